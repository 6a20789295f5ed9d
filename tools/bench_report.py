"""Benchmark: ``write_report`` of a CameraBench run at its real size (11,222 samples), against a baseline revision.

Issue 19 asks the report of such a run to take well under 0.5 s, without matplotlib, and a rerun on unchanged inputs
to redraw nothing. This script makes the run once (seeded official-shape Script 1 files over the pinned data folder,
``pinbench run camerabench --checkpoint gpt-4o -o scores=... -o data=... --offline``; or ``--run DIR`` reuses one),
then times, in fresh processes, interleaved, N times each:

* ``write_report`` of this checkout (the scorecard, its reference and its records, as ``pinbench report`` loads them),
  then the same call again (a rerun: nothing changed);
* the same with the library of ``--baseline REV`` (default ``main``), exported with ``git archive``.

It prints, per implementation, the best and the median wall time of the first and the second call, the peak RSS of
the process (loading the records included), whether matplotlib was imported, and the ratio of the best times.
The figures depend on the machine's load: the ratio within one invocation is the comparison.

Run: ``.venv/bin/python tools/bench_report.py [--data ../shared/data/camerabench] [--run DIR] [-n 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from bench_scale import DATA, MISSING

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
from pathlib import Path
from pinbench.cli import _load_run
from pinbench.results.report import write_report
card = Path(sys.argv[1])
loaded, reference, samples = _load_run(card)
times = []
for _ in range(2):
    start = time.perf_counter()
    write_report([card], Path(sys.argv[2]), references={0: reference} if reference else None, samples={0: samples})
    times.append(time.perf_counter() - start)
print(json.dumps({"first": times[0], "rerun": times[1], "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                  / 1024, "matplotlib": "matplotlib" in sys.modules, "n_samples": len(samples),
                  "n_metrics": len(loaded.metrics)}))
"""


def make_run(data: Path, root: Path) -> Path:
    scores, out = root / "scores", root / "run"
    subprocess.run([sys.executable, "-m", "pinbench_recipes.camerabench.synthetic", str(data), str(scores)],
                   check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "pinbench", "run", "camerabench", "--checkpoint", "gpt-4o", "-o",
                           f"scores={scores}", "-o", f"data={data}", "--offline", "--skip-doctor", "--out", str(out)],
                          capture_output=True, text=True)
    if not (out / "scorecard.json").is_file():
        raise SystemExit(f"the CameraBench run wrote no scorecard:\n{done.stderr[-2000:]}")
    return out


def export_library(rev: str, dest: Path) -> list[Path]:
    """The pinbench package and the recipes of ``rev`` (a declaration of one version is read by its own library),
    extracted under ``dest``: the import roots to put first on the path."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "common", "recipes"], check=True,
                             capture_output=True).stdout
    tar = dest / "baseline.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as handle:
        handle.extractall(dest, filter="data")
    (dest / "packages").mkdir()
    (dest / "recipes").rename(dest / "packages" / "pinbench_recipes")  # the package-dir mapping of pyproject.toml
    return [dest / "common", dest / "packages"]


def measure(library: list[Path] | None, card: Path, out: Path) -> dict:
    env = dict(os.environ)
    if library is not None:  # the baseline's pinbench and recipes first on the path
        env["PYTHONPATH"] = os.pathsep.join([*map(str, library), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run([sys.executable, "-c", CHILD, str(card), str(out)], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{'baseline' if library else 'this checkout'}: write_report failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--run", type=Path, help="an existing run directory to report (skips making one)")
    parser.add_argument("--baseline", default="main", help="git revision of the baseline library (default main)")
    parser.add_argument("-n", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.run is None and args.data is None:
            raise SystemExit(MISSING)
        run = args.run or make_run(args.data, root)
        card = run / "scorecard.json"
        baseline = export_library(args.baseline, root)
        results: dict[str, list[dict]] = {"this checkout": [], f"baseline {args.baseline}": []}
        for k in range(args.n):
            for name, library in (("this checkout", None), (f"baseline {args.baseline}", baseline)):
                results[name].append(measure(library, card, root / f"report-{name.split()[0]}-{k}"))
    first = results["this checkout"][0]
    print(f"CameraBench run: {first['n_samples']} records, {first['n_metrics']} metrics; python "
          f"{sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f}")
    best = {}
    for name, runs in results.items():
        firsts, reruns = sorted(r["first"] for r in runs), sorted(r["rerun"] for r in runs)
        best[name] = firsts[0]
        print(f"{name:<22} write_report best {firsts[0]:.3f} s, median {statistics.median(firsts):.3f} s; rerun best "
              f"{reruns[0]:.3f} s, median {statistics.median(reruns):.3f} s; peak RSS "
              f"{max(r['rss_mb'] for r in runs):.0f} MB; matplotlib imported: {runs[0]['matplotlib']}  (n={args.n})")
    ours, theirs = best["this checkout"], best[f"baseline {args.baseline}"]
    print(f"baseline / this checkout (best write_report): {theirs / ours:.1f}x")


if __name__ == "__main__":
    main()
