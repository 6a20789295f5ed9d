"""Benchmark the core at the benchmarks' real sizes, as ratios against baselines measured in the same run.

Prints one table: wall time, CPU time (user + sys) and peak RSS of each command, in fresh processes, interleaved:

* CameraBench score-only runs (``-o scores=DIR -o data=DIR --offline``, through the doctor) on seeded
  official-shape score files over the pinned data folder (``../shared/data/camerabench``, a byte copy matching
  ``data_manifest.json``), with files holding a seeded 10 %, 50 % and 100 % of its 11,222 samples (every split
  keeps both labels; the run counts the rest as missing samples), each beside upstream's Script 2 CLIs on the
  same files when ``--upstream DIR`` names a checkout of linzhiqiu/t2v_metrics at the pinned commit (its
  ``camerabench/`` folder is run as it is);
* at 100 %: the rerun (everything reused), ``pinbench check``, ``diff``, ``report`` and ``compare`` of two runs;
* one 95 % interval over 11,222 units (mean, median) and a paired difference over 11,222 matched units;
* dynamic-degree on 200 small videos (Farneback preview): the fresh run and the rerun that reuses all of them;
* with ``--upstream``, at 100 %: every number upstream's JSON files hold against the scorecard (the largest
  difference is printed);
* with ``--kill K``: K runs of the full CameraBench set killed (SIGKILL) at seeded random moments, each then
  rerun to the end; the scorecards must equal the uninterrupted run's (values, counts, intervals, failures).

Also printed: the commit, whether Python caches bytecode (``PYTHONDONTWRITEBYTECODE``), and the load average
before and after, since other work on the machine inflates wall time.

    .venv/bin/python tools/bench_scale.py --upstream /path/to/t2v_metrics [--kill 10] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "camerabench"
PINBENCH = [sys.executable, "-m", "pinbench"]
TIME = "/usr/bin/time"


@dataclass
class Measured:
    wall: float
    cpu: float
    rss_mb: float


def measure(argv: list[str], *, cwd: Path = REPO, env: dict[str, str] | None = None,
            ok: tuple[int, ...] = (0,)) -> Measured:
    """One command in a fresh process under GNU time: wall, user + sys, peak RSS of the process."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        started = time.perf_counter()
        proc = subprocess.run([TIME, "-f", "%U %S %M", "-o", out.name, *argv], cwd=cwd, env=env,
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode not in ok:
            raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        user, system, rss_kb = out.read().split()[-3:]
    return Measured(wall, float(user) + float(system), int(rss_kb) / 1024)


def combined(*parts: Measured) -> Measured:
    return Measured(sum(p.wall for p in parts), sum(p.cpu for p in parts), max(p.rss_mb for p in parts))


def camerabench_subset(fraction: float):
    """The data of the pinned folder, or a seeded share of every split and skill that keeps both labels of each
    split (a first-N cut would leave single-class splits, on which upstream's binary CLI crashes)."""
    import random

    from pinbench_recipes.camerabench.dataset import CameraBenchData, load_dataset

    data = load_dataset(DATA, ["binary", "vqa"])
    if fraction >= 1:
        return data
    rng = random.Random(0)

    def share(items: list) -> list:
        return items if len(items) < 2 else sorted(rng.sample(items, max(2, round(fraction * len(items)))),
                                                  key=items.index)

    binary = []
    for split in data.splits:
        samples = list(data.split_samples(split))
        by_label = [[s for s in samples if s.label == label] for label in (0, 1)]
        binary += sorted([s for group in by_label for s in share(group)], key=samples.index)
    vqa = [p for skill in data.skills for p in share(list(data.skill_pairs(skill)))]
    return CameraBenchData(root=data.root, binary=tuple(binary), vqa=tuple(vqa), captions=())


def write_scores(fraction: float, dest: Path) -> int:
    """Official-shape score files for the samples of ``camerabench_subset(fraction)``; how many samples."""
    from pinbench_recipes.camerabench.official_json import write_score_dir
    from pinbench_recipes.camerabench.synthetic import MODEL_NAME, TIMESTAMP, synthetic_outputs

    whole = camerabench_subset(1.0)
    data = camerabench_subset(fraction)
    outputs = synthetic_outputs(whole, seed=0)  # each sample's score is the same in every subset
    outputs.binary = {s.sample_id: outputs.binary[s.sample_id] for s in data.binary}
    outputs.vqa = {p.sample_id: outputs.vqa[p.sample_id] for p in data.vqa}
    write_score_dir(dest, data, outputs, model_name=MODEL_NAME, checkpoint=None, timestamp=TIMESTAMP,
                    video_dir="videos", extra_metadata={"synthetic_seed": 0})
    return len(data.binary) + len(data.vqa)


def camerabench_run(scores: Path, out: Path) -> list[str]:
    return [*PINBENCH, "run", "camerabench", "--checkpoint", "gpt-4o", "-o", f"scores={scores}", "-o", f"data={DATA}",
            "--offline", "--out", str(out)]


def upstream_runs(upstream: Path, scores: Path, out: Path) -> Measured:
    folder = upstream / "camerabench"
    binary = measure([sys.executable, "binary_classification_evaluation.py", "--score_dir", str(scores),
                      "--output_dir", str(out)], cwd=folder)
    vqa = measure([sys.executable, "vqa_and_retrieval_evaluation.py", "--score_dir", str(scores),
                   "--output_dir", str(out)], cwd=folder)
    return combined(binary, vqa)


def upstream_values(out: Path) -> dict[str, float]:
    """The numbers upstream's Script 2 JSON files hold, under the scorecard's metric names."""
    from pinbench_recipes.camerabench.synthetic import MODEL_NAME

    (binary,) = out.glob("binary_classification_evaluation_*.json")
    (vqa,) = out.glob("vqa_retrieval_evaluation_*.json")
    b, v = json.loads(binary.read_text()), json.loads(vqa.read_text())
    values = {f"binary/overall_{k}": b[f"overall_{k}"] for k in ("average_precision", "roc_auc")}
    for split, r in b["results_by_split"].items():
        values.update({f"binary/{split.removeprefix(MODEL_NAME + '_')}/{k}": r[k] for k in ("average_precision",
                                                                                             "roc_auc")})
    values.update({f"vqa/overall_{k}": v[f"overall_{k}"] for k in ("binary_acc", "question_acc")})
    values.update({f"retrieval/overall_{k}": v[f"overall_retrieval_{k}"] for k in ("text", "image", "group")})
    for r in v["results_by_split"].values():
        skill = r["skill_name"].replace(" ", "_")
        values.update({f"vqa/{skill}/{k}": r["vqa"][k] for k in ("binary_acc", "question_acc")})
        values.update({f"retrieval/{skill}/{k}": r["retrieval"][k] for k in ("text", "image", "group")})
    return values


def value_check(upstream_out: Path, scorecard: Path) -> str:
    """Every number upstream printed against the run's scorecard: how many, and the largest difference."""
    theirs = upstream_values(upstream_out)
    ours = {name: m["value"] for name, m in json.loads(scorecard.read_text())["metrics"].items()}
    absent = sorted(set(theirs) - set(ours))
    if absent:
        return f"  values: {len(absent)} of upstream's {len(theirs)} numbers not in the scorecard, e.g. {absent[0]}"
    worst = max(abs(ours[k] - theirs[k]) for k in theirs)
    return f"  values: upstream's {len(theirs)} numbers and the scorecard's, max abs difference {worst:.2g}"


def interval_costs() -> dict[str, Measured]:
    code = """
import resource, sys, time
import numpy as np
from pinbench.core.uncertainty import aggregate_interval, difference_interval
n = 11222
a = np.random.default_rng(1).random(n)
b = np.clip(a + np.random.default_rng(2).normal(0.01, 0.05, n), 0, 1)
ids = [f"s{i:05d}" for i in range(n)]
kind = sys.argv[1]
start = time.perf_counter(); cpu = time.process_time()
if kind == "paired":
    difference_interval(dict(zip(ids, a)), dict(zip(ids, b)), "mean")
else:
    aggregate_interval(list(a), ids, kind)
print(time.perf_counter() - start, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
    found = {}
    for kind in ("mean", "median", "paired"):
        out = subprocess.run([sys.executable, "-c", code, kind], capture_output=True, text=True, check=True).stdout
        wall, cpu, rss = out.split()
        found[kind] = Measured(float(wall), float(cpu), int(rss) / 1024)
    return found


def write_videos(dest: Path, n: int) -> None:
    import numpy as np

    from pinbench.media.video import write_video

    dest.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        rng = np.random.default_rng(i)
        base = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
        frames = np.stack([np.roll(base, (i % 3) * t, axis=1) for t in range(24)])
        write_video(dest / f"v{i:03d}.mp4", frames, 8.0, crf=0)


def scorecard_core(path: Path) -> dict:
    """What an interrupted run must reproduce: counts, status, every metric entry (values, intervals, failures)."""
    card = json.loads(path.read_text())
    return {"status": card["status"], "samples": card["samples"], "metrics": card["metrics"],
            "derived": card.get("derived")}


def kill_and_resume(work: Path, scores: Path, reference: dict, times: int, fresh_wall: float) -> list[str]:
    rng = random.Random(0)
    lines = []
    for k in range(times):
        out = work / f"killed-{k}"
        delay = rng.uniform(0.1, 0.8 * fresh_wall)  # before the fresh run would have ended
        proc = subprocess.Popen(camerabench_run(scores, out), cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(delay)
        finished_first = proc.poll() is not None
        if not finished_first:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        measure(camerabench_run(scores, out), ok=(0, 1))
        same = scorecard_core(out / "scorecard.json") == reference
        lines.append(f"  kill {k}: at {delay:.2f} s{' (had finished)' if finished_first else ''}, rerun: "
                     f"{'identical scorecard' if same else 'DIFFERENT scorecard'}")
        shutil.rmtree(out)
    return lines


def row(label: str, m: Measured, base: Measured | None = None) -> str:
    ratio = f"{m.wall / base.wall:6.2f}x {m.cpu / base.cpu:6.2f}x" if base else " " * 15
    return f"{label:<58} {m.wall:8.2f} s {m.cpu:8.2f} s {m.rss_mb:8.0f} MB  {ratio}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, help="a checkout of linzhiqiu/t2v_metrics at the pinned commit")
    parser.add_argument("--fractions", default="0.1,0.5,1.0")
    parser.add_argument("--kill", type=int, default=0, help="runs to kill at random moments, then resume")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one, removed)")
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"{DATA}: not found (the pinned CameraBench data folder)")
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_scale."))
    work.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    caching = "off (PYTHONDONTWRITEBYTECODE): only .pyc already written are used" if sys.dont_write_bytecode else "on"
    print(f"commit {commit.strip()}, python {sys.version.split()[0]}, bytecode cache {caching}, "
          f"load average before {os.getloadavg()[0]:.2f}")
    print(f"{'command':<58} {'wall':>10} {'cpu':>10} {'peak RSS':>11}  {'vs baseline (wall, cpu)':>15}")
    try:
        full_scores, full_out = None, None
        for fraction in (float(f) for f in args.fractions.split(",")):
            scores = work / f"scores-{fraction}"
            n = write_scores(fraction, scores)
            out = work / f"run-{fraction}"
            ours = measure(camerabench_run(scores, out), ok=(0, 1, 2))  # a share: partial, the rest named missing
            base = upstream_runs(args.upstream, scores, work / f"upstream-{fraction}") if args.upstream else None
            if base:
                print(row(f"upstream Script 2 (binary + vqa CLIs), files of {n} samples", base))
            print(row(f"pinbench camerabench score-only, files of {n} samples", ours, base))
            if base and fraction >= 1:   # at a share, upstream averages the splits it has, we count the rest missing
                print(value_check(work / f"upstream-{fraction}", out / "scorecard.json"))
            if fraction >= 1:
                full_scores, full_out, fresh = scores, out, ours
        if full_out is not None:
            rerun = measure(camerabench_run(full_scores, full_out), ok=(0, 1))
            print(row("  the rerun, everything reused", rerun, fresh))
            print(row("  pinbench check", measure([*PINBENCH, "check", str(full_out)], ok=(0, 2))))
            print(row("  pinbench diff", measure([*PINBENCH, "diff", str(full_out / "scorecard.json")], ok=(0, 1))))
            print(row("  pinbench report", measure([*PINBENCH, "report", str(full_out / "scorecard.json"), "--out",
                                                    str(work / "report")])))
            other = work / "run-other"
            shutil.copytree(full_out, other)
            print(row("  pinbench compare (two runs, paired intervals)",
                      measure([*PINBENCH, "compare", str(full_out), str(other), "--report", str(work / "compare")],
                              ok=(0, 1))))
            shutil.rmtree(other)
        for kind, m in interval_costs().items():
            label = "paired difference (compare)" if kind == "paired" else f"{kind}"
            print(row(f"one 95% interval, 11,222 units: {label} (in process)", m))
        videos = work / "videos"
        write_videos(videos, 200)
        dd = [*PINBENCH, "run", "dynamic-degree", "--checkpoint", "bench", "-o", f"videos={videos}", "-o",
              "flow=farneback", "--offline", "--out", str(work / "dd")]
        fresh_dd = measure(dd)
        print(row("dynamic-degree, 200 videos (Farneback), fresh", fresh_dd))
        print(row("  the rerun, everything reused", measure(dd), fresh_dd))
        if args.kill and full_out is not None:
            reference = scorecard_core(full_out / "scorecard.json")
            print(f"kill -9 at {args.kill} random points of the full CameraBench run, then a rerun:")
            print("\n".join(kill_and_resume(work, full_scores, reference, args.kill, fresh.wall)))
    finally:
        print(f"load average after {os.getloadavg()[0]:.2f}")
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
