"""Bad arguments are refused in one line, and errors of the OS name the option and the path they came from:
``--shard ''``, ``submit --time forever``, exports into the code or onto a dangling symlink, ``compare --report`` and
``submit --out`` where nothing can be written."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pinbench import cli

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
UNWRITABLE = Path("/proc/1/pinbench-test")     # under /proc nothing can be created, whoever runs the tests


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def _main(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``pinbench ARGS`` through the entry point (whose handler turns a ValueError into one line and exit 2)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args)
    captured = capsys.readouterr()
    assert exit_info.value.code == 2, captured
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_an_empty_shard_is_refused_not_run_unsharded(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(cli.app, ["run", "dynamic-degree", "--fixture", "--shard", "", "--out", str(out)])
    assert _one_line_error(result).startswith("error: --shard: invalid shard ''")
    assert not (out / "scorecard.json").exists()


@pytest.mark.parametrize("flag", ["--time", "--finish-time"])
def test_a_time_slurm_cannot_read_is_refused(tmp_path: Path, flag: str) -> None:
    result = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "2", "--fixture", "--dry-run",
                                     "--out", str(tmp_path / "run"), flag, "forever"])
    assert _one_line_error(result).startswith(f"error: {flag} 'forever': not a Slurm time limit")
    assert not (tmp_path / "run").exists()
    for good in ("90", "12:00:00", "1-00", "2-12:30:00", "UNLIMITED"):
        ok = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "2", "--fixture", "--dry-run",
                                     "--out", str(tmp_path / "run"), flag, good])
        assert ok.exit_code == 0, (good, ok.output)


def test_submit_where_nothing_can_be_written_names_the_option() -> None:
    result = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "2", "--fixture", "--dry-run",
                                     "--out", str(UNWRITABLE)])
    assert _one_line_error(result).startswith(f"error: --out {UNWRITABLE}: cannot write the sbatch scripts there")


@pytest.mark.parametrize(("token", "part"), [("ghp_" + "A1b2C3d4E5" * 4, "***"),
                                             ("sk-" + "3f9a0c7e5b1d2468" * 2, "***"),
                                             ("sk-proj-Ab12Cd34Ef56Gh78Ij90Kl", "run.***")])
@pytest.mark.parametrize("command", [["run", "dynamic-degree", "--fixture"],
                                     ["submit", "dynamic-degree", "--shards", "2", "--fixture", "--dry-run"]])
def test_an_out_holding_a_token_is_refused_without_showing_it(tmp_path: Path, token: str, part: str,
                                                             command: list[str]) -> None:
    """A token-shaped folder in --out was printed whole (scorecard: ..., report: ...) and written into the run's
    files: refused before anything is written, the token shown nowhere, the part named by its redacted form."""
    out = tmp_path / part.replace("***", token) / "x"
    result = runner.invoke(cli.app, [*command, "--out", str(out)])
    assert _one_line_error(result) == (f"error: --out {tmp_path}/{part}/x: a part of this path has the shape of a "
                                       f"secret token ({part}); choose another folder")
    assert token not in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("token", ["ghp_" + "A1b2C3d4E5" * 4, "hf_" + "Ab3De6Gh9Jk2Mn5Pq8St"])
@pytest.mark.parametrize("command", [["run", "dynamic-degree", "--fixture"],
                                     ["submit", "dynamic-degree", "--shards", "2", "--fixture", "--dry-run"]])
def test_a_checkpoint_holding_a_token_is_refused_without_showing_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    token: str, command: list[str]) -> None:
    """``-c ghp_...`` named the default run folder (runs/<recipe>/ghp_...-fixture), printed whole and written into
    the run's files: refused as an --out holding a token is, before anything is written, the token shown nowhere."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli.app, [*command, "-c", token])
    assert _one_line_error(result) == ("error: --checkpoint ***: it has the shape of a secret token (***); the name "
                                       "is printed, written into the run's files and names its folder "
                                       "(runs/dynamic-degree/...): choose another name")
    assert token not in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("option", "command"), [
    ("--out", ["requests", "dynamic-degree", "--fixture", "--out"]),
    ("--out", ["doctor", "dynamic-degree", "--out"]),
    ("--out", ["report", "RUN", "--out"]),
    ("--report", ["compare", "RUN", "RUN", "--report"]),
    ("--bundle", ["view", "RUN", "--bundle"]),
    ("--out", ["record-reference", "RUN", "--out"]),
    ("--out", ["demo", "--recipe", "dynamic-degree", "--out"]),
    ("DEST", ["export", "dynamic-degree"]),
    ("--dest", ["new-recipe", "tok-test", "--dest"]),
    ("--build-dir", ["build", "dynamic-degree", "--build-dir"])])
def test_every_output_path_holding_a_token_is_refused_without_showing_it(tmp_path: Path, option: str,
                                                                       command: list[str]) -> None:
    """Only run's and submit's --out were checked: a report, a bundle, an export, ... into a token-shaped folder
    printed it whole ("report: .../hf_.../index.html") and wrote it into what it made. Each is refused, in one
    line, before anything is read or written (the runs named do not exist), the token shown nowhere."""
    token = "hf_" + "Ab3De6Gh9Jk2Mn5Pq8St"
    out = tmp_path / token / "x"
    args = [str(tmp_path / "no-run") if arg == "RUN" else arg for arg in command]
    result = runner.invoke(cli.app, [*args, str(out)])
    assert _one_line_error(result) == (f"error: {option} {tmp_path}/***/x: a part of this path has the shape of a "
                                       "secret token (***); choose another folder")
    assert token not in result.output
    assert list(tmp_path.iterdir()) == []


def test_an_out_shaped_like_a_plain_sk_name_is_taken(tmp_path: Path) -> None:
    """An all-letter or all-digit run after sk- is a name (sk-learn's), not a key: lower-case keys mix both."""
    for name in ("sk-learnbaselinesweepone", "sk-20240105123456789012"):
        out = tmp_path / name / "x"
        result = runner.invoke(cli.app, ["submit", "dynamic-degree", "--shards", "2", "--fixture", "--dry-run",
                                         "--out", str(out)])
        assert result.exit_code == 0 and str(out) in result.output, result.output


@pytest.mark.parametrize("inside", ["recipes/dynamic_degree/exported", "common/pinbench/exported"])
def test_an_export_into_the_code_is_refused(inside: str, capsys: pytest.CaptureFixture[str]) -> None:
    dest = REPO / inside
    assert not dest.exists()
    try:
        line = _main(["export", "dynamic-degree", str(dest)], capsys)
        assert line.startswith(f"error: export DEST {dest}: inside the code") and not dest.exists()
    finally:
        shutil.rmtree(dest, ignore_errors=True)    # a broken refusal must not leave a copy in the code


def test_an_export_onto_a_dangling_symlink_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "export"
    dest.symlink_to(tmp_path / "gone")
    line = _main(["export", "dynamic-degree", str(dest)], capsys)
    assert line == f"error: export DEST {dest}: a dangling symlink (to {tmp_path / 'gone'}); name a new directory"


def test_an_export_that_cannot_be_written_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    line = _main(["export", "dynamic-degree", str(UNWRITABLE)], capsys)
    assert line.startswith(f"error: export DEST {UNWRITABLE}: cannot write")


def test_compare_report_where_nothing_can_be_written_names_the_option(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("compare_runs_helper", Path(__file__).parent / "test_compare.py")
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    write_run = helper.write_run
    a, b = write_run(tmp_path, "A"), write_run(tmp_path, "B", seed=2)
    result = runner.invoke(cli.app, ["compare", str(a), str(b), "--report", str(UNWRITABLE)])
    assert result.exit_code == 2
    assert result.output.rstrip().splitlines()[-1].startswith(f"error: --report {UNWRITABLE}: cannot write")


@pytest.mark.parametrize("value", ["inf", "1e309", "nan", "soon", "-5"])
def test_a_bad_notice_delay_stops_before_the_run_in_one_line(value: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """``inf`` ended each notice's timer thread with a traceback; words and ``nan`` were read silently."""
    monkeypatch.setenv("PINBENCH_NOTICE_S", value)
    line = _main(["run", "paibench-c", "--fixture", "--out", str(tmp_path / "run")], capsys)
    assert "$PINBENCH_NOTICE_S" in line and repr(value) in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("value", "seconds"), [("", 2.0), (" 0 ", 0.0), ("0.5", 0.5)])
def test_a_notice_delay_that_is_a_number_is_read(value: str, seconds: float, monkeypatch) -> None:
    from pinbench.core.notices import notice_after

    monkeypatch.setenv("PINBENCH_NOTICE_S", value)
    assert notice_after() == seconds


@pytest.mark.parametrize("value", ["1e10", "1e300"])
def test_a_notice_delay_past_a_timer_s_longest_wait_is_never_said_and_raises_nothing(value: str, monkeypatch) -> None:
    """A finite delay past a timer's longest wait (``threading.TIMEOUT_MAX``, 292 years) ended each notice's timer
    thread with an OverflowError traceback on stderr, as ``inf`` had."""
    from pinbench.core.notices import notice

    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    monkeypatch.setenv("PINBENCH_NOTICE_S", value)
    with notice("waiting"):
        time.sleep(0.3)
    assert raised == []


@pytest.mark.parametrize(("args", "env", "named"), [
    (["-o", "device=garbage"], {}, "-o device"),
    (["-o", "device=nan"], {}, "-o device"),
    ([], {"REMEMBENCH_DEVICE": "gpu"}, "$REMEMBENCH_DEVICE (option device)"),
])
def test_a_device_torch_does_not_know_is_refused_before_the_run(args, env, named, tmp_path: Path, capsys,
                                                                 monkeypatch) -> None:
    """RememBench's device had no pattern: torch refused it after the rows, annotations and weights were prepared,
    in a line naming neither the option nor the variable."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    line = _main(["run", "remembench", "--fixture", *args, "--out", str(tmp_path / "run")], capsys)
    assert line.startswith(f"error: {named}: ") and "does not match" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("var", "value"), [("PINBENCH_OFFLINE", "2"), ("PINBENCH_OFFLINE", "enabled"),
                                            ("HF_HUB_OFFLINE", "y")])
def test_an_offline_variable_that_is_no_boolean_stops_before_any_fetch(var: str, value: str, tmp_path: Path, capsys,
                                                                       monkeypatch) -> None:
    """``2`` or ``enabled`` was read as online: ``pinbench fetch`` went to the network it was meant to stay off."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(var, value)
    line = _main(["fetch", "dynamic-degree"], capsys)
    assert line == f"error: ${var}={value!r} is not a boolean (1/0, true/false, yes/no, on/off)"
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(("value", "offline"), [("", False), (" On ", True), ("no", False), ("TRUE", True)])
def test_an_offline_variable_that_is_a_boolean_word_is_read(value: str, offline: bool) -> None:
    from pinbench.core.options import offline_in

    assert offline_in({"PINBENCH_OFFLINE": value}) is offline


@pytest.mark.parametrize(("var", "value", "says"), [
    ("PINBENCH_SAMPLE_CACHE_MB", "garbage", "the sample cache's bound must be a finite number"),
    ("PINBENCH_SAMPLE_CACHE", str(REPO / "README.md"), "not a folder but a regular file"),
])
def test_a_bad_sample_cache_stops_every_recipe_before_it_prepares(var: str, value: str, says: str, tmp_path: Path,
                                                                  capsys, monkeypatch) -> None:
    """RememBench keeps no samples in the cache, so it ran on and passed; the others stopped only at their first
    step, after preparing (and downloading)."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / "samples"))
    monkeypatch.setenv(var, value)
    line = _main(["run", "remembench", "--fixture", "--out", str(tmp_path / "run")], capsys)
    assert f"${var}=" in line and says in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("args", "env", "named"), [
    (["-o", "flow=raft", "-o", "raft_weights=~nouser-pinbench/raft.pth"], {}, "-o raft_weights"),
    ([], {"PINBENCH_RAFT_WEIGHTS": "~nouser-pinbench/raft.pth"}, "$PINBENCH_RAFT_WEIGHTS (option raft_weights)"),
    ([], {"PINBENCH_SAMPLE_CACHE": "~nouser-pinbench/samples"}, "$PINBENCH_SAMPLE_CACHE"),
    ([], {"PINBENCH_CACHE": "~nouser-pinbench"}, "$PINBENCH_CACHE"),
])
def test_a_home_folder_that_does_not_exist_names_the_option(args, env, named, tmp_path: Path, capsys,
                                                            monkeypatch) -> None:
    """``~nouser`` ended in "Could not determine home directory.", naming neither the option nor the path."""
    monkeypatch.delenv("PINBENCH_SAMPLE_CACHE", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    line = _main(["run", "dynamic-degree", "--fixture", *args, "--out", str(tmp_path / "run")], capsys)
    assert line.startswith(f"error: {named}: ") and "~nouser-pinbench names no home folder" in line


@pytest.mark.parametrize("var", ["PINBENCH_CACHE", "HF_HOME"])
def test_a_cache_root_that_is_no_folder_is_refused_by_doctor_and_fetch(var: str, tmp_path: Path, capsys,
                                                                      monkeypatch) -> None:
    """A FIFO or a file as the cache root was taken: the doctor said "this run downloads it" into it."""
    monkeypatch.delenv("PINBENCH_CACHE", raising=False)
    monkeypatch.setenv(var, str(REPO / "README.md"))
    expected = f"error: ${var}={REPO / 'README.md'}: the cache root is not a folder but a regular file"
    assert _main(["fetch", "dynamic-degree"], capsys) == expected
    assert _main(["doctor", "dynamic-degree", "-o", f"videos={tmp_path}"], capsys) == expected


@pytest.mark.parametrize(("args", "env"), [(["--gpus", "99999999999999999999999"], {}), (["--gpus", "2000"], {}),
                                           ([], {"GPUS": "1025"})])
def test_more_gpus_than_a_machine_has_is_refused_before_the_run(args, env, tmp_path: Path, capsys,
                                                                monkeypatch) -> None:
    """A fixture run skips the doctor's GPU count: --gpus 10**23 made a device name for each until it was killed
    (exit 137), and 2000 ran on silently."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    line = _main(["run", "paibench-c", "--fixture", *args, "--out", str(tmp_path / "run")], capsys)
    assert line.startswith("error: --gpus must be at most 1024 (the GPUs of one machine), got ")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ["1e10", "1e300", "inf", "nan", "0", "-1"])
def test_a_generation_timeout_no_wait_can_take_is_refused_before_the_run(value: str, tmp_path: Path, capsys) -> None:
    """1e10 s was accepted, then every sample failed: a wait on the generator overflowed (select takes ~9.2e9 s)."""
    line = _main(["run", "paibench-c", "--fixture", "--offline", "--out", str(tmp_path / "run"),
                  "--generator", "python:render_generator:render", "--generation-timeout", value], capsys)
    assert line.startswith("error: --generation-timeout must be a positive number of seconds, at most 1e+09, got ")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("pairs", "said"), [
    (["-g", "mode=a", "-g", "mode=b"], "error: -g mode given twice (-g mode=a and -g mode=b)"),
    (["-g", "mode"], "error: -g 'mode' is not KEY=VALUE"),
    (["-o", "modalities=edge", "-o", "modalities=blur"],
     "error: -o modalities given twice (-o modalities=edge and -o modalities=blur)"),
])
def test_a_repeated_or_bare_generator_option_is_named_as_the_flag_it_came_with(
        pairs: list[str], said: str, tmp_path: Path, capsys) -> None:
    """A -g option given twice was said to be '-o mode given twice (-o mode=a and -o mode=b)': a flag not given."""
    line = _main(["run", "paibench-c", "--fixture", "--offline", "--out", str(tmp_path / "run"),
                  "--generator", "python:render_generator:render", *pairs], capsys)
    assert line == said
    assert not (tmp_path / "run").exists()


def test_a_sample_cache_inside_an_input_folder_stops_the_run_before_it_prepares(tmp_path: Path, capsys,
                                                                                 monkeypatch) -> None:
    """PINBENCH_SAMPLE_CACHE=.cache with -o videos=.: the entries the first run kept changed its inputs, and every
    rerun was refused as "holds the run of other inputs (its content changed: .cache/02/... added ...)"."""
    videos, out = tmp_path / "videos", tmp_path / "run"
    videos.mkdir()
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(videos / ".cache"))
    line = _main(["run", "dynamic-degree", "-c", "mine", "-o", f"videos={videos}", "-o", "flow=farneback",
                  "--out", str(out)], capsys)
    assert line == (f"error: $PINBENCH_SAMPLE_CACHE={videos / '.cache'}: inside -o videos={videos}, an input of the "
                    "run; what the cache keeps there would change those inputs and every rerun be refused: name a "
                    "folder outside it")
    assert not out.exists() and list(videos.iterdir()) == []


def test_a_run_directory_inside_an_input_folder_stops_the_run_before_it_prepares(tmp_path: Path, capsys,
                                                                                 monkeypatch) -> None:
    """--out run with -o videos=.: what the first run wrote changed its inputs, and every rerun was refused as
    "holds the run of other inputs (its content changed: run/.pinbench-input-digests.json added ...)"."""
    videos = tmp_path / "videos"
    videos.mkdir()
    monkeypatch.chdir(videos)
    line = _main(["run", "dynamic-degree", "-c", "mine", "-o", "videos=.", "-o", "flow=farneback", "--out", "run"],
                 capsys)
    assert line == ("error: --out run: inside -o videos=., an input of the run; what the run writes there would "
                    "change that input and every rerun be refused: name a folder outside it")
    assert list(videos.iterdir()) == []


@pytest.mark.parametrize("marked_by", ["pinbench-run.json", "scorecard.json"])
def test_a_run_directory_inside_another_run_directory_stops_the_run_before_it_prepares(
        marked_by: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """--out earlier/sub: the earlier run's check counted this run's store as its own unpinned files, and its
    --move-aside took this run along; a folder whose scorecard names a run (a kept-aside one) is one too."""
    earlier = tmp_path / "earlier"
    with pytest.raises(SystemExit) as first:
        cli.main(["run", "dynamic-degree", "--fixture", "--out", str(tmp_path / "first")])
    assert first.value.code == 0
    earlier.mkdir()
    shutil.copy(tmp_path / "first" / marked_by, earlier / marked_by)
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    line = _main(["run", "dynamic-degree", "--fixture", "--out", "earlier/sub"], capsys)
    assert line == (f"error: --out earlier/sub: inside {earlier}, another run's directory ({earlier / marked_by}); "
                    "its check would count this run's files as its own and its --move-aside take this run along: "
                    "name a folder outside it")
    assert sorted(p.name for p in earlier.iterdir()) == [marked_by]


def test_a_sample_cache_inside_the_run_directory_stops_the_run_before_it_prepares(tmp_path: Path, capsys,
                                                                                  monkeypatch) -> None:
    """Each entry another run kept or used there changed a file of this run directory, so a finished run's rerun
    manifest no longer held and it computed again: refused in one line, nothing written."""
    out = tmp_path / "run"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(out / "cache"))
    line = _main(["run", "dynamic-degree", "--fixture", "--out", str(out)], capsys)
    assert line == (f"error: $PINBENCH_SAMPLE_CACHE={out / 'cache'}: inside the run directory {out}; the sample "
                    "cache is shared by every run, name a folder outside it")
    assert not out.exists()


@pytest.mark.parametrize(("where", "said"), [
    ("file/demo", "error: --out {tmp}/file/demo: {tmp}/file is a regular file, not a folder"),
    ("file", "error: --out {tmp}/file: a regular file, not a folder; name a folder for the demo"),
])
def test_a_demo_out_that_cannot_be_a_folder_is_one_line_before_any_recipe_runs(where: str, said: str,
                                                                               tmp_path: Path, capsys) -> None:
    """It was the first recipe's "[Errno 20] Not a directory: '.../logs'" after its progress line."""
    (tmp_path / "file").write_text("x")
    assert _main(["demo", "--recipe", "dynamic-degree", "--out", str(tmp_path / where)], capsys) == \
        said.format(tmp=tmp_path)
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize(("args", "said"), [
    (["record-reference", "{loop}"], "error: {loop}: a symlink loop"),
    (["report", "{loop}", "--out", "{tmp}/report"], "error: {loop}: a symlink loop"),
    (["docs", "--root", "{loop}"], "error: --root {loop}: a symlink loop, not a folder; --root names the repository "
                                   "root"),
    (["new-recipe", "--dest", "{loop}", "x"], "error: --dest {loop}: a symlink loop, not a folder"),
    (["requests", "dynamic-degree", "--fixture", "--out", "{loop}"],
     "error: {loop}: a symlink loop, not a folder; name a new folder for the requests folder"),
    (["demo", "--recipe", "dynamic-degree", "--out", "{loop}"],
     "error: --out {loop}: a symlink loop, not a folder; name a folder for the demo"),
])
def test_a_symlink_loop_is_called_one_in_every_command(args: list[str], said: str, tmp_path: Path, capsys) -> None:
    """record-reference, docs --root and new-recipe --dest said Python's "Symlink loop from '...'", requests --out
    and demo --out "a dangling symlink", report "unreadable: Too many levels of symbolic links"."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert _main([arg.format(loop=loop, tmp=tmp_path) for arg in args], capsys) == said.format(loop=loop)
    assert loop.is_symlink()


def test_a_demo_out_that_is_a_run_directory_is_refused_before_any_recipe_runs(tmp_path: Path, capsys) -> None:
    """The demo wrote its report over the run's report/ (index.html replaced), and logs/ and a run per recipe
    into it."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "pinbench-run.json").write_text("{}")
    (run / "report").mkdir()
    (run / "report" / "index.html").write_text("the run's report")
    assert _main(["demo", "--recipe", "camerabench", "--out", str(run)], capsys) == (
        f"error: --out {run}: a run directory; the demo writes logs/, report/ and a run per recipe there: name "
        "another folder for the demo")
    assert sorted(p.name for p in run.iterdir()) == ["pinbench-run.json", "report"]
    assert (run / "report" / "index.html").read_text() == "the run's report"
