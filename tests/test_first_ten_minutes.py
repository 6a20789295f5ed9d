"""Issue 21, the first ten minutes of a new user: what the real ``pinbench`` command prints when you score your own
videos, on this machine, in fresh processes (no CliRunner: stdout, stderr and exit codes as a shell sees them)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sockets import closed_port

from pinbench.core.recipe import available_recipes

REPO = Path(__file__).resolve().parents[1]


def pinbench(*args: str, cwd: Path, env: dict[str, str] | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``pinbench ARGS`` in a fresh process, with this checkout's interpreter."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    for name in ("PINBENCH_OFFLINE", "HF_HUB_OFFLINE", "PINBENCH_DD_VIDEOS", "PINBENCH_RAFT_WEIGHTS"):
        if env is None or name not in env:
            full_env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "pinbench", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of five small videos, as a user would have (dynamic-degree's fixture writer makes them)."""
    from pinbench_recipes.dynamic_degree.fixture import write_fixture

    folder = tmp_path_factory.mktemp("my_videos")
    write_fixture(folder)
    (folder / "fixture.json").unlink()
    return folder


# ------------------------------------------------------------------------------ 1: the results table


def _table_row(text: str, metric: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.lstrip("* ").startswith(metric + " ")]
    return line.lstrip("* ").split()


def test_a_run_without_a_reference_ends_with_the_results_table_and_diff_prints_it(tmp_path: Path,
                                                                                   videos: Path) -> None:
    out = tmp_path / "run"
    done = pinbench("run", "dynamic-degree", "--checkpoint", "mine", "-o", f"videos={videos}", "-o", "flow=farneback",
                    "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    header = "metric value 95% CI scored direction".split()
    assert any(line.split() == header for line in done.stdout.splitlines()), done.stdout
    # the fixture videos score 0.7 by construction; its interval and the count come with it
    assert _table_row(done.stdout, "preview/dynamic_degree") == ["preview/dynamic_degree", "0.7", "[0.3,", "1]",
                                                                  "5/5", "higher"]
    assert done.stdout.splitlines()[-3] == "result: REPORTED (exit 0): not diffed, status complete", done.stdout

    shown = pinbench("diff", str(out / "scorecard.json"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stdout + shown.stderr  # the README: 0 for complete, no reference
    assert shown.stdout.splitlines()[-1] == "result: REPORTED (exit 0): not diffed, status complete"
    assert _table_row(shown.stdout, "preview/dynamic_degree")[1:] == ["0.7", "[0.3,", "1]", "5/5", "higher"]
    assert "no full reference for dynamic-degree / mine" in shown.stdout and not shown.stderr


def test_a_partial_run_ends_with_its_result_and_exit_code_below_its_failed_samples(tmp_path: Path,
                                                                                   videos: Path) -> None:
    """A run with a failed sample printed "reported, not diffed (status partial)" then the failed samples, and no
    exit code: its last line before where its files are is a result line, as a diffed run's."""
    import shutil

    folder = shutil.copytree(videos, tmp_path / "videos")
    (folder / "broken.mp4").write_bytes(b"junk")
    done = pinbench("run", "dynamic-degree", "--checkpoint", "mine", "-o", f"videos={folder}", "-o", "flow=farneback",
                    "--out", str(tmp_path / "run"), "--skip-doctor", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    *_, failed, result, scorecard, report = done.stdout.splitlines()
    assert failed.startswith("  broken (preview/dynamic_degree): VideoError: ") and scorecard.startswith("scorecard:")
    assert result == "result: INCOMPLETE (exit 2): not diffed, status partial", done.stdout


def test_a_run_with_a_reference_shows_every_metric_beside_the_diff_columns(tmp_path: Path) -> None:
    done = pinbench("run", "dynamic-degree", "--fixture", "--out", str(tmp_path / "fx"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    header = "metric value 95% CI scored direction reference delta vs ref tolerance status ref 95% CI noise".split()
    assert any(line.split() == header for line in done.stdout.splitlines()), done.stdout
    row = _table_row(done.stdout, "preview/dynamic_degree")
    assert row[:9] == ["preview/dynamic_degree", "0.7", "[0.3,", "1]", "5/5", "higher", "0.7", "+0", "same"]
    assert "PASS" in row


# ------------------------------------------------------------------------------ 2: network failures


@pytest.fixture()
def no_network(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The network really failing: every HTTP(S) request goes to a local port nothing listens on (a proxy for
    urllib and requests, and the Hub's endpoint), with an empty cache, so nothing is found locally either."""
    with closed_port() as dead:
        yield {"HTTPS_PROXY": dead, "HTTP_PROXY": dead, "https_proxy": dead, "http_proxy": dead, "NO_PROXY": "",
               "no_proxy": "", "HF_ENDPOINT": dead, "PINBENCH_CACHE": str(tmp_path / "empty-cache"), "HF_TOKEN": ""}


def _the_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "URLError" not in done.stderr, done.stderr
    assert "LocalEntryNotFoundError" not in done.stderr and "MaxRetryError" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, done.stderr
    assert "0 B, 0 B/s" not in done.stderr  # no progress line of a download that never started
    return errors[0]


@pytest.mark.parametrize(("argv", "what", "ways"), [
    (["run", "dynamic-degree", "-c", "mine", "-o", "videos={videos}", "--skip-doctor"],
     "https://download.pytorch.org/models/raft_large_C_T_V1-22a6c225.pth (file raft_large_C_T_V1-22a6c225.pth)",
     ["`pinbench fetch dynamic-degree` on a connected machine", "-o raft_weights=PATH", "-o flow=farneback"]),
    (["fetch", "dynamic-degree"],
     "https://download.pytorch.org/models/raft_large_C_T_V1-22a6c225.pth (file raft_large_C_T_V1-22a6c225.pth)",
     ["`pinbench fetch dynamic-degree` on a connected machine", "-o raft_weights=PATH", "-o flow=farneback"]),
    (["run", "remembench", "-c", "t2v-moc-1chunk", "-o", "videos={videos}", "--skip-doctor"],
     "mosaichunk/RememBench@cdeabf0fce9c075876a903a1d5234483ad677fd5 (dataset; files: all)",
     ["`pinbench fetch remembench -c t2v-moc-1chunk` on a connected machine", "-o dataset_dir=PATH"]),
    (["fetch", "remembench", "-c", "t2v-moc-1chunk", "-o", "split=t2v"],
     "mosaichunk/RememBench@cdeabf0fce9c075876a903a1d5234483ad677fd5 (dataset; files: all)",
     ["`pinbench fetch remembench -c t2v-moc-1chunk -o split=t2v` on a connected machine", "-o dataset_dir=PATH"]),
    (["fetch", "camerabench"],
     "chancharikm/qwen2.5-vl-7b-cam-motion (model; its revision, to record for this machine)",
     ["`pinbench fetch camerabench` on a connected machine", "-o scores=DIR -o data=DIR"]),
    # its revision is resolved before anything is downloaded: that failure named the bare fetch, without -o
    (["fetch", "camerabench", "-o", "families=caption"],
     "chancharikm/qwen2.5-vl-7b-cam-motion (model; its revision, to record for this machine)",
     ["`pinbench fetch camerabench -o families=caption` on a connected machine"]),
])
def test_every_network_failure_is_one_line_with_what_and_the_way_on(
        tmp_path: Path, videos: Path, no_network: dict[str, str], argv: list[str], what: str, ways: list[str]) -> None:
    done = pinbench(*(a.format(videos=videos) for a in argv), cwd=tmp_path, env=no_network)
    line = _the_error(done)
    assert line.startswith(f"error: {what}: could not be fetched, the network failed ("), line
    for way in ways:
        assert way in line, line


# ------------------------------------------------------------------------------ 7: help and names


RECIPES = sorted(available_recipes())


@pytest.mark.parametrize("name", RECIPES)
def test_run_help_shows_checkpoints_and_examples_that_parse(name: str) -> None:
    import shlex

    from pinbench import cli
    from pinbench.core.options import parse_pairs
    from pinbench.core.recipe import get_recipe

    recipe = get_recipe(name)
    text = "\n".join(cli.describe_usage(recipe))
    assert text.startswith("checkpoints: ") and all(c in text for c in recipe.checkpoints)
    assert recipe.examples and "examples:" in text
    for example in recipe.examples:
        assert f"  {example.run}\n" in text + "\n"
        argv = shlex.split(example.run)
        assert argv[:3] == ["pinbench", "run", name], example.run
        # every example is a command line the recipe accepts (paths need not exist to be parsed)
        options = parse_pairs([argv[i + 1] for i, a in enumerate(argv) if a == "-o"])
        fixture = "--fixture" in argv
        checkpoint = argv[argv.index("--checkpoint") + 1] if "--checkpoint" in argv else ""
        recipe.config(checkpoint, fixture=fixture, options=options, env={},
                      limit=int(argv[argv.index("--limit") + 1]) if "--limit" in argv else None)


def test_required_is_marked_one_way() -> None:
    """The declaration says required (``required`` / ``required_unless``), never a help text; help shows one word."""
    from pinbench import cli
    from pinbench.core.recipe import get_recipe

    for name in RECIPES:
        recipe = get_recipe(name)
        for option, spec in recipe.options.items():
            assert "required" not in spec.help.lower(), f"{name} -o {option}: {spec.help}"
    lines = cli.describe_options(get_recipe("mind"))
    assert any(line.startswith("  -o gt=<path>  default required") for line in lines), lines
    assert any(line.startswith("  -o videos=<path>  default required unless -o results is given") for line in lines)


def test_misspelled_names_get_did_you_mean_before_any_download(tmp_path: Path, videos: Path,
                                                                no_network: dict[str, str]) -> None:
    recipe = pinbench("run", "dynamic-degre", "-c", "mine", cwd=tmp_path)
    assert recipe.returncode == 2 and "unknown recipe 'dynamic-degre' (did you mean 'dynamic-degree'?)" in recipe.stderr
    key = pinbench("run", "dynamic-degree", "-c", "mine", "-o", f"video={videos}", cwd=tmp_path)
    assert key.returncode == 2 and "unknown option(s) video (did you mean 'videos'?)" in key.stderr
    fetch_key = pinbench("fetch", "dynamic-degree", "-o", "flw=raft", cwd=tmp_path, env=no_network)
    assert fetch_key.returncode == 2 and "flw (did you mean 'flow'?)" in fetch_key.stderr  # before the download
    note = pinbench("run", "paibench-c", "-c", "Cosmos3-nano", "--offline", cwd=tmp_path)
    assert "did you mean 'Cosmos3-Nano'?" in note.stderr
    # RememBench: a misspelled paper arm is refused at once, before the dataset would be downloaded
    arm = pinbench("run", "remembench", "-c", "t2v-mosaichunk-2chunks", "-o", f"videos={videos}", "--skip-doctor",
                   cwd=tmp_path, env=no_network)
    assert arm.returncode == 2, arm.stderr
    assert "(did you mean 't2v-mosaichunk-2chunk'?)" in arm.stderr and "network" not in arm.stderr
    assert not (Path(no_network["PINBENCH_CACHE"]) / "hub").exists()


# ------------------------------------------------------------------------------ 4: doctor


def test_doctor_probes_the_network_and_warns_of_raft_on_cpu_with_an_estimate(tmp_path: Path, videos: Path,
                                                                             no_network: dict[str, str]) -> None:
    done = pinbench("doctor", "dynamic-degree", "-o", f"videos={videos}", cwd=tmp_path, env=no_network)
    assert done.returncode == 2, done.stdout
    (network,) = [line for line in done.stdout.splitlines() if line.startswith("PROBLEM network: ")]
    assert "https://download.pytorch.org/ does not answer within 3 s" in network
    assert "urls/raft_things cannot be fetched" in network and "`pinbench fetch dynamic-degree`" in network
    (cpu,) = [line for line in done.stdout.splitlines() if line.startswith("WARNING cpu: ")]
    assert "RAFT would run on CPU (no GPU visible): 136 frame pairs in 5 videos" in cpu, cpu
    assert "0.711 pairs/s" in cpu and "tools/gpu_check.py" in cpu
    # run starts with the same checks: it stops there, with the warning shown too, instead of failing later
    run = pinbench("run", "dynamic-degree", "-c", "mine", "-o", f"videos={videos}", "--out", str(tmp_path / "r"),
                   cwd=tmp_path, env=no_network)
    assert run.returncode == 2 and "PROBLEM network: " in run.stderr and "WARNING cpu: " in run.stderr, run.stderr
    assert "nothing was started" in run.stderr and not (tmp_path / "r" / "samples").exists()


def test_the_cpu_rate_names_the_torch_it_was_measured_with_and_this_environment_s(monkeypatch) -> None:
    """The rate is a measurement at torch 2.11.0; the environment's torch is read from its installed distribution
    (the lock's, 2.15.0 here), never written into the message."""
    from importlib.metadata import version

    from pinbench_recipes.dynamic_degree import estimate

    source = estimate.rate_source()
    assert "(torch 2.11.0+cu130, batch 8, fp32): 0.711 pairs/s" in source
    assert source.endswith(f"; this environment has torch {version('torch')}, at a rate not measured")
    monkeypatch.setattr(estimate, "version", lambda name: "2.11.0+cpu")  # the measured torch, another build
    assert "this environment" not in estimate.rate_source()


def test_raft_pairs_follow_the_clip_table() -> None:
    """The README's table: at 8 fps a 2 s clip is 16 frames, all sampled (15 pairs); at 30 fps 60 frames, every
    4th sampled (15 frames, 14 pairs); a tail clip overlaps the last full one."""
    from pinbench_recipes.dynamic_degree.estimate import raft_pairs

    assert raft_pairs(16, 8) == 15 and raft_pairs(32, 8) == 30 and raft_pairs(40, 8) == 45
    assert raft_pairs(60, 30) == 14 and raft_pairs(10, 8) == 9


def test_the_cpu_estimate_reads_right_in_every_range() -> None:
    """``about`` goes with a number, never with ``under 1 s`` (a small folder's GPU time read ``about under 1 s``)."""
    from types import SimpleNamespace

    from pinbench_recipes.dynamic_degree.estimate import cpu_time_finding

    small = SimpleNamespace(n_frames=16, fps=8.0, width=96, height=64)  # 15 pairs: 0.3 s on CPU
    finding = cpu_time_finding([small], flow="raft", device="cpu", gpus=None)
    assert finding is not None and "in 1 video, under 1 s (rate: " in finding.line, finding
    assert "; a GPU: under 1 s); -o flow=farneback" in finding.line and "about under" not in finding.line
    large = SimpleNamespace(n_frames=16 * 60, fps=8.0, width=832, height=480)
    finding = cpu_time_finding([large] * 10, flow="raft", device="cpu", gpus=None)
    assert finding is not None and ", about 3.5 h (rate: " in finding.line and "a GPU: about 6 min)" in finding.line


def test_a_bad_video_names_the_way_on_and_skip_doctor_does_what_it_says(tmp_path: Path, videos: Path) -> None:
    import shutil

    folder = tmp_path / "videos"
    shutil.copytree(videos, folder)
    (folder / "broken.mp4").write_bytes(b"not a video")
    done = pinbench("doctor", "dynamic-degree", "-o", f"videos={folder}", "-o", "flow=farneback", cwd=tmp_path)
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("PROBLEM inputs: ")]
    assert f"1 of 6 videos is unusable under {folder} (1 does not decode): broken.mp4 (" in line
    assert ("`pinbench run ... --skip-doctor`: the run scores the rest and counts each of them as a failed "
            "sample") in line
    run = pinbench("run", "dynamic-degree", "-c", "mine", "-o", f"videos={folder}", "-o", "flow=farneback",
                   "--skip-doctor", "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr  # partial
    assert "* preview/dynamic_degree  0.7" in run.stdout and " 5/6 " in run.stdout
    assert "broken (preview/dynamic_degree)" in run.stdout


# ------------------------------------------------------------------------------ 5: quick start, PATH, version


def _quick_start(readme: str) -> tuple[list[str], list[str]]:
    """The README's Quick start: (set-up lines, the lines that score a folder), each block's commands verbatim."""
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = [block.split("```", 1)[0] for block in section.split("```bash\n")[1:]]
    commands = [[line.split("  #")[0].strip() for line in block.splitlines() if line.strip()] for block in blocks]
    return commands[0], commands[1]


def test_the_readme_quick_start_works_verbatim_in_a_fresh_clone(tmp_path: Path, videos: Path) -> None:
    import shutil

    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    setup, score = _quick_start((clone / "README.md").read_text())
    assert setup == ["make setup", 'export PATH="$PWD/.venv/bin:$PATH"'], setup
    assert len(score) == 3 and score[0].startswith("pinbench run "), score
    (clone / ".venv").symlink_to(REPO / ".venv")  # set-up excluded: this checkout's environment
    shutil.copytree(videos, clone / "my_videos")  # the folder the quick start names, holding a user's videos
    script = "set -e\n" + setup[1] + "\n" + "\n".join(score) + "\n"
    env = {k: v for k, v in os.environ.items() if k not in ("PINBENCH_OFFLINE", "HF_HUB_OFFLINE")}
    env["PATH"] = "/usr/bin:/bin"  # no pinbench on PATH but the one the quick start puts there
    done = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("* preview/dynamic_degree  0.7") == 2, done.stdout  # the run's table, then diff's
    assert (clone / "runs" / "my-report" / "index.html").is_file()
    assert (clone / "runs" / "dynamic-degree" / "my-model" / "scorecard.json").is_file()


def test_version_has_one_source() -> None:
    from importlib.metadata import version

    import pinbench as package

    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert version("pinbench") == package.__version__
    done = pinbench("--version", cwd=REPO)
    assert done.returncode == 0 and done.stdout == f"pinbench {package.__version__}\n"


def test_make_setup_says_how_to_put_pinbench_on_path() -> None:
    import shutil

    if shutil.which("make") is None or not (REPO / ".venv" / ".pinbench-installed").exists():
        pytest.skip("no make, or no .venv made by make setup")
    done = subprocess.run(["make", "--no-print-directory", "setup"], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert f'  export PATH="{REPO}/.venv/bin:$PATH"' in done.stdout.splitlines(), done.stdout


# ------------------------------------------------------------------------------ 10: long work says so


def test_long_work_says_what_it_does(monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    import time

    from pinbench.core.notices import ENV, notice

    monkeypatch.setenv(ENV, "0.2")
    with notice("slow: computing"):
        time.sleep(0.6)
    with notice("quick: nothing to say"):
        pass
    lines = capsys.readouterr().err.splitlines()   # the time said: at least the sleep's (a loaded machine's is longer)
    assert lines[0] == "slow: computing ..." and re.fullmatch(r"slow: computing: done in (\d+\.\d) s", lines[1])
    assert float(lines[1].split()[-2]) >= 0.6 and len(lines) == 2


def test_everything_after_the_samples_is_named(tmp_path: Path) -> None:
    """With the notice delay at 0 all announced work says itself: each piece of the end of a run has a name.
    (The run ends with its report; ``pinbench check`` is the standalone checker and does not run in it; an
    unsharded run takes its records from the runner and does not collect them from the store again.)"""
    done = pinbench("run", "dynamic-degree", "--fixture", "--out", str(tmp_path / "fx"), cwd=tmp_path,
                    env={"PINBENCH_NOTICE_S": "0"})
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.endswith(" ...")]
    starts = ["dynamic-degree: importing its code", "provenance: ",
              "scorecard: 1 metric with 95% intervals over 5 records", "report: "]
    assert [next(i for i, line in enumerate(said) if line.startswith(s)) for s in starts] == sorted(
        next(i for i, line in enumerate(said) if line.startswith(s)) for s in starts), said


# ------------------------------------------------------------------------------ 6: a quiet demo


def test_demo_is_one_line_per_recipe_then_a_summary_and_details_come_with_v(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = pinbench("demo", "--out", str(out), "--recipe", "dynamic-degree", "--recipe", "paibench-c", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("dynamic-degree   fixture run ... PASS in ")
    assert lines[1].startswith("paibench-c       fixture run ... PASS in ")
    assert lines[2] == "" and lines[3].split() == ["recipe", "status", "verdict", "primary", "metric", "pinbench",
                                                   "check", "time"]
    assert lines[5].split()[:7] == ["dynamic-degree", "complete", "PASS", "preview/dynamic_degree", "=", "0.7",
                                    "consistent"]
    assert lines[6].split()[:3] == ["paibench-c", "complete", "PASS"] and "consistent" in lines[6]
    assert lines[7] == f"demo report: {out / 'report' / 'index.html'}" and lines[8].startswith("details: ")
    assert len(lines) == 9 and "no interval" not in done.stdout + done.stderr
    # the details stay in the files: each recipe's own output in its log, its table in diff.txt
    log = (out / "logs" / "dynamic-degree.log").read_text()
    assert "result: PASS (exit 0)" in log
    assert "result: PASS (exit 0)" in (out / "dynamic-degree" / "diff.txt").read_text()
    verbose = pinbench("demo", "--out", str(tmp_path / "v"), "--recipe", "dynamic-degree", "-v", cwd=tmp_path)
    assert verbose.returncode == 0 and "result: PASS (exit 0)" in verbose.stdout
    assert "---- dynamic-degree (fixture) ----" in verbose.stdout
