"""Measure a fixture sweep as 1, 2, ... Slurm array tasks against the plain single-process run.

Starts a throwaway single-node Slurm (tools/slurm_local.py), runs ``pinbench run <recipe> --fixture`` once
as the baseline, then ``pinbench submit <recipe> --fixture --shards N`` + ``pinbench status --wait`` for
each N, all in this one invocation, and prints a Markdown table with each layout's wall time as a ratio of
the baseline's. Per array task it splits Slurm's run time (StartTime to EndTime, 1 s resolution) into the
samples' own compute (the ``seconds`` of the records it wrote) and the rest, the task's fixed overhead:
scheduling, process start, imports, preparing the inputs.

usage: python tools/bench_slurm.py [--recipe dynamic-degree] [--shards 1 2 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from slurm_local import LocalSlurm, start_cluster

PINBENCH = str(Path(sys.executable).parent / "pinbench")


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return time.perf_counter() - started


def compute_seconds(out: Path) -> dict[str, float]:
    """Each sample's own seconds, from its record."""
    return {p.stem: json.loads(p.read_text())["seconds"] for p in (out / "samples").glob("*.json")}


def job_times(cluster: LocalSlurm, job_id: str) -> list[dict[str, object]]:
    """Start, end and array index of every task of a job (from scontrol, which keeps them for MinJobAge)."""
    text = cluster.run("scontrol", "show", "job", "-o", job_id).stdout
    rows = []
    for line in text.splitlines():
        fields = dict(re.findall(r"(?:^|\s)(\w+)=(\S*)", line))
        rows.append({"task": fields.get("ArrayTaskId"), "start": datetime.fromisoformat(fields["StartTime"]),
                     "end": datetime.fromisoformat(fields["EndTime"])})
    return rows


def sweep(cluster: LocalSlurm, recipe: str, shards: int, out: Path) -> dict[str, float]:
    env = cluster.env
    started = time.perf_counter()
    timed([PINBENCH, "submit", recipe, "--fixture", "--shards", str(shards), "--out", str(out)], env)
    submitted = time.perf_counter() - started
    proc = subprocess.run([PINBENCH, "status", str(out), "--wait", "--poll", "0.5"], env=env, capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{recipe} with {shards} task(s) exited {proc.returncode}:\n{proc.stdout}")
    record = json.loads((out / "slurm" / "submissions.jsonl").read_text().splitlines()[-1])
    array, finish = (job["job_id"] for job in record["jobs"])
    tasks = job_times(cluster, array)
    [merge] = job_times(cluster, finish)
    seconds = compute_seconds(out)
    manifests = {json.loads(p.read_text())["shard"]: json.loads(p.read_text()) for p in (out / "shards").glob("*")}
    overheads, runtimes = [], []
    for task in tasks:
        runtime = (task["end"] - task["start"]).total_seconds()
        owned = manifests[f"{task['task']}/{shards}"]["samples"][int(task["task"])::shards]
        compute = sum(seconds[s["sample_id"]] for s in owned)
        runtimes.append(runtime)
        overheads.append(runtime - compute)
    first_start = min(t["start"] for t in tasks)
    last_end = max(t["end"] for t in tasks)
    return {"wall": wall, "submit": submitted, "task_mean": statistics.mean(runtimes),
            "overhead_mean": statistics.mean(overheads), "compute": sum(seconds.values()),
            "finish": (merge["end"] - merge["start"]).total_seconds(),
            "array_span": (last_end - first_start).total_seconds(),
            "gap": (merge["start"] - last_end).total_seconds()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="dynamic-degree")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="pinbench-bench-"))
    cluster = start_cluster(Path(tempfile.mkdtemp(prefix="pinbench-slurm-")))
    try:
        env = cluster.env
        plain_out = work / f"{args.recipe}-plain"
        plain = timed([PINBENCH, "run", args.recipe, "--fixture", "--out", str(plain_out)], env)
        plain_compute = sum(compute_seconds(plain_out).values())
        rows = [(n, sweep(cluster, args.recipe, n, work / f"{args.recipe}-{n}")) for n in args.shards]
    finally:
        cluster.stop()
    cpus = cluster_cpus(cluster)
    print(f"{args.recipe} fixture, local single-node Slurm ({cpus} CPUs: at most {cpus} array tasks at once)")
    print()
    print("| layout | wall s | vs plain | mean array task s | samples' compute s (all tasks) | overhead per task s "
          "| finish job s | array end to finish start s |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| plain `pinbench run` | {plain:.1f} | 1.00 | - | {plain_compute:.1f} | - | - | - |")
    for n, r in rows:
        layout = f"{n} array task{'s' if n > 1 else ''} + finish"
        print(f"| {layout} | {r['wall']:.1f} | {r['wall'] / plain:.2f} | {r['task_mean']:.0f} "
              f"| {r['compute']:.1f} | {r['overhead_mean']:.0f} | {r['finish']:.0f} | {r['gap']:.0f} |")


def cluster_cpus(cluster: LocalSlurm) -> str:
    match = re.search(r"\bCPUs=(\d+)", cluster.conf.read_text())
    return match.group(1) if match else "?"


if __name__ == "__main__":
    main()
