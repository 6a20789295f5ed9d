"""Benchmark the core at the benchmarks' real sizes, as ratios against baselines measured in the same run.

Prints one table: wall time, CPU time (user + sys) and peak RSS of each command, in fresh processes, interleaved:

* CameraBench score-only runs (``-o scores=DIR -o data=DIR --offline``, through the doctor) on seeded
  official-shape score files over the pinned data folder (``../shared/data/camerabench``, a byte copy matching
  ``data_manifest.json``), with files holding a seeded 10 %, 50 % and 100 % of its 11,222 samples (every split
  keeps both labels; the run counts the rest as missing samples), each beside upstream's Script 2 CLIs on the
  same files when ``--upstream DIR`` names a checkout of linzhiqiu/t2v_metrics at the pinned commit (its
  ``camerabench/`` folder is run as it is);
* at 100 %: the rerun (everything reused), ``pinbench check``, ``diff``, ``report`` and ``compare`` (without and
  with ``--report``) against a run of other score files (seed 1: every metric compared, the derived ones by
  resampling their members);
* one 95 % interval over 11,222 units (mean, median) and a paired difference over 11,222 matched units;
* dynamic-degree on 200 small videos (Farneback preview): the fresh run and the rerun that reuses all of them;
* with ``--upstream``, at 100 %: every number upstream's JSON files hold against the scorecard (the largest
  difference is printed);
* ``x10``: 10x CameraBench's size, 112,220 samples: the full set's score files replicated under new ids (replica r
  of a row names its videos ``<stem>.r<r>.mp4``; the copy keeps every score, so every value is the full set's),
  with the data folder replicated alike; the recipe's score-only run over them beside upstream's Script 2 CLIs
  (interleaved, ``--repeat`` times), then upstream's numbers against the scorecard. The recipe scores the pinned
  test set only (``data_manifest.json``, byte for byte, and the official counts), so this run goes through
  ``--replica`` below: the same CLI in a process whose manifest is the replica's and whose official counts are
  10x, every check still made on them;
* with ``--kill K``: K runs of the full CameraBench set killed (SIGKILL) at seeded random moments, each then
  rerun to the end; the scorecards must equal the uninterrupted run's (values, counts, intervals, failures);
* with ``--peer DIR`` (a source tree of iChubai/WorldFoundry, run by ``--peer-python``, a Python with its
  dependencies): WorldFoundry's CameraBench score-dir aggregation (``zoo benchmark-run --score-dir``, which runs
  its in-tree Script 2 port in a subprocess) on the full set's files, without and with a seeded caption file
  (``synthetic.synthetic_captions``), beside the recipe's score-only run on the same files; then every number
  both compute, the values that differ named one by one; and once more with the binary scores rounded to bf16
  (ties across labels, as a bf16 model's probabilities have them), for the values only.

The upstream and peer pairs run ``--repeat`` times, interleaved (ours, theirs, ours, ...), and their rows are the
medians: CPU seconds are the steadier figure on a shared machine.

Also printed: the commit, whether Python caches bytecode (``PYTHONDONTWRITEBYTECODE``), and the load average
before and after, since other work on the machine inflates wall time.

    .venv/bin/python tools/bench_scale.py --upstream /path/to/t2v_metrics [--kill 10] [--work DIR]
        [--peer /path/to/WorldFoundry --peer-python /path/to/its/venv/bin/python] [--repeat 5]

``python tools/bench_scale.py --replica DATA K -- ARGS...`` is ``pinbench ARGS...`` with the replica's manifest
(``DATA/../replica-manifest.json``, written by this script) in place of ``data_manifest.json`` and the official
counts of CameraBench times K: a benchmark's harness, never a way to score other data.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "tests" / "helpers"))
from shared_data import shared_data  # noqa: E402  (the tests' lookup, which also finds it from a git worktree)

DATA = shared_data("camerabench")   # None where neither this checkout nor the main one has ../shared/data
MISSING = "../shared/data/camerabench: not found beside this checkout or the main one (the pinned CameraBench data)"
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


def median(runs: list[Measured]) -> Measured:
    return Measured(*(statistics.median(getattr(r, key) for r in runs) for key in ("wall", "cpu", "rss_mb")))


def interleaved(ours: Callable[[], Measured], theirs: Callable[[], Measured] | None,
                repeat: int) -> tuple[Measured, Measured | None]:
    """Medians of ``repeat`` runs of each, alternated so that a load change on the machine hits both."""
    mine: list[Measured] = []
    base: list[Measured] = []
    for _ in range(repeat):
        mine.append(ours())
        if theirs is not None:
            base.append(theirs())
    return median(mine), (median(base) if base else None)


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


def write_scores(fraction: float, dest: Path, *, captions: bool = False, seed: int = 0) -> int:
    """Official-shape score files for the samples of ``camerabench_subset(fraction)`` (and, with ``captions``, a
    seeded caption file of the 1,071 captions); how many samples."""
    import dataclasses

    from pinbench_recipes.camerabench.dataset import load_dataset
    from pinbench_recipes.camerabench.official_json import write_score_dir
    from pinbench_recipes.camerabench.synthetic import MODEL_NAME, TIMESTAMP, synthetic_outputs

    whole = camerabench_subset(1.0)
    data = camerabench_subset(fraction)
    if captions:
        whole = data = dataclasses.replace(data, captions=load_dataset(DATA, ["caption"]).captions)
    outputs = synthetic_outputs(whole, seed=seed)  # each sample's score is the same in every subset
    outputs.binary = {s.sample_id: outputs.binary[s.sample_id] for s in data.binary}
    outputs.vqa = {p.sample_id: outputs.vqa[p.sample_id] for p in data.vqa}
    write_score_dir(dest, data, outputs, model_name=MODEL_NAME, checkpoint=None, timestamp=TIMESTAMP,
                    video_dir="videos", extra_metadata={"synthetic_seed": seed})
    return len(data.binary) + len(data.vqa) + len(data.captions)


REPLICA_MANIFEST = "replica-manifest.json"


def replica_name(video: str, replica: int) -> str:
    """The video a row of replica ``replica`` names (replica 0 is the original)."""
    return video if replica == 0 else f"{video.removesuffix('.mp4')}.r{replica}.mp4"


def replicate(k: int, scores: Path, data_dest: Path, scores_dest: Path) -> int:
    """``k`` copies of the pinned data folder's rows and of the score files' rows, replica r under new video names
    (so new sample ids); the replica's manifest beside the data folder. How many samples."""
    from pinbench_recipes.camerabench.data_files import write_manifest

    shutil.rmtree(data_dest, ignore_errors=True)
    shutil.copytree(DATA, data_dest)
    for path in sorted(data_dest.rglob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        path.write_text("".join(json.dumps(_renamed(row, r)) + "\n" for r in range(k) for row in rows))
    write_manifest(data_dest, "replica", f"x{k}", "camerabench/data", out=data_dest.parent / REPLICA_MANIFEST)
    shutil.rmtree(scores_dest, ignore_errors=True)
    scores_dest.mkdir(parents=True)
    n = 0
    for path in sorted(scores.glob("*.json")):
        doc = json.loads(path.read_text())
        doc["scores"] = [_renamed(row, r) for r in range(k) for row in doc["scores"]]
        n += len(doc["scores"])
        (scores_dest / path.name).write_text(json.dumps(doc))
    return n


def _renamed(row: dict, replica: int) -> dict:
    row = dict(row)
    for key in ("image", "video_path", "pos_video", "neg_video"):   # what the recipe reads a row's videos from
        if key in row:
            row[key] = replica_name(row[key], replica)
    return row


def replica_main(data: Path, k: int, argv: list[str]) -> None:
    """``pinbench ARGV`` over a replica of the data (``replicate``): its manifest in place of the pinned one, the
    official counts times ``k``."""
    import functools

    from pinbench_recipes.camerabench import data_files, dataset

    data_files.load_manifest = functools.partial(data_files.load_manifest, data.parent / REPLICA_MANIFEST)
    for split, (n, positives) in list(dataset.BINARY_SPLITS.items()):
        dataset.BINARY_SPLITS[split] = (n * k, positives * k)
    for skill, (tasks, pairs) in list(dataset.VQA_SKILLS.items()):
        dataset.VQA_SKILLS[skill] = (tasks, pairs * k)
    from pinbench.cli import main as pinbench_main

    pinbench_main(argv)


def camerabench_run(scores: Path, out: Path, *, captions: bool = False) -> list[str]:
    families = ["-o", "families=binary,vqa,caption"] if captions else []
    return [*PINBENCH, "run", "camerabench", "--checkpoint", "gpt-4o", "-o", f"scores={scores}", "-o", f"data={DATA}",
            *families, "--offline", "--out", str(out)]


def fresh(argv: list[str], out: Path, ok: tuple[int, ...]) -> Callable[[], Measured]:
    """A run into ``out`` from nothing (the folder removed first), measured."""
    def once() -> Measured:
        shutil.rmtree(out, ignore_errors=True)
        return measure(argv, ok=ok)
    return once


# ----------------------------------------------------------------------------------------- the peer: WorldFoundry

def peer_run(peer: Path, python: Path, scores: Path, out: Path) -> Callable[[], Measured]:
    """WorldFoundry's CameraBench score-dir aggregation, as its docs run it (``zoo benchmark-run --score-dir``)."""
    argv = [str(python), "-m", "worldfoundry.cli", "zoo", "benchmark-run", "--benchmark-id", "camerabench", "--mode",
            "official-validation", "--score-dir", str(scores), "--output-dir", str(out), "--json"]
    env = {**os.environ, "PYTHONPATH": str(peer)}

    def once() -> Measured:
        shutil.rmtree(out, ignore_errors=True)
        found = measure(argv, cwd=peer, env=env, ok=(0, 1))   # 1: "not a full official suite" (no data root)
        if not (out / "upstream" / "camerabench_all_results.json").is_file():
            raise SystemExit(f"{peer}: WorldFoundry wrote no upstream/camerabench_all_results.json in {out}")
        return found
    return once


def peer_values(out: Path) -> dict[str, float]:
    """WorldFoundry's numbers under the scorecard's metric names (composites under ``composite/``)."""
    from pinbench_recipes.camerabench.caption_metrics import UPSTREAM_NAMES

    raw = json.loads((out / "upstream" / "camerabench_all_results.json").read_text())
    values: dict[str, float] = {}
    for key, result in raw.get("results_by_split", {}).items():
        task, _, _ = key.partition(":")
        meta = result.get("metadata") or {}
        if task == "binary":
            split = meta["split_name"]
            values.update({f"binary/{split}/{k}": result[k] for k in ("average_precision", "roc_auc")})
        elif task == "vqa_retrieval":
            skill = meta["skill_name"].replace(" ", "_")
            values.update({f"vqa/{skill}/{k}": result["vqa"][k] for k in ("binary_acc", "question_acc")})
            values.update({f"retrieval/{skill}/{k}": result["retrieval"][k] for k in ("text", "image", "group")})
    for key in ("average_precision", "roc_auc", "binary_acc", "question_acc"):
        if raw.get(f"overall_{key}") is not None:
            values[f"{'binary' if key in ('average_precision', 'roc_auc') else 'vqa'}/overall_{key}"] = \
                raw[f"overall_{key}"]
    for key in ("text", "image", "group"):
        if raw.get(f"overall_retrieval_{key}") is not None:
            values[f"retrieval/overall_{key}"] = raw[f"overall_retrieval_{key}"]
    for row in raw.get("results", []):
        values.update({f"caption/{ours}": row[theirs] for ours, theirs in UPSTREAM_NAMES.items()
                       if ours != "gen_match" and row.get(theirs) is not None})
    leaderboard = json.loads((out / "scorecard.json").read_text())["metrics"]["leaderboard"]
    values.update({f"composite/{k}": v for k, v in leaderboard.items()})
    return values


def our_values(run: Path) -> dict[str, float]:
    """The scorecard's values, and the composite's components (``composite/``) from its derived record."""
    values = {name: m["value"] for name, m in json.loads((run / "scorecard.json").read_text())["metrics"].items()
              if m["value"] is not None}
    for line in (run / "derived.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["derived_id"] == "camerabench_average" and record["result"]:
            values.update({f"composite/{k}": v for k, v in record["result"].items() if isinstance(v, float)})
    return values


def value_diff(ours: dict[str, float], theirs: dict[str, float], *, shown: int = 20) -> list[str]:
    """How many numbers both have, how many are equal (to 1e-12), and each that is not."""
    common = sorted(set(ours) & set(theirs))
    differ = [(k, ours[k], theirs[k]) for k in common if abs(ours[k] - theirs[k]) > 1e-12]
    same = [k for k in common if k not in {d[0] for d in differ}]
    worst = max((abs(ours[k] - theirs[k]) for k in same), default=0.0)
    lines = [f"  values: {len(common)} numbers in both, {len(same)} equal (max abs difference {worst:.2g}), "
             f"{len(differ)} differ" + (":" if differ else "")]
    lines += [f"    {k}: ours {a:.10g}, WorldFoundry {b:.10g} (difference {a - b:+.4g})" for k, a, b in differ[:shown]]
    if len(differ) > shown:
        lines.append(f"    ... {len(differ) - shown} more")
    return lines


def round_to_bf16(scores: Path) -> None:
    """Every binary score of the folder rounded to bfloat16 (8 significant bits), as a bf16 model's probabilities
    are: many tie, across labels too, which is where AP implementations differ."""
    import numpy as np

    for path in scores.glob("classification_scores_*.json"):
        doc = json.loads(path.read_text())
        bits = np.array([r["score"] for r in doc["scores"]], dtype=np.float32).view(np.uint32)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).view(np.float32)
        for r, value in zip(doc["scores"], rounded.tolist(), strict=True):
            r["score"] = value
        path.write_text(json.dumps(doc))


def peer_section(peer: Path, python: Path, work: Path, repeat: int) -> None:
    """The peer and the recipe on the same files: without and with the caption file (timed), then with bf16 ties."""
    for captions, bf16 in ((False, False), (True, False), (False, True)):
        scores = work / f"peer-scores{'-captions' if captions else ''}{'-bf16' if bf16 else ''}"
        n = write_scores(1.0, scores, captions=captions)
        if bf16:
            round_to_bf16(scores)
        ours_out, peer_out = work / "peer-ours", work / "peer-theirs"
        ours, theirs = interleaved(fresh(camerabench_run(scores, ours_out, captions=captions), ours_out, (0, 1, 2, 3)),
                                   peer_run(peer, python, scores, peer_out), 1 if bf16 else repeat)
        what = f"{len(list(scores.glob('*.json')))} files, {n} samples{', captions' if captions else ''}"
        if bf16:
            print("the same files with every binary score rounded to bf16 (ties across labels), once each:")
        else:
            print(row(f"WorldFoundry zoo benchmark-run --score-dir, {what}", theirs))
            print(row(f"pinbench camerabench score-only, {what}", ours, theirs))
        print("\n".join(value_diff(our_values(ours_out), peer_values(peer_out))))


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
    ratio = f"{m.wall / base.wall:6.2f}x {m.cpu / base.cpu:6.2f}x {m.rss_mb / base.rss_mb:6.2f}x" if base else ""
    return f"{label:<66} {m.wall:8.2f} s {m.cpu:8.2f} s {m.rss_mb:8.0f} MB  {ratio}"


SECTIONS = ("scale", "x10", "intervals", "dd", "peer")


def main() -> None:
    if sys.argv[1:2] == ["--replica"]:   # the pinbench process of the x10 rows (module docstring)
        data, k, dashes, *argv = sys.argv[2:]
        if dashes != "--":
            raise SystemExit("usage: bench_scale.py --replica DATA K -- PINBENCH-ARGS...")
        replica_main(Path(data), int(k), argv)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, help="a checkout of linzhiqiu/t2v_metrics at the pinned commit")
    parser.add_argument("--peer", type=Path, help="a source tree of iChubai/WorldFoundry")
    parser.add_argument("--peer-python", type=Path, default=Path(sys.executable),
                        help="the Python that runs --peer (its own venv: msgpack, packaging, pyyaml, tqdm, websockets, "
                             "numpy, nltk, rouge-score)")
    parser.add_argument("--fractions", default="0.1,0.5,1.0")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved runs per row (the rows are medians)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"which parts to run, of {', '.join(SECTIONS)} (peer needs --peer)")
    parser.add_argument("--kill", type=int, default=0, help="runs to kill at random moments, then resume")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one, removed)")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    if DATA is None:
        raise SystemExit(MISSING)
    if sections - set(SECTIONS) or args.repeat < 1:
        raise SystemExit(f"--sections: one or more of {', '.join(SECTIONS)}; --repeat: at least 1")
    if "peer" in sections and args.peer is not None and not (args.peer / "worldfoundry" / "cli").is_dir():
        raise SystemExit(f"{args.peer}: not a WorldFoundry source tree (no worldfoundry/cli)")
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_scale."))
    work.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    caching = "off (PYTHONDONTWRITEBYTECODE): only .pyc already written are used" if sys.dont_write_bytecode else "on"
    print(f"commit {commit.strip()}, python {sys.version.split()[0]}, bytecode cache {caching}, {os.cpu_count()} CPUs, "
          f"load average before {os.getloadavg()[0]:.2f}; paired rows: medians of {args.repeat} interleaved runs")
    print(f"{'command':<66} {'wall':>10} {'cpu':>10} {'peak RSS':>11}  vs baseline (wall, cpu, RSS)")
    try:
        if "scale" in sections:
            scale_section(args, work)
        if "x10" in sections:
            x10_section(args, work)
        if "intervals" in sections:
            for kind, m in interval_costs().items():
                label = "paired difference (compare)" if kind == "paired" else f"{kind}"
                print(row(f"one 95% interval, 11,222 units: {label} (in process)", m))
        if "dd" in sections:
            videos = work / "videos"
            write_videos(videos, 200)
            dd = [*PINBENCH, "run", "dynamic-degree", "--checkpoint", "bench", "-o", f"videos={videos}", "-o",
                  "flow=farneback", "--offline", "--out", str(work / "dd")]
            fresh_dd = measure(dd)
            print(row("dynamic-degree, 200 videos (Farneback), fresh", fresh_dd))
            print(row("  the rerun, everything reused", measure(dd), fresh_dd))
        if "peer" in sections and args.peer is not None:
            peer_section(args.peer, args.peer_python, work, args.repeat)
    finally:
        print(f"load average after {os.getloadavg()[0]:.2f}")
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


def x10_section(args: argparse.Namespace, work: Path) -> None:
    """112,220 samples: the full set replicated 10x (``replicate``), the recipe beside upstream's Script 2."""
    k = 10
    scores, data, out = work / "scores-x10", work / "replica" / "data", work / "run-x10"
    write_scores(1.0, work / "scores-x1")
    n = replicate(k, work / "scores-x1", data, scores)
    argv = [sys.executable, str(Path(__file__).resolve()), "--replica", str(data), str(k), "--",
            *camerabench_run(scores, out)[len(PINBENCH):]]
    argv[argv.index(f"data={DATA}")] = f"data={data}"
    upstream = None
    if args.upstream:
        def upstream() -> Measured:
            return upstream_runs(args.upstream, scores, work / "upstream-x10")
    ours, base = interleaved(fresh(argv, out, (0, 1, 2, 3)), upstream, args.repeat)  # 3: a 10x count is no reference's
    if base:
        print(row(f"upstream Script 2 (binary + vqa CLIs), files of {n} samples (10x)", base))
    print(row(f"pinbench camerabench score-only, files of {n} samples (10x)", ours, base))
    if base:
        print(value_check(work / "upstream-x10", out / "scorecard.json"))


def scale_section(args: argparse.Namespace, work: Path) -> None:
    full_scores, full_out, fresh_run = None, None, None
    for fraction in (float(f) for f in args.fractions.split(",") if f):
        scores = work / f"scores-{fraction}"
        n = write_scores(fraction, scores)
        out = work / f"run-{fraction}"
        upstream = None
        if args.upstream:
            def upstream(scores: Path = scores, fraction: float = fraction) -> Measured:
                return upstream_runs(args.upstream, scores, work / f"upstream-{fraction}")
        # a share: partial, the rest named missing
        ours, base = interleaved(fresh(camerabench_run(scores, out), out, (0, 1, 2)), upstream, args.repeat)
        if base:
            print(row(f"upstream Script 2 (binary + vqa CLIs), files of {n} samples", base))
        print(row(f"pinbench camerabench score-only, files of {n} samples", ours, base))
        if base and fraction >= 1:   # at a share, upstream averages the splits it has, we count the rest missing
            print(value_check(work / f"upstream-{fraction}", out / "scorecard.json"))
        if fraction >= 1:
            full_scores, full_out, fresh_run = scores, out, ours
    if full_out is None or full_scores is None or fresh_run is None:
        return

    def repeated(argv: list[str], ok: tuple[int, ...] = (0,)) -> Measured:
        return median([measure(argv, ok=ok) for _ in range(args.repeat)])

    print(row("  the rerun, everything reused", repeated(camerabench_run(full_scores, full_out), (0, 1)), fresh_run))
    print(row("  pinbench check", repeated([*PINBENCH, "check", str(full_out)], (0, 2))))
    print(row("  pinbench diff", repeated([*PINBENCH, "diff", str(full_out / "scorecard.json")], (0, 1))))
    print(row("  pinbench report", repeated([*PINBENCH, "report", str(full_out / "scorecard.json"), "--out",
                                             str(work / "report")])))
    other_scores, other = work / "scores-other", work / "run-other"   # another method's files: seed 1
    write_scores(1.0, other_scores, seed=1)
    measure(camerabench_run(other_scores, other), ok=(0, 1, 2))
    print(row("  pinbench compare (another run, paired intervals)",
              repeated([*PINBENCH, "compare", str(full_out), str(other)], (0, 1))))
    print(row("  pinbench compare --report (the same, and the report with its 11,222 sample pages)",
              repeated([*PINBENCH, "compare", str(full_out), str(other), "--report", str(work / "compare")], (0, 1))))
    shutil.rmtree(other)
    if args.kill:
        reference = scorecard_core(full_out / "scorecard.json")
        print(f"kill -9 at {args.kill} random points of the full CameraBench run, then a rerun:")
        print("\n".join(kill_and_resume(work, full_scores, reference, args.kill, fresh_run.wall)))


if __name__ == "__main__":
    main()
