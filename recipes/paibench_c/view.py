"""What ``pinbench view`` shows of a PAI-Bench-C task (``pinbench.results.view``): the generated video of every
modality (``<run>/<modality>/videos/<task>.mp4``, checked against the digest the evaluator's stamp recorded), and the
task's inputs from the rows the run wrote (``<run>/inputs/<modality>.jsonl``): the input video every modality is
given, the depth and seg control videos, the prompt. The edge and blur controls are computed inside cosmos-framework
from the input video; the run keeps no copy of them. Inputs are served from the dataset folder only (the fixture's,
or the one the run's provenance names: the pinned snapshot it read)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from pinbench.core.files import loads_json, read_json_object, read_regular_text
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


@cache
def _scored_digests(stamp: Path) -> dict[str, str]:
    """Task -> SHA-256 of the generated video the evaluator scored (``eval_stamp.json``; none when it is no JSON
    object of that form: a stamp cut or edited was a traceback that ended ``pinbench view``)."""
    inputs = (read_json_object(stamp) or {}).get("inputs")
    videos = inputs.get("videos") if isinstance(inputs, dict) else None
    if not isinstance(videos, dict):
        return {}
    return {task: digest for task, digest in videos.items() if isinstance(digest, str)}


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
    prompt = None
    for modality in modalities:
        # a scorecard kept aside: the stamp is the rerun's, of other bytes maybe (its page says it keeps no digest)
        expected = None if run.aside else _scored_digests(run.dir / modality / "eval_stamp.json").get(sample_id)
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
