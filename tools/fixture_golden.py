"""Print the per-sample results and metric values of a `pinbench demo` directory as one JSON document.

Why: the fixtures' per-sample values must survive refactors of the core unchanged. This was run on the demo of
main 87e8f14 (before Core v3) to write ``tests/golden/fixtures_87e8f14.json``; ``tests/test_fixture_golden.py``
compares every later demo with it. Only what a score depends on is kept: each record's status, result and
error (not its timing, traceback or storage fields), each derived record's result, each metric's value.

    python tools/fixture_golden.py runs/demo > tests/golden/fixtures_87e8f14.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


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
    json.dump(golden(Path(sys.argv[1])), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
