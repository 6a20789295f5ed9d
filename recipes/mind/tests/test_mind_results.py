"""Result.json import: Infinity/NaN, keys, missing blocks, duplicates, stale copies, mirror records."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pinbench_recipes.mind.layout import ActionFile, ContinuationSample, SampleKey
from pinbench_recipes.mind.results import (
    ResultFileError,
    check_run_settings,
    import_results,
    load_result_file,
    mirror_keys,
)
from pinbench_recipes.mind.samples import SampleFailure, continuation_result, mirror_result
from pinbench_recipes.mind.tests.conftest import continuation_record, lcm_block, mirror_record

A = SampleKey("1st_data", "mem_test", "data-1")
B = SampleKey("1st_data", "mem_test", "data-2")
M = SampleKey("1st_data", "mirror_test", "loop-1")
METRICS = ("lcm", "visual", "dino", "action")


def imported(write_result: Callable[..., Path], records: list[dict], expected=(A, B, M)):
    return import_results(load_result_file(write_result(records)), list(expected))


def test_infinity_and_nan_are_parsed_and_psnr_falls_back_to_finite_frames(write_result) -> None:
    lcm = lcm_block(100)
    lcm["psnr"] = [math.inf] * 2 + [30.0] * 49 + [40.0] * 49
    lcm["avg_psnr"] = math.inf
    lcm["ssim"][3] = math.nan
    lcm["avg_ssim"] = math.nan
    report = imported(write_result, [continuation_record("data-1", lcm=lcm)], expected=(A,))
    text = report.source.read_text()
    assert "Infinity" in text and "NaN" in text           # written as process.py writes them
    result = continuation_result(report.samples[A], None, metrics=METRICS, video_max_time=None)
    assert result["lcm_psnr"] == pytest.approx(35.0)     # mean of the 98 finite frames, not inf
    assert result["lcm_ssim"] == pytest.approx(0.8)      # NaN average: mean of the finite frames
    assert result["lcm_psnr_infinite_frames"] == 2
    assert result["errors"] == {}


def test_all_frames_infinite_gives_no_value_with_a_reason(write_result) -> None:
    lcm = lcm_block(100, psnr=math.inf)
    report = imported(write_result, [continuation_record("data-1", lcm=lcm)], expected=(A,))
    result = continuation_result(report.samples[A], None, metrics=("lcm",), video_max_time=None)
    assert result["lcm_psnr"] is None and "+inf: every frame is identical to the GT" in result["errors"]["lcm_psnr"]
    assert result["lcm_mse"] == pytest.approx(0.01)


def test_records_are_keyed_not_ordered(write_result) -> None:
    records = [continuation_record("data-2", lcm=lcm_block(100, mse=0.02)), mirror_record("loop-1"),
               continuation_record("data-1", lcm=lcm_block(100, mse=0.05))]
    report = imported(write_result, records)
    assert all(i.ok for i in report.samples.values())
    a = continuation_result(report.samples[A], None, metrics=METRICS, video_max_time=None)
    b = continuation_result(report.samples[B], None, metrics=METRICS, video_max_time=None)
    assert (a["lcm_mse"], b["lcm_mse"]) == (pytest.approx(0.05), pytest.approx(0.02))


def test_missing_blocks_with_null_error_fail_those_metrics_by_name(write_result) -> None:
    report = imported(write_result, [continuation_record("data-1", lcm=None, visual_quality=None, dino=None,
                                                         action=None)], expected=(A,))
    result = continuation_result(report.samples[A], None, metrics=METRICS, video_max_time=None)
    for metric_id in ("lcm_mse", "lcm_psnr", "imaging_quality", "aesthetic_quality", "dino_mse",
                      "action_rpe_trans_mean", "action_rpe_rot_mean_deg"):
        assert result[metric_id] is None
        assert metric_id in result["errors"]
    assert "scores no frame" in result["errors"]["lcm_mse"]
    assert "fewer than 8 valid RPE steps" in result["errors"]["action_rpe_trans_mean"]


def test_only_requested_blocks_are_required(write_result) -> None:
    report = imported(write_result, [continuation_record("data-1", action=None, dino=None)], expected=(A,))
    result = continuation_result(report.samples[A], None, metrics=("lcm", "visual"), video_max_time=None)
    assert result["errors"] == {} and "dino_mse" not in result


def test_error_record_fails_the_sample(write_result) -> None:
    report = imported(write_result, [continuation_record("data-1", error="CUDA out of memory")], expected=(A,))
    assert not report.samples[A].ok
    with pytest.raises(SampleFailure, match="gave up after 4 attempts: CUDA out of memory"):
        continuation_result(report.samples[A], None, metrics=METRICS, video_max_time=None)


def test_missing_record_fails_the_sample(write_result) -> None:
    report = imported(write_result, [continuation_record("data-1")], expected=(A, B))
    assert report.samples[A].ok
    assert report.samples[B].failure == "no record in the Result.json (process.py never wrote one)"


def test_stale_copy_is_recognised_and_the_failing_sample_named(write_result) -> None:
    """B raised before result = data.copy(): its error went onto a second copy of A's record."""
    good = continuation_record("data-1")
    stale = continuation_record("data-1", error="[Errno 2] No such file or directory: "
                                               "'/gt/1st_data/test/mem_test/data-2/action.json'")
    report = imported(write_result, [good, stale], expected=(A, B))
    assert report.samples[A].ok and report.samples[A].record == good
    assert report.stale_copies == [{"copy_of": "1st_data/mem_test/data-1", "index": 1, "error": stale["error"]}]
    failure = report.samples[B].failure
    assert "raised before creating its record" in failure and "copy of 1st_data/mem_test/data-1" in failure
    assert "data-2/action.json" in failure


def test_stale_copy_before_the_real_record_also_works(write_result) -> None:
    stale = continuation_record("data-1", error="boom at /x/1st_data/mem_test/data-2/video.mp4")
    report = imported(write_result, [stale, continuation_record("data-1")], expected=(A, B))
    assert report.samples[A].ok and "raised before creating its record" in report.samples[B].failure


def test_identical_duplicates_are_one_record(write_result) -> None:
    report = imported(write_result, [continuation_record("data-1")] * 2, expected=(A,))
    assert report.samples[A].ok and report.samples[A].notes == ["2 identical records"]


def test_conflicting_duplicates_fail_the_sample(write_result) -> None:
    records = [continuation_record("data-1"), continuation_record("data-1", lcm=lcm_block(100, mse=0.9))]
    report = imported(write_result, records, expected=(A,))
    assert "2 different error-free records (data[0], data[1])" in report.samples[A].failure


def test_records_outside_the_plan_are_reported(write_result) -> None:
    report = imported(write_result, [continuation_record("data-1"), continuation_record("data-7")], expected=(A,))
    assert report.unexpected == ["1st_data/mem_test/data-7"]
    assert report.summary()["unexpected_records"] == ["1st_data/mem_test/data-7"]


# The planned inputs of A: 112 generated frames of a 112-frame continuation -> 100 frames scored.
PLANNED_A = ContinuationSample(key=A, gt_dir=Path("gt/data-1"), actions=ActionFile(10, 122, 122, ()), gt_frames=122,
                               gt_poses=97, video=Path("generated/data-1/video.mp4"), video_frames=112)


def test_frame_count_of_another_process_py_version_is_refused(write_result) -> None:
    """WorldFoundry's fixture says 97 scored frames: process.py at 8f9c59c only scores multiples of 100."""
    report = imported(write_result, [continuation_record("data-1", lcm=lcm_block(97))], expected=(A,))
    result = continuation_result(report.samples[A], PLANNED_A, metrics=("lcm",), video_max_time=None)
    assert result["lcm_mse"] is None and "holds 97 frames" in result["errors"]["lcm_mse"]
    assert continuation_result(imported(write_result, [continuation_record("data-1")], expected=(A,)).samples[A],
                               PLANNED_A, metrics=("lcm",), video_max_time=None)["errors"] == {}


@pytest.mark.parametrize(("field", "value", "words"), [("mark_time", 20, r"mark_time 20 \(inputs: 10\)"),
                                                       ("sample_frames", 150, r"sample_frames 150 \(inputs: 112\)")])
def test_record_of_other_inputs_is_refused(write_result, field: str, value: int, words: str) -> None:
    record = continuation_record("data-1")
    record[field] = value
    report = imported(write_result, [record], expected=(A,))
    with pytest.raises(SampleFailure, match=words):
        continuation_result(report.samples[A], PLANNED_A, metrics=("lcm",), video_max_time=None)


def test_mirror_values_average_the_rollouts(write_result) -> None:
    record = mirror_record("loop-1", videos={"path-1.mp4": 12, "path-2.mp4": 8},
                           path_1={"gsc": lcm_block(6, mse=0.02, psnr=30.0)},
                           path_2={"gsc": lcm_block(4, mse=0.04, psnr=20.0)})
    report = imported(write_result, [record], expected=(M,))
    result = mirror_result(report.samples[M], None)
    assert result["gsc_mse"] == pytest.approx(0.03) and result["gsc_psnr"] == pytest.approx(25.0)
    assert set(result["videos"]) == {"path-1.mp4", "path-2.mp4"} and result["errors"] == {}


def test_mirror_rollout_with_an_error_fails_the_directory_by_name(write_result) -> None:
    record = mirror_record("loop-1", videos={"path-1.mp4": 12, "path-2.mp4": 9},
                           path_2={"error": "frame count is not an even number!", "gsc": None})
    report = imported(write_result, [record], expected=(M,))
    result = mirror_result(report.samples[M], None)
    assert result["gsc_mse"] is None
    assert result["errors"]["gsc_mse"] == "path-2.mp4: frame count is not an even number!"


def test_mirror_rollout_missing_from_the_record(write_result) -> None:
    from pinbench_recipes.mind.layout import MirrorSample, MirrorVideo

    planned = MirrorSample(M, Path("loop-1"), (MirrorVideo("path-1.mp4", Path("p1"), 12),
                                               MirrorVideo("path-2.mp4", Path("p2"), 8)))
    report = imported(write_result, [mirror_record("loop-1")], expected=(M,))
    result = mirror_result(report.samples[M], planned)
    assert "path-2.mp4: no entry in video_results" in result["errors"]["gsc_psnr"]


def test_mirror_keys_come_from_the_file_without_a_generated_root(write_result) -> None:
    path = write_result([mirror_record("loop-2", "3rd_data"), mirror_record("loop-1"), continuation_record("data-1")])
    assert [k.label for k in mirror_keys(load_result_file(path))] == [
        "1st_data/mirror_test/loop-1", "3rd_data/mirror_test/loop-2"]


@pytest.mark.parametrize(("text", "words"), [
    ('{"data": [{"path": "a", "perspective": "1st_data", "test_type": "mem_te', ["invalid JSON", "cut short"]),
    ('[1, 2]', ["not a MIND result"]),
    ('{"data": [{"perspective": "1st_data", "test_type": "mem_test"}]}', ["data[0] has no 'path'"]),
    ('{"data": [{"path": "a", "perspective": "2nd_data", "test_type": "mem_test"}]}', ["data[0]", "2nd_data"]),
    ('{"data": [], "video_max_time": "97"}', ["video_max_time"]),
    ('{"data": [{"path": "a", "perspective": "1st_data", "test_type": "mem_test", "error": 3}]}', ["error 3"]),
    ('{"data": [{"path": "../../x", "perspective": "1st_data", "test_type": "mirror_test"}]}',
     ["data[0]", "not a directory name"]),
    ('{"data": [{"path": "..", "perspective": "3rd_data", "test_type": "mirror_test"}]}', ["data[0]", "'..'"]),
    ('{"data": [{"path": "a\\nb", "perspective": "3rd_data", "test_type": "mirror_test"}]}', ["data[0]", "a\\nb"]),
    # process.py's json.dump of a non-UTF-8 directory name: it became the sample id, and the scorecard's write failed
    # after every sample was stored ("'utf-8' codec can't encode character '\\udcff'", no file named)
    ('{"data": [{"path": "a\\udcff", "perspective": "1st_data", "test_type": "mem_test"}]}',
     ["data[0]", "not valid UTF-8"]),
    # the parser's recursion limit ended the run naming no file
    ('{"data": ' + "[" * 100_000 + "]" * 100_000 + "}", ["invalid JSON", "nested too deeply"]),
])
def test_unusable_result_file_is_one_line_naming_it(tmp_path: Path, text: str, words: list[str]) -> None:
    path = tmp_path / "Result.json"
    path.write_text(text)
    with pytest.raises(ResultFileError) as info:
        load_result_file(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message
    assert all(word in message for word in words), message


@pytest.mark.parametrize(("edit", "field", "value"), [
    (lambda r: r["lcm"]["mse"].__setitem__(7, -0.01), "lcm.mse[7]", -0.01),
    (lambda r: r["lcm"].__setitem__("avg_lpips", -0.3), "lcm.avg_lpips", -0.3),
    (lambda r: r["dino"].__setitem__("avg_dino_mse", -1e-3), "dino.avg_dino_mse", -1e-3),
    (lambda r: r["action"]["__overall__"].__setitem__("rpe_rot_mean_deg", -2.0),
     "action.__overall__.rpe_rot_mean_deg", -2.0),
    (lambda r: r["action"]["other"].__setitem__("rpe_trans_median", -math.inf), "action.other.rpe_trans_median",
     -math.inf),
])
def test_a_negative_error_is_refused_naming_file_entry_and_field(write_result, edit, field: str, value: float) -> None:
    """A hand-edited Result.json with a negative MSE or rotation error was scored (an error below zero, an
    impossible score averaged in)."""
    record = continuation_record("data-2")
    edit(record)
    path = write_result([continuation_record("data-1"), record])
    with pytest.raises(ResultFileError) as info:
        load_result_file(path)
    assert str(info.value) == (f"{path}: data[1] ('data-2'): {field} is {value!r}, a negative error or distance, "
                               "which process.py cannot write (edited by hand?)")


def test_a_negative_mirror_error_is_refused_and_other_signs_are_not(write_result) -> None:
    entry = {"gsc": lcm_block(6, mse=-0.5)}
    with pytest.raises(ResultFileError, match=r"data\[0\] \('loop-1'\): video_results\[0\]\.gsc\.avg_mse is -0\.5"):
        load_result_file(write_result([mirror_record("loop-1", path_1=entry)]))
    fine = continuation_record("data-1", lcm=lcm_block(100, psnr=-3.0))   # not an error: left to the metrics
    fine["action"]["__overall__"]["count"] = -1
    assert load_result_file(write_result([fine])).records[0][1] == fine


def test_result_path_must_be_a_file(tmp_path: Path) -> None:
    with pytest.raises(ResultFileError, match="is a directory"):
        load_result_file(tmp_path)
    with pytest.raises(ResultFileError, match="file not found"):
        load_result_file(tmp_path / "absent.json")


def test_video_max_time_must_match_the_run(write_result) -> None:
    result = load_result_file(write_result([], video_max_time=200))
    check_run_settings(result, 200)
    with pytest.raises(ResultFileError, match="video_max_time is 200, this run asks for None"):
        check_run_settings(result, None)


@pytest.mark.parametrize(("block", "field", "value", "words"), [
    # a frame that is no number was left out of the finite-frame mean unseen: lcm_mse 0.0118 -> 0.0183, rc 0
    ("lcm", "mse", ["0.9"] + [0.01] * 99, "'mse'[0] is '0.9', not a number"),
    ("lcm", "ssim", [True] + [0.8] * 99, "'ssim'[0] is True, not a number"),
    # an average that is no number was passed over for the frames' mean without a word
    ("lcm", "avg_mse", "0.5", "'avg_mse' is '0.5', not a number"),
    ("lcm", "avg_lpips", False, "'avg_lpips' is False, not a number"),
    ("visual_quality", "avg_imaging", [0.5], "'avg_imaging' is [0.5], not a number"),
])
def test_a_block_value_that_is_no_number_fails_its_metrics(write_result, block: str, field: str, value,
                                                           words: str) -> None:
    record = continuation_record("data-1")
    record[block][field] = value
    report = imported(write_result, [record], expected=(A,))
    result = continuation_result(report.samples[A], PLANNED_A, metrics=METRICS, video_max_time=None)
    failed = [m for m, reason in result["errors"].items() if words in reason]
    assert failed and all(result[m] is None for m in failed), result["errors"]
    assert result["dino_mse"] == pytest.approx(0.001)          # the other blocks keep their values


def test_null_average_falls_back_to_the_frames(write_result) -> None:
    record = continuation_record("data-1")
    record["lcm"]["avg_mse"] = None
    result = continuation_result(imported(write_result, [record], expected=(A,)).samples[A], PLANNED_A,
                                 metrics=("lcm",), video_max_time=None)
    assert result["lcm_mse"] == pytest.approx(0.01) and result["errors"] == {}


def test_an_average_that_is_not_the_mean_of_its_frames_fails_its_metrics_naming_the_file(write_result) -> None:
    """process.py writes each average as the mean of its listed frames; one that is not (``avg_mse: 1e300`` over
    frames of 0.01 was scored as lcm_mse 1e300) fails its block's metrics, naming the file and both values."""
    report = imported(write_result, [continuation_record("data-1", lcm=lcm_block(100, avg_mse=1e300))], expected=(A,))
    result = continuation_result(report.samples[A], PLANNED_A, metrics=METRICS, video_max_time=None)
    reason = (f"'lcm' block 'avg_mse' is 1e+300 in {report.source}, but its 100 'mse' frames average "
              f"{sum([0.01] * 100) / 100!r} (process.py writes their mean)")
    lcm = ("lcm_mse", "lcm_psnr", "lcm_ssim", "lcm_lpips")
    assert {m: (result[m], result["errors"].get(m)) for m in lcm} == dict.fromkeys(lcm, (None, reason))
    assert result["dino_mse"] == pytest.approx(0.001)           # the other blocks keep their values

    record = mirror_record("loop-1", path_1={"gsc": lcm_block(6, avg_ssim=0.2)})
    report = imported(write_result, [record], expected=(M,))
    result = mirror_result(report.samples[M], None)
    assert result["gsc_ssim"] is None and result["errors"]["gsc_ssim"] == (
        f"path-1.mp4: gsc block 'avg_ssim' is 0.2 in {report.source}, but its 6 'ssim' frames average "
        f"{sum([0.8] * 6) / 6!r} (process.py writes their mean)")


def test_an_average_rounded_as_process_py_rounds_it_is_the_mean_of_its_frames(write_result) -> None:
    """DINO's average of one chunk is torch's float32 mean of float32 frames, here summed one by one in float32
    (the widest rounding); Infinity and NaN frames give those averages, as Python's sum does."""
    frames = np.random.default_rng(0).uniform(0.0, 4 / 768, 100).astype(np.float32)
    total = np.float32(0.0)
    for value in frames:
        total = np.float32(total + value)
    average = float(total / np.float32(len(frames)))
    assert average != sum(frames.tolist()) / len(frames)      # it is not the float64 mean
    lcm = lcm_block(100, psnr=math.inf, avg_ssim=math.nan)
    lcm["ssim"][7] = math.nan
    record = continuation_record("data-1", lcm=lcm, dino={"dino_mse": frames.tolist(), "avg_dino_mse": average})
    result = continuation_result(imported(write_result, [record], expected=(A,)).samples[A], PLANNED_A,
                                 metrics=("lcm", "dino"), video_max_time=None)
    assert result["dino_mse"] == average and result["lcm_ssim"] == pytest.approx(0.8)
    assert set(result["errors"]) == {"lcm_psnr"} and "+inf" in result["errors"]["lcm_psnr"]


def test_a_rollout_name_that_is_no_string_fails_the_directory_naming_the_entry(write_result) -> None:
    """A list as video_name failed the sample with "TypeError: unhashable type: 'list'", naming nothing."""
    record = mirror_record("loop-1")
    record["video_results"].append(dict(record["video_results"][0], video_name=["path-1.mp4"]))
    with pytest.raises(SampleFailure, match=r'video_results\[1\]: video_name \["path-1.mp4"\] is not a file name'):
        mirror_result(imported(write_result, [record], expected=(M,)).samples[M], None)


def test_conflicting_entries_of_one_rollout_fail_the_directory(write_result) -> None:
    """Two video_results entries for one rollout: the last one won unseen (gsc_mse 0.0003 -> 0.45, rc 0)."""
    record = mirror_record("loop-1")
    other = dict(record["video_results"][0], gsc=lcm_block(6, mse=0.9))
    record["video_results"].append(other)
    result = mirror_result(imported(write_result, [record], expected=(M,)).samples[M], None)
    assert result["gsc_mse"] is None
    assert result["errors"]["gsc_mse"] == ("path-1.mp4: different entries in video_results; cannot tell which is "
                                           "this rollout's")
    record["video_results"][1] = dict(record["video_results"][0])          # identical copies are one entry
    result = mirror_result(imported(write_result, [record], expected=(M,)).samples[M], None)
    assert result["gsc_mse"] == pytest.approx(0.01) and result["errors"] == {}


def test_a_boolean_is_no_action_bucket_value(write_result) -> None:
    record = continuation_record("data-1")
    record["action"]["translation"] = {"rpe_trans_mean": True}
    result = continuation_result(imported(write_result, [record], expected=(A,)).samples[A], PLANNED_A,
                                 metrics=("action",), video_max_time=None)
    assert "action_translation_rpe_trans_mean" not in result
    record["action"]["translation"] = {"rpe_trans_mean": 0.2}
    result = continuation_result(imported(write_result, [record], expected=(A,)).samples[A], PLANNED_A,
                                 metrics=("action",), video_max_time=None)
    assert result["action_translation_rpe_trans_mean"] == pytest.approx(0.2)


def test_a_boolean_frame_count_does_not_describe_the_inputs(write_result) -> None:
    planned = ContinuationSample(key=A, gt_dir=Path("gt"), actions=ActionFile(1, 122, 122, ()), gt_frames=122,
                                 gt_poses=97, video=Path("v.mp4"), video_frames=112)
    record = continuation_record("data-1", mark=True)      # True == 1 in Python
    with pytest.raises(SampleFailure, match=r"mark_time True \(inputs: 1\)"):
        continuation_result(imported(write_result, [record], expected=(A,)).samples[A], planned,
                            metrics=("lcm",), video_max_time=None)
