"""What ``pinbench view`` shows of a PAI-Bench-C task (``pinbench.results.view``): the generated video of every
modality (``<run>/<modality>/videos/<task>.mp4``, checked against the digest of the rollout the generation step kept),
and the task's inputs from the cosmos-framework row of each of its requests (``settings.row`` of request
``<modality>.<task>`` in ``<run>/generation/requests.jsonl``): the input video every modality is given, the depth and
seg control videos, the prompt. The edge and blur controls are computed inside cosmos-framework from the input video;
the run keeps no copy of them. Inputs are served from the dataset folder only (the fixture's, or the one the run's
provenance names: the pinned snapshot it read), not from the copies the run staged for its generator."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pinbench.core.generation import REQUESTS_FILE, RequestError, read_requests
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


@dataclass(frozen=True)
class Rows:
    """The cosmos-framework row of each request, by request id (``<modality>.<task>``). ``problem``: why the
    requests file could not be read (its reader names the file and line)."""

    rows: dict[str, Mapping[str, Any]]
    problem: str | None = None


@cache
def _rows(path: Path) -> Rows:
    try:
        requests = read_requests(path, "paibench-c")
    except RequestError as exc:   # missing, a line cut, a request of another form: said once, no traceback
        return Rows({}, f"{' '.join(str(exc).split())}: no input video, control or prompt is shown")
    return Rows({r.id: r.settings["row"] for r in requests if isinstance(r.settings.get("row"), Mapping)})


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
    """The dataset file a row names: relative to the dataset folder (as ``row_key`` wrote it), or absolute inside it."""
    if not isinstance(recorded, str) or not recorded:
        return Video(label, None, problem="not recorded in the run's request rows")
    if root is None:
        return Video(label, None, problem="the run's scorecard records no dataset folder (provenance dataset_dir)")
    try:
        relative = (root / recorded).relative_to(root)
    except ValueError:
        relative = None
    if relative is None or ".." in relative.parts:
        return Video(label, None, problem=f"{recorded} is outside the dataset folder {root}")
    return Video(label, MediaFile(root, relative.as_posix()))


def sample_media(run: RunInputs, sample_id: str, result: Mapping[str, Any] | None) -> SampleMedia:
    media = SampleMedia()
    root = _dataset_root(run)
    modalities = [m for m in run.options.get("modalities") or MODALITIES if m in MODALITIES]
    # a scorecard kept aside: the generation records are the rerun's, of other bytes maybe (its page says it keeps
    # no digest)
    kept = None if run.aside else _kept(run.dir / GENERATION)
    if kept is not None and kept.problem is not None:
        media.problems.append(kept.problem)
    requests = run.dir / GENERATION / REQUESTS_FILE
    rows = _rows(requests)
    if rows.problem is not None:
        media.problems.append(rows.problem)
    prompt = None
    for modality in modalities:
        expected = kept.digests.get(f"{modality}.{sample_id}") if kept is not None else None
        if kept is not None and kept.problem is None and expected is None:
            media.problems.append(f"{modality}: {run.dir / GENERATION / SAMPLES_DIR} keeps no digest of the rollout "
                                  f"of {modality}.{sample_id}: its video is shown without the check")
        media.rollouts.append(Video(modality, MediaFile(run.dir, f"{modality}/videos/{sample_id}.mp4"), expected))
        row = rows.rows.get(f"{modality}.{sample_id}")
        if row is None:
            if rows.problem is None:
                media.problems.append(f"{modality}: {requests} holds no request {modality}.{sample_id} with a row")
            continue
        media.inputs.append(_input(root, "input video (vision_path of every modality)", row.get("vision_path")))
        spec = row.get(modality) if isinstance(row.get(modality), Mapping) else {}
        control = spec.get("control_path")
        if control is not None:
            media.inputs.append(_input(root, f"{modality} control video", control))
        else:
            media.texts.append(Text(f"{modality} control", "computed by cosmos-framework from the input video "
                                    f"({json.dumps(dict(spec))}); the run keeps no copy"))
        prompt = prompt or row.get("prompt")
    if isinstance(prompt, str):
        media.texts.append(Text("prompt", prompt))
    return media
