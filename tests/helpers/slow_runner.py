"""Test helper: run pinbench.core.runner over N small tasks, slowly, logging each computed id.

Used by tests/test_runner.py to kill a run mid-way (SIGKILL) and resume it. Each call of the sample
function appends its sample id to a side log, so the test can tell which samples were recomputed.

usage: slow_runner.py OUT_DIR SIDE_LOG N_TASKS SLEEP_SECONDS
Prints the run summary counts as one JSON line on stdout.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from loose_task import LooseTask

from pinbench.core.runner import run_samples


def make_tasks(n: int) -> list[dict]:
    return [LooseTask(f"s{i:02d}", x=i) for i in range(n)]


def main(out_dir: str, side_log: str, n_tasks: str, sleep_s: str) -> None:
    log_path = Path(side_log)

    def slow_square(task: Mapping) -> dict:
        time.sleep(float(sleep_s))
        with log_path.open("a", encoding="utf-8") as fh:
            fh.write(task["sample_id"] + "\n")
        x = task["x"]
        return {"square": x * x, "root": math.sqrt(x), "ratio": x / (x % 4) if x % 4 else math.inf}

    summary = run_samples(make_tasks(int(n_tasks)), slow_square, Path(out_dir), progress=False)
    counts = {"total": summary.n_total, "done": summary.n_done, "reused": summary.n_reused,
              "failed": summary.n_failed}
    print(json.dumps(counts))


if __name__ == "__main__":
    main(*sys.argv[1:])
