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
from pathlib import Path
from typing import Any

from pinbench.core.files import while_unchanged
from pinbench.core.generation import REQUESTS_FILE, Request, RequestError, read_each_request
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
class Requests:
    """The run's requests, by id (``<modality>.<task>``), each line read alone (``read_each_request``): a cut line
    hides its own task's inputs only. ``unread``: the lines passed over, by the request id each names (None: not
    seen in it); ``problem``: why the file could not be read at all (its reader names it)."""

    by_id: dict[str, Request]
    unread: dict[str | None, list[str]]
    problem: str | None = None


@while_unchanged(lambda path: [path])
def _requests(path: Path) -> Requests:
    try:
        requests, unread = read_each_request(path, "paibench-c")
    except RequestError as exc:   # missing, a folder, not UTF-8: said once, no traceback
        return Requests({}, {}, f"{' '.join(str(exc).split())}: no input video, control or prompt is shown")
    lines: dict[str | None, list[str]] = {}
    for line in unread:
        lines.setdefault(line.request_id, []).append(line.problem)
    return Requests({r.id: r for r in requests}, lines)


@dataclass(frozen=True)
class Kept:
    """The SHA-256 of each rollout the generation step kept, by request id (``<modality>.<task>``): the bytes every
    task's record was scored from, whether this run evaluated it or took it from the sample cache (the scored task's
    input hash covers them, and a scoring run fails a task whose rollout is no longer the one kept). The evaluator's
    ``eval_stamp.json`` named only the tasks it was given. ``problem``: why the records could not be read."""

    digests: dict[str, str]
    problem: str | None = None


@while_unchanged(lambda store: [store / SAMPLES_DIR])
def _kept(store: Path) -> Kept:
    try:
        records = load_records(store)
    except (StoreError, ValueError, OSError) as exc:   # a store refused or unreadable: said, the videos unchecked
        return Kept({}, f"{' '.join(str(exc).split())}: the generated videos are shown without their digest check")
    results = {sid: r.result for sid, r in records.items() if r.ok and isinstance(r.result, Mapping)}
    return Kept({sid: kept["sha256"] for sid, kept in results.items() if isinstance(kept.get("sha256"), str)})


def _input(root: Path | None, label: str, recorded: Any, request: Request, role: str) -> Video:
    """The dataset file a row names: relative to the dataset folder (as ``row_key`` wrote it), or absolute inside it;
    checked against the SHA-256 its request recorded of it (``conditioning``, the ``role`` file staged from it)."""
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
    staged = request.file(role)
    return Video(label, MediaFile(root, relative.as_posix()), staged.sha256 if staged else None,
                 expected_by=f"request {request.id} conditioned on")


def sample_media(run: RunInputs, sample_id: str, result: Mapping[str, Any] | None) -> SampleMedia:
    media = SampleMedia()
    root = _dataset_root(run)
    modalities = [m for m in run.options.get("modalities") or MODALITIES if m in MODALITIES]
    # a scorecard kept aside: the generation records are the rerun's, of other bytes maybe (its page says it keeps
    # no digest)
    store = run.dir / GENERATION
    kept = None if run.aside else _kept(store)
    if kept is not None and kept.problem is not None:
        media.problems.append(kept.problem)
    path = store / REQUESTS_FILE
    requests = _requests(path)
    if requests.problem is not None:
        media.problems.append(requests.problem)
    media.problems += requests.unread.get(None, [])   # a line whose request is not known may be this task's
    prompt = None
    for modality in modalities:
        request_id = f"{modality}.{sample_id}"
        expected = kept.digests.get(request_id) if kept is not None else None
        if kept is not None and kept.problem is None and expected is None:
            media.problems.append(f"{modality}: {run.dir / GENERATION / SAMPLES_DIR} keeps no digest of the rollout "
                                  f"of {request_id}: its video is shown without the check")
        media.rollouts.append(Video(modality, MediaFile(run.dir, f"{modality}/videos/{sample_id}.mp4"), expected))
        request = requests.by_id.get(request_id)
        row = request.settings.get("row") if request is not None else None
        if not isinstance(row, Mapping):
            if request_id in requests.unread:
                media.problems += [f"{modality}: {line}: its input video, control and prompt are not shown"
                                   for line in requests.unread[request_id]]
            elif requests.problem is None:
                media.problems.append(f"{modality}: {path} holds no request {request_id} with a row")
            continue
        media.inputs.append(_input(root, "input video (vision_path of every modality)", row.get("vision_path"),
                                   request, "context"))
        spec = row.get(modality) if isinstance(row.get(modality), Mapping) else {}
        control = spec.get("control_path")
        if control is not None:
            media.inputs.append(_input(root, f"{modality} control video", control, request, "control"))
        else:
            media.texts.append(Text(f"{modality} control", "computed by cosmos-framework from the input video "
                                    f"({json.dumps(dict(spec))}); the run keeps no copy"))
        prompt = prompt or row.get("prompt")
    if isinstance(prompt, str):
        media.texts.append(Text("prompt", prompt))
    return media
