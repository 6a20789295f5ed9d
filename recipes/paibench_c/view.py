"""What ``pinbench view`` shows of a PAI-Bench-C task (``pinbench.results.view``): the generated video of every
modality (``<run>/<modality>/videos/<task>.mp4``, checked against the digest of the rollout the generation step kept),
and the
task's inputs from the rows the run wrote (``<run>/inputs/<modality>.jsonl``): the input video every modality is
given, the depth and seg control videos, the prompt. The edge and blur controls are computed inside cosmos-framework
from the input video; the run keeps no copy of them. Inputs are served from the dataset folder only (the fixture's,
or the one the run's provenance names: the pinned snapshot it read)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pinbench.core.files import loads_json, read_regular_text
from pinbench.core.run import GENERATION
from pinbench.core.runner import load_records
from pinbench.core.store import SAMPLES_DIR, StoreError
from pinbench.results.view import MediaFile, RunInputs, SampleMedia, Text, Video
from pinbench_recipes.paibench_c.rows import MODALITIES


def _dataset_root(run: RunInputs) -> Path | None:
    """The dataset folder the run read (its provenance says; the fixture's lies in the run directory)."""
    if run.fixture:
        return run.fixture_dir / "dataset"
    extra = run.card.provenance.get("extra")
    recorded = extra.get("dataset_dir") if isinstance(extra, Mapping) else None
    return run.recorded(recorded) if isinstance(recorded, str) and recorded else None


def _row(line: str) -> Any:
    try:
        return loads_json(line)
    except ValueError:   # a line cut or edited: that task's sample says it is not in the rows
        return None


@cache
def _json_lines(path: Path) -> dict[str, dict[str, Any]]:
    """The rows of ``inputs/<modality>.jsonl`` by task (empty when the file is not a readable regular file)."""
    text = read_regular_text(path) or ""
    rows = (_row(line) for line in text.splitlines() if line.strip())
    return {row["name"]: row for row in rows if isinstance(row, dict) and isinstance(row.get("name"), str)}


@dataclass(frozen=True)
class Kept:
    """The SHA-256 of each rollout the generation step kept, by request id (``<modality>.<task>``): the bytes every
    task's record was scored from, whether this run evaluated it or took it from the sample cache (the scored task's
    input hash covers them, and a scoring run fails a task whose rollout is no longer the one kept). The evaluator's
    ``eval_stamp.json`` named only the tasks it was given. ``problem``: why the records could not be read."""

    digests: dict[str, str]
    problem: str | None = None


@cache
def _kept(store: Path) -> Kept:
    try:
        records = load_records(store)
    except (StoreError, ValueError, OSError) as exc:   # a store refused or unreadable: said, the videos unchecked
        return Kept({}, f"{' '.join(str(exc).split())}: the generated videos are shown without their digest check")
    results = {sid: r.result for sid, r in records.items() if r.ok and isinstance(r.result, Mapping)}
    return Kept({sid: kept["sha256"] for sid, kept in results.items() if isinstance(kept.get("sha256"), str)})


def _input(root: Path | None, label: str, recorded: Any) -> Video:
    if not isinstance(recorded, str):
        return Video(label, None, problem="not recorded in the run's input rows")
    if root is None:
        return Video(label, None, problem="the run's scorecard records no dataset folder (provenance dataset_dir)")
    try:
        return Video(label, MediaFile(root, Path(recorded).relative_to(root).as_posix()))
    except ValueError:
        return Video(label, None, problem=f"{recorded} is outside the dataset folder {root}")


def sample_media(run: RunInputs, sample_id: str, result: Mapping[str, Any] | None) -> SampleMedia:
    media = SampleMedia()
    root = _dataset_root(run)
    modalities = [m for m in run.options.get("modalities") or MODALITIES if m in MODALITIES]
    # a scorecard kept aside: the generation records are the rerun's, of other bytes maybe (its page says it keeps
    # no digest)
    kept = None if run.aside else _kept(run.dir / GENERATION)
    if kept is not None and kept.problem is not None:
        media.problems.append(kept.problem)
    prompt = None
    for modality in modalities:
        expected = kept.digests.get(f"{modality}.{sample_id}") if kept is not None else None
        if kept is not None and kept.problem is None and expected is None:
            media.problems.append(f"{modality}: {run.dir / GENERATION / SAMPLES_DIR} keeps no digest of the rollout "
                                  f"of {modality}.{sample_id}: its video is shown without the check")
        media.rollouts.append(Video(modality, MediaFile(run.dir, f"{modality}/videos/{sample_id}.mp4"), expected))
        row = _json_lines(run.dir / "inputs" / f"{modality}.jsonl").get(sample_id)
        if row is None:
            media.problems.append(f"{modality}: task {sample_id} is not in {run.dir / 'inputs' / modality}.jsonl")
            continue
        media.inputs.append(_input(root, "input video (vision_path of every modality)", row.get("vision_path")))
        spec = row.get(modality) if isinstance(row.get(modality), dict) else {}
        control = spec.get("control_path")
        if control is not None:
            media.inputs.append(_input(root, f"{modality} control video", control))
        else:
            media.texts.append(Text(f"{modality} control", "computed by cosmos-framework from the input video "
                                    f"({json.dumps(spec)}); the run keeps no copy"))
        prompt = prompt or row.get("prompt")
    if isinstance(prompt, str):
        media.texts.append(Text("prompt", prompt))
    return media
