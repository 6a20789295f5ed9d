"""The shared watcher of subprocess steps, and the failed-samples summary every run ends with."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from pinbench.core.run import FAILURES_FILE, summarize_failures
from pinbench.core.runner import MISSING_ERROR, SampleRecord
from pinbench.core.scorecard import Failure
from pinbench.ops.watch import Watcher, bytes_under, files_since, tail, wait_watched

TOKEN = "hf_WatchTokenDoNotLeak0123456789"


def _three_videos_writer(folder: Path, every_s: float) -> tuple[subprocess.Popen, Path]:
    """A worker process that writes 0.mp4, 1.mp4 and 2.mp4 into ``folder``, one each ``every_s``; its log."""
    script = ("import pathlib, sys, time\n"
              "for i in range(3):\n"
              f"    time.sleep({every_s}); pathlib.Path(sys.argv[1], f'{{i}}.mp4').write_bytes(b'x')\n")
    log = folder / "worker.log"
    with open(log, "ab") as fh:
        proc = subprocess.Popen([sys.executable, "-c", script, str(folder)], stdout=fh, stderr=subprocess.STDOUT)
    return proc, log


def test_plain_lines_report_observed_progress_and_eta(tmp_path: Path) -> None:
    out = io.StringIO()
    proc, log = _three_videos_writer(tmp_path, 0.3)
    watcher = Watcher("generate edge", lambda: len(list(tmp_path.glob("*.mp4"))), total=3, stream=out,
                      log_every_s=0.25, tty=False)
    assert wait_watched([(proc, log)], watcher, stream=out) == [0]
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2 and all(line.startswith("generate edge: ") for line in lines)
    assert lines[-1].startswith("generate edge: 3/3 tasks (100%)")
    assert any("ETA" in line for line in lines[:-1]) or len(lines) == 2   # ETA while some are left


def test_on_a_terminal_the_progress_is_a_rich_bar(tmp_path: Path, monkeypatch) -> None:
    import pinbench.ops.watch as watch

    monkeypatch.setattr(watch, "TTY_REFRESH_S", 0.1)
    out = io.StringIO()
    proc, log = _three_videos_writer(tmp_path, 0.2)
    watcher = Watcher("generate edge", lambda: len(list(tmp_path.glob("*.mp4"))), total=3, stream=out, tty=True)
    assert wait_watched([(proc, log)], watcher, stream=out) == [0]
    text = out.getvalue()
    assert "generate edge" in text and "3/3" in text and "\u2501" in text    # rich's bar, ending complete
    assert "tasks (100%)" not in text                                        # no plain log lines on a terminal


def test_a_failed_step_prints_the_last_log_lines_redacted(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    out = io.StringIO()
    log = tmp_path / "evaluator.log"
    script = f"import sys\nfor i in range(40): print('line', i)\nprint('auth {TOKEN} refused')\nsys.exit(3)\n"
    with open(log, "ab") as fh:
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=fh, stderr=subprocess.STDOUT)
    codes = wait_watched([(proc, log)], Watcher("evaluate edge", lambda: 0, total=5, stream=out, tty=False),
                         stream=out)
    text = out.getvalue()
    assert codes == [3]
    assert f"---- last 20 lines of {log} ----" in text
    assert "line 21" in text and "line 20\n" not in text and "auth *** refused" in text and TOKEN not in text


def test_observations(tmp_path: Path) -> None:
    (tmp_path / "blur").mkdir()
    (tmp_path / "blur" / "a.mp4").write_bytes(b"12345")
    assert files_since(tmp_path / "blur", 0) == 1 and files_since(tmp_path / "blur", 4e9) == 0
    assert files_since(tmp_path / "nothing", 0) == 0
    assert bytes_under(tmp_path) == 5
    (tmp_path / "log").write_text("\n".join(f"l{i}" for i in range(100)))
    assert tail(tmp_path / "log", 3) == ["l97", "l98", "l99"] and tail(tmp_path / "missing") == []
    line = Watcher("fetch model", lambda: 2_500_000, unit="bytes", tty=False).line()
    assert line.startswith("fetch model: 2.5 MB, ") and "/s, " in line


def _card(n_failed: int) -> SimpleNamespace:
    """TEST DOUBLE for a Scorecard: only the metrics' failed and missing samples, which summarize_failures reads."""
    failed = [Failure(f"task_{i:04d}", f"generation failed: no output {TOKEN}") for i in range(n_failed)]
    return SimpleNamespace(metrics={
        "edge/canny_f1_score": SimpleNamespace(failed=failed, missing=("task_0100",), records=None),
        "edge/blur_ssim": SimpleNamespace(failed=failed[:1], missing=None, records=None)})


def test_every_run_ends_with_up_to_five_failed_samples(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    lines = summarize_failures(_card(7), tmp_path)
    path = tmp_path / FAILURES_FILE
    assert lines[0] == f"failed: 7 samples in 2 metrics, missing: 1 sample never computed; full list: {path}"
    assert lines[1:3] == ["  by reason: 7 x generation failed: no output ***",   # 8 failed: more than shown
                          "  by reason: 1 x missing: no record for this sample"]
    assert lines[3] == "  task_0000 (edge/canny_f1_score): generation failed: no output ***"
    assert len(lines) == 1 + 2 + 5 + 1 and lines[-1] == "  ... and 3 more"
    rows = path.read_text().splitlines()
    assert rows[0] == "sample_id\tmetric\treason" and len(rows) == 1 + 7 + 1 + 1 and TOKEN not in path.read_text()
    assert summarize_failures(SimpleNamespace(metrics={"m": SimpleNamespace(failed=[], missing=(), records=None)}),
                              tmp_path) == []
    assert not path.exists()                                            # a clean rerun removes the stale list


def test_many_failures_are_counted_by_reason_with_each_samples_own_id_read_as_one(tmp_path: Path) -> None:
    """Ten thousand samples missing for one cause read as one line; a reason naming its own sample or file (its
    rollout) is one reason; past three reasons, how many others."""
    failed = [Failure(f"s{i:03d}", f"invalid rollout: s{i:03d}.mp4: not a regular file") for i in range(40)]
    failed += [Failure(f"t{i}", f"reason {i}") for i in range(6)]
    card = SimpleNamespace(metrics={"m": SimpleNamespace(failed=failed, missing=None, records=None)})
    lines = summarize_failures(card, tmp_path)
    assert lines[1:5] == ["  by reason: 40 x invalid rollout: <file>: not a regular file",
                          "  by reason: 1 x reason 0", "  by reason: 1 x reason 1",
                          "  by reason: 4 other reasons, 4 samples"]
    assert lines[5] == "  s000 (m): invalid rollout: s000.mp4: not a regular file"
    from pinbench.core.run import by_reason
    assert by_reason([(sid, f"ValueError: {sid} has no rollout, a{sid}") for sid in ("a", "b", "c", "d", "e", "f")]) \
        == ["  by reason: 1 x ValueError: <sample> has no rollout, aa", *(
            f"  by reason: 1 x ValueError: <sample> has no rollout, a{sid}" for sid in "bc"),
            "  by reason: 3 other reasons, 3 samples"]   # an id inside a word is left as it is
    few = SimpleNamespace(metrics={"m": SimpleNamespace(failed=failed[:5], missing=None, records=None)})
    assert not [line for line in summarize_failures(few, tmp_path) if "by reason" in line]   # each one named


def test_reasons_that_read_alike_as_shown_are_counted_as_one() -> None:
    """A reason is counted by the 200 characters shown of it: two differing past them were two lines of one text
    ('by reason: 4 x EEE...' twice), and each of 100,000 stored reasons of 2,000 characters was read word by word
    (25 s). A sample's id and a file are read as one still within the cut."""
    from pinbench.core.run import by_reason
    failed = [(f"s{i}", "E" * 250 + str(i % 2)) for i in range(8)]
    assert by_reason(failed) == [f"  by reason: 8 x {'E' * 200} ..."]
    long = [(f"s{i}", f"{'x ' * 90}s{i} at /v/s{i}.mp4 {'y' * 1900}") for i in range(6)]
    assert by_reason(long) == [f"  by reason: 6 x {('x ' * 90 + '<sample> at <file> ' + 'y' * 200)[:200]} ..."]


def test_a_reason_cut_in_a_runs_ending_says_so(tmp_path: Path) -> None:
    """A reason longer than the 200 characters shown (a container refused with why MIND's process.py reads no frame
    count from it) ended mid-sentence, 'as MIND's', read as the whole reason; failures.tsv holds it whole."""
    long, exact = "invalid rollout: " + "why " * 60 + "the end", "E" * 200
    card = SimpleNamespace(metrics={"m": SimpleNamespace(failed=[Failure("a", long), Failure("b", exact)],
                                                         missing=None, records=None)})
    lines = summarize_failures(card, tmp_path)
    assert lines[1:] == [f"  a (m): {long[:200]} ...", f"  b (m): {exact}"]
    assert long in (tmp_path / FAILURES_FILE).read_text()


def test_a_failed_derived_record_is_counted_apart_from_the_samples(tmp_path: Path) -> None:
    """MIND's suite scores are one derived record: 5 failed samples and the suite are not "6 sample(s)"."""
    card = _card(5)
    card.metrics["suite/memory"] = SimpleNamespace(failed=[Failure("suite", "no value: a component failed")],
                                                   missing=None, records="derived")
    lines = summarize_failures(card, tmp_path)
    path = tmp_path / FAILURES_FILE
    assert lines[0] == (f"failed: 5 samples and 1 derived record in 3 metrics, missing: 1 sample never "
                        f"computed; full list: {path}")


def test_failed_samples_that_only_derived_metrics_read_are_counted_and_listed(tmp_path: Path) -> None:
    """CameraBench's metrics are all derived (splits, skills): 3 failed samples had read "failed: 0 sample(s) and 3
    derived record(s)", with none of them in failures.tsv. A sample a metric already names is listed once."""
    splits = [Failure(f"split_{i}", f"1 of 9 samples not scored: s{i} (nan)") for i in range(3)]
    card = SimpleNamespace(metrics={"ap": SimpleNamespace(failed=splits, missing=None, records="derived"),
                                    "f1": SimpleNamespace(failed=[Failure("s9", "bad")], missing=None, records=None)})
    failed = [SampleRecord(f"s{i}", "failed", None, f"Script1Failed: score {i} is nan", "0" * 64, 0.0)
              for i in (0, 1, 2, 9)]
    lines = summarize_failures(card, tmp_path, failed)
    path = tmp_path / FAILURES_FILE
    assert lines[0] == f"failed: 4 samples and 3 derived records in 2 metrics; full list: {path}"
    assert lines[1] == "  s0 (-): Script1Failed: score 0 is nan"
    rows = path.read_text().splitlines()
    assert rows[1:4] == [f"s{i}\t-\tScript1Failed: score {i} is nan" for i in range(3)]
    assert [row.split("\t")[0] for row in rows].count("s9") == 1


def test_one_progress_display_for_samples_and_watched_steps() -> None:
    """The runner and the watcher draw through one Progress: the same line, counters and ETA either way."""
    from pinbench.core.progress import Progress

    out = io.StringIO()
    shown = Progress("score", 4, unit="computed", counters=("done", "failed"), stream=out, every_s=0.0, tty=False)
    with shown:
        shown.update(1, done=1, failed=0)
        shown.update(2, done=1, failed=1)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("score: 1/4 computed (25%) (done 1, failed 0), ") and "ETA " in lines[0]
    assert lines[1].startswith("score: 2/4 computed (50%) (done 1, failed 1), ")
    assert lines[-1].startswith("score: 2/4 computed (50%)") and len(lines) == 3
    quiet = io.StringIO()
    with Progress("score", 4, stream=quiet, every_s=0.0, tty=False, enabled=False) as shown:
        shown.update(4)
    assert quiet.getvalue() == ""
    watched = Watcher("fetch model", lambda: 2_500_000, unit="bytes", tty=False).line()
    assert watched.startswith("fetch model: 2.5 MB, ") and watched.endswith(" elapsed")


def test_a_sample_no_shard_stored_is_listed_missing_with_the_merges_reason(tmp_path: Path) -> None:
    """A merge's stand-in for a sample no shard stored is missing, not failed; a cohort that names it missing gives
    the merge's reason (what was stored instead), not "no record": samples.jsonl holds the stand-in."""
    lost = SampleRecord("s1", "failed", None, f"{MISSING_ERROR} (shard-1-of-2.jsonl: stored record not used)",
                        "0" * 64, 0.0)
    card = SimpleNamespace(metrics={"i2v": SimpleNamespace(failed=[], missing=("s1",), records=None)})
    lines = summarize_failures(card, tmp_path, [lost])
    assert lines[0] == (f"failed: 0 samples in 1 metric, missing: 1 sample never computed; full list: "
                        f"{tmp_path / FAILURES_FILE}")
    assert (tmp_path / FAILURES_FILE).read_text().splitlines()[1:] == [f"s1\ti2v\t{lost.error}"]


def test_a_word_with_a_slash_is_a_file_only_when_it_reads_as_a_path() -> None:
    """'24 frames/s' and 'N/A' are no files; /abs, ./rel, a/b/c and x.mp4 are (each reason then reads as one)."""
    from pinbench.core.run import by_reason

    reasons = [(f"s{i}", f"ValueError: 24 frames/s, value N/A at /tmp/x/s{i}.bin, a/b/c{i}, ./rel{i}, v{i}.mp4")
               for i in range(6)]
    assert by_reason(reasons) == [
        "  by reason: 6 x ValueError: 24 frames/s, value N/A at <file>, <file>, <file>, <file>"]
