"""Benchmark: what the command guard pays per request to find what the command left running, at N processes.

The guard (``python -m pinbench.ops.generation --guard``) runs ``_kill_adopted`` once the command has ended; it
reads /proc to find its children (``_children``: every process's stat). This starts N ``sleep`` processes (in a
group of their own, none a child of the process timed), then times, in a fresh process with no children, the scan
alone and ``_kill_adopted`` (what a request that left nothing running pays), best and median of R calls each.

Run: ``.venv/bin/python tools/bench_guard.py [N] [R]`` (defaults 1000 and 30).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

TIMED = """
import os, statistics, sys, time
from pinbench.ops.generation import _children, _kill_adopted

def timed(call, reps):
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3, statistics.median(times) * 1e3

reps = int(sys.argv[1])
processes = sum(1 for name in os.listdir("/proc") if name.isdigit())
for what, call in (("_children scan", lambda: _children(os.getpid())), ("_kill_adopted, nothing left", _kill_adopted)):
    print(f"{processes} processes: {what}: best %.3f ms, median %.3f ms" % timed(call, reps))
"""


def main(n: int, reps: int) -> None:
    subprocess.run([sys.executable, "-c", TIMED, str(reps)], check=True)
    load = subprocess.Popen(["sh", "-c", f"for i in $(seq {n}); do sleep 600 & done; wait"], start_new_session=True)
    try:
        time.sleep(1 + n / 1000)   # all started
        subprocess.run([sys.executable, "-c", TIMED, str(reps)], check=True)
    finally:
        os.killpg(load.pid, signal.SIGKILL)
        load.wait()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000, int(sys.argv[2]) if len(sys.argv) > 2 else 30)
