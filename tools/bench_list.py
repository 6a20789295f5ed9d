"""Benchmark: start-up of `pinbench list` (issue #8 asks for under 0.5 s), against baselines in the same run.

Runs each command N times, interleaved, in fresh processes, and prints the best and median wall time and
CPU time (user + sys, which a loaded machine inflates less than wall time):

* ``pinbench list`` (this checkout's venv);
* ``python -c pass``: the interpreter alone, the floor;
* ``python -c "import torch"``: what every light command paid when listing recipes imported their code.

Run: ``.venv/bin/python tools/bench_list.py [N]`` (default 10). It says whether Python may cache bytecode: with
``PYTHONDONTWRITEBYTECODE`` set (as on the development machine) in a uv-installed venv (uv writes no ``.pyc``)
that has never written any, every run compiles every imported source, which added 0.08-0.14 s to
``pinbench list`` here.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "pinbench list": [sys.executable, "-m", "pinbench", "list"],
    "python -c pass": [sys.executable, "-c", "pass"],
    "import torch": [sys.executable, "-c", "import torch"],
}


def _time(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(n: int) -> None:
    caching = "off (PYTHONDONTWRITEBYTECODE): only .pyc already written are used" if sys.dont_write_bytecode else "on"
    print(f"python {sys.version.split()[0]}, bytecode cache {caching}")
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(n):
        for name, argv in COMMANDS.items():
            runs[name].append(_time(argv))
    best = {}
    for name, values in runs.items():
        wall, cpu = sorted(w for w, _ in values), sorted(c for _, c in values)
        best[name] = (wall[0], cpu[0])
        print(f"{name:<15} wall best {wall[0]:.3f} s, median {statistics.median(wall):.3f} s, worst {wall[-1]:.3f} s; "
              f"cpu best {cpu[0]:.3f} s, median {statistics.median(cpu):.3f} s  (n={n})")
    listing, floor, torch = best["pinbench list"], best["python -c pass"], best["import torch"]
    print(f"pinbench list / python -c pass: wall {listing[0] / floor[0]:.1f}x, cpu {listing[1] / floor[1]:.1f}x; "
          f"import torch / pinbench list: wall {torch[0] / listing[0]:.1f}x, cpu {torch[1] / listing[1]:.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
