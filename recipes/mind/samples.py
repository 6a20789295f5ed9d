"""One flat result per sample: the official values (WorldFoundry's extraction), the native cross-check
beside them, and a reason for every value that is missing.

Keys of a result are WorldFoundry's metric ids (``lcm_mse``, ``dino_mse``, ``action_rpe_trans_mean``,
``gsc_psnr``, ...), the native recomputation under ``native/<id>``, and ``errors`` mapping a metric id to
why this sample has no value for it. A sample that failed as a whole (``error`` set upstream, no record,
a record that does not describe these inputs) raises :class:`SampleFailure`, which the runner stores as a
failed sample with that reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pinbench_recipes.mind.layout import ContinuationSample, MirrorSample, SampleKey
from pinbench_recipes.mind.results import Imported
from pinbench_recipes.mind.worldfoundry import block_value, finite, mean_finite

BLOCKS: dict[str, tuple[str, tuple[tuple[str, str, str], ...]]] = {
    # official metric -> (record key, ((metric id, average key, per-frame key), ...))
    "lcm": ("lcm", (("lcm_mse", "avg_mse", "mse"), ("lcm_psnr", "avg_psnr", "psnr"),
                    ("lcm_ssim", "avg_ssim", "ssim"), ("lcm_lpips", "avg_lpips", "lpips"))),
    "visual": ("visual_quality", (("imaging_quality", "avg_imaging", "imaging"),
                                  ("aesthetic_quality", "avg_aesthetic", "aesthetic"))),
    "dino": ("dino", (("dino_mse", "avg_dino_mse", "dino_mse"),)),
}
ACTION_IDS = (("action_rpe_trans_mean", "rpe_trans_mean"), ("action_rpe_rot_mean_deg", "rpe_rot_mean_deg"),
              ("action_rpe_trans_median", "rpe_trans_median"), ("action_rpe_rot_median_deg", "rpe_rot_median_deg"))
# Reported when present; absence is normal (no pure translation step; "rotation" never fills, see README).
ACTION_BUCKET_IDS = (("action_translation_rpe_trans_mean", "translation", "rpe_trans_mean"),
                     ("action_rotation_rpe_rot_mean_deg", "rotation", "rpe_rot_mean_deg"))
GSC_IDS = (("gsc_mse", "avg_mse", "mse"), ("gsc_psnr", "avg_psnr", "psnr"), ("gsc_ssim", "avg_ssim", "ssim"),
           ("gsc_lpips", "avg_lpips", "lpips"))
PIXEL_FIELDS = ("mse", "psnr", "ssim", "lpips")
IDENTICAL = {"lcm": "every frame is identical to the GT's", "gsc": "every mirrored frame pair is identical"}
# Largest per-frame |official - native| still called agreement (README, "Native cross-check"): the official
# numbers are float32 on a GPU, the native ones float64 on the CPU, from the same decoded frames.
AGREEMENT = {"mse": 1e-5, "psnr": 1e-2, "ssim": 1e-4, "lpips": 1e-3}


class SampleFailure(RuntimeError):
    """This sample has no usable official record; the message is the reason, stored with the sample."""


def metric_ids(metrics: Sequence[str]) -> list[str]:
    """The per-sample metric ids of the requested official metrics, in WorldFoundry's table order."""
    ids: list[str] = []
    for metric in metrics:
        if metric in BLOCKS:
            ids += [m for m, _, _ in BLOCKS[metric][1]]
        elif metric == "action":
            ids += [m for m, _ in ACTION_IDS]
        elif metric == "gsc":
            ids += [m for m, _, _ in GSC_IDS]
    return ids


def _base(key: SampleKey) -> dict[str, Any]:
    return {"perspective": key.perspective, "test_type": key.test_type, "path": key.path}


def _check_inputs(record: Mapping[str, Any], sample: ContinuationSample | None) -> None:
    """The record must describe these inputs (same GT times, same generated frame count)."""
    if sample is None:
        return
    expected = {"mark_time": sample.actions.mark_time, "total_time": sample.actions.total_time}
    if sample.video_frames is not None:
        expected["sample_frames"] = sample.video_frames
    wrong = [f"{name} {record.get(name)!r} (inputs: {value})" for name, value in expected.items()
             if record.get(name) != value or isinstance(record.get(name), bool)]
    if wrong:
        raise SampleFailure("the record does not describe this run's inputs: " + ", ".join(wrong) +
                            " (a Result.json of other data or other videos?)")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _frame_lists_ok(block: Mapping[str, Any], fields: Sequence[tuple[str, str]], expected: int | None,
                    source: Path | None) -> str | None:
    """Why a block's (average, per-frame list) pairs are not what process.py writes, or None: each list covers
    the frames it scores and holds numbers only (a string or boolean frame would be left out of the
    finite-frame mean unseen, moving it), each average is a number or null (``Infinity`` / ``NaN`` are numbers)
    and the mean of its frames (``avg_mse: 1e300`` over frames of 0.01 was scored as written); ``source`` is the
    Result.json, named in that last reason."""
    for average, key in fields:
        values = block.get(key)
        if not isinstance(values, list):
            return f"has no per-frame list {key!r}"
        if expected is not None and len(values) != expected:
            return (f"{key!r} holds {len(values)} frames, process.py at 8f9c59c scores {expected} here "
                    "(a result of another process.py version?)")
        wrong = next((i for i, v in enumerate(values) if not _is_number(v)), None)
        if wrong is not None:
            return f"{key!r}[{wrong}] is {values[wrong]!r:.40}, not a number"
        if block.get(average) is not None and not _is_number(block[average]):
            return f"{average!r} is {block[average]!r:.40}, not a number"
        mean = _other_mean(block[average], values) if values and block.get(average) is not None else None
        if mean is not None:
            return (f"{average!r} is {block[average]!r} in {source or 'the Result.json'}, but its {len(values)} "
                    f"{key!r} frames average {mean!r} (process.py writes their mean)")
    return None


def _other_mean(average: float, values: Sequence[float]) -> float | None:
    """The mean of ``values`` when ``average`` is not it, as process.py (8f9c59c) computes it, else None. Every
    listed frame counts (its last-chunk drop leaves frames out of the list, never out of the mean; the fallback to
    finite frames is WorldFoundry's, applied after this): ``sum / len`` in float64, except a DINO average of one
    100-frame chunk, which is torch's float32 mean. A float32 sum of n terms is off by at most about n * 2**-24 of
    the sum of their magnitudes, so twice that passes either rounding; a NaN frame makes the mean NaN and an
    infinite one that infinity, as ``sum`` does."""
    mean = sum(values) / len(values)
    if math.isnan(mean) or math.isinf(mean):
        agrees = average == mean or (math.isnan(average) and math.isnan(mean))
    else:   # sum, not fsum, of the magnitudes: huge frames make the bound inf, never an OverflowError
        agrees = abs(average - mean) <= len(values) * 2 ** -23 * sum(abs(v) for v in values) / len(values)
    return None if agrees else mean


def continuation_result(imported: Imported, sample: ContinuationSample | None, *, metrics: Sequence[str],
                        video_max_time: int | None) -> dict[str, Any]:
    """The result of a mem_test / action_space_test sample; SampleFailure when it failed as a whole."""
    if not imported.ok:
        raise SampleFailure(imported.failure)
    record = imported.record
    assert record is not None
    _check_inputs(record, sample)
    expected = sample.frames_scored(video_max_time) if sample is not None and sample.video else None
    result = _base(imported.key)
    errors: dict[str, str] = {}
    for metric in metrics:
        if metric in BLOCKS:
            _read_frame_block(record, metric, expected, result, errors, imported.source)
        elif metric == "action":
            _read_action(record, result, errors)
    lcm = record.get("lcm")
    if isinstance(lcm, dict) and isinstance(lcm.get("psnr"), list):
        result["lcm_psnr_infinite_frames"] = sum(1 for v in lcm["psnr"] if v == math.inf)
    result["official_frames"] = lcm.get("length") if isinstance(lcm, dict) else None
    result["errors"] = errors
    if imported.notes:
        result["import_notes"] = imported.notes
    return result


def _read_frame_block(record: Mapping[str, Any], metric: str, expected: int | None, result: dict[str, Any],
                      errors: dict[str, str], source: Path | None) -> None:
    key, fields = BLOCKS[metric]
    block = record.get(key)
    problem = None
    if block is None:
        problem = (f"no {key!r} block although error is null: process.py writes none when it scores no frame "
                   f"(a read of {100} frames or fewer)")
    elif not isinstance(block, dict):
        problem = f"{key!r} is not an object"
    else:
        problem = _frame_lists_ok(block, [(average, frames) for _, average, frames in fields], expected, source)
        if problem is None and key == "lcm" and expected is not None and block.get("length") != expected:
            problem = f"length {block.get('length')!r}, process.py at 8f9c59c scores {expected} frames here"
        problem = f"{key!r} block {problem}" if problem else None
    for metric_id, average, frames in fields:
        value = None if problem else block_value(block, average, frames)
        result[metric_id] = value
        if problem:
            errors[metric_id] = problem
        elif value is None and _all_infinite(block.get(frames)):
            errors[metric_id] = (f"+inf: every frame is identical to the GT's ({key!r} {average} is Infinity, as "
                                 "process.py writes it); a scorecard holds finite numbers, so it is not averaged")
        elif value is None:
            errors[metric_id] = f"{key!r} block has no finite {average} nor finite per-frame {frames!r}"


def _all_infinite(values: Any) -> bool:
    return isinstance(values, list) and bool(values) and all(v == math.inf for v in values)


def _read_action(record: Mapping[str, Any], result: dict[str, Any], errors: dict[str, str]) -> None:
    block = record.get("action")
    overall = block.get("__overall__") if isinstance(block, dict) else None
    if not isinstance(overall, dict):
        reason = ("no 'action' block although error is null: action.py returned nothing (fewer than 8 valid "
                  "RPE steps, or no aligned steps)") if block is None else "'action' block has no '__overall__'"
        for metric_id, _ in ACTION_IDS:
            result[metric_id] = None
            errors[metric_id] = reason
        return
    for metric_id, field in ACTION_IDS:
        value = overall.get(field)
        result[metric_id] = value if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value) else None
        if result[metric_id] is None:
            errors[metric_id] = f"action.__overall__.{field} is {value!r}"
    for metric_id, bucket, field in ACTION_BUCKET_IDS:
        stats = block.get(bucket)
        if isinstance(stats, dict) and finite(stats.get(field)) is not None:
            result[metric_id] = finite(stats[field])
    result["action_steps"] = overall.get("count")


def mirror_result(imported: Imported, sample: MirrorSample | None) -> dict[str, Any]:
    """The result of a mirror_test directory: ``gsc_*`` averaged over its rollouts, each rollout kept.

    Any rollout without a gsc block (odd frame count, error) fails the directory's gsc values by name,
    rather than being left out of its mean as WorldFoundry does.
    """
    if not imported.ok:
        raise SampleFailure(imported.failure)
    record = imported.record
    assert record is not None
    entries = record.get("video_results")
    if not isinstance(entries, list):
        raise SampleFailure("mirror record has no 'video_results' list")
    by_name: dict[Any, dict[str, Any]] = {}
    conflicting: set[Any] = set()   # one rollout, two different entries: which is its own cannot be told
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        name = entry.get("video_name")
        if name is not None and not isinstance(name, str):   # a list ended the sample in "unhashable type: 'list'"
            raise SampleFailure(f"video_results[{index}]: video_name {json.dumps(name)[:60]} is not a file name")
        if by_name.setdefault(name, entry) != entry:
            conflicting.add(name)
    planned = {v.name: v for v in sample.videos} if sample is not None else {}
    names = list(planned) if sample is not None else sorted(n for n in by_name if isinstance(n, str))
    result = _base(imported.key)
    videos: dict[str, Any] = {}
    problems: list[str] = []
    for name in names:
        entry = by_name.get(name)
        video: dict[str, Any] = {}
        if entry is None:
            problems.append(f"{name}: no entry in video_results")
        elif name in conflicting:
            problems.append(f"{name}: different entries in video_results; cannot tell which is this rollout's")
        elif entry.get("error") is not None:
            problems.append(f"{name}: {entry['error']}")
        elif not isinstance(entry.get("gsc"), dict):
            problems.append(f"{name}: no gsc block")
        else:
            planned_video = planned.get(name)
            expected = planned_video.pairs if planned_video is not None else None
            if planned_video is not None and entry.get("sample_frames") != planned_video.frames:
                problems.append(f"{name}: sample_frames {entry.get('sample_frames')!r}, the video has "
                                f"{planned_video.frames}")
            bad = _frame_lists_ok(entry["gsc"], [(average, frames) for _, average, frames in GSC_IDS], expected,
                                  imported.source)
            if bad:
                problems.append(f"{name}: gsc block {bad}")
            video = {metric_id: block_value(entry["gsc"], average, frames) for metric_id, average, frames in GSC_IDS}
        videos[name] = video
    extra = sorted(n for n in by_name if isinstance(n, str) and n not in names)
    errors: dict[str, str] = {}
    for metric_id, _, _ in GSC_IDS:
        values = [videos[n].get(metric_id) for n in names]
        result[metric_id] = None if problems or not names else mean_finite(values)
        if problems:
            errors[metric_id] = "; ".join(problems)
        elif result[metric_id] is None:
            errors[metric_id] = "no rollout has a finite value"
    result["videos"] = videos
    result["errors"] = errors
    if extra:
        result["unplanned_rollouts"] = extra
    return result


# --------------------------------------------------------------------------------- native cross-check


def _frame_diff(official: Any, native: Any) -> float:
    """|official - native| for one frame; both infinite (identical frames) agree, one infinite does not."""
    if not isinstance(official, (int, float)) or not isinstance(native, (int, float)):
        return math.inf
    if math.isinf(official) or math.isinf(native):
        return 0.0 if official == native else math.inf
    if math.isnan(official) or math.isnan(native):
        return math.inf
    return abs(official - native)


def compare_blocks(official: Mapping[str, Any], native: Mapping[str, Any]) -> dict[str, float]:
    """Largest per-frame difference per pixel metric between an official and a native block."""
    out = {}
    for name in PIXEL_FIELDS:
        a, b = official.get(name), native.get(name)
        if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b) or not a:
            out[name] = math.inf
        else:
            out[name] = max(_frame_diff(x, y) for x, y in zip(a, b, strict=True))
    return out


def native_values(native_blocks: Mapping[str, Mapping[str, Any]], prefix: str) -> dict[str, float | None]:
    """``<prefix>_<field>`` of the native blocks (a sample's value: the same rule as the official one)."""
    ids = [(f"{prefix}_{f}", f"avg_{f}", f) for f in PIXEL_FIELDS]
    per_block = {name: {metric_id: block_value(native, average, frames) for metric_id, average, frames in ids}
                 for name, native in native_blocks.items()}
    values = {}
    for metric_id, _, _ in ids:
        found = [per_block[n][metric_id] for n in native_blocks]
        values[metric_id] = mean_finite(found) if found and None not in found else None
    return values


def add_native(result: dict[str, Any], official_blocks: Mapping[str, Mapping[str, Any]],
               native_blocks: Mapping[str, Mapping[str, Any]], prefix: str) -> None:
    """Put ``native/<prefix>_<field>`` (sample value, same rule as the official one) and the per-frame
    agreement into ``result``; ``official_blocks`` / ``native_blocks`` are keyed by block (``lcm``) or
    rollout name. A native value that is None is given its reason as the official one is: +inf when every frame of
    every block is identical (PSNR), else no finite value."""
    values = native_values(native_blocks, prefix)
    result.update({f"native/{metric_id}": value for metric_id, value in values.items()})
    errors = result.setdefault("errors", {})
    for metric_id, value in values.items():
        field = metric_id.removeprefix(f"{prefix}_")
        if value is None and native_blocks and all(_all_infinite(b.get(field)) for b in native_blocks.values()):
            errors[f"native/{metric_id}"] = (f"+inf: {IDENTICAL[prefix]} (the native {field} is inf for each, as "
                                             "upstream computes it); a scorecard holds finite numbers, so it is not "
                                             "averaged")
        elif value is None:
            errors[f"native/{metric_id}"] = f"no native {prefix} block has a finite {field}"
    agreement: dict[str, float] = {}
    for name, official in official_blocks.items():
        if name in native_blocks:
            for field, diff in compare_blocks(official, native_blocks[name]).items():
                agreement[field] = max(agreement.get(field, 0.0), diff)
    result["cross_check"] = {f: (None if math.isinf(d) else d) for f, d in agreement.items()}
    result["cross_check_agrees"] = bool(agreement) and all(d <= AGREEMENT[f] for f, d in agreement.items())
