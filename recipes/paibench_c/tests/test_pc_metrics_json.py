"""metrics.json parsing with counts: a task the evaluator dropped never disappears from the denominator."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

import pytest

from pinbench.core.recipe import get_recipe
from pinbench.core.runner import SampleRecord, input_hash
from pinbench.core.scorecard import build_scorecard
from pinbench_recipes.paibench_c.metrics_json import EVALUATOR_METRICS, MetricsFileError, parse_metrics_json, task_id_of
from pinbench_recipes.paibench_c.results import metric_specs, task_result

RECIPE = get_recipe("paibench-c")

TASKS = ["task_0000", "task_0001", "task_0002", "task_0003"]


def entry(name: str, **values: float | None) -> dict:
    base = {"pred_video_uuid": name, "pred_video_file": f"/out/edge/videos/{name}.mp4", "fps": 30,
            "video_shape": [121, 480, 640], "max_frames": 121, "dover_tech_score_gt": 11.0, "blur_mse": 3.0}
    base.update({m: 0.5 for m in EVALUATOR_METRICS})
    base.update(values)
    return base


def write_metrics(path: Path, per_video: list[dict]) -> Path:
    # What pandas' DataFrame.mean() does: skip None/NaN, i.e. silently drop the failed task.
    global_ = {}
    for m in EVALUATOR_METRICS:
        vals = [e[m] for e in per_video if e.get(m) is not None and not math.isnan(e[m])]
        global_[m] = sum(vals) / len(vals)
    path.write_text(json.dumps({"global": global_, "per_video": per_video}, indent=4))  # NaN -> NaN token
    return path


@pytest.fixture
def metrics_file(tmp_path: Path) -> Path:
    return write_metrics(tmp_path / "metrics.json", [
        entry("task_0000", canny_f1_score=0.40),
        entry("task_0001", canny_f1_score=None, canny_precision=None, canny_recall=None),  # Canny raised
        entry("task_0002", canny_f1_score=0.60, blur_ssim=float("nan")),                     # NaN SSIM
        # task_0003 is missing entirely (no video, or skipped); a stray video was scored as well:
        entry("task_0099", canny_f1_score=0.99),
    ])


def test_counts_missing_and_unexpected(metrics_file: Path) -> None:
    parsed = parse_metrics_json(metrics_file, TASKS)
    assert parsed.missing == ["task_0003"]
    assert parsed.unexpected == ["task_0099"]
    assert parsed.counts["canny_f1_score"] == 2
    assert parsed.counts["blur_ssim"] == 2
    assert parsed.counts["dover_tech_score"] == 3
    assert parsed.per_task["task_0001"]["canny_f1_score"] is None
    assert parsed.per_task["task_0002"]["blur_ssim"] is None


def test_means_are_recomputed_from_per_task_values_not_taken_from_global(metrics_file: Path) -> None:
    parsed = parse_metrics_json(metrics_file, TASKS)
    assert parsed.mean("canny_f1_score") == pytest.approx(0.5)
    # The evaluator's own mean includes the stray task and silently drops the failed one:
    assert parsed.evaluator_global["canny_f1_score"] == pytest.approx((0.40 + 0.60 + 0.99) / 3)


def test_a_dropped_task_makes_the_scorecard_partial(metrics_file: Path) -> None:
    parsed = {"edge": parse_metrics_json(metrics_file, TASKS)}
    records = []
    for task in TASKS:
        result = task_result(task, evaluator=parsed, modality_errors={}, native=None)
        records.append(SampleRecord(task, "ok", result, None, input_hash({"t": task}), 0.0))
    card = build_scorecard(recipe="paibench-c", recipe_version="1.0.0", checkpoint="Cosmos3-Nano", mode="full",
                           metrics=[s.with_info(RECIPE.metric_info(s.name))
                                    for s in metric_specs(["edge"], native=False)],
                           records=records, n_expected=4,
                           provenance={}, config={}, timings={})
    f1 = card.metrics["edge/canny_f1_score"]
    assert (f1.n_expected, f1.n_scored, f1.n_failed) == (4, 2, 2)
    assert f1.value == pytest.approx(0.5)
    assert card.status == "partial"
    assert any("edge/canny_f1_score: 2/4 scored" in r for r in card.status_reasons)
    failed = {f.sample_id for f in f1.failed}
    assert failed == {"task_0001", "task_0003"}
    missing_reason = records[3].result["errors"]["edge"]
    assert "not in metrics.json" in missing_reason


def test_seed_variant_names_map_to_their_task() -> None:
    assert task_id_of("task_0599__1.mp4") == "task_0599"
    assert task_id_of("task_0007.mp4") == "task_0007"
    assert task_id_of("task_0007_caption2.mp4") == "task_0007_caption2"


def test_duplicate_task_and_malformed_files_are_refused(tmp_path: Path) -> None:
    dup = write_metrics(tmp_path / "dup.json", [entry("task_0000"), entry("task_0000__2")])
    with pytest.raises(MetricsFileError, match="task_0000 appears twice"):
        parse_metrics_json(dup, TASKS)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(MetricsFileError, match=r"bad\.json: invalid JSON at line 1, column 2: "):
        parse_metrics_json(tmp_path / "bad.json", TASKS)
    (tmp_path / "nopv.json").write_text(json.dumps({"global": {}}))
    with pytest.raises(MetricsFileError, match="no 'per_video' list"):
        parse_metrics_json(tmp_path / "nopv.json", TASKS)
    with pytest.raises(MetricsFileError, match="did not finish"):
        parse_metrics_json(tmp_path / "absent.json", TASKS)
    # the parser's RecursionError escaped parse_all and ended the run after every GPU step, with no scorecard
    (tmp_path / "deep.json").write_text('{"per_video": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(MetricsFileError, match=r"deep\.json: invalid JSON: nested too deeply to parse$"):
        parse_metrics_json(tmp_path / "deep.json", TASKS)


@pytest.mark.parametrize(("metric", "value", "reason"), [
    # each was counted failed with "null/NaN in metrics.json (the evaluator's step raised)", true of none of them
    ("canny_f1_score", "0.5", "'0.5' in metrics.json is not a finite number"),
    ("canny_f1_score", True, "True in metrics.json is not a finite number"),
    ("blur_ssim", [0.9], "[0.9] in metrics.json is not a finite number"),
    ("canny_f1_score", float("inf"), "inf in metrics.json is not a finite number"),
    # values no evaluator of these definitions gives were averaged into the scorecard (exit 1 against the table)
    ("canny_f1_score", 1e300, "1e+300 in metrics.json is outside [0, 1], the range of canny_f1_score"),
    ("seg_recall", 1.5, "1.5 in metrics.json is outside [0, 1], the range of seg_recall"),
    ("blur_ssim", -1.5, "-1.5 in metrics.json is outside [-1, 1], the range of blur_ssim"),
    ("depth_si_rmse", -3.0, "-3.0 in metrics.json is outside [0, inf], the range of depth_si_rmse"),
])
def test_a_value_that_is_no_score_is_counted_failed_with_what_it_is(tmp_path: Path, metric: str, value,
                                                                     reason: str) -> None:
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"per_video": [entry("task_0000", **{metric: value}), entry("task_0001")]}))
    parsed = parse_metrics_json(path, TASKS[:2])
    assert parsed.per_task["task_0000"][metric] is None and parsed.counts[metric] == 1
    result = task_result("task_0000", evaluator={"edge": parsed}, modality_errors={}, native=None)
    assert result["errors"] == {f"edge/{metric}": reason}
    assert parsed.per_task["task_0001"][metric] == 0.5


def test_an_absent_metric_is_named_as_absent(tmp_path: Path) -> None:
    record = entry("task_0000")
    del record["blur_ssim"]
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"per_video": [record]}))
    result = task_result("task_0000", evaluator={"edge": parse_metrics_json(path, TASKS[:1])}, modality_errors={},
                         native=None)
    assert result["errors"] == {"edge/blur_ssim": "absent from metrics.json"}
    assert result["edge/blur_ssim"] is None


def test_metrics_json_that_is_no_regular_file_is_one_line(tmp_path: Path) -> None:
    """A folder named metrics.json raised IsADirectoryError out of the run; a FIFO would block it."""
    folder = tmp_path / "metrics.json"
    folder.mkdir()
    with pytest.raises(MetricsFileError, match=r"metrics\.json: is a directory, not a file$"):
        parse_metrics_json(folder, TASKS)


@pytest.mark.parametrize(("content", "words"), [
    # read by the library's JSON reader (files.read_json_file) as every other data file
    (json.dumps({"per_video": [entry("task_\udc00")]}, indent=1).encode(),   # was taken, failed when written out
     "metrics.json: line 4: a string holds the lone surrogate \\udc00 (half a UTF-16 pair), which no UTF-8 file "
     "can hold"),
    (b'{"per_video": [\xff]}', "metrics.json: not UTF-8 text (byte 15)"),   # was "not valid JSON: 'utf-8' codec..."
])
def test_metrics_json_the_library_reader_refuses_is_one_line(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "metrics.json"
    path.write_bytes(content)
    with pytest.raises(MetricsFileError) as info:
        parse_metrics_json(path, TASKS)
    assert str(info.value).endswith(words) and str(info.value).startswith(str(path)), str(info.value)


def test_metrics_json_that_becomes_a_fifo_after_a_check_is_refused_at_once(tmp_path: Path, monkeypatch) -> None:
    """The kind was checked, then the file read: a FIFO put there in between (here: a check that says regular file)
    blocked the read for ever. One open that refuses it now."""
    fifo = tmp_path / "metrics.json"
    os.mkfifo(fifo)
    monkeypatch.setattr(Path, "is_file", lambda self: True)
    raised: list[str] = []

    def parse() -> None:
        try:
            parse_metrics_json(fifo, TASKS)
        except MetricsFileError as exc:
            raised.append(str(exc))

    thread = threading.Thread(target=parse, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))   # the blocked read ends
        thread.join(10)
        pytest.fail("parse_metrics_json was still blocked on the FIFO after 10 s")
    assert raised == [f"{fifo}: a FIFO (named pipe), not a regular file"]
