"""Benchmark: what the ``folder`` generator (``--generator folder -g dir=DIR``) reads, on a first run and on an
unchanged rerun, against ``cat`` of the folder (the floor: each byte read once).

Builds a folder of PAI-Bench-C's fixture rollouts (made by the ``static`` generator), each padded to SIZE MB with
an MP4 ``free`` box of random bytes (the rollout check passes over it), then runs ``pinbench run paibench-c
--fixture --generator folder -g dir=DIR`` twice in fresh processes. Bytes read are the ``rchar`` of
``/proc/self/io``, which counts the children this process waited for (the run and its workers); peak memory is
the largest child's ``ru_maxrss``.

Each run has a sample cache of its own (``PINBENCH_CACHE`` in the temporary folder), so the first run is one.

Run: ``.venv/bin/python tools/bench_folder.py [SIZE_MB]`` (default 40; 16 rollouts). To measure another checkout's
code with this script, put its ``common`` and its root first on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PINBENCH = [sys.executable, "-m", "pinbench"]


def _rchar() -> int:
    text = Path("/proc/self/io").read_text()
    return next(int(line.split()[1]) for line in text.splitlines() if line.startswith("rchar:"))


def _measured(argv: list[str]) -> tuple[int, float]:
    """Bytes read and wall seconds of ``argv`` and every process it starts."""
    before, start = _rchar(), time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return _rchar() - before, time.perf_counter() - start


def _folder(work: Path, size_mb: int) -> Path:
    """The fixture's rollouts, each padded with a ``free`` box to ``size_mb`` MB."""
    subprocess.run([*PINBENCH, "run", "paibench-c", "--fixture", "--offline", "--generator", "static", "--out",
                    str(work / "made")], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mine = work / "mine"
    shutil.copytree(work / "made" / "rollouts", mine)
    for path in mine.rglob("*.mp4"):
        path.chmod(0o644)
        pad = size_mb * 1_000_000 - path.stat().st_size - 8
        with open(path, "ab") as fh:
            fh.write(struct.pack(">I", pad + 8) + b"free" + os.urandom(pad))
    return mine


def main(size_mb: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-folder-") as tmp:
        work = Path(tmp)
        os.environ["PINBENCH_CACHE"] = str(work / "cache")
        mine = _folder(work, size_mb)
        files = sorted(mine.rglob("*.mp4"))
        total = sum(p.stat().st_size for p in files)
        cat, cat_s = _measured(["sh", "-c", 'find "$1" -name "*.mp4" -exec cat {} + > /dev/null', "sh", str(mine)])
        run = [*PINBENCH, "run", "paibench-c", "--fixture", "--offline", "--generator", "folder", "-g",
               f"dir={mine}", "--out", str(work / "run")]
        print(f"folder: {len(files)} files, {total / 1e6:.0f} MB; cat: {cat / 1e6:.0f} MB read in {cat_s:.2f} s")
        for label in ("first run", "unchanged rerun"):
            read, wall = _measured(run)
            print(f"{label}: {read / 1e6:.0f} MB read ({read / cat:.2f}x cat), {wall:.2f} s")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"peak memory (largest child): {peak:.0f} MB")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
