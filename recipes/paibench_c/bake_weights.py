"""Image build step: place the four evaluator weights where the evaluator reads them, verified.

``python -m pinbench_recipes.paibench_c.bake_weights /opt/pai-bench-c/conditional_generation`` downloads
through the pinned URLs (SHA-256 checked where pinned) and the pinned grounding-dino-tiny revision, copies them under
``checkpoint/`` and prints every file's SHA-256, so a build log shows what went into the image. The
evaluator's own ``get_checkpoint.sh`` is not used: it pins no hash and fetches grounding-dino from ``main``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from pinbench.core.files import sha256_file
from pinbench.core.pins import load_pins
from pinbench.ops.downloads import fetch_hf, fetch_url
from pinbench_recipes.paibench_c.evaluate import REVISION_STAMP, WEIGHT_PATHS
from pinbench_recipes.paibench_c.fetch import EVALUATOR_URL_WEIGHTS, PINS_PATH


def bake(evaluator_root: Path) -> None:
    pins = load_pins(PINS_PATH)
    with tempfile.TemporaryDirectory(prefix="paibench-c-weights-") as cache:
        for name in EVALUATOR_URL_WEIGHTS:
            pin = pins.urls[name]
            target = evaluator_root / WEIGHT_PATHS[name]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(fetch_url(pin, cache=cache), target)
            state = "verified" if pin.sha256 else "UNVERIFIED (no sha256 pinned)"
            print(f"{name}: {target} sha256={sha256_file(target)} {state}")
        pin = pins.huggingface["grounding_dino_tiny"]
        target = evaluator_root / WEIGHT_PATHS["grounding_dino_tiny"]
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(fetch_hf(pin, cache=cache), target, symlinks=False)
        (target / REVISION_STAMP).write_text(f"{pin.revision}\n", encoding="utf-8")
        for path in sorted(p for p in target.rglob("*") if p.is_file()):
            print(f"grounding_dino_tiny@{pin.revision}: {path.relative_to(target)} sha256={sha256_file(path)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m pinbench_recipes.paibench_c.bake_weights <evaluator conditional_generation folder>")
    bake(Path(sys.argv[1]))
