"""Print the per-sample results and metric values of a `pinbench demo` directory as one JSON document.

Why: the fixtures' per-sample values must survive refactors of the core unchanged. This was run on the demo of
main 87e8f14 (before Core v3) to write the records in ``tests/golden/fixtures_87e8f14/``;
``tests/test_fixtures.py`` compares every later demo with them. Only what a score depends on is kept: each
record's status, result and error (not its timing, traceback or storage fields), each derived record's result,
each metric's value; and the machine it ran on, since the float32 torch kernels of some fixtures (LPIPS, PSNR,
CLIP) give values that differ in the 8th digit between CPU kinds (one record per kind).

    git worktree add /tmp/base 87e8f14 && (cd /tmp/base && make setup && .venv/bin/pinbench demo --out runs/demo)
    python tools/fixture_golden.py /tmp/base/runs/demo > tests/golden/fixtures_87e8f14/<name>.json
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

# The instruction-set extensions that decide which float32 kernels torch and oneDNN run (and so the values).
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni", "amx_tile")


def machine() -> dict[str, Any]:
    """This CPU as the records name it: its model and the ISA extensions in ISA_FLAGS it has."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    return {"cpu_model": model, "isa": [flag for flag in ISA_FLAGS if flag in flags]}


def golden(demo: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for card_path in sorted(demo.glob("*/scorecard.json")):
        card = json.loads(card_path.read_text())
        run = card_path.parent
        samples = {}
        for line in (run / "samples.jsonl").read_text().splitlines():
            rec = json.loads(line)
            samples[rec["sample_id"]] = {"status": rec["status"], "result": rec["result"], "error": rec["error"]}
        derived = {}
        if (run / "derived.jsonl").is_file():
            for line in (run / "derived.jsonl").read_text().splitlines():
                rec = json.loads(line)
                derived[rec["derived_id"]] = {"status": rec["status"], "result": rec["result"], "error": rec["error"]}
        out[card["recipe"]] = {"recipe_version": card["recipe_version"], "status": card["status"],
                               "metrics": {name: m["value"] for name, m in card["metrics"].items()},
                               "samples": samples, "derived": derived}
    return out


if __name__ == "__main__":
    json.dump({"machine": machine(), "fixtures": golden(Path(sys.argv[1]))}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
