"""Generation (#29): typed requests, a generator plugged in three ways, reuse by request and signature, hostile
generators failing their samples by name, kill -9 safety, and the refusal of what a generator cannot honour.

The run is PAI-Bench-C's fixture (the smallest generating recipe: 4 tasks, 9-frame rollouts) with the test double
``render_generator`` (tests/helpers), which renders each rollout from its request; other recipes' generation is in
their own tests.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pickle
import random
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from render_generator import MODES, Render
from rollout_checks import checked_rollouts, stricter_check

from pinbench.core.config import RecipeError
from pinbench.core.generation import Conditioning, Prompt, Request, RequestError, read_requests
from pinbench.core.inputs import InputDigests
from pinbench.core.recipe import get_recipe
from pinbench.core.run import RunOutcome
from pinbench.core.rundir import process_stat
from pinbench.core.runner import load_records
from pinbench.ops.launch import run_recipe

HELPERS = Path(__file__).resolve().parent / "helpers"
RENDER = "python:render_generator:render"


def _request(**changes) -> Request:
    fields = dict(id="t2v-000", kind="prompt-schedule", recipe="remembench", output="t2v-000.mp4", frames=379,
                  fps=24.0, width=64, height=48, seed="18446744073709551615",
                  prompts=(Prompt("a block appears"), Prompt("it returns", 11.2)),
                  conditioning=(Conditioning("initial_frame", "inputs/ab/s01.png", "a" * 64),))
    return Request(**{**fields, **changes})


def test_a_request_round_trips_and_its_digest_is_its_content() -> None:
    request = _request(root=Path("/somewhere"))
    again = Request.from_json(json.loads(json.dumps(request.to_json())))
    assert again == request and again.digest == request.digest
    assert _request(root=Path("/elsewhere")).digest == request.digest      # where its files are is not what it asks
    assert _request(seed="18446744073709551614").digest != request.digest   # a 64-bit seed, never through a float
    assert request.message()["root"] == "/somewhere" and "root" not in request.to_json()
    assert request.path("initial_frame") == Path("/somewhere/inputs/ab/s01.png") and request.path("control") is None


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "text-to-image"}, "unknown kind 'text-to-image'"),
    ({"seed": "1.5e3"}, "seed must be a decimal string"),
    ({"frames": 0}, "frames must be a whole number of 1 or more"),
    ({"fps": float("nan")}, "fps must be a positive number"),
    ({"output": "../escape.mp4"}, "path '../escape.mp4' must be relative, inside its folder"),
    ({"conditioning": (Conditioning("initial_frame", "/etc/passwd", "a" * 64),)}, "path '/etc/passwd' must be"),
    ({"output": "t2v\0.mp4"}, "path 't2v\\\\x00.mp4' holds a NUL character"),
    ({"conditioning": (Conditioning("context", "inputs/ab/" + "c" * 256, "a" * 64),)},
     "path 'inputs/ab/c+\\.\\.\\.': a name of 256 bytes in it, longer than a file name may be \\(255\\)"),
    ({"conditioning": (Conditioning("depth", "d.mp4", "a" * 64),)}, "conditioning role 'depth' is not one of"),
    ({"prompts": ()}, "a prompt-schedule request needs a prompt"),
    ({"recipe": 5}, "recipe must be a non-empty string, got 5"),
    ({"prompts": (Prompt(5),)}, "a prompt's text must be a string, got 5"),
    ({"prompts": (Prompt("a", "x"),)}, "a prompt's start_seconds must be a number of 0 or more, got 'x'"),
    ({"prompts": (Prompt("a", -1.0),)}, "a prompt's start_seconds must be a number of 0 or more"),
    ({"negative_prompt": ["blur"]}, "negative_prompt must be a string or null"),
    ({"conditioning": (Conditioning("context", "c.mp4", "a" * 64, ("x", "y")),)},
     r"conditioning context: frames must be \[start, stop\)"),
    ({"conditioning": (Conditioning("context", "c.mp4", "a" * 64, (5, 2)),)}, "conditioning context: frames must be"),
])
def test_a_bad_request_is_refused_in_one_line(change: dict, message: str) -> None:
    with pytest.raises(RequestError, match=f"^request 't2v-000': {message}") as info:
        _request(**change)
    assert "\n" not in str(info.value)


def test_a_rollout_of_a_long_file_name_is_made_and_kept(tmp_path: Path) -> None:
    """A rollout named with 254 bytes (a valid name): its hidden partial and the temporary names beside it are cut to
    fit, where each was a "File name too long" error that failed the sample."""
    from pinbench.ops.generation import _keep
    from pinbench.ops.generators import Static

    request = _request(output="\u00e9" * 125 + ".mp4", frames=3, prompts=(Prompt("p"),), conditioning=())
    result = _keep(request, tmp_path, Static().signature(), Static().generate, tmp_path / "store")
    assert result["output"] == request.output and [p.name for p in tmp_path.iterdir()] == [request.output]


def test_a_requests_file_names_its_bad_line_and_is_never_waited_on(tmp_path: Path) -> None:
    good = json.dumps(_request().to_json())
    path = tmp_path / "requests.jsonl"
    path.write_text(good + "\n" + good.replace('"frames": 379', '"frames": -1') + "\n")
    with pytest.raises(RequestError, match=rf"^{path}:2: bad request: request 't2v-000': frames must be"):
        read_requests(path)
    path.write_text(good.replace('"id": "t2v-000"', '"id": 5') + "\n")   # edited by hand, fed back
    with pytest.raises(RequestError, match=rf"^{path}:1: bad request: request 5: id must be a non-empty string"):
        read_requests(path)
    path.write_text(good + "\n" + good + "\n")
    with pytest.raises(RequestError, match="request id 't2v-000' appears twice"):
        read_requests(path)
    other = json.dumps(_request(id="t2v-001", output="./t2v-000.mp4").to_json())
    path.write_text(good + "\n" + other + "\n")
    with pytest.raises(RequestError, match=rf"^{path}: requests 't2v-000' and 't2v-001' both ask for ./t2v-000.mp4$"):
        read_requests(path)
    path.write_text(good + "\n")
    assert read_requests(path)[0].root == tmp_path   # its files are under the file's folder
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(RequestError, match="not a regular file"):
        read_requests(fifo)


def test_rollouts_check_counts_rollouts_not_text_before_a_colon(tmp_path: Path) -> None:
    """``pinbench rollouts check`` counts each request whose rollout has a problem once, whatever the folder is
    called: in a folder named ``run:1`` every problem line shared the text before its first ':', so two missing
    rollouts of three read as "2 of 3 are what their requests ask for". An empty requests file and a --limit below 1
    are refused, not passed as "0 of 0"."""
    import numpy as np
    from typer.testing import CliRunner

    from pinbench import cli
    from pinbench.media.video import write_video

    asked = [_request(id=f"t2v-00{i}", output=f"t2v-00{i}.mp4", frames=5, fps=8.0, conditioning=()) for i in range(3)]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(r.to_json()) + "\n" for r in asked))
    folder = tmp_path / "run:1"
    folder.mkdir()
    write_video(folder / "t2v-000.mp4", np.zeros((5, 48, 64, 3), dtype=np.uint8), 8)
    runner = CliRunner()
    result = runner.invoke(cli.app, ["rollouts", "check", "remembench", str(folder), "--requests", str(requests)])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == "1 of 3 rollouts is what its request asks for"
    assert sum("no rollout" in line for line in result.output.splitlines()) == 2

    # rollouts made elsewhere under a near name, or that no request names: each named, never passed over unsaid
    write_video(folder / "T2V-001.mp4", np.zeros((5, 48, 64, 3), dtype=np.uint8), 8)
    (folder / "extra").mkdir()
    (folder / "extra" / "t2v-009.mp4").write_bytes(b"x")
    (folder / "notes.txt").write_text("not a rollout")
    lines = runner.invoke(cli.app, ["rollouts", "check", "remembench", str(folder), "--requests", str(requests)]
                          ).output.splitlines()
    assert f"{folder / 't2v-001.mp4'}: no rollout; 'T2V-001.mp4' beside it differs only in case, spaces, " \
           "separators or Unicode normalization (names are exact)" in lines
    assert f"{folder / 'T2V-001.mp4'}: no request names it, so it is not scored" in lines
    assert f"{folder / 'extra' / 't2v-009.mp4'}: no request names it, so it is not scored" in lines
    assert not any("notes.txt" in line for line in lines) and lines[-1].startswith("1 of 3 rollouts")
    # another separator is as near a miss (it had no hint); not where two requests' names differ only so
    (folder / "T2V-001.mp4").rename(folder / "t2v_001.mp4")
    lines = runner.invoke(cli.app, ["rollouts", "check", "remembench", str(folder), "--requests", str(requests)]
                          ).output.splitlines()
    assert f"{folder / 't2v-001.mp4'}: no rollout; 't2v_001.mp4' beside it differs only in case, spaces, " \
           "separators or Unicode normalization (names are exact)" in lines
    twins = tmp_path / "twins.jsonl"
    twins.write_text("".join(json.dumps(r.to_json()) + "\n" for r in [
        *asked, _request(id="t2v.001", output="t2v.001.mp4", frames=5, fps=8.0, conditioning=())]))
    lines = runner.invoke(cli.app, ["rollouts", "check", "remembench", str(folder), "--requests", str(twins)]
                          ).output.splitlines()
    assert f"{folder / 't2v-001.mp4'}: no rollout (the generator wrote nothing there)" in lines
    assert f"{folder / 't2v.001.mp4'}: no rollout (the generator wrote nothing there)" in lines
    (folder / "t2v_001.mp4").rename(folder / "T2V-001.mp4")
    (tmp_path / "empty.jsonl").write_text("")
    for recipe, args, says in (
            ("remembench", ["--requests", str(tmp_path / "empty.jsonl")], "empty.jsonl: holds no requests"),
            ("remembench", ["--requests", str(requests), "--limit", "0"], "--limit must be at least 1"),
            ("remembench", ["--requests", str(requests), "--limit", "-2"], "--limit must be at least 1"),
            # another recipe's requests passed as mind's: "1 of 3 rollouts is what its request asks for"
            ("mind", ["--requests", str(requests)],
             f"{requests}: request 't2v-000' is one of remembench's requests, not mind's")):
        result = runner.invoke(cli.app, ["rollouts", "check", recipe, str(folder), *args])
        assert result.exit_code == 2 and result.output.strip().startswith("error: ") and says in result.output


def test_near_name_hints_list_each_folder_once_and_group_the_asked_paths_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each missing rollout listed its whole folder again and compared every asked path: 500 missing of 5,000 beside
    5,000 other files took 20 s (quadratic; a 100k-request check, hours). One listing per folder now, the hints the
    same."""
    from pinbench.ops.generation import NearNames

    listed = []
    iterdir = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: listed.append(self) or iterdir(self))
    for i in range(40):
        (tmp_path / f"S{i:02d}_A.mp4").write_bytes(b"")
    asked = [tmp_path / f"s{i:02d}-a.mp4" for i in range(40)] + [tmp_path / "t.mp4", tmp_path / "T.mp4"]
    near = NearNames(asked)
    hints = [near(path) for path in asked]
    assert hints[:40] == [f"; 'S{i:02d}_A.mp4' beside it differs only in case, spaces, separators or Unicode "
                          "normalization (names are exact)" for i in range(40)]
    assert hints[40:] == ["", ""] and listed == [tmp_path]


def test_rollouts_check_takes_the_requests_folder_and_names_a_folder_that_is_not_there(tmp_path: Path) -> None:
    """``--requests DIR`` (the folder ``pinbench requests --out DIR`` wrote) was refused as "not a regular file (a
    folder, FIFO or device)", and a rollouts folder that does not exist was "not a folder of rollouts"."""
    import numpy as np
    from typer.testing import CliRunner

    from pinbench import cli
    from pinbench.media.video import write_video

    request = _request(frames=5, fps=8.0, conditioning=())
    (tmp_path / "my-requests").mkdir()
    (tmp_path / "my-requests" / "requests.jsonl").write_text(json.dumps(request.to_json()) + "\n")
    folder = tmp_path / "rollouts"
    folder.mkdir()
    write_video(folder / "t2v-000.mp4", np.zeros((5, 48, 64, 3), dtype=np.uint8), 8)
    runner = CliRunner()
    result = runner.invoke(cli.app, ["rollouts", "check", "remembench", str(folder),
                                     "--requests", str(tmp_path / "my-requests")])
    assert result.exit_code == 0 and result.output == "1 of 1 rollout is what its request asks for\n", \
        result.output
    result = runner.invoke(cli.app, ["rollouts", "check", "remembench", str(tmp_path / "rollout"),
                                     "--requests", str(tmp_path / "my-requests")])
    assert result.exit_code == 2 and result.output == f"error: {tmp_path / 'rollout'}: no such folder\n"
    result = runner.invoke(cli.app, ["rollouts", "check", "remembench", str(folder / "t2v-000.mp4"),
                                     "--requests", str(tmp_path / "my-requests")])
    assert result.exit_code == 2 and result.output == f"error: {folder / 't2v-000.mp4'}: not a folder of rollouts\n"


def test_rollouts_check_reads_a_symlinked_rollout_as_the_run_scoring_the_folder_reads_it(tmp_path: Path) -> None:
    """A rollout made elsewhere that is a symlink to a video (on another disk, say) is scored through its link by
    ``-o videos`` and copied through it by ``--generator folder``; ``rollouts check`` refused it as "not a file the
    generator wrote", so the check said 0 of 1 where the run scored it complete. A dangling link is named as one."""
    import numpy as np
    from typer.testing import CliRunner

    from pinbench import cli
    from pinbench.media.video import write_video

    request = _request(frames=5, fps=8.0, conditioning=())
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps(request.to_json()) + "\n")
    outside = tmp_path / "elsewhere" / "video.mp4"
    outside.parent.mkdir()
    write_video(outside, np.zeros((5, 48, 64, 3), dtype=np.uint8), 8)
    folder = tmp_path / "rollouts"
    folder.mkdir()
    (folder / "t2v-000.mp4").symlink_to(outside)
    runner = CliRunner()
    result = runner.invoke(cli.app, ["rollouts", "check", "remembench", str(folder), "--requests", str(requests)])
    assert result.exit_code == 0 and result.output == "1 of 1 rollout is what its request asks for\n", \
        result.output
    outside.unlink()
    result = runner.invoke(cli.app, ["rollouts", "check", "remembench", str(folder), "--requests", str(requests)])
    assert result.exit_code == 2 and result.output.splitlines() == [
        f"{folder / 't2v-000.mp4'}: a dangling symlink (to {str(outside)!r})",
        "0 of 1 rollout is what its request asks for"], result.output


def test_a_rollout_is_held_to_the_container_its_output_s_extension_names_as_an_input_is(tmp_path: Path) -> None:
    """check_rollout held only an ``.mp4`` output to its container, with a test of its own beside the table that
    ``misnamed`` holds a recipe's inputs to: Matroska bytes under a ``.mov`` output passed. One table for both."""
    import av
    import numpy as np

    from pinbench.ops.generation import check_rollout

    request = _request(frames=5, fps=8.0, conditioning=(), output="t2v-000.mov")
    path = tmp_path / "t2v-000.mov"
    with av.open(str(path), "w", format="matroska") as out:
        stream = out.add_stream("libx264", rate=8)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for _ in range(5):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")))
        out.mux(stream.encode())
    assert check_rollout(request, path) == [
        f"{path}: a matroska,webm container under an .mov name; the request asks MOV (remembench declares no other: a "
        "reader of the container's own frame count, as MIND's process.py, reads none from another)"]


@pytest.mark.parametrize("recipe", ["remembench", "paibench-c"])
def test_rollouts_check_names_another_container_under_an_mp4_name(tmp_path: Path, recipe: str) -> None:
    """Matroska bytes at ``t2v-000.mp4`` passed the check (they decode, the frames, rate and size right), then MIND's
    plan refused the whole run over it ("the container declares no frame count"): the request's name asks MP4, and
    the refusal says why. PAI-Bench-C's evaluator reads rollouts with OpenCV and imageio, which open them; it declares
    ``rollout_container: any`` and takes them with a warning naming the file and its container (it refused them)."""
    import av
    import numpy as np
    from typer.testing import CliRunner

    from pinbench import cli

    request = _request(frames=5, fps=8.0, conditioning=(), recipe=recipe)
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps(request.to_json()) + "\n")
    folder = tmp_path / "rollouts"
    folder.mkdir()
    with av.open(str(folder / "t2v-000.mp4"), "w", format="matroska") as out:
        stream = out.add_stream("libx264", rate=8)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for _ in range(5):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")))
        out.mux(stream.encode())
    result = CliRunner().invoke(cli.app, ["rollouts", "check", recipe, str(folder), "--requests", str(requests)])
    if recipe == "paibench-c":
        assert result.exit_code == 0 and result.output.splitlines() == [
            f"warning: {folder / 't2v-000.mp4'}: a matroska,webm container under an .mp4 name; accepted, as "
            "paibench-c's evaluator reads rollouts with OpenCV and imageio, which open it",
            "1 of 1 rollout is what its request asks for"], result.output
        return
    assert result.exit_code == 2 and result.output.splitlines()[0] == (
        f"{folder / 't2v-000.mp4'}: a matroska,webm container under an .mp4 name; the request asks MP4 (remembench "
        "declares no other: a reader of the container's own frame count, as MIND's process.py, reads none from "
        "another)"), result.output


MATROSKA = """\
import json, sys, tempfile
from pathlib import Path

import av
from render_generator import Render

from pinbench.core.generation import Request

request, out = Request.from_json(json.loads(Path(sys.argv[1]).read_text())), sys.argv[2]
with tempfile.TemporaryDirectory() as scratch:   # the render double's MP4, its packets remuxed into Matroska
    made = Path(scratch, "made.mp4")
    Render().generate(request, made)
    with av.open(str(made)) as source, av.open(out, "w", format="matroska") as target:
        stream = target.add_stream_from_template(source.streams.video[0])
        for packet in source.demux(source.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                target.mux(packet)
"""


def test_a_paibench_c_run_scores_a_matroska_rollout_under_an_mp4_name_and_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """PAI-Bench-C (``rollout_container: any``) failed every rollout a generator wrote as Matroska under its .mp4
    name, though its evaluator's OpenCV reads them: each is kept and scored, a warning naming it and its container
    (not the hidden name it was made under), said once, not again by a rerun that reuses it."""
    script = tmp_path / "matroska.py"
    script.write_text(MATROSKA)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")]))
    command = f"command:{sys.executable} {script} {{request}} {{out}}"
    capfd.readouterr()
    outcome = _run(tmp_path / "run", command)
    said = capfd.readouterr().err
    assert outcome.exit_code == 0, said
    warned = [line for line in said.splitlines() if line.startswith("warning: ")]
    assert warned == [f"warning: edge/task_000{i}.mp4: a matroska,webm container under an .mp4 name; accepted, as "
                      "paibench-c's evaluator reads rollouts with OpenCV and imageio, which open it"
                      for i in range(4)], said
    assert _run(tmp_path / "run", command).exit_code == 0
    assert "warning: " not in capfd.readouterr().err


def test_a_rollout_past_the_limit_is_said_to_be_cut_by_it_not_unnamed(tmp_path: Path) -> None:
    """``--limit 1`` over a folder of two rollouts said of the second "no request names it", the words for a
    misnamed file, where its request was only cut by the limit."""
    import numpy as np
    from typer.testing import CliRunner

    from pinbench import cli
    from pinbench.media.video import write_video

    asked = [_request(id=f"t2v-00{i}", output=f"t2v-00{i}.mp4", frames=5, fps=8.0, conditioning=()) for i in range(2)]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(r.to_json()) + "\n" for r in asked))
    folder = tmp_path / "rollouts"
    folder.mkdir()
    for request in asked:
        write_video(folder / request.output, np.zeros((5, 48, 64, 3), dtype=np.uint8), 8)
    result = CliRunner().invoke(cli.app, ["rollouts", "check", "remembench", str(folder), "--requests", str(requests),
                                          "--limit", "1"])
    assert result.exit_code == 0 and result.output.splitlines() == [
        f"{folder / 't2v-001.mp4'}: no request of this --limit 1 run names it, so it is not scored",
        "1 of 1 rollout is what its request asks for"], result.output


def test_the_count_of_rollouts_past_the_limit_says_the_limit_cut_them(tmp_path: Path) -> None:
    """Past the first ten, the files a --limit run does not ask were counted as "no request names", the words for
    misnamed files, where each line above said the limit cut them."""
    from pinbench.core.generation import unasked_lines

    for i in range(12):
        (tmp_path / f"t2v-{i:03d}.mp4").write_bytes(b"")
    lines = unasked_lines(tmp_path, [_request(id="t2v-000", output="t2v-000.mp4")], 1)
    assert lines[0] == f"{tmp_path / 't2v-001.mp4'}: no request of this --limit 1 run names it, so it is not scored"
    assert lines[10:] == ["... and 1 more file no request of this --limit 1 run names"]
    assert unasked_lines(tmp_path, [_request(id="t2v-000", output="t2v-000.mp4")])[10:] == [
        "... and 1 more file no request names"]


def test_files_no_request_names_are_looked_for_outside_hidden_folders(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A normal subfolder's video is listed; a hidden folder (a run's .pinbench-* bookkeeping, .cache) is not walked
    at all: it was, for 0.26-0.50 s at 10,000 files, each time a folder run listed them."""
    from pinbench.core.generation import unasked_lines

    for path in ("sub/misnamed.mp4", ".cache/deep/x.mp4", ".pinbench-locks/y.mp4", "t2v-000.mp4"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(b"")
    read, scandir = [], os.scandir
    monkeypatch.setattr(os, "scandir", lambda path=".": read.append(Path(path)) or scandir(path))
    lines = unasked_lines(tmp_path, [_request(id="t2v-000", output="t2v-000.mp4")])
    assert lines == [f"{tmp_path / 'sub' / 'misnamed.mp4'}: no request names it, so it is not scored"]
    assert sorted(read) == [tmp_path, tmp_path / "sub"]


# ------------------------------------------------------------------------------------------- runs


@pytest.fixture(autouse=True)
def _helpers_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator worker is a child process: it imports the test double from the tests' helpers folder."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(HELPERS), os.environ.get("PYTHONPATH")])))


def _run(out: Path, generator: str, *, modalities: str = "edge", gpus: int = 1, **options: str):
    recipe = get_recipe("paibench-c")
    return run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, options={"modalities": modalities},
                                    generator=generator, generator_options=options, env={}, gpus=gpus))


def _calls(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_the_same_generator_regenerates_nothing_and_another_regenerates_every_rollout(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    out, calls = tmp_path / "run", tmp_path / "calls"
    first = _run(out, RENDER, calls=str(calls), version="1")
    assert first.exit_code == 0, first.message
    assert sorted(_calls(calls)) == [f"edge.task_000{i}" for i in range(4)]
    card = json.loads(first.scorecard_path.read_text())
    generation = card["provenance"]["extra"]["generation"]
    assert generation["generator"] == RENDER and generation["signature"]["weights"] == "v1"
    assert generation["n_requests"] == 4 and set(generation["seconds"]) == set(_calls(calls))
    assert generation["seeds"] == {f"edge.task_000{i}": "2025" for i in range(4)}
    requests = read_requests(out / "generation" / "requests.jsonl")
    assert [r.id for r in requests] == [f"edge.task_000{i}" for i in range(4)]

    again = _run(out, RENDER, calls=str(calls), version="1")
    assert again.exit_code == 0 and len(_calls(calls)) == 4              # the same generator: nothing again
    assert "generate: 4 samples: 0 done, 4 reused, 0 failed" in capfd.readouterr().err

    changed = _run(out, RENDER, calls=str(calls), version="2")
    assert changed.exit_code == 0 and len(_calls(calls)) == 8            # another signature: every rollout again
    assert "4 recomputed: generator changed" in capfd.readouterr().err
    from pinbench.core.check import check_run

    # the records it replaced are named as such, not only as damage
    assert [n for n in check_run(out).notes if "quarantine" in n][0].endswith(
        "records a rerun replaced on purpose (another generator, a changed rollout), damaged or contradicting lines, "
        "stray files")

    kept = _run(out, RENDER, calls=str(calls), version="2")
    err = capfd.readouterr().err
    assert kept.exit_code == 0 and len(_calls(calls)) == 8               # the replaced records left the store
    assert "generate: 4 samples: 0 done, 4 reused, 0 failed" in err and "contradicts" not in err


def test_a_changed_option_its_signature_leaves_out_regenerates_every_rollout(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A factory's -g options key its rollouts with its signature: ``delay`` is not in Render's signature(), as a
    user's own option may be left out of theirs, and changing it had reused the rollouts made before."""
    out, calls = tmp_path / "run", tmp_path / "calls"
    assert _run(out, RENDER, calls=str(calls), delay="0").exit_code == 0 and len(_calls(calls)) == 4
    assert _run(out, RENDER, calls=str(calls), delay="0").exit_code == 0 and len(_calls(calls)) == 4
    capfd.readouterr()
    changed = _run(out, RENDER, calls=str(calls), delay="0.01")
    assert changed.exit_code == 0 and len(_calls(calls)) == 8, capfd.readouterr().err
    assert "4 recomputed: generator changed" in capfd.readouterr().err
    signature = json.loads(changed.scorecard_path.read_text())["provenance"]["extra"]["generation"]["signature"]
    assert signature["settings"]["-g"] == {"calls": str(calls), "delay": "0.01"}


COUNTED = """
from pinbench.ops.generators import Static


class Counted(Static):
    def generate(self, request, out):
        with open({calls!r}, "a") as fh:
            fh.write(request.id + "\\n")
        super().generate(request, out)


def make():
    return Counted()


def make_other():   # another generator of this module whose signature() says the same
    return Counted()
"""


def test_an_edited_generator_module_regenerates_every_rollout_and_an_unchanged_one_reuses_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A Python generator's module file keys its rollouts with its signature: an adapter edited without a new
    ``signature()`` had its old rollouts reused."""
    module, out, calls = tmp_path / "counted_generator.py", tmp_path / "run", tmp_path / "calls"
    module.write_text(COUNTED.format(calls=str(calls)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    assert _run(out, "python:counted_generator:make").exit_code == 0 and len(_calls(calls)) == 4
    assert _run(out, "python:counted_generator:make").exit_code == 0 and len(_calls(calls)) == 4
    assert "generate: 4 samples: 0 done, 4 reused, 0 failed" in capfd.readouterr().err
    module.write_text(module.read_text() + "# an edit that signature() does not see\n")
    edited = _run(out, "python:counted_generator:make")
    assert edited.exit_code == 0 and len(_calls(calls)) == 8
    assert "4 recomputed: generator changed" in capfd.readouterr().err
    signature = json.loads(edited.scorecard_path.read_text())["provenance"]["extra"]["generation"]["signature"]
    assert signature["settings"]["source_sha256"] == {"counted_generator": _sha(module)}


def test_another_factory_of_one_module_regenerates_though_its_signature_is_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Two factories of one module may build different generators that say one ``signature()``: the second had the
    first's rollouts reused (found by a new user: ``make_wrongpath`` scored ``make``'s videos)."""
    module, out, calls = tmp_path / "counted_generator.py", tmp_path / "run", tmp_path / "calls"
    module.write_text(COUNTED.format(calls=str(calls)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    assert _run(out, "python:counted_generator:make").exit_code == 0 and len(_calls(calls)) == 4
    other = _run(out, "python:counted_generator:make_other")
    assert other.exit_code == 0 and len(_calls(calls)) == 8
    assert "4 recomputed: generator changed" in capfd.readouterr().err
    signature = json.loads(other.scorecard_path.read_text())["provenance"]["extra"]["generation"]["signature"]
    assert signature["settings"]["factory"] == "counted_generator:make_other"


def test_a_generator_that_cannot_honour_a_request_is_refused_before_it_generates(tmp_path: Path) -> None:
    from pinbench.core.generation import RequestError

    calls = tmp_path / "calls"
    command = f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} --out {{out}}"
    with pytest.raises(RequestError, match=r"^generator command:.* cannot honour control-video requests \(e\.g\. "
                                          r"edge\.task_0000\): it does not generate control-video requests"):
        _run(tmp_path / "run", command, kinds="prompt-schedule")
    with pytest.raises(RequestError, match="cannot honour control-video requests .*: it cannot condition on "
                                          r"context \(capability conditioning\)"):
        _run(tmp_path / "run2", command, conditioning="initial_frame")
    assert not calls.exists() and not list((tmp_path / "run").glob("rollouts/**/*.mp4"))


def test_a_refused_run_leaves_nothing_it_created(tmp_path: Path) -> None:
    """The folders a refused run made (its directory and a parent, as runs/<recipe>/ of a default --out) go with
    what it wrote there: requests, staged inputs, fixture data, its identity; a folder that was there stays."""
    from pinbench.core.generation import RequestError

    command = f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} --out {{out}}"
    with pytest.raises(RequestError, match="cannot honour control-video requests"):
        _run(tmp_path / "runs" / "fixture-fixture", command, kinds="prompt-schedule")
    assert sorted(tmp_path.iterdir()) == []
    there = tmp_path / "there"
    there.mkdir()
    with pytest.raises(RequestError, match="cannot honour control-video requests"):
        _run(there / "run", command, kinds="prompt-schedule")
    assert sorted(tmp_path.iterdir()) == [there] and list(there.iterdir()) == []


def test_the_command_form_renders_each_rollout_from_its_request(tmp_path: Path) -> None:
    command = f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} --out {{out}}"
    outcome = _run(tmp_path / "run", command)
    assert outcome.exit_code == 0, outcome.message
    card = json.loads(outcome.scorecard_path.read_text())
    assert card["status"] == "complete"
    assert card["provenance"]["extra"]["generation"]["signature"]["settings"]["files"] == {
        sys.executable: _sha(Path(sys.executable)),
        str(HELPERS / "render_generator.py"): _sha(HELPERS / "render_generator.py")}


def test_a_rerun_whose_rollouts_are_all_kept_does_not_need_the_program(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A rerun of a command generator whose every rollout is kept generates nothing, yet was refused once its
    program was gone from PATH (``check_program``, before the run): it needs no program. One with a rollout to
    make is still refused."""
    from pinbench.core.config import RecipeError

    folder, out = tmp_path / "bin", tmp_path / "run"
    folder.mkdir()
    gen = folder / "gen"
    gen.write_text(f"#!/bin/sh\nexec {shlex.join([sys.executable, str(HELPERS / 'render_generator.py')])} \"$@\"\n")
    gen.chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(folder), os.environ["PATH"]]))
    command = "command:gen --request {request} --out {out}"
    first = _run(out, command)
    assert first.exit_code == 0, first.message
    gen.unlink()
    again = _run(out, command)
    assert again.exit_code == 0, again.message
    lost = sorted((out / "rollouts").rglob("*.mp4"))[0]
    lost.unlink()   # now one is to be made: refused, in the line a first run says it
    with pytest.raises(RecipeError, match=r"^--generator command: program 'gen' is not on PATH; install it, or "
                                          r"give its path$"):
        _run(out, command)
    assert not lost.exists()


def _sha(path: Path) -> str:
    from pinbench.core.files import sha256_file

    return sha256_file(path)


def test_hostile_generators_fail_their_own_samples_by_name_and_the_run_finishes(tmp_path: Path) -> None:
    """Every request its own hostility (nothing written, a truncated file, a frame too many, a symlink out of the
    run, a hang past the time limit, an exit): each a failed sample naming why; the rendered ones score."""
    recipe = get_recipe("paibench-c")
    cfg = recipe.config(fixture=True, out_dir=tmp_path / "run", offline=True, generator=RENDER,
                        generator_options={"mode": "each"}, generation_timeout_s=3, env={})
    outcome = run_recipe(cfg)
    assert outcome.exit_code == 2 and outcome.scorecard_path is not None   # partial, and finished
    records = load_records(tmp_path / "run" / "generation")
    requests = {r.id: r for r in read_requests(tmp_path / "run" / "generation" / "requests.jsonl")}
    modes = {sid: Render("each").mode_of(requests[sid]) for sid in records}
    assert set(modes.values()) >= {"render", "nothing", "truncated", "frames", "symlink", "hang", "exit"} - {""}
    expected = {"nothing": "the generator wrote nothing to the path it was given", "truncated": "truncated",
                "frames": "10 frames, the request asks 9", "symlink": "a symlink (to ",
                "hang": "did not finish generating within 3 s (--generation-timeout); it was stopped",
                "exit": "the model ran out of memory"}
    for sid, mode in modes.items():
        record = records[sid]
        if mode == "render":
            assert record.ok, (sid, record.error)
        else:
            assert not record.ok and expected[mode] in record.error, (sid, mode, record.error)
    assert not [p for p in (tmp_path / "run" / "rollouts").rglob("*") if p.is_symlink()]
    card = json.loads(outcome.scorecard_path.read_text())
    failed = {f["sample_id"] for m in card["metrics"].values() for f in m["failed"]}
    lost = {sid.partition(".")[2] for sid, mode in modes.items() if mode != "render"}
    assert lost and lost <= failed                                       # never dropped from the cohort
    assert set(modes.values()) - {"render"}, MODES


def test_kill_9_during_generation_never_generates_a_stored_rollout_again(tmp_path: Path) -> None:
    """kill -9 at five random points of a generation, then a run to the end: no rollout stored before a kill is
    generated again, and the scorecard equals an unkilled run's."""
    calls = tmp_path / "calls"
    argv = [sys.executable, "-m", "pinbench", "run", "paibench-c", "--fixture", "--offline", "--out",
            str(tmp_path / "run"), "--generator", RENDER, "-g", f"calls={calls}", "-g", "delay=0.25"]
    env = {**os.environ, "PINBENCH_SAMPLE_CACHE": "off"}
    rng = random.Random(20261203)
    stored_before: set[str] = set()
    for attempt in range(5):
        seen = len(_calls(calls))
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        deadline = time.monotonic() + 120
        while len(_calls(calls)) < seen + 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)   # generation has started in this attempt
        time.sleep(rng.uniform(0.0, 1.5))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        again = [sid for sid in _calls(calls)[seen:] if sid in stored_before]
        assert again == [], f"attempt {attempt}: generated again after they were stored: {again}"
        stored_before = {sid for sid, r in load_records(tmp_path / "run" / "generation").items() if r.ok}
    seen = len(_calls(calls))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not [sid for sid in _calls(calls)[seen:] if sid in stored_before]
    assert 0 < len(stored_before) < 16
    plain = _run(tmp_path / "plain", RENDER, modalities="edge,blur,depth,seg")
    assert _outcome(tmp_path / "run") == _outcome(tmp_path / "plain"), plain.message


def _outcome(run: Path) -> dict:
    card = json.loads((run / "scorecard.json").read_text())
    records = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    return {"metrics": {k: v["value"] for k, v in card["metrics"].items()}, "status": card["status"],
            "results": [(r["sample_id"], r["status"], r["result"]) for r in records]}


def test_requests_of_a_fixture_are_written_with_their_files_and_are_stable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--out holds the requests and their files only: the fixture's data is the fixture run's, in its directory
    (it was built into --out/fixture_data, which then travelled with the requests)."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    monkeypatch.chdir(tmp_path)
    texts = []
    for out in (tmp_path / "a", tmp_path / "b"):
        result = CliRunner().invoke(app, ["requests", "paibench-c", "--fixture", "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert "wrote 16 requests" in result.output and "control-video" in result.output
        assert sorted(os.listdir(out)) == [".pinbench-requests", "inputs", "requests.jsonl"]
        assert (tmp_path / "runs" / "paibench-c" / "fixture-fixture" / "fixture_data" / "fixture.json").is_file()
        requests = read_requests(out / "requests.jsonl")
        for request in requests:
            for file in request.conditioning:
                assert _sha(request.root / file.path) == file.sha256
        texts.append((out / "requests.jsonl").read_text())
    assert texts[0] == texts[1]   # ids and hashes do not depend on where the requests were written


def test_rollouts_check_of_a_fixture_builds_its_data_where_requests_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rollouts check --fixture`` built the fixture's data in a temporary folder each time (seconds); it is the
    fixture run's, built once, as ``requests --fixture`` builds and then reuses it."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    result = CliRunner().invoke(app, ["rollouts", "check", "paibench-c", str(tmp_path / "mine"), "--fixture"])
    assert result.exit_code == 2 and result.output.splitlines()[-1] == "0 of 16 rollouts are what their requests " \
        "ask for", result.output
    data = tmp_path / "runs" / "paibench-c" / "fixture-fixture" / "fixture_data" / "fixture.json"
    built = data.stat()
    assert CliRunner().invoke(app, ["requests", "paibench-c", "--fixture", "--out", str(tmp_path / "out")]
                              ).exit_code == 0
    assert CliRunner().invoke(app, ["rollouts", "check", "paibench-c", str(tmp_path / "mine"), "--fixture"]
                              ).exit_code == 2
    assert (data.stat().st_ino, data.stat().st_mtime_ns) == (built.st_ino, built.st_mtime_ns)   # not built again


def test_requests_go_only_to_a_requests_folder_and_hold_only_what_they_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder of the user's had requests.jsonl and inputs/ written into it; a second, smaller set in the same
    folder left the first set's files in inputs/, which travelled with it."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("keep")
    result = CliRunner().invoke(app, ["requests", "paibench-c", "--fixture", "--out", str(mine)])
    assert result.exit_code != 0 and "no earlier requests folder (it holds notes.md)" in result.output
    assert sorted(p.name for p in mine.iterdir()) == ["notes.md"]
    out = tmp_path / "out"
    assert CliRunner().invoke(app, ["requests", "paibench-c", "--fixture", "--out", str(out)]).exit_code == 0
    stale = out / "inputs" / "0123456789abcdef" / "old.mp4"
    stale.parent.mkdir()
    stale.write_bytes(b"an earlier set's")
    result = CliRunner().invoke(app, ["requests", "paibench-c", "--fixture", "--out", str(out)])
    assert result.exit_code == 0 and "removed 1 file of inputs/ that no request names" in result.output
    assert not stale.parent.exists()
    named = {out / f.path for r in read_requests(out / "requests.jsonl") for f in r.conditioning}
    assert {p for p in (out / "inputs").rglob("*") if p.is_file()} == named


def test_requests_of_another_recipe_are_refused_in_one_line_and_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mind's requests written to a folder of paibench-c's replaced them, saying only "removed 10 file(s)"."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert CliRunner().invoke(app, ["requests", "paibench-c", "--fixture", "--out", str(out)]).exit_code == 0
    kept = _tree(out)
    result = CliRunner().invoke(app, ["requests", "mind", "--fixture", "-o", "metrics=lcm", "--out", str(out)])
    assert result.exit_code != 0
    assert result.output.strip() == (f"error: {out}: a requests folder of paibench-c; name a new folder for mind's "
                                     "requests, or remove this one")
    assert _tree(out) == kept


def _tree(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}


def test_requests_stopped_midway_by_a_bad_input_leave_the_folder_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GT action file too short for its continuation, found after other samples' inputs were staged, left a
    half-filled folder (inputs/, no requests.jsonl) where a new one was asked for, and new files in an earlier one."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    monkeypatch.chdir(tmp_path)
    args = ["requests", "mind", "-o", "metrics=lcm"]
    assert CliRunner().invoke(app, [*args, "--fixture", "--out", str(tmp_path / "built")]).exit_code == 0
    gt = tmp_path / "gt"
    shutil.copytree(tmp_path / "runs" / "mind" / "fixture-fixture" / "fixture_data" / "MIND-Data", gt)
    bad = next(gt.glob("3rd_data/test/action_space_test/*/action.json"))
    bad.write_text(json.dumps({**json.loads(bad.read_text()), "data": []}))
    earlier = tmp_path / "earlier"   # an earlier, smaller set of mind's requests
    assert CliRunner().invoke(app, [*args, "--fixture", "--limit", "1", "--out", str(earlier)]).exit_code == 0
    kept = _tree(earlier)
    for out in (tmp_path / "new" / "requests", earlier):
        result = CliRunner().invoke(app, [*args, "-o", f"gt={gt}", "--out", str(out)])
        assert result.exit_code != 0 and f"{bad}: 'data' holds 0 entries" in result.output, result.output
    assert not (tmp_path / "new").exists()   # nor the parent it made
    assert _tree(earlier) == kept


def _stop(proc: subprocess.Popen) -> None:
    """SIGSTOP, and wait until Linux says the process stands still (the signal is delivered asynchronously)."""
    proc.send_signal(signal.SIGSTOP)
    stat = Path(f"/proc/{proc.pid}/stat")
    while proc.poll() is None and stat.read_text().rpartition(")")[2].split()[0] not in ("T", "t", "Z"):
        time.sleep(0.001)


@pytest.mark.parametrize("earlier", [False, True], ids=["new", "earlier"])
def test_requests_terminated_midway_leave_the_folder_as_it_was(tmp_path: Path, earlier: bool) -> None:
    """SIGTERM (a job's time limit, ``timeout``) while the fixture is built: the process died on the signal and a new
    --out stayed behind with its marker, a half-built fixture and a lock; an earlier folder kept them too."""
    out = tmp_path / "new" / "requests"
    if earlier:   # a folder an earlier pinbench requests claimed, with a file of the user's in it
        out.mkdir(parents=True)
        (out / ".pinbench-requests").write_text("pinbench writes a requests folder here\n")
        (out / "notes.txt").write_text("mine\n")
    kept = _tree(out) if earlier else None
    proc = subprocess.Popen([sys.executable, "-m", "pinbench", "requests", "mind", "--fixture", "-o", "metrics=lcm",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path,   # the fixture's data is built in its run directory, runs/mind/...
                            env={**os.environ, "PINBENCH_NOTICE_S": "600"})   # no slow-step notice on a loaded machine
    built = tmp_path / "runs" / "mind" / "fixture-fixture"
    deadline = time.monotonic() + 60
    while True:   # looked at while it stands still: on a loaded machine it finished between a look and the signal
        _stop(proc)
        if any(p.name.startswith(".fixture_data.") and p.name.endswith(".tmp")   # being built (its .lock stays)
               for p in (built.iterdir() if built.is_dir() else ())):
            break
        proc.send_signal(signal.SIGCONT)
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip() == (f"terminated by SIGTERM: --out {out} left as it was (what this run added there is "
                           "removed); run the same command again")
    if earlier:
        assert _tree(out) == kept
    else:
        assert not (tmp_path / "new").exists()   # nor the parent it made


def test_requests_of_a_score_only_recipe_are_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from pinbench.cli import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["requests", "camerabench", "--fixture", "--out", str(tmp_path / "out")])
    assert result.exit_code != 0
    assert "camerabench generates no rollouts: it scores what it is given" in result.output
    assert not (tmp_path / "out" / "requests.jsonl").exists()


@pytest.mark.parametrize(("content", "says"), [
    ('{"generator": ', "Expecting value"),
    ("[1, 2]", "$: a JSON array, expected an object"),
    ('{"generator": "g", "signature": {"model": 1, "weights": "w"}}', "$.signature.model must be a string"),
    ('{"generator": "g", "signature": {"model": "m", "weights": "w"}, "seed": 3}', "$: unknown field 'seed'"),
    (None, "is a directory, not a file"),
])
def test_a_damaged_generator_file_is_named_in_one_line_by_the_scoring_run(
        tmp_path: Path, content: str | None, says: str) -> None:
    """``--skip-generation`` scores the rollouts an earlier run stored and says who made them, from that run's
    ``generation/generator.json``: a damaged one is refused by name, not read as no generator or a traceback."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    out = tmp_path / "run"
    first = CliRunner().invoke(app, ["run", "paibench-c", "--fixture", "--out", str(out)])
    assert first.exit_code == 0, first.output
    maker = out / "generation" / "generator.json"
    stored = json.loads(maker.read_text())
    assert stored["generator"] == "paibench-c's own generator" and set(stored["signature"]) == {
        "model", "weights", "settings"}
    maker.unlink()
    if content is None:
        maker.mkdir()
    else:
        maker.write_text(content)
    again = CliRunner().invoke(app, ["run", "paibench-c", "--fixture", "--skip-generation", "--out", str(out)])
    assert again.exit_code == 2, again.output
    assert f"error: {maker}: " in again.output and says in again.output
    assert "Traceback" not in again.output


def test_skip_generation_with_another_generator_than_the_one_that_stored_the_rollouts_is_refused(
        tmp_path: Path) -> None:
    """``--skip-generation --generator X`` (what submit's scoring job runs, with the generating jobs' X) scored the
    rollouts another generator stored, silently, under a command line naming X; the same X still scores them."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    out = tmp_path / "run"
    assert _run(out, "static").exit_code == 0
    args = ["run", "paibench-c", "--fixture", "--offline", "-o", "modalities=edge", "--skip-generation", "--out",
            str(out), "--generator"]
    refused = CliRunner().invoke(app, [*args, RENDER])
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert refused.output.strip().splitlines()[-1] == (
        f"error: --generator {RENDER}: the rollouts --skip-generation scores were made by static "
        f"({out / 'generation' / 'generator.json'}); drop --generator to score those, or --skip-generation to "
        "generate with it")
    assert CliRunner().invoke(app, [*args, "static"]).exit_code == 0


def test_skip_generation_takes_a_command_with_relative_paths_for_the_absolute_one_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--runtime docker`` stores a ``command:`` with its paths absolute (generator_files), so a later scoring run
    giving the same ``./helpers/render_generator.py`` (or, from its folder, ``render_generator.py``) was refused as
    another generator; a file elsewhere still is."""
    work = tmp_path / "work"
    shutil.copytree(HELPERS, work / "helpers")
    (tmp_path / "other" / "helpers").mkdir(parents=True)
    shutil.copy(HELPERS / "render_generator.py", tmp_path / "other" / "helpers")
    out, tail = tmp_path / "run", " --request {request} --out {out}"
    assert _run(out, f"command:{sys.executable} {work}/helpers/render_generator.py{tail}").exit_code == 0

    def scoring(script: str = "./helpers/render_generator.py") -> RunOutcome:
        return run_recipe(get_recipe("paibench-c").config(
            fixture=True, out_dir=out, offline=True, options={"modalities": "edge"}, skip_generation=True, env={},
            generator=f"command:{sys.executable} {script}{tail}"))

    monkeypatch.chdir(work / "helpers")
    assert scoring("render_generator.py").exit_code == 0
    monkeypatch.chdir(work)
    assert scoring().exit_code == 0
    monkeypatch.chdir(tmp_path / "other")
    with pytest.raises(RecipeError, match="the rollouts --skip-generation scores were made by command:"):
        scoring()


def test_skip_generation_with_move_aside_is_refused_before_anything_moves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the identity's refusal suggests after the scoring options changed (--move-aside) moved the stored
    rollouts aside with the run, then refused for want of them ('generator.json is missing: run one first'). The
    way it names instead, the generator with --move-aside, takes every rollout back from the sample cache."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    assert _run(out, "static").exit_code == 0
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    args = ["run", "paibench-c", "--fixture", "--offline", "-o", "modalities=edge", "--move-aside", "--out", str(out)]
    refused = CliRunner().invoke(app, [*args, "--skip-generation"])
    assert refused.exit_code == 2 and refused.output.strip() == (
        f"error: --move-aside with --skip-generation: moving the earlier run aside takes with it the rollouts {out} "
        "holds, which --skip-generation scores; to score them under other options, run their --generator with "
        "--move-aside (or into another --out): the sample cache gives their rollouts back without generating them")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before   # nothing moved
    again = CliRunner().invoke(app, [*args, "--generator", "static"])
    assert "generate: 4 samples: 0 done, 4 reused (4 from the sample cache), 0 failed" in again.output, again.output


def test_a_rollout_swapped_after_it_was_kept_fails_its_sample_by_name_in_the_scoring_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--skip-generation`` scored whatever stood in ``rollouts/`` (27 frames of another size at 210 fps): it checks
    each rollout against its request as generation does before keeping one, and fails that sample naming why; a
    rollout still the one kept is checked without being decoded again."""
    import numpy as np

    from pinbench.media import video
    from pinbench.media.video import write_video
    from pinbench.ops import generation

    recipe = get_recipe("paibench-c")

    def run(skip: bool):
        return run_recipe(recipe.config(fixture=True, out_dir=tmp_path / "run", offline=True, env={},
                                        skip_generation=skip))

    assert run(False).exit_code == 0
    checked, decoded = checked_rollouts(monkeypatch), list[str]()
    real = video.is_valid_video
    monkeypatch.setattr(video, "is_valid_video", lambda path, frames: decoded.append(str(path)) or real(path, frames))
    monkeypatch.setattr(generation, "_check_version", lambda: "newer")   # no verdict of this version's check yet
    assert run(True).exit_code == 0 and decoded == []   # each the one kept: none decoded again
    assert sorted(checked) == sorted((tmp_path / "run" / "rollouts").rglob("*.mp4")) and len(checked) == 16
    swapped = tmp_path / "run" / "rollouts" / "edge" / "task_0001.mp4"
    write_video(swapped, np.random.default_rng(0).integers(0, 255, (27, 64, 96, 3), dtype=np.uint8), 210)
    checked.clear()
    outcome = run(True)
    assert outcome.exit_code == 2 and checked == [swapped] and decoded == []   # the others passed that check before
    card = json.loads(outcome.scorecard_path.read_text())
    failed = {f["sample_id"]: f["error"] for f in card["metrics"]["edge/canny_f1_score"]["failed"]}
    assert list(failed) == ["task_0001"]
    assert ("generation failed: invalid rollout: edge/task_0001.mp4: 96x64, the request asks 96x72; 210 fps, the "
            f"request asks 30; 27 frames, the request asks 9 ({swapped})") in failed["task_0001"]
    assert all(not m["failed"] for name, m in card["metrics"].items() if not name.startswith("edge/"))


def test_a_scoring_run_checks_each_kept_rollout_against_the_rollout_checks_of_this_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """``--skip-generation`` scored a rollout still the file generation kept unchecked: a check added to
    ``check_rollout`` since it was kept did not apply to it, where a rerun generating into the same --out refuses it.
    Now it is checked (without its decode) and, refused, its sample fails by name, never scored."""

    recipe = get_recipe("paibench-c")

    def run(skip: bool):
        return run_recipe(recipe.config(fixture=True, out_dir=tmp_path / "run", offline=True, env={},
                                        skip_generation=skip))

    assert run(False).exit_code == 0

    stricter_check(monkeypatch, "edge.task_0001")
    capfd.readouterr()
    outcome = run(True)
    assert outcome.exit_code == 2
    why = ("invalid rollout: edge/task_0001.mp4: too dark (a new check) (kept before that was checked); generate it "
           "again without --skip-generation")
    assert f"generate: 1 sample without the rollout their requests ask for, failed (e.g. edge.task_0001: {why})" in (
        capfd.readouterr().err)
    card = json.loads(outcome.scorecard_path.read_text())
    failed = {f["sample_id"]: f["error"] for f in card["metrics"]["edge/canny_f1_score"]["failed"]}
    assert list(failed) == ["task_0001"] and f"generation failed: {why} (" in failed["task_0001"]
    assert all(not m["failed"] for name, m in card["metrics"].items() if not name.startswith("edge/"))


def test_two_rollouts_of_one_shape_swapped_after_they_were_kept_fail_their_samples(tmp_path: Path) -> None:
    """Two rollouts of one size, rate and length swapped after generation kept them passed the shape check, and each
    was scored as the other's rollout: a file other than the one kept (its SHA-256) fails its sample by name."""
    recipe = get_recipe("paibench-c")

    def run(skip: bool):
        return run_recipe(recipe.config(fixture=True, out_dir=tmp_path / "run", offline=True, env={},
                                        skip_generation=skip))

    assert run(False).exit_code == 0
    a, b = (tmp_path / "run" / "rollouts" / "edge" / f"task_000{i}.mp4" for i in (1, 2))
    os.replace(a, tmp_path / "swap")
    os.replace(b, a)
    os.replace(tmp_path / "swap", b)
    outcome = run(True)
    assert outcome.exit_code == 2
    card = json.loads(outcome.scorecard_path.read_text())
    failed = {f["sample_id"]: f["error"] for f in card["metrics"]["edge/canny_f1_score"]["failed"]}
    assert sorted(failed) == ["task_0001", "task_0002"]
    assert "another file than the one generation kept" in failed["task_0001"]


def _marked(marker: str) -> list[int]:
    """The processes whose environment carries ``marker`` (what a run and everything it started inherit)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_a_generator_never_outlives_the_run(tmp_path: Path) -> None:
    """The worker process is stopped at the end of the step: no thread or process of it is left running."""
    before = threading.active_count()
    marker = f"PINBENCH_TEST_MARKER={os.getpid()}-{time.time_ns()}"
    os.environ["PINBENCH_TEST_MARKER"] = marker.split("=", 1)[1]
    try:
        assert _run(tmp_path / "run", RENDER).exit_code == 0
    finally:
        del os.environ["PINBENCH_TEST_MARKER"]
    assert threading.active_count() == before, [t.name for t in threading.enumerate()]
    left = [pid for pid in _marked(marker) if pid != os.getpid()]
    assert left == [], [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in left]


@pytest.mark.parametrize("form", ["python", "command", "python, --gpus 2"])
def test_a_generator_dies_with_a_run_killed_by_kill_9(form: str, tmp_path: Path) -> None:
    """kill -9 of the run while its generator hangs: the generator and all it started (with --gpus 2, the run's
    worker process per GPU too) are gone within seconds (they would otherwise hold a GPU, or write to the run
    directory, for a run that no longer exists). Nothing is left in the system's temporary folder: a command's
    request file is in the run directory, where the next generating run removes it."""
    calls, marker = tmp_path / "calls", f"PINBENCH_TEST_MARKER={tmp_path.name}-{time.time_ns()}"
    (tmp_path / "tmp").mkdir()
    generator = (["--generator", RENDER, "-g", "mode=hang", "-g", f"calls={calls}"] if form.startswith("python") else
                 ["--generator", f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} "
                                 f"--out {{out}} --mode hang --calls {calls}"])
    generator += ["--gpus", "2"] if form.endswith("--gpus 2") else []
    proc = subprocess.Popen([sys.executable, "-m", "pinbench", "run", "paibench-c", "--fixture", "--offline", "--out",
                             str(tmp_path / "run"), *generator], env={**os.environ, marker.split("=")[0]:
                                                                      marker.split("=", 1)[1],
                                                                      "TMPDIR": str(tmp_path / "tmp")},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not calls.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls.exists(), "the generator never started"
    assert len(_marked(marker)) >= 2          # the run and its generator
    os.kill(proc.pid, signal.SIGKILL)         # the run only, not its process group
    proc.wait()
    deadline = time.monotonic() + 10
    while _marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _marked(marker) == []
    assert list((tmp_path / "tmp").iterdir()) == []
    left = list((tmp_path / "run" / "generation").glob(".requests/request-*/request.json"))
    assert len(left) == (form == "command")


def _provenance(generator: str, model: str, requests: str, **settings: str) -> dict:
    return {"extra": {"generation": {"generator": generator, "requests": requests, "n_requests": 1,
                                     "signature": {"model": model, "weights": "w", "settings": settings},
                                     "seeds": {"s": "18446744073709551615"}, "seconds": {"s": 0.5}}}}


def test_runs_whose_rollouts_were_made_differently_are_said_to_differ() -> None:
    """compare and table say when two runs answered other requests or used another generator or settings
    (item 5); alike runs, and runs that generated nothing, get no line."""
    from pinbench.core.generation import Generated, generation_differences

    def lines(*provenances: dict) -> list[str]:
        return generation_differences([(chr(65 + i), Generated.of(p)) for i, p in enumerate(provenances)])

    same = _provenance("static", "baseline", "r" * 64, frame="initial")
    assert lines(same, same) == [] and lines({}, {"extra": {}}) == []
    assert lines(same, _provenance("static", "baseline", "s" * 64, frame="initial")) == [
        f"different requests (prompts, seeds, sizes or conditioning): A {'r' * 12}; B {'s' * 12}"]
    assert lines(same, _provenance("static", "baseline", "r" * 64, frame="last")) == [
        "different generators: A static (baseline, weights w); B static (baseline, weights w); "
        "settings that differ: frame (A initial, B last)"]   # what each run used, not only which setting
    assert lines(same, _provenance("static", "baseline", "r" * 64, frame="initial", **{"-g": "x" * 50}))[0].endswith(
        f"settings that differ: -g (A none, B {'x' * 37}...)")
    assert lines(same, {}) == ["B scored rollouts made without a generation step (a folder given, or a fixture's "
                               "own), A generated theirs: the requests they answered may differ"]
    # A hand-edited reference's generator text may hold a token: redacted, as the provenance lines are.
    token = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm12345678"
    assert lines(_provenance(f"command:gen --token {token}", "other", "r" * 64), same) == [
        "different generators: A command:gen --token *** (other, weights w); B static (baseline, weights w); "
        "settings that differ: frame (A none, B initial)"]
    assert lines(same, _provenance("static", "baseline", "r" * 64, frame="a\nb\x1b[31m"))[0].endswith(
        "settings that differ: frame (A initial, B a\\nb\\u001b[31m)")   # one line, no terminal escape


def test_compare_and_table_name_the_generators_of_two_runs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pinbench import cli

    for name, generator in (("a", "static"), ("b", RENDER), ("c", "static")):
        assert _run(tmp_path / name, generator).exit_code == 0
    runner = CliRunner()
    differ = runner.invoke(cli.app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert ("generation: different generators: A static (pinbench static baseline, weights none); B "
            f"{RENDER} (test render generator, weights v1)") in differ.output
    alike = runner.invoke(cli.app, ["compare", str(tmp_path / "a"), str(tmp_path / "c")])
    assert alike.exit_code == 0 and "generation:" not in alike.output
    table = runner.invoke(cli.app, ["table", *(str(tmp_path / n) for n in "abc"), "--format", "csv"])
    assert table.exit_code == 0, table.output
    assert table.output.count("rollouts made differently (#1: the leftmost run): different generators: #1 static ") >= 3


def _seen(path: Path) -> dict[str, tuple[str, str]]:
    """request id -> (CUDA_VISIBLE_DEVICES, process id) it was generated with, one generation each."""
    lines = [line.split() for line in path.read_text().splitlines()]
    assert len({line[0] for line in lines}) == len(lines), lines
    return {sid: (device, pid) for sid, device, pid, _ in lines}


@pytest.mark.parametrize("form", ["python", "command"])
def test_an_offline_run_keeps_its_generator_offline(tmp_path: Path, form: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """--offline reaches the generator's process as HF_HUB_OFFLINE=1 (and pinbench's, transformers' and datasets'
    variables), as a --runtime docker stage has no network: the user's code downloads nothing either; a run
    without --offline leaves its environment as it is."""
    for var in ("HF_HUB_OFFLINE", "PINBENCH_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    for offline in (True, False):
        seen = tmp_path / f"seen-{offline}"
        spec = RENDER if form == "python" else (
            f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} --out {{out}} "
            f"--seen {seen}")
        recipe = get_recipe("paibench-c")
        outcome = run_recipe(recipe.config(fixture=True, out_dir=tmp_path / f"run-{offline}", offline=offline,
                                           options={"modalities": "edge"}, generator=spec, env={},
                                           generator_options={"seen": str(seen)} if form == "python" else {}))
        assert outcome.exit_code == 0, outcome.message
        assert {line.split()[3] for line in seen.read_text().splitlines()} == {"1" if offline else "-"}


@pytest.mark.parametrize("form", ["python", "command"])
def test_gpus_2_spreads_generation_over_one_generator_per_gpu(tmp_path: Path, form: str,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    """--gpus 2 with CUDA_VISIBLE_DEVICES=5,3: each rollout made once, by a generator that sees one of the two GPUs
    (the python form: one process per GPU, its model loaded once there), both GPUs used; the rollouts, records and
    scorecard are those of a one-GPU run."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,3")
    seen = tmp_path / "seen"
    spec = RENDER if form == "python" else (
        f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} --out {{out}} --seen {seen}")
    options = {"seen": str(seen)} if form == "python" else {}
    spread = _run(tmp_path / "spread", spec, modalities="edge,depth", gpus=2, **options)
    assert spread.exit_code == 0, spread.message
    assert "generate: 8 samples on 2 devices: 8 done, 0 reused, 0 failed" in capfd.readouterr().err   # the step's
    made = _seen(seen)
    assert sorted(made) == sorted(f"{m}.task_000{i}" for m in ("edge", "depth") for i in range(4))
    assert {device for device, _ in made.values()} == {"5", "3"}
    if form == "python":
        assert all(len({pid for d, pid in made.values() if d == device}) == 1 for device in ("5", "3"))
    seen.unlink()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    plain = _run(tmp_path / "plain", spec, modalities="edge,depth", **options)
    assert {device for device, _ in _seen(seen).values()} == {"-"}   # one GPU: the run's own environment
    for name in ("spread", "plain"):
        assert not list((tmp_path / name / "generation").glob("samples/quarantine/*"))

    def made_by(run: Path) -> dict:
        card = json.loads((run / "scorecard.json").read_text())
        return {"rollouts": {sid: r.result["sha256"] for sid, r in load_records(run / "generation").items()},
                "metrics": {k: m["value"] for k, m in card["metrics"].items()}, "status": card["status"]}
    assert made_by(tmp_path / "spread") == made_by(tmp_path / "plain") and plain.exit_code == 0


def test_a_folder_a_generator_left_where_its_rollout_is_made_fails_that_try_only(tmp_path: Path) -> None:
    """A generator that makes a folder at its ``out`` fails that sample by name, and the folder is cleared: the next
    try generates (it was an IsADirectoryError on every rerun, the sample stuck failed)."""
    from pinbench.core.generation import Signature
    from pinbench.ops.generation import _keep, _partial
    from pinbench.ops.generators import Static

    request = _request(kind="prompt-schedule", output="sub/t2v-000.mp4", frames=3, conditioning=(), prompts=(
        Prompt("grey"),))
    signature = Signature("test", "none")
    # what the folder holds is named (a tool that takes its --output for a folder writes its video in it): it
    # said "not a regular file", no hint of where the video went
    with pytest.raises(ValueError, match=r"^invalid rollout: sub/t2v-000.mp4: a folder \(holding inner, video.mp4\), "
                       r"not a video file: write the rollout to that path itself, not into a folder there \(kept to "
                       r"look at under .*/store/rejected\)$"):
        _keep(request, tmp_path, signature, lambda _request, out: [(out / "inner").mkdir(parents=True),
                                                                   (out / "video.mp4").write_bytes(b"")],
              tmp_path / "store")
    assert not _partial(tmp_path, request).exists()
    _partial(tmp_path, request).mkdir()   # a folder left by a run killed there
    kept = _keep(request, tmp_path, signature, Static().generate, tmp_path / "store")
    assert kept["output"] == "sub/t2v-000.mp4" and (tmp_path / "sub" / "t2v-000.mp4").is_file()


def test_a_folder_where_a_rollout_goes_fails_that_sample_by_name_and_keeps_the_rest(tmp_path: Path) -> None:
    """A stored rollout replaced by a folder: the regenerating run fails that sample in one line naming the folder
    (it was an IsADirectoryError traceback from the rename, after generating in vain); every other rollout is
    reused and the folder is left as it is."""
    out, calls = tmp_path / "run", tmp_path / "calls"
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0
    folder = out / "rollouts" / "edge" / "task_0001.mp4"
    folder.unlink()
    (folder / "mine").mkdir(parents=True)
    outcome = _run(out, RENDER, calls=str(calls))
    assert outcome.exit_code == 2 and len(_calls(calls)) == 4   # nothing generated again, that one not in vain
    failed = {sid: r for sid, r in load_records(out / "generation").items() if not r.ok}
    assert list(failed) == ["edge.task_0001"] and failed["edge.task_0001"].traceback is None
    assert failed["edge.task_0001"].error == (f"RolloutBlocked: {folder}: a folder where the rollout goes; "
                                              "move it away to generate it")
    card = json.loads(outcome.scorecard_path.read_text())
    assert {f["sample_id"] for f in card["metrics"]["edge/canny_f1_score"]["failed"]} == {"task_0001"}
    assert (folder / "mine").is_dir()


def test_a_file_where_a_rollouts_folder_goes_fails_that_sample_in_one_line(tmp_path: Path) -> None:
    from pinbench.core.generation import Signature
    from pinbench.ops.generation import RolloutBlocked, _keep
    from pinbench.ops.generators import Static

    (tmp_path / "sub").write_text("not a folder")
    request = _request(output="sub/t2v-000.mp4", frames=3, conditioning=(), prompts=(Prompt("grey"),))
    with pytest.raises(RolloutBlocked, match=f"^{tmp_path / 'sub'}: a regular file where the folder of "
                                             "sub/t2v-000.mp4 goes$"):
        _keep(request, tmp_path, Signature("test", "none"), Static().generate, tmp_path / "store")


def test_a_rollout_a_generator_left_as_a_hard_link_to_a_file_of_its_own_is_kept_as_a_copy(tmp_path: Path) -> None:
    """A generator that links a file it keeps elsewhere (``ln mine.mp4 {out}``) handed over that file's inode: the
    step made it read-only (the user's own file, outside the run, became 0444) and the kept rollout, shared with
    the cache and every run directory, was that file, changed whenever its owner wrote to it. Now the rollout is a
    copy of its own, read-only, and the file it came from is left as it was."""
    import stat

    from pinbench.core.generation import Signature
    from pinbench.ops.generation import _keep
    from pinbench.ops.generators import Static

    request = _request(output="sub/t2v-000.mp4", frames=3, conditioning=(), prompts=(Prompt("grey"),))
    mine = tmp_path / "mine.mp4"

    def make(asked: Request, out: Path) -> None:
        Static().generate(asked, mine)
        os.link(mine, out)

    kept = _keep(request, tmp_path / "rollouts", Signature("test", "none"), make, tmp_path / "generation")
    rollout = tmp_path / "rollouts" / "sub" / "t2v-000.mp4"
    assert stat.S_IMODE(mine.stat().st_mode) & stat.S_IWUSR, oct(mine.stat().st_mode)
    assert mine.stat().st_nlink == 1 and rollout.stat().st_ino != mine.stat().st_ino
    assert stat.S_IMODE(rollout.stat().st_mode) == 0o444 and kept["sha256"] == _sha(rollout) == _sha(mine)
    assert sorted(p.name for p in rollout.parent.iterdir()) == ["t2v-000.mp4"]   # no copy left beside it


@pytest.mark.parametrize("suffix", [".real", "\nsecond line"])
def test_a_symlink_a_generator_left_at_its_out_is_named_with_its_own_target_in_one_line(
        tmp_path: Path, suffix: str) -> None:
    """A link at ``out`` to a name built on ``out`` (a file written beside it, then linked) is said as the rollout's
    name and the link's real target, on one line (the hidden name was rewritten inside the target too, and a
    newline in the target split the message)."""
    from pinbench.core.generation import Signature
    from pinbench.ops.generation import _keep, _partial

    request = _request(output="sub/t2v-000.mp4", conditioning=())
    linked = f"{_partial(tmp_path, request)}{suffix}"
    with pytest.raises(ValueError) as raised:
        _keep(request, tmp_path, Signature("test", "none"), lambda _request, out: os.symlink(linked, out),
              tmp_path / "store")
    assert str(raised.value) == (f"invalid rollout: sub/t2v-000.mp4: a symlink (to {linked!r}), "
                                 f"not a file the generator wrote (kept to look at under {tmp_path}/store/rejected)")
    assert not _partial(tmp_path, request).is_symlink() and not (tmp_path / "sub" / "t2v-000.mp4").exists()


def test_a_command_generator_that_does_not_split_is_named_in_one_line(tmp_path: Path) -> None:
    """An unclosed quote in ``--generator command:...`` says which flag (it was shlex's bare 'No closing quotation')."""
    from pinbench.core.config import RecipeError

    with pytest.raises(RecipeError, match=r"^--generator command:'unterminated \{out\}: No closing quotation"):
        _run(tmp_path / "run", "command:'unterminated {out}")


def test_a_misspelt_placeholder_of_a_command_generator_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """``{output}`` for ``{out}`` was passed to the command as written: the command wrote elsewhere, or to a file
    named ``{output}``, and every sample failed as "no rollout" only after the run began."""
    from pinbench.core.config import RecipeError

    calls = tmp_path / "calls"
    command = (f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} --out {{output}} "
               f"--calls {calls}")
    with pytest.raises(RecipeError) as caught:
        _run(tmp_path / "run", command)
    assert str(caught.value) == (f"--generator {command}: unknown placeholder {{output}} (known: {{request}}, {{out}}; "
                                 "write {{output}} for a literal {output})")
    assert not calls.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("word", ["${out}", "--out=${out}", "${request}"])
def test_a_placeholder_written_as_a_shell_variable_is_refused_before_anything_runs(tmp_path: Path, word: str) -> None:
    """``--out ${out}`` was filled as '$' and the path (no shell reads the command's words): the command wrote to a
    folder named '$' or failed, after the run began (review57)."""
    from pinbench.core.config import RecipeError

    calls = tmp_path / "calls"
    command = f"command:{sys.executable} {HELPERS / 'render_generator.py'} --calls {calls} {word}"
    with pytest.raises(RecipeError) as caught:
        _run(tmp_path / "run", command)
    name = word.split("${")[1].rstrip("}")
    assert str(caught.value) == (f"--generator {command}: ${{{name}}} is no variable (no shell reads the command's "
                                 f"words): write {{{name}}} for the path")
    assert not calls.exists() and list(tmp_path.iterdir()) == []


def test_a_command_generator_that_names_no_out_is_refused_before_the_run(tmp_path: Path) -> None:
    """``command:python gen.py`` (no ``{out}``) is never told where to write (the request's file holds no path, and
    no variable names it): every sample failed after the run began ("wrote nothing", or the script's usage error).
    Refused first, in one line; ``{out}`` as a shell script's argument, or inside a word, is told."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import command_argv

    calls = tmp_path / "calls"
    refused = (": its argv names no {out}, so it is never told where to write the rollout: add {out} (a word of its "
               "own, or a shell script's argument: sh -c 'gen --out \"$1\"' sh {out})")
    script = HELPERS / "render_generator.py"
    for words in ("--request {request}", "--out {{out}}", "--out out.mp4"):
        command = f"command:{sys.executable} {script} --calls {calls} {words}"
        with pytest.raises(RecipeError) as caught:
            _run(tmp_path / "run", command)
        assert str(caught.value) == f"--generator {command}{refused}"
        assert not calls.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(RecipeError) as caught:   # the command named, its secret flag's value not
        command_argv("command:gen --token plain-tok-6631 {request}")
    assert str(caught.value) == f"--generator command:gen --token *** {{request}}{refused}"
    for told in ("sh -c 'gen --out \"$1\"' sh {out}", "gen --out={out}", "gen {request} {out}"):
        assert command_argv(f"command:{told}")


def test_escaped_braces_around_a_placeholder_fill_it_and_a_placeholder_program_is_refused(tmp_path: Path) -> None:
    """``{{{out}}}`` (a literal brace pair around the path, as Python's format reads it) was a literal ``{out}`` and
    a ``}``: refused as naming no ``{out}``. It is the path in braces; ``{{out}}`` stays a literal ``{out}``.
    ``command:{out}`` (the program a placeholder) ran the rollout's path for every sample: refused in one line."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import GeneratorSpec, _run_command

    spec = GeneratorSpec("command:sh -c 'o=${2#?}; cp \"$1\" \"${o%?}\"' sh {request} {{{out}}} {{out}}")
    out = tmp_path / "it's.mp4"
    _run_command(spec.command, _request(), out, 60, tmp_path / "log", tmp_path)
    assert json.loads(out.read_text())["id"] == "t2v-000"
    for command, name in (("{out}", "out"), ("timeout 1h {request} {out}", "request"), ("{{{out}}}", "out")):
        with pytest.raises(RecipeError) as caught:
            _run(tmp_path / "run", f"command:{command}")
        assert str(caught.value) == (f"--generator command:{command}: its program is {{{name}}}, a path the run fills "
                                     "in, not a program: give command:PROGRAM ARGS... with {out} among the arguments")
    assert not (tmp_path / "run").exists()


def test_any_run_of_braces_around_a_placeholder_reads_as_python_format_reads_it() -> None:
    """``{{{{out}}}}`` gave ``{{/path}}`` where Python's format gives the literal ``{{out}}``: each ``{{`` and ``}}``
    is a literal brace, an odd one left opens or closes the placeholder. Filled as ``str.format`` fills the same
    word; a run it refuses (a brace left unpaired on one side alone) is refused before the run, in one line."""
    from pinbench.ops.generation import _filled, command_argv

    values = {"out": "/runs/x/it's.mp4", "request": "/runs/x/request.json"}
    for name in ("out", "request"):
        for opening in range(1, 6):
            for closing in range(1, 6):
                for before in ("", "--x=", "$"):
                    run = f"{'{' * opening}{name}{'}' * closing}"
                    word = f"{before}{run}.txt"
                    if before == "$" and opening == 1:
                        continue   # ${out}: a shell variable's form, refused as no variable
                    try:
                        expected = word.format(**values)
                    except ValueError:
                        with pytest.raises(RecipeError, match=(
                                rf"^--generator command:gen {re.escape(word)} {{out}}: {re.escape(run)}: an unpaired "
                                rf"brace around {{{name}}}")):
                            command_argv(f"command:gen {word} {{out}}")
                        continue
                    assert command_argv(f"command:gen {word} {{out}}")[1] == word
                    assert _filled(word, values) == expected, word


def test_an_interpreter_given_a_placeholder_as_its_script_is_refused_before_the_run(tmp_path: Path) -> None:
    """``python {request} {out}`` ran the request's JSON as a Python script: every sample failed with a
    SyntaxError after the run began. An interpreter whose script is a placeholder is refused in one line; one that
    takes it as an argument after its script, ``-c`` code or ``-m`` module is not."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import command_argv

    for command, name, program in (("python {request} {out}", "request", "python"),
                                   ("env A=1 python3 -u ./{request} {out}", "request", "python3"),
                                   ("timeout 1h bash -e {request} {out}", "request", "bash"),
                                   ("python -W ignore {out}", "out", "python")):
        with pytest.raises(RecipeError) as caught:
            _run(tmp_path / "run", f"command:{command}")
        assert str(caught.value) == (f"--generator command:{command}: {program} runs {{{name}}} as its script, a path "
                                     "the run fills in (the request's JSON, the rollout), not a program: name the "
                                     f"script first: {program} gen.py {{request}} {{out}}")
    assert not (tmp_path / "run").exists()
    for command in ("python gen.py {request} {out}", "python -c 'import gen' {request} {out}",
                    "python -m gen {request} {out}", "bash -c 'gen \"$1\"' sh {out}", "python {{request}} {out}",
                    "env -S 'python -u' gen.py {out}"):
        assert command_argv(f"command:{command}")[-1] == "{out}"


def test_a_placeholder_outside_a_string_in_python_c_code_is_refused_and_the_code_s_arguments_carry_the_path(
        tmp_path: Path) -> None:
    """``python -c "open({out}, 'wb')"`` pasted the path into the code unquoted: a SyntaxError for every sample,
    after the run began. Refused before the run, in one line saying to pass the paths as the code's arguments
    (in quotes, a path with a quote breaks it too); one in a string literal, or after the code, is taken. One in an
    f-string's field (``f'{{{out}}}'`` is ``f'{/path}'``) is code: Python 3.11 reads the f-string as one token, and
    it was taken."""
    from pinbench.ops.generation import _run_command, command_argv

    for command, name, python in (("python -c \"open({out}, 'wb')\"", "out", "python"),
                                  ("timeout 1h python3 -u -c 'import gen; gen.run({request}, \"{out}\")'",
                                   "request", "python3"),
                                  ("env A=1 python -Bc 'x = {out}' {out}", "out", "python"),
                                  ("python -c'open({{{out}}})'", "out", "python"),
                                  # the path in an f-string's field, as code (Python 3.11: one STRING token)
                                  ("python -c \"f'{{{out}}}'\"", "out", "python"),
                                  ("python3 -c \"print(f'x{ {request} }')\" {out}", "request", "python3")):
        with pytest.raises(RecipeError) as caught:
            _run(tmp_path / "run", f"command:{command}")
        assert str(caught.value) == (
            f"--generator command:{command}: {{{name}}} in {python} -c code is outside a string, so the path is "
            "pasted in as code (a SyntaxError); pass the paths as the code's arguments, as a quoted one breaks on "
            f"a path with a quote: {python} -c 'import sys; gen(sys.argv[1], sys.argv[2])' {{request}} {{out}}")
    assert list(tmp_path.iterdir()) == []
    for command in ("python -c \"open('{out}', 'wb')\"", "python -c 'open(\"\"\"{{{out}}}\"\"\")'",
                    "python -c 'x = {{out}}' {out}", "python -c 'x = 1  # {out}'", "python gen.py -c {out}",
                    "python -m gen -c {out}", "python -c \"print(f'{x!r} {out}')\"",
                    "python -c \"print(f'{{out}} {\\\"{out}\\\"}')\""):
        assert command_argv(f"command:{command}")
    code = "import json, sys; f = open(sys.argv[2], 'w'); f.write(json.load(open(sys.argv[1]))['id'])"
    out = tmp_path / "a run" / "it's.mp4"
    out.parent.mkdir()
    _run_command(command_argv(f"command:{sys.executable} -c \"{code}\" {{request}} {{out}}"), _request(), out, 60,
                 tmp_path / "log", tmp_path)
    assert out.read_text() == "t2v-000"


def test_a_command_generator_whose_program_cannot_run_here_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """A program not on PATH (or a path that is no executable file) failed every sample with "cannot run
    'nonexistent-binary': No such file or directory" after the run began: refused first, in one line naming it.
    With --skip-generation nothing runs it, so nothing is said."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import Generating, GeneratorSpec

    folder, dangling, plain = tmp_path / "gen", tmp_path / "gone.sh", tmp_path / "plain.sh"
    folder.mkdir()
    dangling.symlink_to(tmp_path / "absent")
    plain.write_text("#!/bin/sh\n")
    runs = tmp_path / "runs"
    for program, why in (("nonexistent-binary", "is not on PATH; install it, or give its path"),
                         (str(folder), "is a folder; give the path of a program"),
                         (str(dangling), "is a symlink to nothing; give the path of a program"),
                         (str(tmp_path / "absent"), "does not exist; give the path of a program"),
                         (str(plain), f"is not executable; chmod +x it, or name its interpreter first "
                                      f"(bash {plain})")):
        with pytest.raises(RecipeError) as caught:
            _run(runs / "run", f"command:{program} {{request}} {{out}}")
        assert str(caught.value) == f"--generator command: program {program!r} {why}"
    assert not runs.exists()
    Generating(GeneratorSpec("command:nonexistent-binary {out}"), get_recipe("paibench-c"), skip_generation=True)


def test_a_wrapped_program_and_a_script_the_kernel_will_not_run_are_refused_before_anything_runs(
        tmp_path: Path) -> None:
    """``timeout 1h ./missing.sh`` passed the check (``timeout`` is on PATH), and so did an executable script with no
    #! line or with one naming a missing interpreter; every sample then failed with "Exec format error" or "No such
    file or directory" (of a file that exists). A wrapper's execvp hands a script with no #! line to sh: accepted
    there, as a program a wrapper finds elsewhere (``env -C``, ``env PATH=``) is."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import check_program

    bare, lost, fine = tmp_path / "bare.sh", tmp_path / "lost.sh", tmp_path / "fine.sh"
    bare.write_text("echo made\n")
    lost.write_text(f"#!{tmp_path / 'no-shell'}\necho made\n")
    fine.write_text("#!/bin/sh\necho made\n")
    for script in (bare, lost, fine):
        script.chmod(0o755)
    runs = tmp_path / "runs"
    for command, why in (
            (f"timeout 1h {tmp_path / 'absent'}", f"{str(tmp_path / 'absent')!r} does not exist; give the path of a "
                                                  "program"),
            ("nice -n 5 nonexistent-binary", "'nonexistent-binary' is not on PATH; install it, or give its path"),
            (str(bare), f"{str(bare)!r} has no #! line, so only a shell runs it; add one (#!/bin/sh), or name its "
                        f"interpreter first (bash {bare})"),
            (f"env A=1 {lost}", f"{str(lost)!r} names an interpreter that cannot run here in its #! line "
                                f"({str(tmp_path / 'no-shell')!r}); fix that line, or name its interpreter first")):
        with pytest.raises(RecipeError) as caught:
            _run(runs / "run", f"command:{command} {{request}} {{out}}")
        assert str(caught.value) == f"--generator command: program {why}"
    assert not runs.exists()
    for argv in ([str(fine)], ["env", "A=1", str(bare)], ["timeout", "1h", str(bare)],
                 ["env", "-C", "/", "./absent"], ["env", "PATH=/opt/x", "gen"], ["env", "-S", "gen {out}", "{out}"]):
        check_program(argv)


def test_an_interpreter_s_missing_script_is_refused_before_anything_runs(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``python /tmp/nope.py {out}`` and ``bash ./typo.sh {out}`` passed the check (the program, python or bash, is on
    PATH): every sample then failed with "can't open file". The script is the interpreter's first operand, after
    its options; code (``-c``), a module (``-m``), stdin and a placeholder are not files to look for."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import check_program

    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    for command, said in (
            ("python /tmp/gen-nope.py", "python's script '/tmp/gen-nope.py' does not exist"),
            ("bash ./typo.sh", f"bash's script './typo.sh' does not exist (in {tmp_path}, where the command runs)"),
            ("timeout 1h python3 -u -W ignore -X dev typo.py", f"python3's script 'typo.py' does not exist (in "
                                                               f"{tmp_path}, where the command runs)"),
            ("sh -e -o pipefail -- typo.sh", f"sh's script 'typo.sh' does not exist (in {tmp_path}, where the command "
                                             "runs)")):
        with pytest.raises(RecipeError) as caught:
            _run(runs / "run", f"command:{command} {{request}} {{out}}")
        assert str(caught.value) == f"--generator command: {said}; give the path of the script"
    assert not runs.exists()
    (tmp_path / "gen.py").write_text("")
    for argv in (["python", "gen.py"], ["python", "-m", "gen"], ["python", "-c", "print(1)", "{out}"],
                 ["python", "-uc", "print(1)"], ["bash", "-c", "x", "sh", "{out}"], ["bash", "-s", "{out}"],
                 ["python", "-", "{out}"], ["python", "{out}"], ["python", "-Wignore", "gen.py"],
                 ["env", "-C", "/", "python", "gen-nope.py"]):
        check_program(argv)


def test_a_path_that_starts_with_a_tilde_is_refused_saying_no_shell_expands_it(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """``python ~/gen.py {out}`` (quoted, as --generator is): no shell reads the command's words, so ``~`` is a
    folder named ``~``. It was refused as "does not exist (in CWD ...)" of a file the user sees in their home; the
    line now says why, and the path to write."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import check_program

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "gen.py").write_text("")
    for argv, said in ((["python", "~/gen.py", "{out}"], "python's script '~/gen.py' does not exist (in "
                                                         f"{os.getcwd()}, where the command runs)"),
                       (["~/gen.sh", "{out}"], "program '~/gen.sh' does not exist")):
        with pytest.raises(RecipeError) as caught:
            check_program(argv)
        where = tmp_path / argv[-2].removeprefix("~/")
        assert str(caught.value) == (f"--generator command: {said} (no shell reads the command's words, so ~ is "
                                     f"not your home: write {where}); give the path of "
                                     f"{'the script' if 'script' in said else 'a program'}")


def test_a_script_whose_env_shebang_names_a_program_not_on_path_is_refused(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``#!/usr/bin/env python3`` run where no python3 is on PATH failed every sample after the run began; an env
    line of more than a name (``-S``, a variable, two words) is left to the run, as the check cannot be sure."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import check_program

    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", os.pathsep.join([str(folder), "/usr/bin", "/bin"]))

    def script(name: str, line: str) -> str:
        (folder / name).write_text(f"#!{line}\necho made\n")
        (folder / name).chmod(0o755)
        return str(folder / name)

    gen = script("gen", "/bin/sh")
    missing = script("a.py", "/usr/bin/env missing-python")
    with pytest.raises(RecipeError) as caught:
        check_program([missing, "{out}"])
    assert str(caught.value) == (f"--generator command: program {missing!r} names in its #! line a program that is "
                                 "not on PATH ('missing-python'); install it, or fix that line")
    with pytest.raises(RecipeError):   # the wrapped program's line is read too
        check_program(["timeout", "1h", missing])
    for line in ("/bin/sh\r", "/usr/bin/env gen\r"):   # a CRLF script's: the kernel looks for "sh\r", "gen\r"
        with pytest.raises(RecipeError) as caught:
            check_program([script("crlf", line)])
        assert repr(line.split()[-1] + "\r") in str(caught.value)
    for line in ("/usr/bin/env gen", "/usr/bin/env -S missing-python -u", "/usr/bin/env A=1 missing-python",
                 "/usr/bin/env missing-python -u", f"/usr/bin/env {gen}"):
        check_program([script("b.py", line), "{out}"])


def test_a_placeholder_inside_a_shell_c_script_is_refused_and_the_script_s_arguments_carry_a_spaced_path(
        tmp_path: Path) -> None:
    """``sh -c "gen --out {out}"`` pasted the path into shell code unquoted: under an --out holding a space the
    script saw two words and every sample failed. Refused before the run; "$1" "$2" carry any path whole."""
    from pinbench.ops.generation import GeneratorSpec, _run_command

    gen = f"{sys.executable} {HELPERS / 'render_generator.py'}"
    for shell, name, script in (("sh", "request", f'sh -c "{gen} --request {{request}} --out {{out}}"'),
                                ("bash", "out", f"env bash -e -o pipefail -c '{gen} --out={{out}}'"),
                                ("dash", "request", f"/bin/dash -ec '{gen} --request \"{{request}}\"'"),
                                # bash's option taking a value before -c: the value was taken for the script
                                ("bash", "out", f"bash --rcfile rc -c '{gen} --out {{out}}'"),
                                ("sh", "request", f"env -i -u B A=1 sh -c '{gen} --request {{request}}'")):
        with pytest.raises(RecipeError) as caught:
            _run(tmp_path / "run", f"command:{script}")
        assert str(caught.value) == (
            f"--generator command:{script}: {{{name}}} inside a {shell} -c script is pasted in unquoted, so a path "
            f"with a space or a quote breaks the script; pass the paths as the script's arguments: {shell} -c 'gen "
            f'--request "$1" --out "$2"\' {shell} {{request}} {{out}}')
    assert list(tmp_path.iterdir()) == []
    spec = GeneratorSpec("command:sh -c 'cp \"$1\" \"$2\"' sh {request} {out}")
    out = tmp_path / "a run" / "it's.mp4"
    out.parent.mkdir()
    _run_command(spec.command, _request(), out, 60, tmp_path / "log", tmp_path)
    assert json.loads(out.read_text())["id"] == "t2v-000"
    assert GeneratorSpec("command:sh ./gen.sh -c {request} {out}").command[-1] == "{out}"   # a script file's -c
    # a program's own option named --shell: bash is its value there, no shell runs {request} (it was refused)
    assert GeneratorSpec("command:gen --shell bash -c {request} --out {out}").command[-1] == "{out}"


def test_a_placeholder_written_as_a_variable_in_a_shell_script_is_refused_unless_the_script_sets_it(
        tmp_path: Path) -> None:
    """``bash -c 'gen --out ${out}'`` was refused as "pasted in unquoted", but the run passes ``${out}`` as
    written: the shell's variable ``out``, which nothing set, read empty (``gen --out`` and no path). Refused
    saying so; a script or env that sets the variable (``out="$1"``) is taken, and runs."""
    from pinbench.ops.generation import GeneratorSpec, _run_command, command_argv

    for script, text, name, shell in (
            ("bash -c 'gen --out ${out}'", "${out}", "out", "bash"),
            ("sh -c 'gen --out \"$1\" --request \"${request}\"' sh {out}", "${request}", "request", "sh"),
            ("sh -c 'gen --out=${out}' sh {out}", "${out}", "out", "sh"),
            ("sh -c 'gen --the-out=${out} --out \"$1\"' sh {out}", "${out}", "out", "sh"),
            # without braces the same variable (it passed, and gen got --out and no path)
            ("bash -c 'gen --out $out --x \"$1\"' bash {out}", "$out", "out", "bash"),
            ("sh -c 'gen \"$1\" --request \"$request\" --o $out.mp4' sh {out}", "$request", "request", "sh"),
            ("sh -c \"gen \\\"'$out'\\\" \\\"$1\\\"\" sh {out}", "$out", "out", "sh"),   # ' inside " quotes nothing
            ("sh -c 'gen \\\\$out \"$1\"' sh {out}", "$out", "out", "sh")):   # an escaped backslash, then $out
        with pytest.raises(RecipeError) as caught:
            _run(tmp_path / "run", f"command:{script}")
        assert str(caught.value) == (
            f"--generator command:{script}: {text} inside a {shell} -c script is the shell's variable {name}, "
            f"which the command never sets (the run fills {{{name}}}, not {text}), so the script reads it empty; "
            f"pass the paths as the script's arguments: {shell} -c 'gen --request \"$1\" --out \"$2\"' {shell} "
            "{request} {out}")
    assert list(tmp_path.iterdir()) == []
    for taken in ("env out=/x sh -c 'gen \"${out}\" \"$1\"' sh {out}",
                  "sh -c 'export request=\"$1\"; gen \"${request}\" \"$2\"' sh {request} {out}",
                  "sh -c 'out=\"$1\"; gen $out' sh {out}", "env out=/x sh -c 'gen $out \"$1\"' sh {out}",
                  # other variables, and $out where the shell reads it as text: escaped, in its single quotes, $$
                  "sh -c 'gen --d $outdir --o \"$1\" $output ${out_x}' sh {out}",
                  "sh -c 'gen --lit \\$out --o \"$1\"' sh {out}", "sh -c \"gen --lit '$out' \\\"$1\\\"\" sh {out}",
                  "sh -c 'echo $$out \"$\"out; gen \"$1\"' sh {out}",
                  # a loop's or read's variable is set too (review87: refused as "never sets")
                  "bash -c 'for out in \"$@\"; do gen --out \"${out}\"; done' bash {out}",
                  "zsh -c 'select out in \"$@\"; do gen --out \"${out}\"; done' zsh {out}",
                  "sh -c 'read -r request; gen \"${request}\" \"$1\"' sh {out}",
                  "bash -c 'while getopts o: out; do gen --out \"${out}\"; done' bash {out}"):
        assert command_argv(f"command:{taken}")
    spec = GeneratorSpec("command:sh -c 'out=\"$2\"; cp \"$1\" \"${out}\"' sh {request} {out}")
    out = tmp_path / "a run" / "it's.mp4"
    out.parent.mkdir()
    _run_command(spec.command, _request(), out, 60, tmp_path / "log", tmp_path)
    assert json.loads(out.read_text())["id"] == "t2v-000"


@pytest.mark.parametrize(("script", "refused"), [
    # a comment, a quoted here-document: text the shell never expands (refused, as if code)
    ('gen "$1"  # $out is the rollout', None), ('# $out\ngen "$1"', None), ('gen "$1"#$out', "$out"),
    ("cat <<'EOF' >log\n$out\nEOF\ngen \"$1\"", None), ('cat <<"EOF"\n$out\nEOF\ngen "$1"', None),
    ('cat <<\\EOF\n$out\nEOF\ngen "$1"', None), ("cat <<-'EOF'\n\t$out\n\tEOF\ngen \"$1\"", None),
    # an unquoted here-document expands, its quotes are text (it's hid the $out after it)
    ("cat <<EOF\nit's $out\nEOF\ngen \"$1\"", "$out"), ("cat <<EOF\nit's\nEOF\ngen \"$1\" $out", "$out"),
    ('gen "$1" <<< "$out"', "$out"),
    # what reads the variable (passed), and what a script writes for one that may be unset (passes)
    ('gen "$1" $((out + 1))', "$((out + 1))"), ('gen "$1" $((16#ff))', None), ('gen "$1" ${#out}', "${#out}"),
    ('gen "$1" ${out%.mp4}', "${out%.mp4}"), ('gen "$1" ${out:0:3}', "${out:0:3}"), ('gen "$1" ${out[0]}', "${out[0]}"),
    ('gen "$1" ${out:-/tmp/x.mp4}', None), ('gen "$1" ${out:+--out}', None), ('gen "$1" ${out-x}', None),
    ('gen "$1" ${!out*}', None), ('gen "$1" ${x:-$out}', "$out"), ('gen "$1" "a ${out}"', "${out}"),
    ('case $out in *.mp4) gen "$1";; esac', "$out"), ("echo \"$(echo '$out')\"; gen \"$1\"", None),
    # what sets it (refused as never set): +=, an element, printf -v, mapfile, readarray
    ('out+=$1; gen "$out"', None), ('out[0]=$1; gen "$out"', None), ('printf -v out %s "$1"; gen "$out"', None),
    ('mapfile -t out <<< "$1"; gen "$out"', None), ('readarray out <<< "$1"; gen "$out"', None),
    ('f() { local out=$1; gen $out; }; f "$1"', None), ('declare out="$1"; gen "$out"', None),
    ('for out; do gen "$out"; done', None), ('read -a out <<< "$1"; gen "$out"', None),
    # set anywhere in the script: read first on purpose ([ -n "$out" ] || out=$1), a default assigned, a function's
    ('[ -n "$out" ] || out=$1; gen --out "$out"', None), ('test -z "$out" && out=$1; gen "$out"', None),
    (': ${out:=$1}; gen "$out"', None), ('gen "${out=$1}"', None), ('f() { gen "$out"; }; out=$1; f', None)])
def test_the_shell_variable_check_reads_a_script_as_the_shell_does(script: str, refused: str | None) -> None:
    """review91: status88's scanner refused ``$out`` in a comment or a quoted here-document, an ``out+=``,
    ``printf -v out`` or ``mapfile out`` script (all set it), and passed ``${#out}``, ``${out%.mp4}``,
    ``$((out))`` and ``$out`` after an ``it's`` in a here-document (each read it empty). A binding anywhere in the
    script counts: ``[ -n "$out" ] || out=$1`` reads it before setting it on purpose."""
    from pinbench.ops.generation import command_argv

    spec = f"command:bash -c {shlex.quote(script)} bash {{out}}"
    if refused is None:
        assert command_argv(spec)
    else:
        with pytest.raises(RecipeError, match=rf": {re.escape(refused)} inside a bash -c script is the shell's "
                                              r"variable out, which the command never sets"):
            command_argv(spec)


@pytest.mark.parametrize("wrapped", [
    "sudo -E -u me bash -c '{gen}'", "sudo -Eu me --chdir /tmp A=1 -- bash -c '{gen}'", "nice -n 5 bash -c '{gen}'",
    "nice -n -5 bash -c '{gen}'", "nice -5 bash -c '{gen}'", "timeout 1h bash -c '{gen}'",
    "timeout -k 10 --signal=TERM 2.5m bash -c '{gen}'", "nohup bash -c '{gen}'", "stdbuf -oL -e 0 bash -c '{gen}'",
    "ionice -c 3 bash -c '{gen}'", "ionice -c2 -n 7 bash -c '{gen}'", "taskset 0x3 bash -c '{gen}'",
    "taskset -c 0-3,8 bash -c '{gen}'", "chrt -f 10 bash -c '{gen}'", "chrt --sched-runtime 5 -d 0 bash -c '{gen}'",
    "setsid -f bash -c '{gen}'", "/usr/bin/timeout 1h nice -n 5 bash -c '{gen}'",
    "timeout 1h env A=1 sudo -u me nohup stdbuf -oL bash -ec '{gen}'",
    # env takes NAME=VALUE after its "--" (env -- A=1 sh -c 'echo $A' says 1): the shell comes after them
    "env -- A=1 bash -c '{gen}'",
    # a lone "-" as env's first operand is its -i, "--" before it or not (env -- - A=1 sh -c 'echo $A' says 1)
    "env -- - A=1 bash -c '{gen}'", "env -i -- - bash -c '{gen}'",
    # a duration strtod reads (timeout runs them all) and a long option getopt_long knows by a prefix
    "timeout 1e3 bash -c '{gen}'", "timeout inf bash -c '{gen}'", "timeout 0x10 bash -c '{gen}'",
    "timeout --sig KILL 5 bash -c '{gen}'", "nice --adj 5 bash -c '{gen}'", "stdbuf --out L bash -c '{gen}'"])
def test_a_placeholder_inside_a_shell_c_script_behind_a_wrapper_is_refused(wrapped: str) -> None:
    """The refusal of ``{out}`` pasted into a ``bash -c`` script looked through ``env`` alone: behind ``timeout``,
    ``nice`` or ``sudo -u USER`` the script took the path unquoted, and a path with a space broke every sample."""
    from pinbench.ops.generation import command_argv

    with pytest.raises(RecipeError, match=r"^--generator command:.*': \{out\} inside a bash -c script is pasted in"):
        command_argv("command:" + wrapped.format(gen="gen --out {out}"))


def test_a_command_that_does_not_split_is_refused_without_its_secret_flags_value() -> None:
    """An unclosed quote was refused by a line that echoed the whole command, and a --token VALUE in it reached the
    terminal whole: the run keeps a flag's value as a secret only once the command splits (``keep_secret_options``)."""
    from pinbench.ops.generation import command_argv

    with pytest.raises(RecipeError) as caught:
        command_argv("command:gen {request} {out} --token plain-tok-6630 'unclosed")
    assert str(caught.value) == ("--generator command:gen {request} {out} --token *** 'unclosed: No closing quotation "
                                 "(it is split as a shell would split it)")


@pytest.mark.parametrize("command", ["env -S \"bash -c 'gen {out}'\"", "env -S'gen --out {out}'",
                                     "env -iS 'gen {out}'", "env --split-string='gen {out}'",
                                     "env -u B --split 'gen {out}'", "timeout 1h env -S 'gen {out}'"])
def test_a_placeholder_inside_env_s_split_string_is_refused(command: str) -> None:
    """``env -S "bash -c 'gen {out}'"`` was taken: the -S string is no shell's -c script, but env splits it into
    words itself, so a path with a space became two words there too."""
    from pinbench.ops.generation import command_argv

    with pytest.raises(RecipeError) as caught:
        command_argv(f"command:{command}")
    assert str(caught.value) == (f"--generator command:{command}: {{out}} inside env's -S (--split-string) string is "
                                 "split into words by env itself, so a path with a space breaks the command; pass the "
                                 "paths as words after the string: env -S 'gen --request' {request} --out {out}")


@pytest.mark.parametrize("command", ["env A=1 -S \"bash -c 'gen {out}'\"", "env A=1 --split-string='gen {out}'"])
def test_env_s_after_an_assignment_is_the_program_env_runs_not_a_split_string(command: str) -> None:
    """GNU env reads its options up to its first NAME=VALUE (``env A=1 -S 'echo hi'`` says "env: '-S': No such
    file or directory"): the string after it is no -S string env splits, and was refused as one."""
    from pinbench.ops.generation import command_argv

    assert command_argv(f"command:{command}")[-1].endswith("{out}'" if "bash" in command else "{out}")


def test_a_placeholder_after_env_s_split_string_is_taken() -> None:
    """Only the -S string itself is split: a placeholder after it, or the value of env's other options, is one word."""
    from pinbench.ops.generation import command_argv

    assert command_argv('command:env -S "gen --x" {out}') == ["env", "-S", "gen --x", "{out}"]
    assert command_argv("command:env -C /tmp -u A gen {request} {out}")[-2:] == ["{request}", "{out}"]


def test_a_program_behind_a_wrapper_that_is_no_shell_takes_its_placeholders() -> None:
    """Only a shell's script is refused: a program behind the wrappers, or behind a wrapper not known (no guessing
    at its options), takes ``{request}`` and ``{out}`` as whole arguments, even after a ``-c`` of its own."""
    from pinbench.ops.generation import command_argv

    for command in ("timeout 1h nice -n 5 python gen.py -c {request} --out {out}",
                    "sudo -u bash gen -c {out}", "taskset -c 1 ionice -c 3 gen -c {out}",
                    "mywrapper -x bash -c 'gen --out {out}'",
                    # env's lone "-" ends its options: env - -u X sh says "env: '-u': No such file or directory";
                    # after a NAME=VALUE or a first "-" it is the program (env A=1 - sh, env -- - - sh: "'-'")
                    "env - -u X bash -c 'gen --out {out}'", "env A=1 - bash -c 'gen --out {out}'",
                    "env -- - - bash -c 'gen --out {out}'"):
        assert command_argv(f"command:{command}")[-1] in ("{out}", "gen --out {out}")


def test_a_command_generator_keeps_braces_it_does_not_name(tmp_path: Path) -> None:
    """A shell's ``${VAR}``, JSON and a Go template pass as written, ``{{NAME}}`` is a literal ``{NAME}``, and a
    placeholder inside another argument is still filled."""
    from pinbench.ops.generation import GeneratorSpec, _run_command

    script = "import json, sys; open(sys.argv[-1], 'w').write(json.dumps(sys.argv[1:-1]))"
    kept = ["${HOME}", '{"a":{"b":1}}', "{{.Id}}", "{{output}}", "${{x}}", "--out={out}.txt"]
    spec = GeneratorSpec("command:" + shlex.join([sys.executable, "-c", script, *kept, "{out}"]))
    out = tmp_path / "out.mp4"
    _run_command(spec.command, _request(), out, 60, tmp_path / "log", tmp_path)
    assert json.loads(out.read_text()) == ["${HOME}", '{"a":{"b":1}}', "{{.Id}}", "{output}", "${x}",
                                           f"--out={out}.txt"]


CLOBBER = '''
import shutil
from pinbench.ops.generators import Static

class Clobber(Static):
    def generate(self, request, out):
        super().generate(request, out)
        for kept in out.parent.glob("[!.]*.mp4"):   # a valid rollout written over every one kept before it
            shutil.copyfile(out, kept)

def make():
    return Clobber()
'''


def test_a_generator_that_writes_over_a_kept_rollout_fails_that_sample_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another request's generation copied its rollout over one already checked and kept: that sample fails by name
    (it was scored as ok, the other request's rollout in its place); its stored record is left for the next run to
    find the file changed."""
    (tmp_path / "clobber_generator.py").write_text(CLOBBER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    outcome = _run(tmp_path / "run", "python:clobber_generator:make")
    records = load_records(tmp_path / "run" / "generation")
    card = json.loads(outcome.scorecard_path.read_text())
    failed = {f["sample_id"]: f["error"] for m in card["metrics"].values() for f in m["failed"]}
    assert len(records) >= 2 and outcome.exit_code == 2
    assert len(failed) == len(records) - 1, failed   # every one but the last written over
    # a file there, not the one kept: said as an invalid rollout (it was "no rollout: GeneratorError: ...")
    assert all(re.fullmatch(r"invalid rollout: edge/task_\d{4}\.mp4: changed after it was checked and kept \(.*\)", why)
               for why in failed.values()), failed


_CHATTY = """
import sys
from pinbench.core.generation import KINDS, ROLES, Capabilities, Signature


class Chatty:
    capabilities = Capabilities(kinds=frozenset(KINDS), prompt_schedule=True, conditioning=frozenset(ROLES))

    def signature(self):
        return Signature(model="chatty", weights="none", settings={})

    def generate(self, request, out):
        print("loading the model", file=sys.stderr, flush=True)


def make():
    return Chatty()
"""


@pytest.mark.parametrize("form", ["python", "command"])
def test_the_generator_log_says_which_request_each_line_is_of(form: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed sample points at the generator's log, where a command's output, and a factory's prints, ran one
    request after another with nothing between them: in 600 requests' lines nobody could find the failed one's."""
    from pinbench.ops.generation import Worker, _run_command

    (tmp_path / "chatty.py").write_text(_CHATTY)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    log, out = tmp_path / "generator.log", tmp_path / "out.mp4"
    requests = [_request(id="t2v-000"), _request(id="t2v-001")]
    if form == "python":
        worker = Worker("chatty:make", {}, log)
        try:
            for request in requests:
                worker.generate(request, out, 30)
        finally:
            worker.stop()
    else:
        for request in requests:
            _run_command([sys.executable, "-c", "import chatty; chatty.make().generate(None, None)", "{out}"], request,
                         out,
                         30, log, tmp_path)
    assert log.read_text().splitlines() == ["--- generating 't2v-000' ---", "loading the model",
                                            "--- generating 't2v-001' ---", "loading the model"]


def test_starting_a_generator_is_announced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Its process's imports and its model's load were silent in a log (CI: stderr to a file) until the first
    rollout's line; with the notice delay at 0 every notice is said."""
    from pinbench.ops.generation import Worker

    (tmp_path / "chatty.py").write_text(_CHATTY)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("PINBENCH_NOTICE_S", "0")
    log = tmp_path / "generator.log"
    worker = Worker("chatty:make", {}, log)
    try:
        worker.start()
    finally:
        worker.stop()
    said = capsys.readouterr().err.splitlines()
    what = f"generate: starting generator chatty:make (its process imports it and makes it; log: {log})"
    assert said[0] == f"{what} ..." and said[1].startswith(f"{what}: done in "), said

_LEAKY = '''
import os, sys
from pinbench.core.generation import KINDS, ROLES, Capabilities, Signature


class Leaky:
    capabilities = Capabilities(kinds=frozenset(KINDS), prompt_schedule=True, conditioning=frozenset(ROLES))

    def signature(self):
        return Signature(model="leaky", weights="none", settings={})

    def generate(self, request, out):
        print("logged in with", os.environ["HF_TOKEN"], flush=True)
        print("stderr too:", os.environ["HF_TOKEN"], file=sys.stderr, flush=True)
        os.write(2, b"raw fd: " + os.environ["HF_TOKEN"].encode() + b"\\n")


def make():
    return Leaky()
'''


@pytest.mark.parametrize("form", ["python", "command"])
def test_a_token_a_generator_prints_never_reaches_its_log(form: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A generator prints what it likes (a library logging its login, say): the run's generator log keeps its lines,
    the token of a secret-named variable redacted, from print, stderr and the raw file descriptor alike."""
    from pinbench.ops.generation import Worker, _run_command

    token = "hf_" + "Zq9" * 12
    monkeypatch.setenv("HF_TOKEN", token)
    (tmp_path / "leaky.py").write_text(_LEAKY)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    log, out = tmp_path / "generator.log", tmp_path / "out.mp4"
    if form == "python":
        worker = Worker("leaky:make", {}, log)
        worker.start()
        try:
            worker.generate(_request(), out, 30)
        finally:
            worker.stop()
    else:
        script = tmp_path / "leaky_command.py"
        script.write_text(f"{_LEAKY}\nmake().generate(None, None)\n")
        _run_command([sys.executable, str(script), "{out}"], _request(), out, 30, log, tmp_path)
    text = log.read_text()
    assert token not in text and "Zq9Zq9" not in text
    assert "logged in with ***" in text and "stderr too: ***" in text and "raw fd: ***" in text


def test_a_fixture_run_with_a_generator_is_judged_against_no_reference_by_check_diff_and_view(tmp_path: Path) -> None:
    """The run says a fixture's reference does not apply to rollouts a --generator made (it scores the fixture's
    own); check, diff and the view must read the run directory the same way, not FAIL a run nobody touched."""
    from typer.testing import CliRunner

    from pinbench.cli import app
    from pinbench.core.check import check_run
    from pinbench.results.view import _reference_rows

    outcome = _run(tmp_path / "run", RENDER)
    assert outcome.exit_code == 0, outcome.message
    assert get_recipe("paibench-c").reference_path("fixture", "fixture") is not None   # one exists, and is not ours
    assert "result: " not in (tmp_path / "run" / "diff.txt").read_text()
    assert check_run(tmp_path / "run").problems == []
    result = CliRunner().invoke(app, ["diff", str(tmp_path / "run")])
    why = f"none: the fixture's reference scores its own rollouts, not those {RENDER} made"   # a reference exists
    assert why in (tmp_path / "run" / "diff.txt").read_text()
    assert result.exit_code == 0 and why in result.output, result.output
    assert any(why.removeprefix("none: ") in note for note in check_run(tmp_path / "run").notes)
    from pinbench.results.compare import load_run

    assert _reference_rows(load_run(outcome.scorecard_path))[0] == "NO REFERENCE"


def test_a_token_given_to_a_command_generator_is_in_no_file_of_the_run(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A token passed as a -g option (a secret-named key, or the value of HF_TOKEN) or in the argv keys the
    generator's signature, but no file the run writes holds it: not the scorecard, not generation/generator.json,
    not a log, not diff.txt (whose line on the fixture's reference named the --generator as given)."""
    token, other = "hf_" + "Qw7" * 12, "Kp4" * 12
    monkeypatch.setenv("HF_TOKEN", token)
    command = (f"command:env HF_TOKEN={token} {sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} "
               "--out {out}")
    outcome = _run(tmp_path / "run", command, weights=token, api_key=other)
    assert outcome.exit_code == 0, outcome.message
    holding = [p for p in (tmp_path / "run").rglob("*") if p.is_file() and not p.is_symlink()
               and (token.encode() in p.read_bytes() or other.encode() in p.read_bytes())]
    assert holding == []



DYING = """
import os, signal
from pinbench.core.generation import Capabilities, Signature

class Dying:
    capabilities = Capabilities(kinds=frozenset({"prompt-schedule"}))

    def __init__(self, how):
        self.how = how

    def signature(self):
        return Signature(model="dying", weights="none")

    def generate(self, request, out):
        os.kill(os.getpid(), signal.SIGKILL) if self.how == "kill" else os._exit(3)
"""


@pytest.mark.parametrize("form", ["python", "command"])
def test_a_generator_killed_by_a_signal_or_exiting_is_named_with_its_signal_or_status(
        form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generator killed by SIGKILL (the out-of-memory killer's signal) says so by name, in both forms (the command
    form said 'exited 247', the python form only 'ended'); one that exits says its status."""
    from pinbench.ops.generation import GeneratorError, Worker, _run_command

    (tmp_path / "dying.py").write_text(DYING)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    log, out = tmp_path / "generator.log", tmp_path / "out.mp4"
    for how, said in (("kill", "was killed by SIGKILL (out of memory?)"), ("exit", "exited 3")):
        with pytest.raises(GeneratorError) as caught:
            if form == "command":
                script = f"import dying; dying.Dying({how!r}).generate(None, None)"
                _run_command([sys.executable, "-c", script], _request(), out, 60, log, tmp_path)
            else:
                worker = Worker("dying:Dying", {"how": how}, log)
                try:
                    worker.generate(_request(), out, 60)
                finally:
                    worker.stop()
        assert said in str(caught.value), str(caught.value)


RAISING = """
from pinbench.core.generation import Capabilities, Signature


class Raising:
    capabilities = Capabilities(kinds=frozenset({"prompt-schedule"}))

    def __init__(self, token):
        self.token = token

    def signature(self):
        return Signature(model="raising", weights="none")

    def generate(self, request, out):
        raise RuntimeError(f"out of memory with token {self.token}")


def broken():
    raise ValueError("no weights at /ckpt")
"""


def test_a_python_generator_that_raises_leaves_its_traceback_in_the_log(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The sample fails with the exception's one line; where in the user's code it was raised is in the
    generator's log, under the request's id, redacted (it was nowhere: the record's traceback is pinbench's own,
    of the parent reading the child's answer). A factory that raises stops the run in one line naming the log,
    which holds its traceback."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import GeneratorError, Worker

    (tmp_path / "raising.py").write_text(RAISING)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    log, token = tmp_path / "generator.log", "hf_" + "abcdefghijklmnopqrstuvwxyzABCDEF12"
    worker = Worker("raising:Raising", {"token": token}, log)
    try:
        with pytest.raises(GeneratorError, match="^RuntimeError: out of memory with token") as caught:
            worker.generate(_request(), tmp_path / "out.mp4", 60)
        assert str(caught.value).endswith(f" (traceback: {log})")   # the sample's line names where the traceback is
    finally:
        worker.stop()
    said = log.read_text()
    assert "generating 't2v-000' raised:" in said and "Traceback (most recent call last)" in said, said
    assert f'File "{tmp_path / "raising.py"}", line 15, in generate' in said, said
    assert token not in said

    log = tmp_path / "broken.log"
    with pytest.raises(RecipeError) as caught:
        Worker("raising:broken", {}, log).start()
    assert str(caught.value) == f"generator raising:broken: ValueError: no weights at /ckpt (traceback: {log})"
    said = log.read_text()
    assert said.startswith("making generator raising:broken raised:\nTraceback (most recent call last)"), said
    assert f'File "{tmp_path / "raising.py"}", line 19, in broken' in said, said


COLOURED = """
from pinbench.core.generation import KINDS, Capabilities, Signature


class Coloured:
    capabilities = Capabilities(kinds=frozenset(KINDS), prompt_schedule=True)

    def signature(self):
        return Signature("coloured", "none")

    def generate(self, request, out):
        raise RuntimeError("\\x1b[1;31mCUDA\\x1b[0m out of memory\\x1b[K")


def broken():
    raise ValueError("\\x1b[31mno weights\\x1b[0m at /ckpt")
"""


def test_a_python_generators_coloured_exception_is_named_without_its_colour_codes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python generator's exception (rich, loguru: coloured) kept its escape codes in the sample's reason and the
    run's error line, where a command's last line lost them (``provenance.one_line`` for both)."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import GeneratorError, Worker

    (tmp_path / "coloured.py").write_text(COLOURED)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    log = tmp_path / "generator.log"
    worker = Worker("coloured:Coloured", {}, log)
    try:
        with pytest.raises(GeneratorError) as caught:
            worker.generate(_request(), tmp_path / "out.mp4", 60)
    finally:
        worker.stop()
    assert str(caught.value) == f"RuntimeError: CUDA out of memory (traceback: {log})"
    with pytest.raises(RecipeError) as made:
        Worker("coloured:broken", {}, tmp_path / "broken.log").start()
    assert str(made.value) == (f"generator coloured:broken: ValueError: no weights at /ckpt (traceback: "
                               f"{tmp_path / 'broken.log'})")


def test_skip_generation_fails_a_rollout_made_for_another_request(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A stored rollout of the right shape whose record was made for another request (its inputs changed since)
    is not what this request asks: its sample fails, naming why (it was checked for its shape alone, and scored)."""
    from pinbench.core.runner import SampleRecord
    from pinbench.ops.generation import CHECKED_FILE, _Checked, _not_as_asked

    request = _request(frames=3, width=16, height=16, conditioning=())
    checked = _Checked(tmp_path / CHECKED_FILE, [request])
    Render().generate(request, tmp_path / request.output)
    old = {"output": request.output, "sha256": "0" * 64, "request": "f" * 64, "generator": "g", "seed": None}
    record = SampleRecord(request.id, "ok", old, None, "h", 0.1)
    said = _not_as_asked([request], tmp_path, {request.id: record}, checked)
    assert said == {request.id: "t2v-000.mp4 was made for another request (its inputs or options changed since); "
                                "generate it again without --skip-generation"}
    assert _not_as_asked([request], tmp_path, {request.id: SampleRecord(
        request.id, "ok", {**old, "request": request.digest, "sha256": _sha(tmp_path / request.output)}, None, "h",
        0.1)}, checked) == {}
    capsys.readouterr()


def test_a_missing_or_unknown_generator_option_is_named_as_an_option() -> None:
    """-g options that the factory does not take, or a required one not given, are named as -g options with what it
    takes (they were a Python TypeError: 'Diffusers.__init__() missing 2 required positional arguments')."""
    from pinbench.core.config import RecipeError
    from pinbench.ops.generation import build

    with pytest.raises(RecipeError) as caught:
        build("pinbench.ops.generators:diffusers", {"steps": "4"})
    assert str(caught.value) == ("generator pinbench.ops.generators:diffusers: give -g model=, -g weights_sha256= "
                                 "(it takes model=, weights_sha256=, [steps=], [guidance=], [pipeline=], [device=])")
    with pytest.raises(RecipeError) as caught:
        build("pinbench.ops.generators:static", {"foo": "1"})
    said = "generator pinbench.ops.generators:static: -g foo: not its option (it takes no -g option)"
    assert str(caught.value) == said


FACTORIES = """
import functools

def make(crash_on="", *, seed):
    return None

class Crashy:
    def __init__(self, crash_on=""):
        pass

class Inherited(Crashy):
    pass

def make_kw(**options):
    return Crashy(**options)

@functools.cache
def cached(crash_on=""):
    return None

def rebound(crash_on=""):
    return None

rebound = functools.partial(make_kw, seed=0)
"""


@pytest.mark.parametrize(("factory", "options", "said"), [
    ("make", {"craash_on": "1", "seed": "0"}, "-g craash_on: not its option (it takes [crash_on=], seed=)"),
    ("make", {}, "give -g seed= (it takes [crash_on=], seed=)"),
    ("Crashy", {"craash_on": "1"}, "-g craash_on: not its option (it takes [crash_on=])"),
    ("Crashy", {"crash_on": "1"}, None),
    ("Inherited", {"craash_on": "1"}, None),   # its __init__ is elsewhere: the worker checks it
    ("make_kw", {"craash_on": "1"}, None),   # **options: only the call can tell
    ("cached", {"craash_on": "1"}, None),   # a decorator may change what it takes
    ("absent", {"craash_on": "1"}, None),   # the worker's import names it
    ("rebound", {"seed": "1"}, None),   # bound again below its def: the def does not say what the worker gets
], ids=["def", "def-missing", "class", "class-ok", "inherited", "kwargs", "decorated", "absent", "rebound"])
def test_a_misspelt_generator_option_is_named_before_the_run_starts(
        factory: str, options: dict[str, str], said: str | None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``-g craash_on=1`` for a factory taking ``crash_on`` was named by the worker, after the recipe's code was
    imported and its data built (10-18 s), and the run had claimed --out: the factory's source, read without
    importing it, refuses it at once, where the source says for certain what the factory takes."""
    from pinbench.ops.generation import check_factory_source

    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "__init__.py").write_text("raise RuntimeError('a package is not imported to read it')\n")
    (tmp_path / "lab" / "adapter.py").write_text(FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    if said is None:
        check_factory_source(f"lab.adapter:{factory}", options, "mine")
        return
    with pytest.raises(RecipeError) as caught:
        check_factory_source(f"lab.adapter:{factory}", options, "mine")
    assert str(caught.value) == f"generator mine: {said}"
    cfg = get_recipe("paibench-c").config(fixture=True, out_dir=tmp_path / "run", offline=True, env={},
                                          generator=f"python:lab.adapter:{factory}", generator_options=options)
    with pytest.raises(RecipeError, match=f"^generator python:lab.adapter:{factory}: {re.escape(said)}$"):
        run_recipe(cfg)
    assert not (tmp_path / "run").exists()   # refused before the run claimed its folder


def test_check_notes_the_partial_rollouts_a_killed_run_left(tmp_path: Path) -> None:
    """A run killed while making rollouts leaves each hidden ``.<stem>.partial<suffix>`` in rollouts/ (a run killed
    mid-rollout left one of 300 kB): pinbench check said nothing of them, though they take disk. A rerun that makes
    the rollout removes it (seen); a note says how many and their size."""
    from pinbench.core.check import check_run
    from pinbench.ops.generation import _partial

    rollouts = tmp_path / "run" / "rollouts"
    left = [_partial(rollouts, _request(output=output))
            for output in ("edge/t2v-000.mp4", "late/" + "x" * 250 + ".mp4")]
    for number, path in enumerate(left):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * 1000 * (number + 1))
    (rollouts / "edge" / ".notes.txt").write_text("mine")   # hidden, but no partial rollout
    notes = check_run(tmp_path / "run").notes
    assert notes == [f"{rollouts}: 2 hidden partial rollouts (3.0 kB; e.g. rollouts/edge/.t2v-000.partial.mp4): "
                     "what a run killed while making rollouts leaves, never scored; the next run that generates "
                     "alone in this folder removes them, or delete them"]


def test_a_rerun_alone_in_its_run_removes_the_partial_rollouts_a_killed_run_left(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A partial rollout of a sample the rerun no longer asks (a smaller --limit, fewer modalities) was never made
    again, so never removed: a run alone in its folder removes every one (no run reads a partial it did not just
    make); while another shard runs, each may be that shard's rollout in the making, and all stay. So do the
    request files of a command generator a killed run left (``REQUEST_FILES``), which ``pinbench check`` leaves
    unnamed."""
    from pinbench.core.check import check_run
    from pinbench.core.config import Shard
    from pinbench.core.rundir import LOCK_DIR

    out = tmp_path / "run"
    (out / "rollouts" / "blur").mkdir(parents=True)
    request_file = out / "generation" / ".requests" / "request-killed" / "request.json"
    request_file.parent.mkdir(parents=True)
    request_file.write_text("{}")
    left = [out / "rollouts" / "blur" / ".task_0000.partial.mp4", out / "rollouts" / ".edge.partial"]
    left[0].write_bytes(b"\0" * 100)
    left[1].mkdir()   # a generator left a folder there
    (out / "rollouts" / "blur" / ".notes.txt").write_text("mine")   # hidden, no partial rollout
    (out / LOCK_DIR).mkdir()
    (out / LOCK_DIR / "shard-0-of-2.lock").write_text(json.dumps(
        {"pid": os.getppid(), "host": socket.gethostname(), "started": "2026-01-01T00:00:00Z", "shard": "0/2",
         "token": "x", "argv": ["pinbench", "run"]}))
    recipe = get_recipe("paibench-c")
    sharded = run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, options={"modalities": "edge"},
                                       generator=RENDER, env={}, shard=Shard(1, 2), skip_scoring=True))
    assert sharded.exit_code == 0, sharded.message
    assert all(path.exists() for path in left) and request_file.exists()
    (out / LOCK_DIR / "shard-0-of-2.lock").unlink()
    capfd.readouterr()
    assert _run(out, RENDER).exit_code == 0
    assert not any(os.path.lexists(path) for path in left)
    assert not os.path.lexists(request_file.parent.parent)
    request_file.parent.mkdir(parents=True)
    request_file.write_text("{}")
    assert check_run(out).problems == []
    assert (out / "rollouts" / "blur" / ".notes.txt").read_text() == "mine"
    assert f"generate: removed 2 hidden partial rollouts that a killed run left in {out / 'rollouts'}" \
        in capfd.readouterr().err


def test_an_option_a_kwargs_factory_passes_on_is_named_as_an_option(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``make(**options)`` passing ``-g craash_on=1`` on to a class: its source cannot tell, and the worker said only
    "TypeError: Crashy.__init__() got an unexpected keyword argument 'craash_on'"."""
    from pinbench.ops.generation import build

    (tmp_path / "kwfactory.py").write_text(FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RecipeError) as caught:
        build("kwfactory:make_kw", {"craash_on": "1"})
    assert str(caught.value) == ("generator kwfactory:make_kw: -g craash_on: not its option: TypeError: "
                                 "Crashy.__init__() got an unexpected keyword argument 'craash_on'")


def test_a_misspelt_option_of_a_kwargs_factory_fails_the_rerun_in_one_line_and_keeps_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """``make(**options)`` takes any key, so ``-g veersion=2`` cannot be refused before the run claims --out (its
    signature does not say): the worker's failure names the option and the factory in one line, and the run's
    rollouts and scorecard stay as they were, reused by the corrected rerun."""
    (tmp_path / "kwgen.py").write_text("from render_generator import Render\n\n\n"
                                       "def make(**options):\n    return Render(**options)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    out = tmp_path / "run"
    assert _run(out, "python:kwgen:make", version="2").exit_code == 0
    kept = {path: path.read_bytes() for path in [out / "scorecard.json", *(out / "rollouts").rglob("*.mp4")]}
    with pytest.raises(RecipeError) as caught:
        _run(out, "python:kwgen:make", veersion="2")
    assert str(caught.value) == ("generator python:kwgen:make: -g veersion: not its option: TypeError: Render.__init__"
                                 "() got an unexpected keyword argument 'veersion' (traceback: "
                                 f"{out / 'generation' / 'generator.log'})")
    assert len(kept) == 5 and {path: path.read_bytes() for path in kept} == kept
    capfd.readouterr()
    assert _run(out, "python:kwgen:make", version="2").exit_code == 0
    assert "generate: 4 samples: 0 done, 4 reused, 0 failed" in capfd.readouterr().err


def test_an_unknown_generator_is_refused_before_the_run_starts(tmp_path: Path) -> None:
    """``--generator my-wrld-model`` was refused after the recipe's code was imported and its data built (10 s),
    leaving pinbench-run.json, rollouts/ and generation/ in --out."""
    cfg = get_recipe("paibench-c").config(fixture=True, out_dir=tmp_path / "run", offline=True, env={},
                                          generator="my-wrld-model")
    with pytest.raises(RecipeError, match="^--generator my-wrld-model: not a known generator"):
        run_recipe(cfg)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("factory", ["in_place", "in_place_batch"])
def test_a_generator_that_writes_its_rollout_in_place_of_out_is_told_to_write_to_out(tmp_path: Path,
                                                                                      factory: str) -> None:
    """A generator that wrote ``request.output`` itself (where the run keeps it) rather than to the ``out`` it was
    given failed with "the generator wrote nothing there", beside the very file it had written; one that
    did so in a batch (``generate_batch``) is told the same."""
    outcome = _run(tmp_path / "run", f"python:render_generator:{factory}")
    assert outcome.exit_code == 2
    records = load_records(tmp_path / "run" / "generation")
    assert records and not any(r.ok for r in records.values())
    for record in records.values():
        output = f"edge/{record.sample_id.partition('.')[2]}.mp4"
        assert (f"invalid rollout: {output}: the generator wrote nothing to the path it was given "
                f"(.{Path(output).stem}.partial.mp4) but wrote {output} itself: write the rollout to that path "
                "(generate's out, a command's {out})") in record.error, record.error


DESCRIBED = """
import math
from pinbench.core.generation import Capabilities, Signature


class Described:
    def __init__(self, mode):
        self.mode = mode
        kinds = {1} if mode == "kinds" else {"prompt-schedule"}
        self.capabilities = Capabilities(kinds=frozenset(kinds))

    def signature(self):
        if self.mode == "raises":
            raise RuntimeError("weights not found")
        settings = {"set": {"a": {1}}, "nan": {"a": math.nan}, "factory": {"factory": "euler"}}.get(self.mode, {})
        return {"model": "m"} if self.mode == "dict" else Signature("m", "w", settings)

    def generate(self, request, out):
        pass


def make(mode):
    return Described(mode)
"""


@pytest.mark.parametrize(("mode", "said"), [
    ("set", "its signature() settings are not JSON data (Object of type set is not JSON serializable;"),
    ("nan", "its signature() settings are not JSON data (Out of range float values are not JSON compliant;"),
    ("dict", "signature() gave {'model': 'm'}, not a Signature(model: str, weights: str, settings: a mapping)"),
    ("kinds", "capabilities Capabilities(kinds=frozenset({1}), "),
    ("raises", "RuntimeError: weights not found (traceback: "),
    ("factory", "its signature() settings hold 'factory', which the run sets itself (its -g options, module "
                "digests and factory): name that setting otherwise"),
])
def test_a_generator_that_describes_itself_wrongly_is_named_in_one_line(
        mode: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A signature() that is no Signature, holds a set or NaN, raises, or capabilities of kinds that are no strings:
    the run ended in a bare 'TypeError: ...', 'Out of range float values are not JSON compliant' or a traceback,
    naming no generator. Settings under a key the run sets (``factory``) lost their value to the run's, and two
    generators that differed there alone shared their rollouts."""
    from pinbench.ops.generation import Worker

    (tmp_path / "described.py").write_text(DESCRIBED)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    with pytest.raises(RecipeError) as caught:
        Worker("described:make", {"mode": mode}, tmp_path / "generator.log").start()
    assert str(caught.value).startswith(f"generator described:make: {said}") and "\n" not in str(caught.value)


ASKS = """
from pinbench.ops.generators import Static


class Asks(Static):
    def generate(self, request, out):
        if input("Do you wish to run the custom code? [y/N] ") != "y":
            raise SystemExit("not trusted")


def make():
    return Asks()
"""


def test_a_python_generator_that_asks_a_question_reads_an_end_of_file(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Its stdin was the pipe of the requests: input() waited there for the whole time limit (three hours by
    default), and the sample failed as a timeout. Now it reads an end of file at once, as a command's does."""
    from pinbench.ops.generation import GeneratorError, Worker

    (tmp_path / "asks.py").write_text(ASKS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    worker = Worker("asks:make", {}, tmp_path / "generator.log")
    try:
        worker.start()
        with pytest.raises(GeneratorError, match=r"^EOFError: EOF when reading a line \(traceback: "):
            worker.generate(_request(), tmp_path / "t2v-000.mp4", timeout_s=60.0)
        with pytest.raises(GeneratorError, match="^EOFError"):   # and the next request is served as well
            worker.generate(_request(id="t2v-001"), tmp_path / "t2v-001.mp4", timeout_s=60.0)
    finally:
        worker.stop()


def test_a_factory_module_not_on_the_path_says_how_to_put_it_there(tmp_path: Path, monkeypatch) -> None:
    """The first thing a new adapter meets ('No module named mygen': its folder is not on PYTHONPATH) says the way
    on; a module that is found but misses one of its own imports says only that."""
    from pinbench.ops.generation import build

    with pytest.raises(RecipeError) as caught:
        build("no_such_adapter.sub:make", {})
    assert str(caught.value) == ("generator no_such_adapter.sub:make: ModuleNotFoundError: No module named "
                                 "'no_such_adapter': put the folder that holds it on PYTHONPATH "
                                 "(PYTHONPATH=DIR pinbench run ...), or install its package")
    (tmp_path / "needs_more.py").write_text("import no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RecipeError) as caught:
        build("needs_more:make", {})
    assert str(caught.value) == ("generator needs_more:make: ModuleNotFoundError: No module named "
                                 "'no_such_dependency'")


@pytest.mark.parametrize(("given", "way_on"), [
    ("python:/tmp/my-lab/mygen.py:make", "--generator python:mygen:make with its folder on PYTHONPATH "
                                         "(PYTHONPATH=/tmp/my-lab pinbench run ...)"),
    ("python:adapters/mygen:make", "--generator python:mygen:make with its folder on PYTHONPATH "
                                   "(PYTHONPATH=adapters pinbench run ...)"),
    ("python:mygen.py:make", "--generator python:mygen:make with its folder on PYTHONPATH (PYTHONPATH=. "
                             "pinbench run ...)"),
], ids=["absolute", "relative", "file name"])
def test_a_python_generator_named_by_its_file_says_to_name_its_module(given: str, way_on: str) -> None:
    """``python:/tmp/my-lab/mygen.py:make`` (the file, as a new user writes it) failed in the worker with
    "No module named '/tmp/my-lab/mygen'" and the advice to put that folder on PYTHONPATH, which did not help."""
    from pinbench.ops.generation import factory_path

    with pytest.raises(RecipeError) as caught:
        factory_path(given, None)
    assert str(caught.value) == f"--generator {given}: python: takes a module's name, not a file: {way_on}"


@pytest.mark.parametrize(("given", "named"), [
    (["diffusers", "-g", "steps=4"], "generator diffusers (pinbench.ops.generators:diffusers): give -g model="),
    (["python:pinbench.ops.generators:static", "-g", "foo=1"], "generator python:pinbench.ops.generators:static: -g "
                                                                "foo: not its option"),
], ids=["named", "python"])
def test_a_generator_that_cannot_be_made_is_named_as_it_was_given(given: list[str], named: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``--generator diffusers`` that could not be made was named ``generator pinbench.ops.generators:diffusers``,
    a name the user never typed."""
    from pinbench.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["run", "paibench-c", "--fixture", "--out", str(tmp_path / "run"), "--generator", *given])
    said = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and said[-1].startswith(f"error: {named}"), said


@pytest.mark.parametrize(("given", "said"), [
    (["command:true {out}", "-g", "prompt_schedule=maybe"], "-g prompt_schedule: 'maybe' is not a boolean"),
    (["command:true {out}", "-g", "max_frames=x"], "-g max_frames: 'x' is not a whole number"),
    (["static", "-g", "foo=1"], "generator static (pinbench.ops.generators:static): -g foo: not its option"),
    (["folder", "-g", "dir=.", "-g", "foo=1"], "generator folder (pinbench.ops.generators:folder): -g foo: not its "
                                               "option"),
], ids=["command boolean", "command number", "static unknown", "folder unknown"])
def test_a_bad_generator_option_is_refused_before_anything_is_written(given: list[str], said: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A command's ``-g prompt_schedule=maybe`` and a shipped factory's unknown option were refused only once the
    fixture's data was built in the run directory (the check of a factory's source did not find pinbench's own
    modules through its editable install, and passed over ``folder = Folder``)."""
    from pinbench.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["run", "paibench-c", "--fixture", "--out", str(tmp_path / "run"), "--generator", *given])
    lines = capsys.readouterr().err.strip().splitlines()
    assert exited.value.code == 2 and lines[-1].startswith(f"error: {said}"), lines
    assert not (tmp_path / "run").exists()


def test_a_generation_only_run_says_why_each_failed_sample_failed(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """--skip-scoring writes no scorecard or failures.tsv, so its last lines name each failed sample's reason (it
    named the samples alone: the reason was only in generation/samples/)."""
    recipe = get_recipe("paibench-c")
    cfg = recipe.config(fixture=True, out_dir=tmp_path / "run", offline=True, generator=RENDER,
                        generator_options={"mode": "frames"}, skip_scoring=True, env={})
    outcome = run_recipe(cfg)
    assert outcome.exit_code == 2 and outcome.scorecard_path is None
    said = capsys.readouterr().out.splitlines()
    failed = [line for line in said if "10 frames, the request asks 9" in line and "by reason" not in line]
    assert len(failed) == 5 and said[-2:] == ["  ... and 11 more",
                                              "result: INCOMPLETE (exit 2): stopped before the diff"], said[-8:]
    assert ("  by reason: 16 x invalid rollout: <file>: 10 frames, the request asks 9 (kept to look at under "
            "<file>)") in said, said
    assert failed[0].startswith("  edge.task_0000: invalid rollout: "), failed[0]
    # what is stored, said as it is (it said "generation stored; scoring is a later run's" of 16 failures)
    ended = [line for line in said if line.startswith("paibench-c: 16 samples: 0 done, 0 reused, 16 failed (")]
    assert len(ended) == 1 and ended[0].endswith(", ...); no rollout made: 16 failures stored, nothing to score")


def test_a_failed_command_generator_is_named_with_the_last_line_it_printed(tmp_path: Path) -> None:
    """A command that exits non-zero fails its sample with the last line it printed (its error, redacted), not only
    its status and the log's path (a misspelt script path said 'exited 2' and nothing more)."""
    from pinbench.ops.generation import GeneratorError, _run_command

    token = "hf_" + "abcdefghijklmnopqrstuvwxyzABCDEF12"
    script = f"import sys; print('loading'); sys.exit('no checkpoint at /ckpt/model.pt (token {token})\\n')"
    with pytest.raises(GeneratorError) as caught:
        _run_command([sys.executable, "-c", script], _request(), tmp_path / "out.mp4", 60, tmp_path / "log",
                     tmp_path)
    said = str(caught.value)
    assert said.startswith("the generator exited 1: no checkpoint at /ckpt/model.pt (token "), said
    assert token not in said and token not in (tmp_path / "log").read_text()


def test_a_commands_prompt_schedule_option_is_a_yes_or_no_and_anything_else_is_refused() -> None:
    """``-g prompt_schedule=`` took anything but 0, false and no for yes: ``False``, ``off`` or ``NO`` declared a
    command that follows a schedule of several prompts, which then got schedules it reads the first prompt of."""
    from pinbench.ops.generation import command_capabilities

    for no in ("0", "false", "False", "no", "NO", "off"):
        assert not command_capabilities({"prompt_schedule": no}).prompt_schedule, no
    for yes in ("1", "true", "True", "yes", "on"):
        assert command_capabilities({"prompt_schedule": yes}).prompt_schedule, yes
    assert command_capabilities({}).prompt_schedule
    with pytest.raises(RecipeError, match=r"^-g prompt_schedule: '2' is not a boolean \(1/0, true/false, yes/no, "
                                          r"on/off\)$"):
        command_capabilities({"prompt_schedule": "2"})


def test_a_commands_max_frames_below_one_is_refused_saying_how_to_ask_no_limit() -> None:
    """``-g max_frames=-1`` (a common "no limit") or ``0`` was taken, and every request was then refused, after the
    fixture's data was built, as "it makes at most -1 frames"."""
    from pinbench.ops.generation import command_capabilities

    for bad in ("-1", "0"):
        with pytest.raises(RecipeError, match=rf"^-g max_frames: '{bad}' is not a whole number of 1 or more \(leave "
                                              r"it out for no limit\)$"):
            command_capabilities({"max_frames": bad})
    assert command_capabilities({"max_frames": "1"}).max_frames == 1


def test_a_failed_command_generators_coloured_last_line_is_named_without_its_colour_codes(tmp_path: Path) -> None:
    """A logger that colours its errors (loguru, rich): the sample's reason held its escape codes, which the run's
    ending wrote to the terminal as they are and failures.tsv and the scorecard kept (``\\x1b[31m...``). The log
    keeps what was printed."""
    from pinbench.ops.generation import GeneratorError, _run_command

    script = "import sys; print('\\x1b[1;31mERROR\\x1b[0m | out of memory\\x1b[K'); sys.exit(1)"
    with pytest.raises(GeneratorError) as caught:
        _run_command([sys.executable, "-c", script, "{out}"], _request(), tmp_path / "out.mp4", 60, tmp_path / "log",
                     tmp_path)
    assert str(caught.value) == f"the generator exited 1: ERROR | out of memory (log: {tmp_path / 'log'})"
    assert "\x1b[1;31mERROR" in (tmp_path / "log").read_text()


def test_a_change_to_the_recipes_code_keeps_the_rollouts_and_scores_them_again(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Generation records are keyed by their request, the generator's signature and the image, not by the recipe's
    code: another code digest (a scoring fix) had made every rollout again ("4 recomputed: code changed"), the
    GPU-days of a full run."""
    import dataclasses

    out, calls = tmp_path / "run", tmp_path / "calls"
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4
    cfg = get_recipe("paibench-c").config(fixture=True, out_dir=out, offline=True, options={"modalities": "edge"},
                                          generator=RENDER, generator_options={"calls": str(calls)}, env={}, gpus=1)
    assert cfg.implementation is not None
    cfg.implementation = dataclasses.replace(cfg.implementation, code="0" * 64)
    capfd.readouterr()
    again = run_recipe(cfg)
    err = capfd.readouterr().err
    assert again.exit_code == 0 and len(_calls(calls)) == 4, err
    assert "generate: 4 samples: 0 done, 4 reused, 0 failed" in err
    assert "recomputed: code changed" in err   # the scoring: the recipe's code computes it


def test_the_recipes_own_generator_is_keyed_by_its_module_file(tmp_path: Path) -> None:
    """The rollouts of a recipe's own generator (a fixture's test double here, PAI-Bench-C's cosmos3 at full size)
    are keyed by its module file, as a --generator's are: its code is no longer in their records' implementation."""
    import importlib
    import inspect

    from pinbench.ops.generation import SOURCE_KEY

    recipe = get_recipe("paibench-c")
    run = run_recipe(recipe.config(fixture=True, out_dir=tmp_path / "run", offline=True,
                                   options={"modalities": "edge"}, env={}))
    assert run.scorecard_path is not None, run.message   # INCOMPLETE: the fixture's reference has every modality
    generation = json.loads(run.scorecard_path.read_text())["provenance"]["extra"]["generation"]
    sources = generation["signature"]["settings"][SOURCE_KEY]
    assert len(sources) == 1
    (module, digest), = sources.items()
    assert digest == _sha(Path(inspect.getfile(importlib.import_module(module))))


BATCHED = """
from pinbench.ops.generators import Static


class Batched(Static):
    def generate_batch(self, pairs):
        with open({calls!r}, "a") as fh:
            fh.write("".join(request.id + "\\n" for request, _ in pairs))
        for request, out in pairs:
            super().generate(request, out)


def make():
    return Batched()
"""


def _cache_bytes(root: Path) -> int:
    from pinbench.core.sample_cache import prune

    return prune(root, float("inf")).kept_bytes


def _cached_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str,
                      calls: Path) -> tuple[str, dict[str, str]]:
    """The generator and its options of a sample-cache test: ``RENDER`` one by one, or a batched one on PYTHONPATH;
    each counts its calls in ``calls``."""
    if form == "one by one":
        return RENDER, {"calls": str(calls)}
    (tmp_path / "batched_generator.py").write_text(BATCHED.format(calls=str(calls)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    return "python:batched_generator:make", {}


@pytest.mark.parametrize("form", ["one by one", "in one batch"])
def test_another_run_directory_takes_the_rollouts_from_the_sample_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], form: str) -> None:
    """A second --out (or a run moved aside) generated every rollout again: the generation step kept none in the
    sample cache. Now each rollout is kept there beside its record (a hard link), and another directory's run with
    the same requests and generator takes it; a cached file that is no longer the one kept is generated again, and
    another generator never takes another's."""
    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    generator, options = _cached_generator(tmp_path, monkeypatch, form, calls)
    first = _run(tmp_path / "a", generator, **options)
    assert first.exit_code == 0 and len(_calls(calls)) == 4
    capfd.readouterr()
    second = _run(tmp_path / "b", generator, **options)
    err = capfd.readouterr().err
    assert second.exit_code == 0 and len(_calls(calls)) == 4, err                  # nothing generated again
    assert "generate: 4 samples: 0 done, 4 reused (4 from the sample cache), 0 failed" in err
    rollouts = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a" / "rollouts").rglob("*.mp4"))
    assert len(rollouts) == 4 and all(_sha(tmp_path / "b" / p) == _sha(tmp_path / "a" / p) for p in rollouts)
    assert _files(tmp_path / "b" / "rollouts") == rollouts   # a rollout linked twice left no temporary link
    values = [{k: m["value"] for k, m in json.loads(r.scorecard_path.read_text())["metrics"].items()}
              for r in (first, second)]
    assert values[0] == values[1]

    kept = sorted(cache.rglob("*.file"))
    assert len(kept) == 4 and _cache_bytes(cache) == sum(p.stat().st_size for p in cache.rglob("*.jsonl"))
    kept[0].unlink()
    kept[0].write_bytes(b"not the rollout")   # another file where the kept one was: that rollout is made again
    assert _run(tmp_path / "c", generator, **options).exit_code == 0 and len(_calls(calls)) == 5

    if form == "one by one":   # another generator: its own entries
        assert _run(tmp_path / "d", generator, calls=str(calls), version="2").exit_code == 0
        assert len(_calls(calls)) == 9
        capfd.readouterr()   # one generator per GPU: each takes its part from the cache, and the step says so
        assert _run(tmp_path / "e", generator, gpus=2, **options).exit_code == 0 and len(_calls(calls)) == 9
        assert "generate: 4 samples on 2 devices: 0 done, 4 reused (4 from the sample cache), 0 failed" in (
            capfd.readouterr().err)


@pytest.mark.parametrize("form", ["one by one", "in one batch"])
def test_a_prune_after_a_cached_rollout_was_found_costs_the_run_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], form: str) -> None:
    """A batch leaves out each rollout the cache holds, placing it, and the step then takes its record from the cache
    again: a prune between the two (another run's, ``pinbench cache prune``) failed that sample, "the generator wrote
    nothing", its rollout in place. The record first found is the one the step takes; a prune right after the lookup
    that placed a rollout (a hard link: the run's name holds it) costs only the rollouts it removed, generated again."""
    from pinbench.core.sample_cache import prune
    from pinbench.ops import generation

    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    generator, options = _cached_generator(tmp_path, monkeypatch, form, calls)
    assert _run(tmp_path / "a", generator, **options).exit_code == 0 and len(_calls(calls)) == 4
    real = generation.RolloutCache.get

    def pruned_after(self: generation.RolloutCache, task_hash: str):   # a prune right after the first hit
        stored = real(self, task_hash)
        if stored is not None and not list(tmp_path.glob("pruned")):
            assert prune(cache, 0).kept == 0
            (tmp_path / "pruned").touch()
        return stored

    monkeypatch.setattr(generation.RolloutCache, "get", pruned_after)
    capfd.readouterr()
    second = _run(tmp_path / "b", generator, **options)
    err = capfd.readouterr().err
    assert second.exit_code == 0 and len(_calls(calls)) == 7, err   # the three the prune removed, made again
    assert "generate: 4 samples: 3 done, 1 reused (1 from the sample cache), 0 failed" in err, err
    rollout = tmp_path / "b" / "rollouts" / "edge" / "task_0000.mp4"   # the first found, as the first run made it
    assert _sha(rollout) == _sha(tmp_path / "a" / rollout.relative_to(tmp_path / "b"))


def test_a_rollout_pruned_from_the_cache_while_it_is_checked_is_generated_again_unsaid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A prune between the check of a kept rollout's bytes and its rollout check made it "no rollout (the generator
    wrote nothing there)", said as a rollout kept before that check: it is a miss, as an entry a prune removed before
    its lookup is, generated again without a word."""
    from pinbench.core.sample_cache import prune
    from pinbench.ops import generation

    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    assert _run(tmp_path / "a", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4
    real = generation.check_rollout

    def pruned_first(request: Any, path: Path, **kwargs: Any) -> list[str]:   # the prune, as the cache's is checked
        if kwargs.get("kept"):
            prune(cache, 0)
        return real(request, path, **kwargs)

    monkeypatch.setattr(generation, "check_rollout", pruned_first)
    capfd.readouterr()
    second = _run(tmp_path / "b", RENDER, calls=str(calls))
    err = capfd.readouterr().err
    assert second.exit_code == 0 and len(_calls(calls)) == 8, err
    assert "generate: 4 samples: 4 done, 0 reused, 0 failed" in err and "sample cache" not in err, err


BATCH_FAILS = """
from pinbench.ops.generators import Static


class Fails(Static):
    def generate_batch(self, pairs):
        raise RuntimeError("out of memory before the first rollout")


def make():
    return Fails()
"""


def test_a_batch_never_keeps_the_partial_an_earlier_run_left(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed after its generator wrote a rollout's hidden partial (another generator's, or a batch of the
    same one) left it there; a batch that then made nothing had that file checked and kept as its own rollout."""
    (tmp_path / "fails.py").write_text(BATCH_FAILS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    assert _run(tmp_path / "a", RENDER, calls=str(tmp_path / "calls")).exit_code == 0
    out = tmp_path / "b"
    assert _run(out, "python:fails:make").exit_code != 0
    (out / "rollouts" / "edge").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tmp_path / "a" / "rollouts" / "edge" / "task_0000.mp4",
                    out / "rollouts" / "edge" / ".task_0000.partial.mp4")   # as a kill -9 left it
    assert _run(out, "python:fails:make").exit_code != 0
    records = load_records(out / "generation")
    assert not records["edge.task_0000"].ok and "out of memory" in records["edge.task_0000"].error
    assert _files(out / "rollouts") == []


SCRIBBLES = """
from pinbench.ops.generators import Static


def scribble(request):
    with open(request.path("context"), "r+b") as fh:   # its own frames, written into the file it was given to read
        fh.seek(64)
        fh.write(bytes(32))


def scribble_hidden(request):
    import os

    path = request.path("context")
    was = os.stat(path)
    scribble(request)
    os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))   # its size and mtime as they were


class Scribbles(Static):
    def generate(self, request, out):
        scribble(request)
        super().generate(request, out)


class Hides(Static):
    def generate(self, request, out):
        scribble_hidden(request)
        super().generate(request, out)


class Batched(Static):
    def generate_batch(self, pairs):
        for request, out in pairs:
            scribble(request)
            super().generate(request, out)


class BatchedFails(Static):
    def generate_batch(self, pairs):
        for request, _ in pairs:
            scribble(request)
        raise RuntimeError("out of memory")


def make(batch="0"):
    return {"1": Batched, "fails": BatchedFails, "hidden": Hides}.get(batch, Scribbles)()
"""


@pytest.mark.parametrize("batch", ["0", "1", "fails", "hidden"])
def test_a_generator_that_writes_into_a_file_it_reads_fails_its_sample_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: str) -> None:
    """A generator that wrote into a conditioning file made its rollout from other inputs than its request pins, and
    the run went on, complete. A batch that did so and then failed, making none, failed each sample with its error
    alone: the changed file is named first, the error after it. One that wrote at the file's size and put its mtime
    back ("hidden") was not seen: the check compared inode, size and mtime, beside ``FileState``, which holds the
    ctime the digests see such an edit by."""
    (tmp_path / "scribbles.py").write_text(SCRIBBLES)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    out = tmp_path / "run"
    assert _run(out, "python:scribbles:make", batch=batch).exit_code != 0
    records = load_records(out / "generation")
    assert len(records) == 4 and not any(r.ok for r in records.values())
    error = records["edge.task_0000"].error
    said = ("changed while the generator ran, a file it is given to read (the run's copy: the dataset's file it came "
            "from is as it was, and the next run stages it again)")
    assert error.startswith(f"{out / 'generation' / 'inputs'}"), error
    assert error.endswith(said) if batch != "fails" else f"{said}; RuntimeError: out of memory (traceback: " in error


TOUCHES = """
import os

from pinbench.ops.generators import Static


class Touches(Static):
    def __init__(self, how, held):
        self.how, self.held = how, held

    def generate(self, request, out):
        path = request.path("context")
        if self.how == "chmod":
            os.chmod(path, 0o444)
        else:   # a hard link of its own to the file, its bytes as they were
            os.link(path, os.path.join(self.held, request.id))
        super().generate(request, out)


def make(how="chmod", held=""):
    return Touches(how, held)
"""


@pytest.mark.parametrize("how", ["chmod", "link"])
def test_a_generator_that_only_chmods_or_links_a_file_it_reads_keeps_its_sample(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """A chmod or a hard link moves a conditioning file's ctime, and so its ``FileState``, though its bytes are the
    ones the request pins: each sample failed as "changed while the generator ran". A changed state only has the
    file read again; the sample fails when its SHA-256 is not the pinned one (the "hidden" case above)."""
    (tmp_path / "touches.py").write_text(TOUCHES)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    out, held = tmp_path / "run", tmp_path / "held"
    held.mkdir()
    result = _run(out, "python:touches:make", how=how, held=str(held))
    records = load_records(out / "generation")
    assert len(records) == 4 and all(r.ok for r in records.values()), [r.error for r in records.values()]
    assert result.exit_code == 0, result.message


APPENDS = """\
import json, sys
from pathlib import Path

from render_generator import Render

from pinbench.core.generation import Request

request, out = Request.from_json(json.loads(Path(sys.argv[1]).read_text())), sys.argv[2]
with open(request.path("context"), sys.argv[3]) as given:   # its own bytes, in the file it was given to read
    given.seek(64)
    given.write(b"frames of its own")
Render().generate(request, Path(out))
sys.exit(int(sys.argv[4]))
"""


# appended to, written over in place (the same size); and appended to by a command that then exited 3
@pytest.mark.parametrize(("mode", "code"), [("ab", 0), ("r+b", 0), ("ab", 3)])
def test_a_command_that_writes_into_its_conditioning_file_leaves_the_dataset_file_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, code: int) -> None:
    """A conditioning file was staged as a hard link to the dataset's file: a command generator that appended to the
    file it was given to read appended to the dataset's video (the ground truth the recipe scores against), and the
    next run made its rollouts from the changed video, saying nothing. Now it is staged as a copy of its own: the
    dataset's file keeps its bytes, the sample fails by name, and the next run stages it again from the dataset.
    One that exited non-zero besides failed with its exit code alone: the changed file is named first, then that."""
    script = tmp_path / "appends.py"
    script.write_text(APPENDS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HELPERS), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "run"
    assert _run(out, RENDER).exit_code == 0
    request = read_requests(out / "generation" / "requests.jsonl")[0]
    given = request.file("context")
    assert given is not None
    source = out / "fixture_data" / "dataset" / "videos" / PurePosixPath(given.path).name   # the file staged
    before = source.read_bytes()
    assert hashlib.sha256(before).hexdigest() == given.sha256

    command = f"command:{sys.executable} {script} {{request}} {{out}} {mode} {code}"
    assert _run(out, command).exit_code != 0
    assert source.read_bytes() == before
    records = load_records(out / "generation")
    assert not any(r.ok for r in records.values())
    said = (f"{out / 'generation' / given.path}: changed while the generator ran, a file it is given to read (the "
            "run's copy: the dataset's file it came from is as it was, and the next run stages it again)")
    error = records["edge.task_0000"].error
    assert error.startswith(said) if code else said in error, error
    assert "\n" not in error and (f"; the generator exited {code} (log: " in error) == bool(code), error

    again = _run(out, RENDER)     # staged again from the dataset's file: every rollout from the input it pins
    assert again.exit_code == 0, again.message
    staged = out / "generation" / given.path
    assert hashlib.sha256(staged.read_bytes()).hexdigest() == given.sha256



def test_a_conditioning_file_an_older_run_staged_as_a_hard_link_is_staged_again_as_a_copy(tmp_path: Path) -> None:
    """An older run's staged file is the dataset's own inode: reused, a generator writing into it still wrote into
    the dataset's file. It is replaced by a copy (its bytes the same, the dataset's file no longer linked)."""
    from pinbench.core.generation import staged
    from pinbench.core.inputs import InputDigests

    source, root = tmp_path / "data" / "clip.mp4", tmp_path / "requests"
    source.parent.mkdir()
    source.write_bytes(b"the dataset's frames")
    sha256 = hashlib.sha256(b"the dataset's frames").hexdigest()
    old = root / "inputs" / sha256[:16] / "clip.mp4"
    old.parent.mkdir(parents=True)
    os.link(source, old)
    assert staged("context", source, root, InputDigests(tmp_path / "run")) == Conditioning(
        "context", f"inputs/{sha256[:16]}/clip.mp4", sha256)
    assert old.read_bytes() == b"the dataset's frames" and source.stat().st_nlink == 1



def test_a_conditioning_file_is_copied_where_copy_file_range_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two file systems on an older kernel (EXDEV), or a file system without it: the plain copy stages it."""
    from pinbench.core.generation import staged
    from pinbench.core.inputs import InputDigests

    def refused(*_: object) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refused)
    source = tmp_path / "clip.mp4"
    source.write_bytes(b"the dataset's frames")
    made = staged("context", source, tmp_path / "requests", InputDigests(tmp_path / "run"))
    assert (tmp_path / "requests" / made.path).read_bytes() == b"the dataset's frames"


def test_a_conditioning_file_written_to_after_it_was_hashed_is_not_staged_under_that_sha256(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SHA-256 is read, then the file copied: one written to in between (a dataset still being written) was
    staged as other bytes under the first SHA-256, which the request and its key then named."""
    from pinbench.core import inputs
    from pinbench.core.generation import staged
    from pinbench.core.inputs import InputDigests, InputFileError

    source = tmp_path / "clip.mp4"
    source.write_bytes(b"the dataset's frames")
    read = inputs.sha256_fd

    def then_written(fd: int) -> str:
        digest = read(fd)
        with open(source, "ab") as file:
            file.write(b" and more")
        return digest

    monkeypatch.setattr(inputs, "sha256_fd", then_written)
    with pytest.raises(InputFileError, match=f"^{re.escape(str(source))}: changed while it was staged"):
        staged("context", source, tmp_path / "requests", InputDigests(tmp_path / "run"))
    assert not (tmp_path / "requests" / "inputs").exists() or not any((tmp_path / "requests" / "inputs").rglob("*.*"))


def test_a_kept_rollout_counts_against_the_bound_once_no_run_directory_holds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    assert _run(tmp_path / "a", RENDER, calls=str(calls)).exit_code == 0
    records = sum(p.stat().st_size for p in cache.rglob("*.jsonl"))
    assert _cache_bytes(cache) == records      # each rollout is a link to the run's own
    shutil.rmtree(tmp_path / "a")
    assert _cache_bytes(cache) == records + sum(p.stat().st_size for p in cache.rglob("*.file"))


def _files(rollouts: Path) -> list[Path]:
    return sorted(p.relative_to(rollouts.parent) for p in rollouts.rglob("*") if not p.is_dir())


def _entries(cache: Path) -> dict[str, tuple[Path, dict]]:
    """The generation entries of the sample cache by sample id: the record's path and the record."""
    from pinbench.core.store import decode_line

    records = {path: decode_line(path.read_bytes().rstrip(b"\n"), str(path))[0].data
               for path in cache.glob("*/*.jsonl")}
    return {data["sample_id"]: (path, data) for path, data in records.items() if "output" in data["result"]}


def test_a_cached_record_of_another_sample_never_places_its_file_over_that_samples_rollout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """An entry whose record is another sample's (planted, or copied by hand to another key) placed its file over
    that sample's rollout, which the run had already taken as sound: that sample failed ('changed after it was
    checked and kept'). Now an entry is used only for the task its record was computed for; the other costs the
    one rollout it should have held, generated again."""
    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    assert _run(tmp_path / "a", RENDER, calls=str(calls)).exit_code == 0
    entries = _entries(cache)
    first, last = sorted(entries)[0], sorted(entries)[-1]
    shutil.copyfile(entries[first][0], entries[last][0])   # the last sample's key now holds the first's record
    capfd.readouterr()
    again = _run(tmp_path / "b", RENDER, calls=str(calls))
    err = capfd.readouterr().err
    assert again.exit_code == 0 and "generate: 4 samples: 1 done, 3 reused (3 from the sample cache), 0 failed" in err
    assert _calls(calls)[4:] == [last]
    rollouts = _files(tmp_path / "a" / "rollouts")
    assert _files(tmp_path / "b" / "rollouts") == rollouts
    assert all(_sha(tmp_path / "b" / p) == _sha(tmp_path / "a" / p) for p in rollouts)


def test_a_rollout_edited_in_place_is_generated_again_in_each_run_that_holds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """The documented misuse: a linked rollout's bytes changed in place change every run directory's and the
    cache's. Each run that holds it says so and generates that one rollout again, and leaves nothing else behind
    (the cache's link to the same file, placed over it, had left a temporary link in the rollouts folder)."""
    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    for out in ("a", "b"):
        assert _run(tmp_path / out, RENDER, calls=str(calls)).exit_code == 0
    rollouts = _files(tmp_path / "a" / "rollouts")
    edited = tmp_path / "a" / rollouts[1]
    edited.chmod(0o644)   # kept read-only (see the test below): its owner makes it writable again, or root writes
    with open(edited, "r+b") as fh:   # b's and the cache's too
        fh.seek(100)
        fh.write(b"edit")
    capfd.readouterr()
    again = _run(tmp_path / "b", RENDER, calls=str(calls))
    err = capfd.readouterr().err
    assert again.exit_code == 0 and len(_calls(calls)) == 5
    assert "1 recomputed: the rollout file changed or is gone" in err
    notices = [line for line in err.splitlines() if line.endswith(" generated again")]   # each names its file
    now = f"(SHA-256 {_sha(edited)[:12]}..., kept "
    assert len(notices) == 2 and notices[0].startswith(f"generate: {tmp_path / 'b' / rollouts[1]}: changed since it "
                                                       f"was kept {now}"), err
    assert notices[1].startswith(f"generate: sample cache: {cache}/"), err
    assert f".file: not the rollout it kept for {rollouts[1].relative_to('rollouts')} {now}" in notices[1], err
    assert _files(tmp_path / "b" / "rollouts") == rollouts
    assert _run(tmp_path / "c", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 5
    assert _sha(tmp_path / "c" / rollouts[1]) == _sha(tmp_path / "b" / rollouts[1])


def _writable_by_its_owner(path: Path) -> bool:
    """Whether the owner of ``path``, not root, may open it for writing. Run as root (which writes anything), the
    file is given to ``nobody`` and opened by a child that is ``nobody``, through a link in a folder of its own
    opened beforehand (so no folder above it need be open to ``nobody``)."""
    import errno

    if os.geteuid() != 0:
        try:
            open(path, "r+b").close()
        except PermissionError:
            return False
        return True
    folder = path.parent / ".as-nobody"
    folder.mkdir(mode=0o755)
    try:
        os.link(path, folder / "rollout")
        os.chown(folder / "rollout", 65534, 65534)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        pid = os.fork()
        if pid == 0:   # the child: only system calls, then out
            code = 0
            try:
                os.setgid(65534)
                os.setuid(65534)
                os.close(os.open("rollout", os.O_WRONLY, dir_fd=fd))
            except OSError as exc:
                code = 13 if exc.errno == errno.EACCES else 1
            os._exit(code)
        os.close(fd)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        assert code in (0, 13), code
        return code == 0
    finally:
        shutil.rmtree(folder)


def test_a_kept_rollout_is_read_only_for_the_cache_and_every_run_directory_that_holds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept rollout is one inode with the cache's entry and each run directory that took it by hard link: a writer
    into it (a generator writing past the file it is given, into a kept rollout's own path) changed all of them
    without a word. Now it is kept read-only (0444), so such a writer that is not root fails loudly; a rollout taken
    by copy is read-only too."""
    import stat

    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    for out in ("a", "b"):
        assert _run(tmp_path / out, RENDER, calls=str(calls)).exit_code == 0
    assert len(_calls(calls)) == 4   # b took a's
    held = [*(tmp_path / "a" / "rollouts").rglob("*.mp4"), *(tmp_path / "b" / "rollouts").rglob("*.mp4"),
            *cache.rglob("*.file")]
    assert len(held) == 12 and len({p.stat().st_ino for p in held}) == 4
    assert {stat.S_IMODE(p.stat().st_mode) for p in held} == {0o444}
    assert not _writable_by_its_owner(held[0])

    shutil.rmtree(cache)   # a copy (a run directory on another file system than the cache) is read-only too
    from pinbench.ops.generation import _linked

    copied = tmp_path / "copied.mp4"
    monkeypatch.setattr(os, "link", lambda *_: (_ for _ in ()).throw(OSError(18, "Invalid cross-device link")))
    assert _linked(held[0], copied) and copied.stat().st_ino != held[0].stat().st_ino
    assert stat.S_IMODE(copied.stat().st_mode) == 0o444


def test_check_names_each_rollout_changed_or_missing_since_generation_kept_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pinbench check`` read no rollout: a finished run whose rollouts were changed after scoring (by root, or an
    owner who made one writable again, through any directory that holds it) checked clean. Now each rollout its
    generation kept is compared with the recorded SHA-256, one line per rollout changed or missing."""
    from pinbench.core.check import check_run

    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    out = tmp_path / "run"
    assert _run(out, RENDER, calls=str(tmp_path / "calls")).exit_code == 0
    assert check_run(out).problems == []
    rollouts = sorted((out / "rollouts").rglob("*.mp4"))
    edited, removed, swapped = rollouts[:3]
    edited.chmod(0o644)
    with open(edited, "r+b") as fh:
        fh.seek(100)
        fh.write(b"edit")
    removed.unlink()
    swapped.unlink()
    swapped.mkdir()
    records = load_records(out / "generation")
    sha = {Path(r.result["output"]).name: r.result["sha256"][:12] for r in records.values()}
    problems = check_run(out).problems
    assert problems == [
        f"{edited}: rollout changed since generation kept it for edge.{edited.stem} (SHA-256 {_sha(edited)[:12]}..., "
        f"kept {sha[edited.name]}...)",
        f"{removed}: rollout missing (generation kept it for edge.{removed.stem}, SHA-256 {sha[removed.name]}...)",
        f"{swapped}: rollout changed since generation kept it for edge.{swapped.stem} (is a directory, not a file, "
        f"kept {sha[swapped.name]}...)"], problems


def test_check_names_a_rollout_swapped_for_a_symlink_and_a_record_naming_no_path_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rollout replaced by a symlink to a file of the same bytes was said to be 'unreadable' (it is read fine;
    it is no file the run holds), and a generation record whose output holds a NUL byte (a line whose digest fits:
    a checksum, not a signature) ended ``pinbench check`` in a traceback ('embedded null byte')."""
    from pinbench.core.check import check_run
    from pinbench.core.store import encode_line, record_bytes

    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    out = tmp_path / "run"
    assert _run(out, RENDER, calls=str(tmp_path / "calls")).exit_code == 0
    linked = sorted((out / "rollouts").rglob("*.mp4"))[0]
    outside = tmp_path / "outside.mp4"
    shutil.copyfile(linked, outside)
    linked.unlink()
    linked.symlink_to(outside)
    log = out / "generation" / "samples" / "run.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[-1])["record"]
    record["result"]["output"] = "edge/\x00.mp4"
    log.write_bytes(b"".join(lines[:-1]) + encode_line(record_bytes(record)))
    sid = record["sample_id"]
    problems = [p for p in check_run(out).problems if p.startswith((f"{out / 'rollouts'}/", f"{log.parent}: "))]
    assert problems == [
        f"{linked}: rollout changed since generation kept it for edge.{linked.stem} (a symlink (to {str(outside)!r}), "
        f"not the file kept, kept {_sha(outside)[:12]}...)",
        f"{log.parent}: the record of {sid} names {'edge/' + chr(0) + '.mp4'!r}, not a rollout inside "
        f"{out / 'rollouts'}"], problems


def _rollouts_through_a_link(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A generated run (``run``) whose ``rollouts/edge`` is now a symlink to a copy outside it: (run, link, copy)."""
    out = tmp_path / "run"
    assert _run(out, RENDER, calls=str(tmp_path / "calls")).exit_code == 0
    link, outside = out / "rollouts" / "edge", tmp_path / "outside"
    shutil.copytree(link, outside)
    shutil.rmtree(link)
    link.symlink_to(outside)
    return out, link, outside


def test_a_symlinked_folder_on_the_way_to_kept_rollouts_is_named_by_check_and_refused_by_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rollouts/edge`` swapped for a symlink to a folder outside the run (the same bytes in it) passed ``pinbench
    check``, and the next generation wrote and reused its rollouts there: files the run does not hold. Check names
    the link once, with the rollouts it leads to; the step refuses in one line naming it, before writing anything."""
    from pinbench.core.check import check_run

    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    out, link, outside = _rollouts_through_a_link(tmp_path)
    problems = [p for p in check_run(out).problems if p.startswith(f"{out / 'rollouts'}")]
    assert problems == [
        f"{link}: a symlink (to {str(outside)!r}) on the way to 4 kept rollouts (edge.task_0000, edge.task_0001, "
        f"edge.task_0002 and 1 more); a kept rollout is a regular file reached without symlinks inside {out}"]
    before = sorted((p.name, p.stat().st_mtime_ns) for p in outside.iterdir())
    with pytest.raises(RecipeError) as info:
        _run(out, RENDER, calls=str(tmp_path / "calls"), version="2")
    assert str(info.value) == (
        f"{link}: a symlink (to {str(outside)!r}); the generate step writes no rollout through it (a kept rollout is "
        f"a regular file reached without symlinks inside {out}); put a folder of the run in its place")
    assert sorted((p.name, p.stat().st_mtime_ns) for p in outside.iterdir()) == before


def test_a_symlinked_rollouts_folder_is_refused_by_a_skip_generation_run_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generate step refused ``rollouts/edge`` as a symlink, but ``--skip-generation`` scored the rollouts through
    it (files outside the run, which ``pinbench check`` names); it is refused in the same one line, before scoring."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    out, link, outside = _rollouts_through_a_link(tmp_path)
    scorecard = out / "scorecard.json"
    before = scorecard.stat().st_mtime_ns
    with pytest.raises(RecipeError) as info:
        run_recipe(get_recipe("paibench-c").config(fixture=True, out_dir=out, offline=True,
                                                   options={"modalities": "edge"}, skip_generation=True, env={}))
    assert str(info.value) == (
        f"{link}: a symlink (to {str(outside)!r}); --skip-generation scores no rollout through it (a kept rollout is "
        f"a regular file reached without symlinks inside {out}); put a folder of the run in its place")
    assert scorecard.stat().st_mtime_ns == before


@pytest.mark.parametrize("thing", ["a folder", "a FIFO", "a symlink to a folder"])
def test_a_thing_planted_where_a_rollout_is_kept_is_skipped_by_name_and_pruned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], thing: str) -> None:
    """A folder (or a symlink to one) at an entry's ``<key>.file`` blocked that key for good: no link is renamed
    over a folder, so its rollout was generated by every run and never kept again, without a word, and ``cache
    prune`` passed over it. Now a run skips it in one line naming it, a FIFO or symlink is replaced by the rollout
    (never opened nor followed), and prune removes a folder (what a symlink points to is left as it is)."""
    from pinbench.core.sample_cache import prune

    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    assert _run(tmp_path / "a", RENDER, calls=str(calls)).exit_code == 0
    entries = _entries(cache)
    sid = sorted(entries)[-1]
    kept, output = entries[sid][0].with_suffix(".file"), entries[sid][1]["result"]["output"]
    kept.unlink()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep").write_text("someone's")
    if thing == "a folder":
        kept.mkdir()
        (kept / "inside").write_text("x")
    elif thing == "a FIFO":
        os.mkfifo(kept)
    else:
        kept.symlink_to(theirs)
    capfd.readouterr()
    assert _run(tmp_path / "b", RENDER, calls=str(calls)).exit_code == 0 and _calls(calls)[4:] == [sid]
    err = capfd.readouterr().err
    kind = {"a folder": "is a directory", "a FIFO": "a FIFO (named pipe)", "a symlink to a folder": "a symlink"}[thing]
    assert (f"generate: sample cache: {kept}: {kind} where the rollout of {output} is kept; skipped, generated again "
            "(`pinbench cache prune` removes it)") in err.splitlines(), err
    blocked = thing == "a folder"
    assert (f"generate: sample cache: {kept}: a folder where the rollout of {output} is kept; not kept "
            "(`pinbench cache prune` removes it)" in err.splitlines()) == blocked, err
    pruned = prune(cache, float("inf"))
    assert pruned.planted == ((f"{kept}: is a directory",) if blocked else ()) and pruned.refused == 0
    assert kept.is_file() != blocked and not os.path.lexists(kept) == blocked
    assert (theirs / "keep").read_text() == "someone's"
    assert _run(tmp_path / "c", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 5 + blocked
    assert _run(tmp_path / "d", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 5 + blocked
    assert kept.is_file() and not kept.is_symlink() and kept.stat().st_nlink == 4 - blocked   # b (kept), c, d


def test_no_rollout_is_kept_through_a_symlink_at_a_subfolders_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """``<root>/<key[:2]>`` as a symlink: the record was refused there (``LINKED``), but the rollout was first linked
    through it into the folder it points to, a file the cache never counted nor pruned. Now neither is written, and
    the step says so once."""
    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    assert _run(tmp_path / "a", RENDER, calls=str(calls)).exit_code == 0
    entries = _entries(cache)
    # a bucket no other entry shares (a step's record there was said too: the keys, and so the buckets, move with
    # the library's code digest, and a commit put another record in the first one)
    shared = Counter(path.parent for path in cache.glob("*/*.jsonl"))
    record = next(path for _, (path, _) in sorted(entries.items()) if shared[path.parent] == 1)
    bucket, elsewhere = record.parent, tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(bucket)
    bucket.symlink_to(elsewhere)
    capfd.readouterr()
    assert _run(tmp_path / "b", RENDER, calls=str(calls)).exit_code == 0
    err = capfd.readouterr().err.splitlines()
    assert list(elsewhere.iterdir()) == []
    said = [line for line in err if "not kept" in line]
    assert said == [f"sample cache: {record.with_suffix('.file')}: not kept (a symlink where a folder of the cache "
                    "belongs (`pinbench cache prune` removes it)); the run goes on, keeping what it can"], err


@pytest.mark.parametrize("bad", ["another sample's file", "another generator's record"])
def test_a_kept_file_not_the_one_its_record_names_is_never_placed_among_the_rollouts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    """A cached rollout that its step's check refuses (its file not the one its record names, another sample's
    rollout there; its record another generator's) was linked into the run's rollouts before that check; with its
    generation then failing, it stayed there as that sample's rollout, and a --skip-generation run scored it
    (status complete). Now it is never placed: that sample has no rollout."""
    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    assert _run(tmp_path / "a", RENDER, calls=str(calls)).exit_code == 0
    entries = _entries(cache)
    first, last = sorted(entries)[0], sorted(entries)[-1]
    kept = entries[last][0].with_suffix(".file")
    if bad == "another sample's file":
        kept.unlink()
        shutil.copyfile(tmp_path / "a" / "rollouts" / entries[first][1]["result"]["output"], kept)
    else:   # the same rollout, its record (and file) moved from another generator's entry to this one's key
        shutil.rmtree(cache)
        assert _run(tmp_path / "v2", RENDER, calls=str(calls), version="2").exit_code == 0
        shutil.copytree(cache, tmp_path / "theirs")
        shutil.rmtree(cache)
        assert _run(tmp_path / "a2", RENDER, calls=str(calls)).exit_code == 0
        theirs = _entries(tmp_path / "theirs")[last][0]
        shutil.copyfile(theirs, entries[last][0])
        kept.unlink()
        shutil.copyfile(theirs.with_suffix(".file"), kept)
    calls.unlink()
    calls.mkdir()   # the same generator, failing every rollout it is asked for now
    assert _run(tmp_path / "b", RENDER, calls=str(calls)).exit_code == 2
    assert not (tmp_path / "b" / "rollouts" / entries[last][1]["result"]["output"]).exists()
    recipe = get_recipe("paibench-c")
    scored = run_recipe(recipe.config(fixture=True, out_dir=tmp_path / "b", offline=True, env={},
                                      options={"modalities": "edge"}, skip_generation=True))
    card = json.loads(scored.scorecard_path.read_text())
    assert scored.exit_code == 2 and card["status"] == "partial"
    assert [f["sample_id"] for f in card["metrics"]["edge/canny_f1_score"]["failed"]] == [last.partition(".")[2]]


def test_rollouts_are_kept_by_hard_link_only_and_a_run_elsewhere_takes_a_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A cache on another file system than the run keeps no rollout (a copy of each would fill it, a home folder's
    quota, before a prune); a run directory on another file system than the cache takes a copy of each."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs /dev/shm on another file system than the tests' temporary folder")
    elsewhere = Path(tempfile.mkdtemp(dir=shm))
    try:
        calls = tmp_path / "calls"
        monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(elsewhere / "cache"))
        capfd.readouterr()
        assert _run(tmp_path / "a", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4
        assert not list((elsewhere / "cache").rglob("*.file"))
        said = [line for line in capfd.readouterr().err.splitlines() if "sample cache" in line]
        assert said == [f"generate: sample cache: {elsewhere / 'cache'}: no rollout kept there, it is on another "
                        f"file system than {tmp_path / 'a' / 'rollouts'} (a copy of each would fill it); another "
                        "run directory generates them again"]
        assert _run(tmp_path / "b", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 8

        monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / "cache"))
        assert _run(tmp_path / "c", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 12
        capfd.readouterr()
        assert _run(elsewhere / "d", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 12
        assert "4 reused (4 from the sample cache)" in capfd.readouterr().err
        assert all(p.stat().st_nlink == 1 for p in (elsewhere / "d" / "rollouts").rglob("*.mp4"))
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)


def test_rollouts_reach_the_cache_as_copies_across_two_mounts_of_one_file_system(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Under ``--runtime docker`` the run directory and the cache are two bind mounts of one file system: a hard link
    between them fails (EXDEV) though both are one device, so no rollout (nor its record) was ever kept, unsaid, and
    each run directory generated every rollout again. Such a rollout is now kept as a copy, said once."""
    cache, calls, real = tmp_path / "cache", tmp_path / "calls", os.link

    def link(source: str, target: str, **kwargs: object) -> None:   # what link(2) says across two mounts
        if Path(source).is_relative_to(cache) != Path(target).is_relative_to(cache):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        real(source, target, **kwargs)

    monkeypatch.setattr(os, "link", link)
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    capfd.readouterr()
    assert _run(tmp_path / "a", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4
    said = [line for line in capfd.readouterr().err.splitlines() if "sample cache" in line]
    assert said == [f"generate: sample cache: {cache}: rollouts copied there, not linked "
                    f"({tmp_path / 'a' / 'rollouts'} is another mount of its file system, as a container's); "
                    "each copy counts against $PINBENCH_SAMPLE_CACHE_MB"]
    kept = sorted(cache.rglob("*.file"))
    assert len(kept) == 4 and all(p.stat().st_nlink == 1 for p in kept)
    assert _run(tmp_path / "b", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4
    assert "4 reused (4 from the sample cache)" in capfd.readouterr().err


def test_a_rollout_from_the_sample_cache_meets_the_rollout_checks_of_this_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A cache entry's key names the request and the generator, not the checks a rollout must pass: a check added
    to ``check_rollout`` since the rollout was kept did not apply to it, placed and scored as it was (only
    ``PINBENCH_SAMPLE_CACHE=off`` applied it). A cached rollout is checked again before it is placed."""
    from pinbench.ops import generation

    cache, calls, real = tmp_path / "cache", tmp_path / "calls", generation.check_rollout
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    assert _run(tmp_path / "a", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4

    def stricter(request: Request, path: Path, **options: bool) -> list[str]:   # a check this version adds
        added = [f"{path}: too dark (a new check)"] if request.id == "edge.task_0000" else []
        return [*real(request, path, **options), *added]

    monkeypatch.setattr(generation, "check_rollout", stricter)
    capfd.readouterr()
    outcome = _run(tmp_path / "b", RENDER, calls=str(calls))
    said = capfd.readouterr().err
    assert outcome.exit_code == 2 and _calls(calls)[4:] == ["edge.task_0000"], said
    assert ("generate: sample cache: invalid rollout: edge/task_0000.mp4: too dark (a new check) (kept before that "
            "was checked); not used, generated again\n") in said
    assert "3 reused (3 from the sample cache)" in said
    assert load_records(tmp_path / "b" / "generation")["edge.task_0000"].error == (
        f"invalid rollout: edge/task_0000.mp4: too dark (a new check) (kept to look at under {tmp_path}/b/generation/"
        "rejected)")


def test_a_rollout_reused_from_the_run_directory_meets_the_rollout_checks_of_this_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A rerun into the same --out reused a stored rollout still the file it kept (same SHA-256) unchecked: a check
    added to ``check_rollout`` since did not apply to it, scored as it was, where one from the sample cache is
    checked again. Now it is checked (its decode not repeated) and, refused, generated again by name; a rollout cut
    short on disk is generated again too; the other two are reused."""

    out, calls = tmp_path / "run", tmp_path / "calls"
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4
    cut = out / "rollouts" / "edge" / "task_0001.mp4"
    cut.chmod(0o644)
    with open(cut, "r+b") as fh:
        fh.truncate(cut.stat().st_size // 2)

    stricter_check(monkeypatch, "edge.task_0000")
    capfd.readouterr()
    outcome = _run(out, RENDER, calls=str(calls))
    said = capfd.readouterr().err
    assert outcome.exit_code == 2 and sorted(_calls(calls)[4:]) == ["edge.task_0000", "edge.task_0001"], said
    assert ("generate: invalid rollout: edge/task_0000.mp4: too dark (a new check) (kept before that was checked); "
            "generated again\n") in said
    assert f"generate: {cut}: changed since it was kept (SHA-256 " in said
    assert "generate: 4 samples: 1 done, 2 reused, 1 failed" in said, said
    assert "1 recomputed: the rollout fails this version's rollout check" in said
    assert "1 recomputed: the rollout file changed or is gone" in said
    records = load_records(out / "generation")
    assert records["edge.task_0000"].error == ("invalid rollout: edge/task_0000.mp4: too dark (a new check) (kept to "
                                               f"look at under {out}/generation/rejected)")
    assert records["edge.task_0001"].ok


def test_a_rerun_checks_each_reused_rollout_without_decoding_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """The check of a reused rollout still the file kept reads its container facts only: its every frame decoded
    when it was kept, and a rerun of thousands decoded them all again."""
    from pinbench.media import video
    from pinbench.ops import generation

    out, calls = tmp_path / "run", tmp_path / "calls"
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4
    monkeypatch.setattr(generation, "_check_version", lambda: "newer")   # no verdict of this version's check yet
    checked, decoded = checked_rollouts(monkeypatch), list[str]()
    monkeypatch.setattr(video, "is_valid_video", lambda path, frames: decoded.append(str(path)) or True)
    capfd.readouterr()
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4
    assert "generate: 4 samples: 0 done, 4 reused, 0 failed" in capfd.readouterr().err and decoded == []
    assert len(checked) == 4


def test_a_rollout_from_the_sample_cache_is_checked_without_decoding_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A cached rollout whose bytes are its record's SHA-256 was decoded to its last frame when the run that kept it
    checked it; taking it into another run directory decoded every frame again (a second --out of thousands)."""
    from pinbench.media import video

    cache, calls = tmp_path / "cache", tmp_path / "calls"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    assert _run(tmp_path / "a", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4
    decoded: list[str] = []
    monkeypatch.setattr(video, "is_valid_video", lambda path, frames: decoded.append(str(path)) or True)
    capfd.readouterr()
    assert _run(tmp_path / "b", RENDER, calls=str(calls)).exit_code == 0 and len(_calls(calls)) == 4
    assert "4 reused (4 from the sample cache)" in capfd.readouterr().err and decoded == []


def test_a_rerun_checks_no_reused_rollout_that_passed_this_version_s_check_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rerun read every reused rollout's container again (~0.7 ms a small rollout, ~15 times the rest of
    reusing it): the verdicts are kept in the run's generation folder by check version, request and SHA-256, so an
    unchanged rerun checks none, and one of another check version checks each again."""
    from pinbench.ops import generation

    out, calls = tmp_path / "run", tmp_path / "calls"
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0
    checked = checked_rollouts(monkeypatch)
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0 and checked == []   # passed when it was kept
    monkeypatch.setattr(generation, "_check_version", lambda: "another")
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0
    assert sorted(checked) == sorted((out / "rollouts").rglob("*.mp4")) and len(checked) == 4
    assert len((out / "generation" / generation.CHECKED_FILE).read_text().splitlines()) == 4   # this version's only
    checked.clear()
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0 and checked == []
    assert len(_calls(calls)) == 4   # every rerun reused all four


def test_a_shard_keeps_the_verdicts_of_the_other_shards_rollouts(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards share the run's generation folder, and each looks up the rollouts of its own share only: writing the
    keys it looked up alone dropped the other shards' verdicts, so each shard's rerun checked every rollout of the
    others' again, in turn."""
    from pinbench.core.config import Shard
    from pinbench.ops import generation

    out, calls = tmp_path / "run", tmp_path / "calls"
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0
    recipe = get_recipe("paibench-c")
    checked = checked_rollouts(monkeypatch)
    for index in (0, 1, 0, 1):
        sharded = run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, options={"modalities": "edge"},
                                           generator=RENDER, generator_options={"calls": str(calls)}, env={},
                                           shard=Shard(index, 2), skip_scoring=True))
        assert sharded.exit_code == 0, sharded.message
    assert checked == [] and len(_calls(calls)) == 4
    assert len((out / "generation" / generation.CHECKED_FILE).read_text().splitlines()) == 4


@pytest.mark.parametrize("form", ["python", "command"])
def test_each_shard_writes_its_own_generator_log_and_its_failed_samples_name_it(tmp_path: Path, form: str) -> None:
    """Shards of a Slurm array run at once: all of them wrote one ``generation/generator.log``, their requests' lines
    interleaved, and a failed sample named that shared log. Each shard now writes ``generator.shard-I-of-N.log``,
    holding only its own requests' headers, and its failed samples name that file (in ``pinbench status`` too)."""
    from pinbench.core.check import check_run
    from pinbench.core.config import Shard
    from pinbench.ops.status import render, run_status

    out, recipe = tmp_path / "run", get_recipe("paibench-c")
    generator, options = ((RENDER, {"mode": "exit"}) if form == "python" else
                          (f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} "
                           "--out {out} --mode exit", {}))
    for index in (0, 1):
        run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, options={"modalities": "edge"},
                                 generator=generator, generator_options=options, env={}, shard=Shard(index, 2),
                                 skip_scoring=True))
    generation = out / "generation"
    assert not (generation / "generator.log").exists()
    for index in (0, 1):
        log = generation / f"generator.shard-{index}-of-2.log"
        stored = [json.loads(line)["record"] for line in
                  (generation / "samples" / f"shard-{index}-of-2.jsonl").read_text().splitlines()]
        assert len(stored) == 2 and all(record["status"] != "ok" for record in stored)
        headers = [line for line in log.read_text().splitlines() if line.startswith("--- generating ")]
        assert headers == [f"--- generating {record['sample_id']!r} ---" for record in stored]
        assert all(f"{log})" in record["error"] for record in stored), [r["error"] for r in stored]
    shown = [line for line in render(run_status(out, ask_slurm=False)).splitlines() if "(shard 1/2)" in line]
    assert len(shown) == 2 and all(line.endswith(f"{generation / 'generator.shard-1-of-2.log'})") for line in shown)
    assert [problem for problem in check_run(out).problems if "generator" in problem] == []   # none a stray


def test_a_shard_on_2_gpus_writes_its_own_log_per_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --gpus 2 each GPU's generator has a log: every shard's GPU 5 wrote ``generator-gpu5.log``, so a Slurm
    array's shards interleaved there too. Shard 1 of 2 writes ``generator-gpu5.shard-1-of-2.log`` and its GPU 3's, each
    request's header in one of them."""
    from pinbench.core.config import Shard

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,3")
    out = tmp_path / "run"
    sharded = run_recipe(get_recipe("paibench-c").config(
        fixture=True, out_dir=out, offline=True, options={"modalities": "edge"}, generator=RENDER, env={}, gpus=2,
        shard=Shard(1, 2), skip_scoring=True))
    assert sharded.exit_code == 0, sharded.message
    logs = {path.name: path.read_text() for path in (out / "generation").glob("*.log")}
    assert sorted(logs) == ["generator-gpu3.shard-1-of-2.log", "generator-gpu5.shard-1-of-2.log",
                            "generator.shard-1-of-2.log"]   # the last: the generator that described it, before them
    assert sorted(line for text in logs.values() for line in text.splitlines() if line.startswith("--- ")) == [
        "--- generating 'edge.task_0001' ---", "--- generating 'edge.task_0003' ---"]


def test_a_gpu_named_by_a_mig_uuid_with_slashes_writes_its_log_in_the_generation_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA_VISIBLE_DEVICES may name MIG instances as ``MIG-GPU-<uuid>/<gi>/<ci>`` (``gpu_devices`` takes them): the
    log ``generator-gpu<device>.log`` was a path into folders that do not exist, and every sample failed naming it."""
    mig = "MIG-GPU-5a1b2c3d-0000-1111-2222-333344445555"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{mig}/1/0,{mig}/2/0")
    out = tmp_path / "run"
    outcome = run_recipe(get_recipe("paibench-c").config(
        fixture=True, out_dir=out, offline=True, options={"modalities": "edge"}, generator=RENDER, env={}, gpus=2))
    assert outcome.exit_code == 0, outcome.message
    assert sorted(p.relative_to(out / "generation").as_posix() for p in (out / "generation").rglob("*.log")) == [
        f"generator-gpu{mig}_1_0.log", f"generator-gpu{mig}_2_0.log", "generator.log"]


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_verdicts_file_that_is_a_fifo_or_a_folder_costs_the_checks_not_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """The kept verdicts are a cache: a FIFO in their place blocked the rerun on reading it, and one that cannot be
    written (a folder there) ended it after every rollout was reused. Each rollout is checked again; the run passes."""
    from pinbench.ops import generation

    out, calls = tmp_path / "run", tmp_path / "calls"
    assert _run(out, RENDER, calls=str(calls)).exit_code == 0
    verdicts = out / "generation" / generation.CHECKED_FILE
    verdicts.unlink()
    os.mkfifo(verdicts) if kind == "fifo" else verdicts.mkdir()
    checked = checked_rollouts(monkeypatch)
    done: list[RunOutcome] = []
    thread = threading.Thread(target=lambda: done.append(_run(out, RENDER, calls=str(calls))), daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():
        os.close(os.open(verdicts, os.O_WRONLY | os.O_NONBLOCK))   # the blocked read ends; the test fails
        thread.join(60)
        pytest.fail("the rerun was blocked reading the verdicts file")
    assert done[0].exit_code == 0, done[0].message
    assert len(checked) == 4 and len(_calls(calls)) == 4   # each reused, each checked again


def test_the_folder_generator_fails_a_fifo_or_a_dangling_link_by_name_and_the_run_finishes(tmp_path: Path) -> None:
    """A FIFO or a dangling symlink where a rollout belongs in ``-g dir=`` stopped the whole run before anything was
    scored (the folder's digest refused it: "file not found" for the link), where a missing rollout fails its own
    sample by name: now each fails its sample with what it is, and the others score. Each (a folder too) is said
    as a missing one is, where it read ``NotRegularFile: ... (traceback: ...)``."""
    made = _run(tmp_path / "made", RENDER)
    assert made.exit_code == 0, made.message
    mine = tmp_path / "mine"
    shutil.copytree(tmp_path / "made" / "rollouts", mine)
    (mine / "edge" / "task_0001.mp4").unlink()
    os.mkfifo(mine / "edge" / "task_0001.mp4")
    (mine / "edge" / "task_0002.mp4").unlink()
    (mine / "edge" / "task_0002.mp4").symlink_to(tmp_path / "nowhere.mp4")
    (mine / "edge" / "task_0003.mp4").unlink()
    (mine / "edge" / "task_0003.mp4").mkdir()
    outcome = _run(tmp_path / "run", "folder", dir=str(mine))
    assert outcome.exit_code == 2 and outcome.scorecard_path is not None, outcome.message
    records = load_records(tmp_path / "run" / "generation")
    assert [sid for sid, r in sorted(records.items()) if r.ok] == ["edge.task_0000"]
    # each in one line naming the file, as a missing one is: no class name, no traceback (pinbench's own) to read
    assert records["edge.task_0001"].error == (f"{mine / 'edge' / 'task_0001.mp4'}: a FIFO (named pipe), not a "
                                               "regular file (request edge.task_0001)")
    assert records["edge.task_0002"].error == (f"{mine / 'edge' / 'task_0002.mp4'}: a dangling symlink (to "
                                               f"{str(tmp_path / 'nowhere.mp4')!r}) (request edge.task_0002)")
    assert records["edge.task_0003"].error == (f"{mine / 'edge' / 'task_0003.mp4'}: is a directory, not a file "
                                               "(request edge.task_0003)")


def test_a_folder_generators_dir_with_a_line_break_is_named_as_it_is(tmp_path: Path) -> None:
    """``-g dir=$'mine\\n'`` was said ``-g dir=mine : not a folder`` (the error line's break made a space): the
    folder ``mine`` there is the one the user meant, and the name shown was not the one given."""
    from pinbench.ops.generation import rollouts_dir

    (tmp_path / "mine").mkdir()
    with pytest.raises(ValueError) as caught:
        rollouts_dir(f"{tmp_path / 'mine'}\n")
    assert str(caught.value) == (f"-g dir={tmp_path / 'mine'}\\n: not a folder (--generator folder copies the "
                                 "rollouts under it)")
    (tmp_path / "ünï cødé").mkdir()   # a name of spaces and accents is a folder like any
    assert rollouts_dir(str(tmp_path / "ünï cødé")) == tmp_path / "ünï cødé"


def test_a_skip_generation_run_refused_for_want_of_a_generating_run_leaves_no_folder(tmp_path: Path) -> None:
    """Refused ('generator.json is missing: run one first'), it left the run directory it had made, holding the
    fixture data and the staged inputs of a run that never ran, as a generator's refusal no longer does."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    out = tmp_path / "runs" / "remembench"
    result = CliRunner().invoke(app, ["run", "remembench", "--fixture", "--offline", "--skip-generation", "--out",
                                      str(out)])
    assert result.exit_code == 2 and "generator.json is missing" in result.output, result.output
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("spec", ["folder", "python:pinbench.ops.generators:folder"])
def test_the_folder_generator_scores_rollouts_made_elsewhere_and_never_a_stale_copy(
        tmp_path: Path, capfd: pytest.CaptureFixture[str], spec: str) -> None:
    """How a --fixture run (no -o videos) scores a folder of yours: ``folder`` copies each request's output from
    it, each rollout keyed by its own file's SHA-256, so a rollout replaced there is copied and scored again, said
    by name, and no other (a command that copies from a folder it names is keyed by its argv alone: the stored copy
    was reused, a silent stale number; keyed by the whole folder's digest, one file fixed copied every rollout
    again, "4 recomputed: generator changed" and a line per record moved aside)."""
    made = _run(tmp_path / "made", RENDER)
    assert made.exit_code == 0, made.message
    mine = tmp_path / "mine"
    shutil.copytree(tmp_path / "made" / "rollouts", mine)
    first = _run(tmp_path / "run", spec, dir=str(mine))
    assert first.exit_code == 0, first.message
    scores = {s: r.result for s, r in load_records(tmp_path / "run" / "samples").items()}
    assert scores == {s: r.result for s, r in load_records(tmp_path / "made" / "samples").items()}
    capfd.readouterr()

    shutil.copyfile(mine / "edge" / "task_0001.mp4", mine / "edge" / "task_0000.mp4")   # the same shape, other frames
    shutil.copyfile(mine / "edge" / "task_0001.mp4", mine / "edge" / "Task_0003 .mp4")   # misnamed: never scored
    again = _run(tmp_path / "run", spec, dir=str(mine))
    said = capfd.readouterr().err
    assert again.exit_code == 0
    assert "generate: 4 samples: 1 done, 3 reused, 0 failed" in said and "moved" not in said, said
    assert f"generate: {mine / 'edge' / 'task_0000.mp4'}: changed since its rollout was copied (SHA-256 " in said
    # as `pinbench rollouts check` names it: the run passed over it without a word
    assert f"generate: {mine / 'edge' / 'Task_0003 .mp4'}: no request names it, so it is not scored\n" in said
    (mine / "edge" / "Task_0003 .mp4").unlink()
    stored = tmp_path / "run" / "rollouts" / "edge" / "task_0000.mp4"
    assert stored.read_bytes() == (mine / "edge" / "task_0001.mp4").read_bytes()

    (mine / "edge" / "task_0002.mp4").unlink()
    capfd.readouterr()
    gone = _run(tmp_path / "run", spec, dir=str(mine))
    failures = (tmp_path / "run" / "failures.tsv").read_text()
    assert gone.exit_code != 0 and f"{mine / 'edge' / 'task_0002.mp4'}: not in -g dir" in failures
    # was "changed since its rollout was copied (not a readable file, ...); copied again": nothing was copied
    said = capfd.readouterr().err
    assert (f"generate: {mine / 'edge' / 'task_0002.mp4'}: not a readable file now, where its rollout was copied "
            "from (SHA-256 ") in said and "copied again" not in said, said
    with pytest.raises(RecipeError, match=f"-g dir={tmp_path / 'absent'}: not a folder"):
        _run(tmp_path / "other", spec, dir=str(tmp_path / "absent"))
    # no -g dir= read "-g dir=: not a folder", after seconds of fixture data built in the run's folder
    with pytest.raises(RecipeError) as caught:
        _run(tmp_path / "other", spec)
    assert str(caught.value) == ("--generator folder: give -g dir=DIR, the folder of your rollouts (each at its "
                                 "request's output path under it)")
    assert not (tmp_path / "other").exists()


def test_the_folder_generator_reuses_every_copy_when_its_dir_is_spelled_another_way(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The same -g dir by another spelling (a symlink to it, a path through ``..``) is the same folder of the
    same files: each copy is keyed by its file's SHA-256 and the folder by its resolved path. The raw spelling,
    kept in the signature's ``-g`` too, made it another generator: every rollout copied again ("4 recomputed:
    generator changed", a line per record moved aside) and the scorecard moved aside as of other rollouts."""
    made = _run(tmp_path / "made", RENDER)
    assert made.exit_code == 0, made.message
    mine = tmp_path / "mine"
    shutil.copytree(tmp_path / "made" / "rollouts", mine)
    (mine / "sub").mkdir()
    (tmp_path / "link").symlink_to(mine)
    assert _run(tmp_path / "run", "folder", dir=str(mine)).exit_code == 0
    for spelling in (tmp_path / "link", mine / "sub" / ".."):
        capfd.readouterr()
        again = _run(tmp_path / "run", "folder", dir=str(spelling))
        said = capfd.readouterr().err
        assert again.exit_code == 0, again.message
        assert "generate: 4 samples: 0 done, 4 reused, 0 failed" in said and "moved" not in said, said


def test_a_rollout_that_is_there_but_wrong_fails_as_invalid_and_a_missing_one_as_no_rollout(tmp_path: Path) -> None:
    """A folder's file of the wrong length failed its sample as ``NotGenerated: no rollout: ValueError: invalid
    rollout: ...``: "no rollout" of a file that is there, and two Python class names. It says what happened; a
    missing file still says "no rollout"."""
    made = _run(tmp_path / "made", RENDER)
    assert made.exit_code == 0, made.message
    mine = tmp_path / "mine"
    shutil.copytree(tmp_path / "made" / "rollouts", mine)
    request = {r.id: r for r in read_requests(tmp_path / "made" / "generation" / "requests.jsonl")}["edge.task_0001"]
    Render("frames").generate(request, mine / "edge" / "task_0001.mp4")   # there, a frame too many
    (mine / "edge" / "task_0002.mp4").unlink()
    outcome = _run(tmp_path / "run", "folder", dir=str(mine))
    assert outcome.exit_code == 2 and outcome.scorecard_path is not None, outcome.message
    failed = {f["sample_id"]: f["error"] for m in json.loads(outcome.scorecard_path.read_text())["metrics"].values()
              for f in m["failed"]}
    # the user's file, the one to fix (it named the copy in the run's rollouts, edge/task_0001.mp4)
    wrong = mine / "edge" / "task_0001.mp4"
    assert failed["task_0001"] == (f"invalid rollout: {wrong}: {request.frames + 1} frames, the request "
                                   f"asks {request.frames}")
    missing = mine / "edge" / "task_0002.mp4"
    assert failed["task_0002"] == f"no rollout: {missing}: not in -g dir (request edge.task_0002)"   # no class name
    rows = (tmp_path / "run" / "failures.tsv").read_text()
    assert f"\tinvalid rollout: {wrong}: {request.frames + 1} frames" in rows and "NotGenerated" not in rows
    # one generator per GPU names it too
    two = run_recipe(get_recipe("paibench-c").config(
        fixture=True, out_dir=tmp_path / "two", offline=True, options={"modalities": "edge"}, generator="folder",
        generator_options={"dir": str(mine)}, env={}, gpus=2))
    assert load_records(tmp_path / "two" / "generation")["edge.task_0001"].error.startswith(
        f"invalid rollout: {wrong}: "), two.message


def test_the_folder_generator_never_reuses_a_copy_made_while_its_file_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A rollout's key is its file's SHA-256 hashed before the copy: a file changed between the two (A to B) left a
    copy of B under A's key, which, once the file was A again, was reused: B scored as A. A kept copy is reused
    only when it is the file as it is now."""
    from pinbench.ops import generation

    made = _run(tmp_path / "made", RENDER)
    assert made.exit_code == 0, made.message
    mine, was = tmp_path / "mine", tmp_path / "was.mp4"
    shutil.copytree(tmp_path / "made" / "rollouts", mine)
    source = mine / "edge" / "task_0000.mp4"
    shutil.copyfile(source, was)
    hashed = generation.folder_sources(mine, read_requests(tmp_path / "made" / "generation" / "requests.jsonl"),
                                       InputDigests(tmp_path))
    shutil.copyfile(mine / "edge" / "task_0001.mp4", source)   # B, changed after A was hashed
    monkeypatch.setattr(generation, "folder_sources", lambda root, requests, digests: hashed)
    assert _run(tmp_path / "run", "folder", dir=str(mine)).exit_code == 2
    assert load_records(tmp_path / "run" / "generation")["edge.task_0000"].error == (
        "ValueError: result rejected: edge/task_0000.mp4: not a copy of its file in -g dir as that file is now (it "
        "changed while it was copied)")
    monkeypatch.undo()
    shutil.copyfile(was, source)   # A again
    capfd.readouterr()
    assert _run(tmp_path / "run", "folder", dir=str(mine)).exit_code == 0
    assert "generate: 4 samples: 1 done, 3 reused, 0 failed" in capfd.readouterr().err
    assert (tmp_path / "run" / "rollouts" / "edge" / "task_0000.mp4").read_bytes() == was.read_bytes()


def test_the_folder_generator_hashes_each_copy_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generate step hashed each copy twice, for its record and for the check of that record (200 rollouts of
    2 MB: 400 MB more read); the check now takes the hash the record was made with (``regular_sha256``)."""
    from pinbench.core import files
    from pinbench.ops import generation

    made = _run(tmp_path / "made", RENDER)
    assert made.exit_code == 0, made.message
    hashed: list[Path] = []

    def counted(path: Path | str) -> str:
        hashed.append(Path(path))
        return sha256_file(path)

    def counted_fd(fd: int) -> str:
        hashed.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        return sha256_fd(fd)

    sha256_file, sha256_fd = files.sha256_file, files.sha256_fd
    monkeypatch.setattr(files, "sha256_file", counted)
    monkeypatch.setattr(files, "sha256_fd", counted_fd)
    monkeypatch.setattr(generation, "sha256_file", counted)
    assert _run(tmp_path / "run", "folder", dir=str(tmp_path / "made" / "rollouts")).exit_code == 0
    copies = [p for p in hashed if (tmp_path / "run" / "rollouts") in p.parents]
    assert sorted(copies) == sorted((tmp_path / "run" / "rollouts").rglob("*.mp4")) and len(copies) == 4


def _padded(folder: Path, payload: bytes) -> None:
    """Each MP4 under ``folder`` ending in an MP4 ``free`` box of ``payload`` (the rollout check passes over it)."""
    for path in folder.rglob("*.mp4"):
        with open(path, "ab") as fh:
            fh.write(struct.pack(">I", len(payload) + 8) + b"free" + payload)


def test_an_unchanged_folder_rerun_reads_no_file_again_and_a_changed_one_is_still_seen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """An unchanged rerun of the ``folder`` generator read each file of -g dir and each kept copy again (500
    videos of 50 MB: 50 GB read to do nothing); now each is read only when its state changed since the run
    directory's input digests hashed it, and a source rewritten at its size with its mtime put back (its ctime) or
    another file renamed into its place at its size and mtime (its inode) is still copied again."""
    from pinbench.core import files, inputs

    made = _run(tmp_path / "made", RENDER)
    assert made.exit_code == 0, made.message
    mine = tmp_path / "mine"
    shutil.copytree(tmp_path / "made" / "rollouts", mine)
    _padded(mine, b"a" * 64)
    assert _run(tmp_path / "run", "folder", dir=str(mine)).exit_code == 0
    opened: list[Path] = []

    def counting_open_regular(path: Path | str, *args: Any, **kwargs: Any) -> int:
        opened.append(Path(path))
        return open_regular(path, *args, **kwargs)

    def counting_sha256_file(path: Path | str) -> str:
        opened.append(Path(path))
        return sha256_file(path)

    open_regular, sha256_file = files.open_regular, files.sha256_file
    monkeypatch.setattr(files, "open_regular", counting_open_regular)
    monkeypatch.setattr(files, "sha256_file", counting_sha256_file)
    monkeypatch.setattr(inputs, "open_regular", counting_open_regular)
    monkeypatch.setattr(files, "_HASHED", {})   # a rerun is a new process: nothing hashed in this one
    capfd.readouterr()
    assert _run(tmp_path / "run", "folder", dir=str(mine)).exit_code == 0
    assert "generate: 4 samples: 0 done, 4 reused, 0 failed" in capfd.readouterr().err
    assert [p for p in opened if mine in p.parents or tmp_path / "run" / "rollouts" in p.parents] == []
    monkeypatch.undo()

    rewritten = mine / "edge" / "task_0000.mp4"
    held = rewritten.stat()
    with open(rewritten, "r+b") as fh:   # the same size, other bytes, its mtime put back
        fh.seek(-64, os.SEEK_END)
        fh.write(b"b" * 64)
    os.utime(rewritten, ns=(held.st_atime_ns, held.st_mtime_ns))
    assert rewritten.stat().st_size == held.st_size and rewritten.stat().st_mtime_ns == held.st_mtime_ns
    renamed, other = mine / "edge" / "task_0001.mp4", tmp_path / "other.mp4"
    held = renamed.stat()
    shutil.copyfile(renamed, other)
    with open(other, "r+b") as fh:
        fh.seek(-64, os.SEEK_END)
        fh.write(b"c" * 64)
    os.utime(other, ns=(held.st_atime_ns, held.st_mtime_ns))
    os.replace(other, renamed)   # another file, at the same size and mtime
    capfd.readouterr()
    assert _run(tmp_path / "run", "folder", dir=str(mine)).exit_code == 0
    said = capfd.readouterr().err
    assert "generate: 4 samples: 2 done, 2 reused, 0 failed" in said, said
    for path in (rewritten, renamed):
        assert f"generate: {path}: changed since its rollout was copied (SHA-256 " in said
        assert (tmp_path / "run" / "rollouts" / path.relative_to(mine)).read_bytes() == path.read_bytes()


def test_a_secret_named_generator_options_value_is_redacted_from_the_whole_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """-g api_key=VALUE of no token's shape reached the generator's log, its signature (generator.json, the
    scorecard, the report) and a failed sample's reason whole: no variable named it a secret."""
    from pinbench.core.provenance import KEPT_SECRETS_ENV

    monkeypatch.delenv(KEPT_SECRETS_ENV, raising=False)   # the run keeps it in this process's environment
    (tmp_path / "keyed.py").write_text(
        "from render_generator import Render\nfrom pinbench.core.generation import Signature\n\n\n"
        "class Keyed(Render):\n"
        "    def __init__(self, api_key):\n"
        "        super().__init__()\n        self.key = api_key\n        print('connecting with', api_key)\n\n"
        "    def signature(self):\n        return Signature(model='keyed at ' + self.key, weights='v1')\n\n"
        "    def generate(self, request, out):\n"
        "        if request.id.endswith('1'):\n            raise RuntimeError('refused: ' + self.key)\n"
        "        super().generate(request, out)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    out = tmp_path / "run"
    _run(out, "python:keyed:Keyed", api_key="plain-key-9876")
    said = capfd.readouterr()
    leaked = [str(path) for path in out.rglob("*") if path.is_file() and b"plain-key-9876" in path.read_bytes()]
    assert leaked == [] and "plain-key-9876" not in said.out + said.err
    assert "connecting with ***" in (out / "generation" / "generator.log").read_text()


def test_a_secret_named_flag_of_a_command_generator_is_redacted_from_the_whole_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A command generator's argv given --api-key VALUE, --token=VALUE or env's MY_TOKEN=VALUE of no token's shape:
    each value reached the scorecard, generator.json, the report, diff.txt and what the run printed whole."""
    from pinbench.core.provenance import KEPT_SECRETS_ENV

    monkeypatch.delenv(KEPT_SECRETS_ENV, raising=False)   # the run keeps them in this process's environment
    script = "\"$0\" \"$1\" --request \"$2\" --out \"$3\""   # the words after {out} are the flags the test plants
    command = (f"command:env MY_TOKEN=plain-env-4417 sh -c '{script}' {sys.executable} "
               f"{HELPERS / 'render_generator.py'} {{request}} {{out}} --api-key plain-key-5521 --token=plain-tok-6630")
    out = tmp_path / "run"
    outcome = _run(out, command)
    assert outcome.exit_code == 0, outcome.message
    said = capfd.readouterr()
    for value in ("plain-env-4417", "plain-key-5521", "plain-tok-6630"):
        leaked = [str(path) for path in out.rglob("*") if path.is_file() and value.encode() in path.read_bytes()]
        assert leaked == [] and value not in said.out + said.err, (value, leaked)
    assert "--api-key *** --token=***" in (out / "generation" / "generator.json").read_text()


def test_a_secret_flag_inside_a_shell_script_of_a_command_generator_is_redacted_from_the_whole_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """``sh -c "... --hf-token VALUE ..."``: the flag stood inside one argv word, the script, and its value reached
    generator.json, the scorecard and the generator's log (the script echoes it) whole."""
    from pinbench.core.provenance import KEPT_SECRETS_ENV

    monkeypatch.delenv(KEPT_SECRETS_ENV, raising=False)   # the run keeps it in this process's environment
    script = "echo using --hf-token plain-sh-7731; \"$0\" \"$1\" --request \"$2\" --out \"$3\""
    command = (f"command:sh -c '{script}' {sys.executable} {HELPERS / 'render_generator.py'} {{request}} {{out}}")
    out = tmp_path / "run"
    outcome = _run(out, command)
    assert outcome.exit_code == 0, outcome.message
    said = capfd.readouterr()
    leaked = [str(path) for path in out.rglob("*") if path.is_file() and b"plain-sh-7731" in path.read_bytes()]
    assert leaked == [] and "plain-sh-7731" not in said.out + said.err, leaked
    assert "using --hf-token ***" in (out / "generation" / "generator.log").read_text()


def _save_verdicts(path: Path, requests: list[Request], mine: range) -> None:
    """One shard's saves: a verdict of one more of its own requests each time (a shard's run per save)."""
    from pinbench.ops.generation import _check_version, _Checked

    for index in mine:
        checked = _Checked(path, requests)
        checked.looked.add(requests[index].digest)
        checked.passed.add(f"{_check_version()} {requests[index].digest} False {'0' * 64}")
        checked.save()


def test_two_shards_saving_the_verdicts_at_once_lose_none(tmp_path: Path) -> None:
    """Two shards of one run save the generation folder's verdicts at the same moment: each read the file, merged
    its own and wrote it back, so a shard that wrote between another's read and write had its lines dropped (a
    check again on the next run). Now a save holds a lock across the read, merge and write: none is lost."""
    import multiprocessing

    from pinbench.ops.generation import CHECKED_FILE

    count, path = 150, tmp_path / CHECKED_FILE
    requests = [_request(id=f"t2v-{i:03d}", output=f"t2v-{i:03d}.mp4", seed=str(i)) for i in range(2 * count)]
    context = multiprocessing.get_context("fork")
    shards = [context.Process(target=_save_verdicts, args=(path, requests, share))
              for share in (range(0, count), range(count, 2 * count))]
    for shard in shards:
        shard.start()
    for shard in shards:
        shard.join(120)
        assert shard.exitcode == 0
    saved = {line.split(" ")[1] for line in path.read_text().splitlines()}
    assert saved == {request.digest for request in requests}, f"{2 * count - len(saved)} verdicts lost"


def test_the_check_version_changes_with_the_installed_pyav(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept verdict holds for the check's code: another PyAV (an upgrade reading a container otherwise) left the
    version as it was, and every rollout it had passed was reused unchecked. Now its version is part of it."""
    import av

    from pinbench.ops import generation

    generation._check_version.cache_clear()
    before = generation._check_version()
    monkeypatch.setattr(av, "__version__", f"{av.__version__}.1")
    generation._check_version.cache_clear()
    try:
        assert generation._check_version() != before
    finally:
        generation._check_version.cache_clear()


def test_the_check_version_changes_with_the_ffmpeg_under_pyav(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PyAV built on the system's FFmpeg keeps its version when FFmpeg is upgraded, and FFmpeg is what reads the
    container: the verdicts kept under the old libraries were reused unchecked."""
    import av

    from pinbench.ops import generation

    generation._check_version.cache_clear()
    before = generation._check_version()
    monkeypatch.setattr(av, "library_versions", {**av.library_versions, "libavformat": (99, 0, 0)})
    generation._check_version.cache_clear()
    try:
        assert generation._check_version() != before
    finally:
        generation._check_version.cache_clear()


def test_a_video_a_generator_wrote_beside_its_out_is_named_after_the_step(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A command that wrote its video into the rollouts folder under a name of its own: its sample failed with
    "wrote nothing to the path it was given", and the file it wrote was named nowhere (``rollouts check`` names
    such a file; the run passed over it without a word)."""
    script = tmp_path / "elsewhere.py"
    script.write_text("import pathlib, sys\n"
                      "out = pathlib.Path(sys.argv[1])\n"
                      "(out.parent / ('mine-' + out.name.lstrip('.'))).write_bytes(b'not scored')\n")
    outcome = _run(tmp_path / "run", f"command:{sys.executable} {script} {{out}}")
    said = capfd.readouterr().err
    assert outcome.exit_code == 2
    stray = sorted((tmp_path / "run" / "rollouts" / "edge").glob("mine-*"))
    assert len(stray) == 4
    for path in stray:
        assert f"generate: {path}: no request names it, so it is not scored\n" in said, said


def test_a_generator_that_changes_folder_under_a_relative_out_writes_where_the_run_looks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a relative ``--out``, ``out``, ``{out}``, ``{request}`` and the request's ``root`` were relative: a
    generator that changed folder (its model's folder) wrote its rollout there and read no request, and every
    sample said "wrote nothing to the path it was given". They are absolute; a sample with nothing written names
    the absolute path the run looked at."""
    elsewhere, work = tmp_path / "elsewhere", tmp_path / "work"
    elsewhere.mkdir()
    work.mkdir()
    (tmp_path / "moving.py").write_text(
        "import os\nfrom render_generator import Render\n\n\nclass Moving(Render):\n"
        "    def generate(self, request, out):\n"
        f"        os.chdir({str(elsewhere)!r})\n"
        "        assert request.path('context').is_file()\n"
        "        super().generate(request, out)\n\n\ndef make():\n    return Moving()\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    monkeypatch.chdir(work)
    moved = (f"command:sh -c 'cd {elsewhere} && exec {sys.executable} {HELPERS / 'render_generator.py'} "
             "--request \"$1\" --out \"$2\"' sh {request} {out}")
    for name, generator in (("python", "python:moving:make"), ("command", moved)):
        outcome = _run(Path(name), generator)
        assert outcome.exit_code == 0, (name, outcome.message, load_records(work / name / "generation"))
        assert len(list((work / name / "rollouts").rglob("*.mp4"))) == 4
    assert list(elsewhere.rglob("*")) == []
    outcome = _run(Path("nothing"), "command:sh -c 'cd /' sh {out}")
    error = load_records(work / "nothing" / "generation")["edge.task_0000"].error
    assert error == ("no rollout: edge/task_0000.mp4: the generator wrote nothing to the path it was given "
                     f"({work}/nothing/rollouts/edge/.task_0000.partial.mp4)"), error


def test_a_rollout_that_fails_the_check_is_kept_aside_to_look_at_never_scored_nor_reused(tmp_path: Path) -> None:
    """A rollout of the wrong frame count was deleted with its sample's failure: nothing was left to open and see
    what went wrong. It is moved to generation/rejected/ under its output's name, which the reason names; it is not
    a rollout (the sample fails, a rerun makes it again), and one made right later removes it."""
    from pinbench.media.video import video_info

    out = tmp_path / "run"
    rejected = out / "generation" / "rejected" / "edge" / "task_0000.mp4"
    for _ in range(2):   # the rerun generates it again: a rejected rollout is never reused
        outcome = _run(out, RENDER, mode="frames")
        assert outcome.exit_code == 2
        error = load_records(out / "generation")["edge.task_0000"].error
        assert error == ("invalid rollout: edge/task_0000.mp4: 10 frames, the request asks 9 (kept to look at "
                         f"under {out}/generation/rejected)"), error
        assert rejected.is_file() and not list((out / "rollouts").rglob("*.mp4"))
        assert video_info(rejected).n_frames == 10
    assert _run(out, RENDER).exit_code == 0
    assert not rejected.exists() and len(list((out / "rollouts").rglob("*.mp4"))) == 4


def test_a_stale_rejected_rollout_that_cannot_be_removed_fails_no_good_sample(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A good rollout, once in place, removes the rejected one an earlier run left for its output: where that removal
    raised (a rejected/ the run may not write), the sample was recorded failed though its rollout was in place. Now
    the sample is done and the file left is said once, by its path (root ignores chmod: the removal raises here)."""
    from pinbench.ops import generation

    out = tmp_path / "run"
    rejected = out / "generation" / "rejected" / "edge" / "task_0000.mp4"
    assert _run(out, RENDER, mode="frames").exit_code == 2 and rejected.is_file()
    clear = generation._clear

    def refused(path: Path) -> None:
        if "rejected" in path.parts:
            raise PermissionError(13, "Permission denied", str(path))
        clear(path)

    monkeypatch.setattr(generation, "_clear", refused)
    capfd.readouterr()
    outcome = _run(out, RENDER)
    said = capfd.readouterr().err
    assert outcome.exit_code == 0, said
    assert all(record.ok for record in load_records(out / "generation").values())
    assert said.count(f"generate: {rejected}: an earlier run's rejected rollout of edge/task_0000.mp4, not removed "
                      "(Permission denied); the rollout kept in its place passed the check\n") == 1, said
    assert rejected.is_file() and len(list((out / "rollouts").rglob("*.mp4"))) == 4


def test_a_kept_rollout_walks_the_rejected_folder_only_where_there_is_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each kept rollout walked generation/rejected/<output> for symlinks (a stat of each folder on the way) to
    clear an earlier run's rejected rollout, though most runs have no rejected folder: one look at it is enough."""
    from pinbench.ops import generation

    walked: list[str] = []
    rejects_inside = generation._rejects_inside

    def spied(store: Path, output: str) -> bool:
        walked.append(output)
        return rejects_inside(store, output)

    monkeypatch.setattr(generation, "_rejects_inside", spied)
    out = tmp_path / "run"
    assert _run(out, RENDER).exit_code == 0
    assert walked == [] and not (out / "generation" / "rejected").exists()
    assert _run(out, RENDER, mode="frames").exit_code == 2   # a rejected rollout, then a good one clears it
    assert _run(out, RENDER).exit_code == 0
    assert "edge/task_0000.mp4" in walked and not (out / "generation" / "rejected" / "edge" / "task_0000.mp4").exists()


def test_the_rejected_folder_is_named_by_its_absolute_path_under_a_relative_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a relative --out the reason named ``run/generation/rejected`` where the sample's other words name
    absolute paths."""
    monkeypatch.chdir(tmp_path)
    assert _run(Path("run"), RENDER, mode="frames").exit_code == 2
    error = load_records(tmp_path / "run" / "generation")["edge.task_0000"].error
    assert error == ("invalid rollout: edge/task_0000.mp4: 10 frames, the request asks 9 (kept to look at under "
                     f"{tmp_path}/run/generation/rejected)"), error


@pytest.mark.parametrize("planted", ["rejected", "rejected/edge"])
def test_a_symlink_planted_on_the_way_to_the_rejected_folder_is_not_followed_out_of_the_run(
        tmp_path: Path, planted: str) -> None:
    """A symlink at generation/rejected (or a folder in it) that leads out of the run directory: the rejected
    rollout replaced the file there, and a later good rollout's clearing deleted it. Now the rollout is not kept
    (removed, as when it cannot be moved) and nothing outside is touched."""
    out, victim = tmp_path / "run", tmp_path / "victim"
    assert _run(out, RENDER).exit_code == 0
    (victim / "edge").mkdir(parents=True)
    (victim / "edge" / "task_0000.mp4").write_bytes(b"precious")
    (victim / "task_0000.mp4").write_bytes(b"precious")
    link = out / "generation" / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim if planted == "rejected" else victim / "edge")
    outcome = _run(out, RENDER, mode="frames")
    assert outcome.exit_code == 2
    error = load_records(out / "generation")["edge.task_0000"].error
    assert error == "invalid rollout: edge/task_0000.mp4: 10 frames, the request asks 9", error
    assert _run(out, RENDER).exit_code == 0   # the good rollout's clearing of the rejected one
    assert (victim / "edge" / "task_0000.mp4").read_bytes() == b"precious"
    assert (victim / "task_0000.mp4").read_bytes() == b"precious"
    assert link.is_symlink()


def test_check_of_a_run_notes_a_video_in_its_rollouts_that_no_request_names(tmp_path: Path) -> None:
    """``pinbench check`` of a generating run said nothing of a file in its rollouts folder that no request names
    (the run named it once, as its generation ended): a note now, not a problem, as the scores are of the files its
    requests name."""
    from pinbench.core.check import check_run

    out = tmp_path / "run"
    assert _run(out, RENDER).exit_code == 0
    stray = out / "rollouts" / "edge" / "mine-task_0000.mp4"
    shutil.copyfile(out / "rollouts" / "edge" / "task_0000.mp4", stray)
    result = check_run(out)
    assert result.exit_code == 0, result.lines()
    assert f"{stray}: no request names it, so it is not scored" in result.notes, result.lines()


def test_check_of_a_limit_run_says_its_limit_of_a_video_no_request_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``--limit`` a video no request names may be a good rollout of a request the limit cut (an earlier
    full run's): ``pinbench check`` said "no request names it" as of any run. It reads the limit from the
    scorecard's config and says it, as the run's own line does: from the scorecard check_run loaded, not read a
    second time."""
    from pinbench.core import files
    from pinbench.core.check import check_run

    out = tmp_path / "run"
    recipe = get_recipe("paibench-c")
    assert run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, limit=1, generator=RENDER,
                                    options={"modalities": "edge"}, env={})).exit_code == 0
    stray = out / "rollouts" / "edge" / "task_0003.mp4"
    shutil.copyfile(out / "rollouts" / "edge" / "task_0000.mp4", stray)
    opened: list[str] = []
    open_regular = files.open_regular

    def counted(path: Path | str, *args: Any, **kwargs: Any) -> int:
        opened.append(Path(path).name)
        return open_regular(path, *args, **kwargs)

    monkeypatch.setattr(files, "open_regular", counted)
    result = check_run(out)
    assert opened.count("scorecard.json") == 1, opened
    assert f"{stray}: no request of this --limit 1 run names it, so it is not scored" in result.notes, result.lines()
    assert not [note for note in result.notes if "no request names it" in note], result.lines()


def test_a_video_a_generator_wrote_at_its_out_plus_a_suffix_is_named_in_its_sample_and_removed(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A command that added its own suffix to ``{out}`` (``out + '.mp4'``, as many a tool's ``--output`` does):
    its sample said only "wrote nothing to the path it was given", and the hidden file it wrote (no partial's
    name, so no rerun removed it) stayed in the rollouts folder, one more each run, named nowhere."""
    script = tmp_path / "suffixed.py"
    script.write_text("import pathlib, sys\npathlib.Path(sys.argv[1] + '.mp4').write_bytes(b'not scored')\n")
    for _ in range(2):
        outcome = _run(tmp_path / "run", f"command:{sys.executable} {script} {{out}}")
        assert outcome.exit_code == 2
        error = load_records(tmp_path / "run" / "generation")["edge.task_0000"].error
        assert error == ("no rollout: edge/task_0000.mp4: the generator wrote nothing to the path it was given "
                         "(.task_0000.partial.mp4) but wrote .task_0000.partial.mp4.mp4 beside it: write the "
                         "rollout to that very path (a command's {out}), adding nothing to its name"), error
        assert sorted(p.name for p in (tmp_path / "run" / "rollouts" / "edge").iterdir()) == []


def _still_running(pids: Path, expected: int) -> list[int]:
    """The processes ``pids`` lists (``expected`` of them) that still run, a moment later (dead ones not yet reaped
    are not running); killed, so that a red test leaves none behind."""
    left = [int(pid) for pid in pids.read_text().split()]
    assert len(left) == expected
    time.sleep(0.2)
    alive = [pid for pid in left if Path(f"/proc/{pid}").exists()
             and Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    return alive


def test_a_daemon_a_command_left_in_a_session_of_its_own_is_stopped_when_it_exits(tmp_path: Path) -> None:
    """A command that double-forked a daemon into a new session (``setsid``): the run's kill of its process group
    missed it, so it outlived the run, holding the log's pipe (each request waited 5 s for it). The command exits
    once its daemon has written its pid (read from a pipe): sooner, a loaded machine's run killed it before."""
    pids = tmp_path / "pids"
    script = tmp_path / "daemonises.py"
    script.write_text("import os, time\n"
                      "written, wrote = os.pipe()\n"
                      "if os.fork() == 0:\n"
                      "    os.setsid()\n"
                      "    if os.fork() == 0:\n"
                      f"        open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
                      "        os.write(wrote, b'.')\n"
                      "        time.sleep(60)\n"
                      "    os._exit(0)\n"
                      "os.wait()\n"
                      "os.read(written, 1)\n")
    started = time.monotonic()
    _run(tmp_path / "run", f"command:{sys.executable} {script} {{out}}")
    took = time.monotonic() - started
    alive = _still_running(pids, 4)
    assert alive == [] and took < 15, took


DAEMON_LIMIT_S = 6   # the time limit of the tests of a daemon left at a timeout: the guard's start, bash's and the
# daemon's within it on a loaded machine (at 1 s, a daemon not yet started left no pid to look at); under it plus 4 s
# the guard killed what it adopted without the 5 s wait for it


@pytest.mark.parametrize("then", ["sleep 100\n", "while [ ! -s {pids} ]; do sleep 0.05; done\nkill -STOP 0\n"],
                         ids=["hangs", "stops its own group"])
def test_a_daemon_a_command_left_in_a_session_of_its_own_is_stopped_when_it_times_out(tmp_path: Path,
                                                                                     then: str) -> None:
    """A command that started ``setsid sleep 1000 &`` and then hung past the per-request time limit: the run killed
    the guard with the command's group, before the guard could kill what it had adopted, and the sleep outlived
    the run. One that then stopped its group (``kill -STOP 0``: the guard too): the guard held the run's SIGTERM
    while stopped, the group's SIGKILL came after the 5 s wait, and the sleep outlived the run (11 s: the 5 s wait
    and the log's 5 s join that the sleep's pipe held)."""
    from pinbench.ops.generation import GeneratorError, GeneratorSpec, _run_command

    pids = tmp_path / "pids"
    script = tmp_path / "hangs.sh"
    script.write_text(f"setsid sh -c 'echo $$ >> {pids}; exec sleep 1000' &\n" + then.format(pids=pids))
    spec = GeneratorSpec(f"command:bash {script} {{out}}")
    started = time.monotonic()
    with pytest.raises(GeneratorError, match=f"did not finish within {DAEMON_LIMIT_S} s"):
        _run_command(spec.command, _request(), tmp_path / "t2v-000.mp4", DAEMON_LIMIT_S, tmp_path / "log", tmp_path)
    took = time.monotonic() - started
    assert _still_running(pids, 1) == [] and took < DAEMON_LIMIT_S + 4, took


def test_the_guard_reads_no_proc_when_the_command_left_nothing_running() -> None:
    """The guard read every process's /proc stat after each request to find what the command left: 30 ms or more
    a request on a machine of 1,100 processes (tools/bench_guard.py), where a command most often leaves nothing.
    Run in a process of its own: ``_kill_adopted`` kills every child of the process it runs in."""
    code = ("from pinbench.ops import generation\n"
            "def scans(parent):\n"
            "    raise SystemExit('read /proc')\n"
            "generation._children = scans\n"
            "generation._kill_adopted()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_what_a_command_left_running_is_stopped_when_it_exits(tmp_path: Path) -> None:
    """A command that started a child and exited: the child kept the log's pipe open (each request waited 5 s for
    it) and outlived the run."""
    pids = tmp_path / "pids"
    script = tmp_path / "leaves.py"
    script.write_text("import subprocess, sys\n"
                      "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                      f"open({str(pids)!r}, 'a').write(f'{{child.pid}}\\n')\n")
    _run(tmp_path / "run", f"command:{sys.executable} {script} {{out}}")
    alive = _still_running(pids, 4)
    assert alive == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_daemon_a_command_left_in_a_session_of_its_own_is_stopped_when_the_run_is_stopped(
        tmp_path: Path, signum: int) -> None:
    """Ctrl-C or SIGTERM (as the CLI's ``terminate_as_exit`` turns it into SystemExit) to the run while a command
    that started ``setsid sleep 1000 &`` runs: the run's group SIGKILL killed the guard before it could kill what
    it had adopted, so the sleep outlived the run. The run stands in a process of its own, signalled once the
    daemon's pid is written."""
    pids = tmp_path / "pids"
    script = tmp_path / "hangs.sh"
    script.write_text(f"setsid sh -c 'echo $$ >> {pids}; exec sleep 1000' &\nsleep 100\n")
    (tmp_path / "request.pickle").write_bytes(pickle.dumps(_request()))
    code = ("import pickle, sys\n"
            "from pathlib import Path\n"
            "from pinbench.core.rundir import terminate_as_exit\n"
            "from pinbench.ops.generation import GeneratorSpec, _run_command\n"
            "tmp = Path(sys.argv[1])\n"
            "request = pickle.loads((tmp / 'request.pickle').read_bytes())\n"
            "with terminate_as_exit():\n"
            "    _run_command(GeneratorSpec(f'command:bash {tmp / \"hangs.sh\"} {{out}}').command, request,\n"
            "                 tmp / 't2v-000.mp4', 100, tmp / 'log', tmp)\n")
    run = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (pids.exists() and pids.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.05)
    run.send_signal(signum)
    _, stderr = run.communicate(timeout=30)
    assert run.returncode != 0 and ("KeyboardInterrupt" in stderr or run.returncode == 128 + signum), stderr
    assert _still_running(pids, 1) == []


_A_REQUEST = """
import json, os, sys
from pathlib import Path
from pinbench.core.generation import Request
from pinbench.ops import generation

tmp = Path(sys.argv[1])
request = Request.from_json(json.loads(sys.argv[2]))
"""
INTERRUPTED_IN_THE_LOCK = _A_REQUEST + """
generation._run_command(["bash", "-c", f"kill -INT {os.getpid()}; exec sleep 100", "{out}"], request,
                        tmp / "t2v-000.mp4", 100, tmp / "log", tmp)
"""


def test_ctrl_c_as_the_run_takes_the_wait_lock_of_its_command_s_process_stops_the_run(
        tmp_path: Path, signalled_in_the_wait_lock: Callable[..., tuple[int, str, str]]) -> None:
    """Ctrl-C that came as the run's ``Popen.wait(timeout=...)`` for its command's guard had just taken the Popen's
    wait lock, before the ``try`` that gives it back: the lock stayed taken, and the run's last wait for the guard
    (``_stop``) waited on it forever, the guard long dead: 1 run in 60 on a loaded 2-core machine did not end on
    Ctrl-C. Here the lock sends that SIGINT itself as its first non-blocking take returns; the command sends one
    too (``kill -INT``), for a run that takes no such lock."""
    code, _, stderr = signalled_in_the_wait_lock(INTERRUPTED_IN_THE_LOCK, signal.SIGINT, str(tmp_path),
                                                 json.dumps(_request().to_json()))
    assert code == -signal.SIGINT and "KeyboardInterrupt" in stderr, stderr


def test_ctrl_c_as_a_python_generator_s_run_takes_the_wait_lock_of_its_worker_s_process_stops_the_run(
        tmp_path: Path, signalled_in_the_wait_lock: Callable[..., tuple[int, str, str]]) -> None:
    """The Python generator's side of the test above: Ctrl-C as the run's check that its worker still runs
    (``Worker._ask``'s ``poll()``, before each request after the first) had just taken the worker's Popen wait lock.
    The lock stays taken; the run ends all the same, as its stop of the worker (``_stop``) takes no such lock."""
    (tmp_path / "chatty.py").write_text(_CHATTY)
    code = _A_REQUEST + """
worker = generation.Worker("chatty:make", {}, tmp / "log")
try:
    for _ in range(3):
        worker.generate(request, tmp / "t2v-000.mp4", 100)
finally:
    worker.stop()
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    returncode, _, stderr = signalled_in_the_wait_lock(code, signal.SIGINT, str(tmp_path),
                                                       json.dumps(_request().to_json()), env=env)
    assert returncode == -signal.SIGINT and "in poll" in stderr and "KeyboardInterrupt" in stderr, stderr
    assert (tmp_path / "log").read_text().count("loading the model") == 1   # the first request made, the second not

def test_requests_of_a_fixture_name_the_fixture_run_directory_they_cannot_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--fixture builds the fixture's data in the fixture run's directory (runs/<recipe>/fixture-fixture, from the
    working folder): a ``runs`` there that is no folder (a read-only working folder alike) was said as an error of
    --out, a folder that could be written; --out is left as it was."""
    from typer.testing import CliRunner

    from pinbench.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").write_text("not a folder")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["requests", "paibench-c", "--fixture", "--out", str(out)])
    assert result.exit_code != 0
    assert ("runs/paibench-c/fixture-fixture: cannot create the fixture run's directory "
            "runs/paibench-c/fixture-fixture, where --fixture builds the fixture's data (Not a directory)"
            in result.output), result.output
    assert "--out" not in result.output and not out.exists()


def test_a_daemon_a_command_left_in_a_session_of_its_own_is_stopped_when_the_run_is_killed_by_kill_9(
        tmp_path: Path) -> None:
    """kill -9 of the run while its command hangs, after it started ``setsid sleep 1000 &``: the guard, on its
    parent's death, killed its own process group, itself included, so the sleep it had adopted outlived the run.
    The run here is a process that runs the command (``_run_command``), killed once the daemon wrote its pid."""
    pids = tmp_path / "pids"
    script = tmp_path / "hangs.sh"
    script.write_text(f"setsid sh -c 'echo $$ >> {pids}; exec sleep 1000' &\nsleep 100\n")
    code = ("import sys\n"
            "from pathlib import Path\n"
            "import json\n"
            "from pinbench.core.generation import Request\n"
            "from pinbench.ops.generation import GeneratorSpec, _run_command\n"
            "tmp = Path(sys.argv[1])\n"
            "request = Request.from_json(json.loads(sys.argv[2]))\n"
            f"_run_command(GeneratorSpec('command:bash {script} {{out}}').command, request, tmp / 't2v-000.mp4', 600,\n"
            "             tmp / 'log', tmp)\n")
    run = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), json.dumps(_request().to_json())],
                           start_new_session=True)
    deadline = time.monotonic() + 60
    while not (pids.exists() and pids.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(run.pid, signal.SIGKILL)   # the run only, not its process group
    run.wait()
    daemon, deadline = int(pids.read_text()), time.monotonic() + 30   # the guard looks at its parent every 0.2 s
    while (process_stat(str(daemon)) or ["Z"])[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _still_running(pids, 1) == []


SIGTERM_AT = """
import os, signal, subprocess, sys
from pinbench.ops import generation
real, armed, kill = generation._kill_adopted, sys.argv[1] == "start", subprocess.Popen.kill   # or at the wait
waitpid = os.waitpid

def reaped(pid, options):   # the guard's wait for its command, SIGTERM sent once it has the status, before it returns
    global armed
    got = waitpid(pid, options)
    if sys.argv[1] == "reaped" and (pid, options) == (-1, 0):
        armed = True
        os.kill(os.getpid(), signal.SIGTERM)
    return got

def killing():
    real()
    print("killed what it adopted", flush=True)

def stopped_again(proc):   # the guard's kill of its command, as it handles the first SIGTERM
    os.kill(os.getpid(), signal.SIGTERM)
    kill(proc)

def trace(frame, event, arg):
    global armed
    guard, reaping = frame.f_code is generation._guard.__code__, frame.f_code is generation._reaping.__code__
    if (reaping and event == sys.argv[1].replace("wait", "return")
            or guard and event == "exception" and issubclass(arg[0], OSError)):
        armed = True
    elif armed and (guard or reaping) and event == "line" and signal.getsignal(signal.SIGTERM) is generation._stopped:
        os.kill(os.getpid(), signal.SIGTERM)
    return trace

generation._kill_adopted, subprocess.Popen.kill, os.waitpid = killing, stopped_again, reaped
sys.settrace(trace)
status = generation._guard(sys.argv[2:])
sys.settrace(None)
print(status, flush=True)
"""


@pytest.mark.parametrize(("sent", "command", "status"), [("start", "sh -c 'exit 3'", -signal.SIGTERM),
                                                         ("call", "sleep 1000", -signal.SIGTERM),
                                                         ("wait", "sh -c 'exit 3'", 3),
                                                         ("reaped", "sh -c 'exit 3'", 3),
                                                         ("refused", "/no/such/command", -signal.SIGTERM)],
                         ids=["from its start", "in the wait", "after the command was waited for",
                              "as the wait returns the command's status", "after the command failed to start"])
def test_a_guard_sent_sigterm_at_each_step_kills_what_it_adopted_and_says_one_status(sent: str, command: str,
                                                                                    status: int) -> None:
    """A SIGTERM to the guard at each line of ``_guard`` and ``_reaping`` (a trace sends it, from the handler's
    setting on, from the wait's "call" or end on, or from the command's failed start on; the trace ends at the first
    raise), and a second one as the guard kills its command: one that landed after the wait, or in the ``except
    OSError``, raised ``_Stopped`` out of the guard's handling, which then died with a traceback, by no signal; the
    second skipped the kill of the command, and the guard waited on it. The first stops the guard, unless its
    command was waited for: its status stands, also where the SIGTERM came as the wait returned that status (sent
    from inside ``os.waitpid``, then at each line on): that said SIGTERM. Run in a process of its own: the guard
    kills every child of the process it runs in."""
    done = subprocess.run([sys.executable, "-c", SIGTERM_AT, sent, *shlex.split(command)], capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, f"killed what it adopted\n{status}\n"), done.stderr
    assert "Traceback" not in done.stderr, done.stderr


REAPED_BEFORE = """
import os, subprocess
from pinbench.ops import generation
proc = subprocess.Popen(["true"])
os.waitpid(proc.pid, 0)
print(generation._reaping(proc), proc.returncode)
"""


def test_a_guard_whose_command_its_watch_reaped_says_it_killed() -> None:
    """The guard's watch of its parent (``die_with_parent``), on the parent's death, reaps the guard's children
    (``_kill_adopted``), the command among them, while the guard waits for it: that wait failed with "No child
    processes" and a traceback. Here the command is reaped before the wait, in a process of its own (the wait
    reaps any child of the process it runs in)."""
    done = subprocess.run([sys.executable, "-c", REAPED_BEFORE], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, f"{-signal.SIGKILL} {-signal.SIGKILL}\n"), done.stderr


def test_a_guard_whose_command_dumped_core_names_the_signal_and_dumps_none(tmp_path: Path) -> None:
    """A command killed by SIGSEGV: the guard ends by the same signal so that the run names it, and, where core
    dumps are on (``ulimit -c unlimited``), it dumped a core of its own (a Python process, 24 MB) into the working
    folder. The command's own dump is off here, so that any core is the guard's."""
    guard = shlex.join([sys.executable, "-m", "pinbench.ops.generation", "--guard", "sh", "-c",
                        "ulimit -c 0; kill -SEGV $$"])
    done = subprocess.run(["bash", "-c", f"ulimit -c unlimited && exec {guard}"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == -signal.SIGSEGV, done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == []


SPAWNING = """
import pathlib, subprocess, time
from pinbench.core.generation import Capabilities, Signature

class Spawning:
    capabilities = Capabilities(kinds=frozenset({"prompt-schedule"}))

    def __init__(self, pids, hang):
        self.pids, self.hang = pathlib.Path(pids), hang == "yes"

    def signature(self):
        return Signature(model="spawning", weights="none")

    def generate(self, request, out):
        for setsid in (["setsid"], []):
            subprocess.Popen([*setsid, "sh", "-c", f"echo $$ >> {self.pids}; exec sleep 1000"])
        while len(self.pids.read_text().split()) < 2 if self.pids.exists() else True:
            time.sleep(0.02)
        if self.hang:
            time.sleep(100)
"""


@pytest.mark.parametrize("hang", ["yes", "no"])
def test_what_a_python_generator_started_is_stopped_with_its_worker(hang: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python generator that started a ``setsid sleep 1000`` and a plain one, then hung past the per-request
    time limit (``yes``) or returned (``no``, the run's end stops its worker): the kill of the worker's process
    group missed the one in a session of its own, which outlived the run."""
    from pinbench.ops.generation import GeneratorError, Worker

    (tmp_path / "spawning.py").write_text(SPAWNING)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    pids = tmp_path / "pids"
    worker = Worker("spawning:Spawning", {"pids": str(pids), "hang": hang}, tmp_path / "generator.log")
    try:
        if hang == "yes":
            with pytest.raises(GeneratorError, match=f"did not finish generating within {DAEMON_LIMIT_S} s"):
                worker.generate(_request(), tmp_path / "out.mp4", DAEMON_LIMIT_S)
        else:
            worker.generate(_request(), tmp_path / "out.mp4", 30)
    finally:
        worker.stop()
    assert _still_running(pids, 2) == []


HANGING = """
import time
from pinbench.core.generation import Capabilities, Signature

class Hanging:
    capabilities = Capabilities(kinds=frozenset({"prompt-schedule"}))

    def signature(self):
        return Signature(model="hanging", weights="none")

    def generate(self, request, out):
        print("rendering", request.id, flush=True)
        time.sleep(600)
"""


@pytest.mark.parametrize("form", ["command", "python"])
def test_a_request_past_the_time_limit_names_the_option_and_the_log_and_says_so_in_it(
        form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generator stopped past ``--generation-timeout``: its reason named neither the option that sets the limit
    nor the log, whose last line was the generator's own (``rendering t2v-000``), nothing saying it was stopped."""
    from pinbench.ops.generation import GeneratorError, GeneratorSpec, Worker, _run_command

    log = tmp_path / "generator.log"
    (tmp_path / "hanging.py").write_text(HANGING)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    worker = Worker("hanging:Hanging", {}, log)
    try:
        with pytest.raises(GeneratorError) as failed:
            if form == "command":
                spec = GeneratorSpec("command:sh -c 'echo rendering t2v-000; exec sleep 600' sh {out}")
                _run_command(spec.command, _request(), tmp_path / "t2v-000.mp4", 3, log, tmp_path)
            else:
                worker.generate(_request(), tmp_path / "t2v-000.mp4", 3)
    finally:
        worker.stop()
    doing = "" if form == "command" else " generating"
    said = f"the generator did not finish{doing} within 3 s (--generation-timeout); it was stopped"
    assert str(failed.value) == f"{said} (log: {log})"
    lines = log.read_text().splitlines()
    assert lines[-2:] == ["rendering t2v-000", f"--- {said} ---"], lines


DOUBLE_FORKING = """
import os, pathlib
from pinbench.core.generation import Capabilities, Signature

class DoubleForking:
    capabilities = Capabilities(kinds=frozenset({"prompt-schedule"}))

    def signature(self):
        return Signature(model="double-forking", weights="none")

    def generate(self, request, out):
        for _ in range(200):   # os.system("tool &") each time: its grandchild is orphaned at once, then ends
            if os.fork() == 0:
                if os.fork() == 0:
                    os._exit(0)
                os._exit(0)
            os.wait()
        pathlib.Path(out).write_bytes(b"made")
"""


def test_a_python_generator_s_orphans_that_ended_are_reaped_while_its_worker_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python generator whose short-lived grandchildren are orphaned (a double fork): its guard adopts them and
    waited on the worker alone, so each one that ended stayed a zombie for the worker's whole life (2,000 after
    2,000 such processes), each holding a process slot of the user's and the container's limit."""
    from pinbench.ops.generation import Worker

    (tmp_path / "double_forking.py").write_text(DOUBLE_FORKING)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    worker = Worker("double_forking:DoubleForking", {}, tmp_path / "generator.log")
    try:
        worker.generate(_request(), tmp_path / "out.mp4", 60)
        assert worker._proc is not None
        guard, deadline = worker._proc.pid, time.monotonic() + 10   # a loaded machine's guard reaps a moment later
        while (zombies := [pid for pid in os.listdir("/proc") if pid.isdigit()
                           and (fields := process_stat(pid) or [])[:1] == ["Z"] and int(fields[1]) == guard]) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        worker.stop()
    assert zombies == []


@pytest.mark.parametrize("does", ["chmod", "rewrite"])
def test_a_generator_that_wrote_nothing_and_only_chmodded_the_kept_rollout_wrote_nothing(does: str,
                                                                                         tmp_path: Path) -> None:
    """A generator that wrote nothing to its out, only a chmod on the rollout already at its place: that moved the
    file's state (ctime), and the run said it had written the rollout there itself. Its bytes say it did not; one
    that rewrote the rollout there is told so still."""
    from pinbench.core.generation import Signature
    from pinbench.ops.generation import GeneratorError, InvalidRollout, _keep

    request, rollouts = _request(conditioning=()), tmp_path / "rollouts"
    target = rollouts / request.output
    target.parent.mkdir(parents=True)
    target.write_bytes(b"the kept rollout")
    target.chmod(0o444)

    def make(request: Request, out: Path) -> None:
        if does == "chmod":
            target.chmod(0o644)
        else:
            target.unlink()
            target.write_bytes(b"a rollout of its own")

    with pytest.raises((GeneratorError, InvalidRollout)) as caught:
        _keep(request, rollouts, Signature(model="m", weights="w"), make, rollouts.parent / "generation")
    itself = f"but wrote {request.output} itself"
    assert (itself in str(caught.value)) == (does == "rewrite"), str(caught.value)
    assert str(caught.value).startswith("no rollout: " if does == "chmod" else "invalid rollout: ")


def test_a_folder_at_a_rollouts_place_that_cannot_be_listed_is_named_without_what_it_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check names what a folder left at a rollout's place holds; one it may not list (root lists any, so the
    refusal is a test double of ``Path.iterdir``) is named as such, where the listing raised out of the check."""
    from pinbench.ops.generation import check_rollout

    folder = tmp_path / "a.mp4"
    folder.mkdir()
    (folder / "video.mp4").write_bytes(b"")
    assert check_rollout(None, folder) == [f"{folder}: a folder (holding video.mp4), not a video file: write the "
                                           "rollout to that path itself, not into a folder there"]

    def refused(self: Path) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", refused)
    assert check_rollout(None, folder) == [f"{folder}: a folder (unlisted: Permission denied), not a video file: "
                                           "write the rollout to that path itself, not into a folder there"]


def test_a_one_frame_rollout_is_counted_in_the_singular(make_video) -> None:
    """A one-frame video read ``1 frames, the request asks 9``: the count goes through ``counted``."""
    from pinbench.ops.generation import check_rollout

    path = make_video(name="t2v-000.mp4", n_frames=1)
    request = _request(frames=9, fps=8.0, width=64, height=48)
    assert check_rollout(request, path) == [f"{path}: 1 frame, the request asks 9"]


def test_a_rollout_named_in_another_unicode_normalization_is_a_near_name_never_the_rollout(tmp_path: Path) -> None:
    """A name macOS wrote in NFD (``e`` + combining acute) where the request asks NFC ``é``: missing, with no hint;
    now the hint names it, and the rollout is still missing (names are exact)."""
    import unicodedata

    from pinbench.ops.generation import check_rollout

    asked = tmp_path / unicodedata.normalize("NFC", "café.mp4")
    written = unicodedata.normalize("NFD", "café.mp4")
    (tmp_path / written).write_bytes(b"")
    assert check_rollout(_request(), asked) == [
        f"{asked}: no rollout; {written!r} beside it differs only in case, spaces, separators or Unicode "
        "normalization (names are exact)"]


@pytest.mark.parametrize(("change", "message"), [
    ({"steps": "x"}, "-g steps=x: must be a whole number of 1 or more"),
    ({"guidance": "-1"}, "-g guidance=-1: must be a finite number of 0 or more"),
    ({"device": "tpu"}, "-g device=tpu: must be cpu, cuda or cuda:N"),
    ({"stpes": "2"}, "generator diffusers (pinbench.ops.generators:diffusers): -g stpes: not its option (it takes "
                     "model=, weights_sha256=, [steps=], "),
], ids=["steps", "guidance", "device", "misspelt"])
def test_a_shipped_generator_s_bad_value_is_refused_before_anything_is_written(tmp_path: Path, change,
                                                                               message) -> None:
    """``--generator diffusers -g steps=x`` was refused by the worker, after the fixture's data was built in the
    run's folder (``diffusers = Diffusers`` is no ``def`` its source check reads). The shipped constructors load
    nothing (Diffusers reads model_index.json), so the run builds one first: one line, nothing written."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "model_index.json").write_text('{"_class_name": "TextToVideoSDPipeline"}')
    options = {"model": str(model), "weights_sha256": "0" * 64, **change}
    with pytest.raises(RecipeError) as caught:
        _run(tmp_path / "run", "diffusers", **options)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value), caught.value
    assert not (tmp_path / "run").exists()
