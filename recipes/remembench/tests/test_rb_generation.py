"""RememBench generation (#29): a fixture run goes requests -> generation -> rollout check -> scores through the
recipe's own run.py, with the render test double (``tests/helpers/render_generator.py``, python and command forms)
and with the ``static`` baseline.

What a request states is checked against the fixture's release rows and prepared images (read here as raw JSON and
pixels) and against the numbers of RememBench's usage guide (``../shared/seeds/000_*.txt``) and
``../shared/specs/remembench.md``, never against the request builder.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from render_generator import Render
from rollout_checks import checked_rollouts, swap_rollout
from typer.testing import CliRunner

from pinbench.cli import app
from pinbench.core.config import RecipeError, Shard
from pinbench.core.generation import read_requests
from pinbench.core.recipe import get_recipe
from pinbench.core.run import FIXTURE_DIR
from pinbench.core.runner import load_records
from pinbench.media.video import read_video
from pinbench.ops.launch import run_recipe
from pinbench.ops.status import render, run_status

HELPERS = Path(__file__).resolve().parents[3] / "tests" / "helpers"
RENDER = "python:render_generator:render"
COMMAND = f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} --out {{out}}"
# The usage guide's T2V and I2V inputs: the paper settings a generator must not guess
PROMPT_STARTS = [0.0, 3.6, 6.2, 11.2]
T2V_FRAMES, T2V_FPS = 379, 24
I2V_FRAMES, I2V_FPS, I2V_SEED = 253, 16, "0"
LATENT_POSITIONS = 64   # "64 equally spaced positions over the full pose sequence"
# The decoded chunk layouts (specs §1): T2V frames 0-4, then 22 chunks of 17; I2V 0-12, then 15 chunks of 16
T2V_CHUNKS = [[0, 4]] + [[5 + 17 * k, 21 + 17 * k] for k in range(22)]
I2V_CHUNKS = [[0, 12]] + [[13 + 16 * k, 28 + 16 * k] for k in range(15)]
GROUPS = ("t2v", "i2v/rotation_180", "i2v/translation_180")
METRICS = ("clip", "lpips_alex", "tempssim", "drift")


@pytest.fixture(autouse=True)
def _helpers_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator worker is a child process: it imports the test double from the tests' helpers folder."""
    monkeypatch.setenv("PYTHONPATH", str(HELPERS))


def _run(out: Path, generator: str | None, asked: Path, limit: int | None = None, skip_generation: bool = False,
         **options: str):
    """A generating fixture run in ``out`` (with ``skip_generation``, one scoring what an earlier one stored), on a
    copy of the fixture data ``pinbench requests`` built (built once per module: it is most of a run's time)."""
    if not (out / FIXTURE_DIR).exists():
        shutil.copytree(_fixture_data(asked), out / FIXTURE_DIR)
    recipe = get_recipe("remembench")
    return run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, limit=limit, generator=generator,
                                    generator_options=options, skip_generation=skip_generation, env={}))


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _canonical_sha256(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                          .encode()).hexdigest()


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pinbench requests remembench --fixture``: the folder of its requests (and of the fixture it read)."""
    work = tmp_path_factory.mktemp("rb-requests")
    out = work / "requests"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)   # the fixture's data goes to the fixture run's directory, runs/remembench/...
        result = CliRunner().invoke(app, ["requests", "remembench", "--fixture", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 7 requests" in result.output
    return out


def _fixture_data(asked: Path) -> Path:
    """The data ``asked``'s requests were made from: the fixture run's (``pinbench requests --fixture`` built it)."""
    return asked.parent / "runs" / "remembench" / "fixture-fixture" / FIXTURE_DIR


def test_requests_state_what_the_release_and_the_guide_fix(asked: Path) -> None:
    release, images = _fixture_data(asked) / "RememBench", _fixture_data(asked) / "i2v-images"
    requests = {r.id: r for r in read_requests(asked / "requests.jsonl")}
    t2v, i2v = _rows(release / "data" / "t2v" / "test.jsonl"), _rows(release / "data" / "i2v" / "test.jsonl")
    assert sorted(requests) == sorted([r["scene_id"] for r in t2v] + [r["sample_id"] for r in i2v])
    assert any(int(row["seed"]) >= 2**63 for row in t2v)   # the fixture holds a seed no float carries
    lines = {json.loads(line)["id"]: line for line in (asked / "requests.jsonl").read_text().splitlines()}
    for row in t2v:
        request = requests[row["scene_id"]]
        assert request.kind == "prompt-schedule" and request.output == f"{row['scene_id']}.mp4"
        assert [(p.text, p.start_seconds) for p in request.prompts] == list(zip(row["prompts"], PROMPT_STARTS,
                                                                               strict=True))
        assert request.seed == row["seed"] and f'"seed":"{row["seed"]}"' in lines[request.id]   # a JSON string
        assert (request.frames, request.fps) == (T2V_FRAMES, T2V_FPS) == (row["num_frames"], row["fps"])
        assert (request.width, request.height) == (row["width"], row["height"])
        assert request.settings["chunk_layout"] == T2V_CHUNKS and request.conditioning == ()
    for row in i2v:
        request = requests[row["sample_id"]]
        assert request.kind == "image-camera" and [p.text for p in request.prompts] == [row["prompt"]]
        assert (request.frames, request.fps, request.seed) == (I2V_FRAMES, I2V_FPS, I2V_SEED)
        assert (request.frames, request.fps, request.seed) == (row["num_frames"], row["fps"], row["seed"])
        assert (request.width, request.height) == (row["width"], row["height"])
        assert request.settings["chunk_layout"] == I2V_CHUNKS
        assert request.settings["latent_positions"] == LATENT_POSITIONS
        image, trajectory = images / row["image_path"], release / row["trajectory_path"]
        with Image.open(image) as picture:
            pixels = hashlib.sha256(picture.convert("RGB").tobytes()).hexdigest()
        assert request.settings["initial_frame_rgb_sha256"] == pixels
        assert request.file("initial_frame").sha256 == _sha256(image) == _sha256(request.path("initial_frame"))
        assert request.file("trajectory").sha256 == _sha256(trajectory) == _sha256(request.path("trajectory"))
        assert request.path("trajectory").read_bytes() == trajectory.read_bytes()
        assert request.path("trajectory").name == Path(row["trajectory_path"]).name


def _calls(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _card(out: Path) -> dict:
    return json.loads((out / "scorecard.json").read_text())


def _complete_for_every_request(out: Path, n_requests: int) -> dict:
    """The scorecard of a complete run whose denominators are its requests, every metric of every group."""
    card = _card(out)
    requests = read_requests(out / "generation" / "requests.jsonl")
    assert len(requests) == n_requests
    assert card["status"] == "complete" and card["samples"]["n_expected"] == card["samples"]["n_ok"] == n_requests
    for name, metric in card["metrics"].items():
        group = name.rpartition("/")[0]
        asked = sorted(r.id for r in requests if (r.settings["split"] if r.kind == "prompt-schedule" else
                                                  f"i2v/{r.settings['setting']}") == group)
        assert metric["n_expected"] == metric["n_scored"] == len(asked) > 0 and not metric["failed"], name
        assert sorted(metric["sample_ids"]) == asked, name
    return card


def test_the_python_then_the_command_form_render_every_request_and_each_is_scored(asked: Path,
                                                                                 tmp_path: Path) -> None:
    """The render double in its python form over the whole fixture (3 T2V scenes, 4 I2V samples), then in its
    command form in the same run directory: another generator, so every rollout is made again, each by a separate
    program from the request file it was handed, and byte for byte the same (the render is a function of the
    request's digest: the command got every byte of its request, the 20-digit seed included); so every score is
    the stored one and the scorecard is the same."""
    out = tmp_path / "run"
    outcome = _run(out, RENDER, asked)
    assert outcome.exit_code == 0, outcome.message
    card = _complete_for_every_request(out, 7)
    assert set(card["metrics"]) == {f"{g}/{m}" for g in GROUPS for m in METRICS}
    generation = card["provenance"]["extra"]["generation"]
    assert generation["generator"] == RENDER
    assert generation["signature"] == {"model": "test render generator", "weights": "v1",
                                       "settings": {"mode": "render", "source_sha256": {
                                           "render_generator": _sha256(HELPERS / "render_generator.py")},
                                                    "factory": "render_generator:render"}}
    # the requests digest: SHA-256 of the canonical JSON list of each request's canonical-JSON SHA-256
    lines = [json.loads(line) for line in (asked / "requests.jsonl").read_text().splitlines()]
    assert generation["requests"] == _canonical_sha256([_canonical_sha256(line) for line in lines])
    assert generation["n_requests"] == 7
    release = _fixture_data(asked) / "RememBench" / "data"
    seeds = {row.get("sample_id", row.get("scene_id")): row["seed"]
             for split in ("t2v", "i2v") for row in _rows(release / split / "test.jsonl")}
    assert generation["seeds"] == seeds and generation["seeds"]["t2v-001"] == "18446744073709551615"
    assert set(generation["seconds"]) == set(seeds)
    # the requests the run generated are the ones `pinbench requests` writes, byte for byte
    assert (out / "generation" / "requests.jsonl").read_bytes() == (asked / "requests.jsonl").read_bytes()
    requests = read_requests(out / "generation" / "requests.jsonl")
    records = load_records(out / "generation")
    rollouts = {r.id: _sha256(out / "rollouts" / r.output) for r in requests}
    for request in requests:
        result = records[request.id].result
        assert records[request.id].ok and result["sha256"] == rollouts[request.id]
        assert result["seed"] == seeds[request.id] and result["request"] == request.digest
    checked = CliRunner().invoke(app, ["rollouts", "check", "remembench", str(out / "rollouts"), "--requests",
                                       str(asked / "requests.jsonl")])
    assert checked.exit_code == 0 and "7 of 7 rollouts are what their requests ask for" in checked.output
    scored = load_records(out)

    calls = tmp_path / "calls"
    again = _run(out, f"{COMMAND} --calls {calls}", asked)
    assert again.exit_code == 0, again.message
    assert {r.id: _sha256(out / "rollouts" / r.output) for r in requests} == rollouts
    assert sorted(_calls(calls)) == sorted(rollouts)   # every one made again, once
    command = _complete_for_every_request(out, 7)
    generation = command["provenance"]["extra"]["generation"]
    made = {sid: r.result["generator"] for sid, r in load_records(out / "generation").items()}
    assert made == dict.fromkeys(rollouts, _canonical_sha256(generation["signature"]))   # stored as the command's
    assert {k: m["value"] for k, m in command["metrics"].items()} == {k: m["value"] for k, m in
                                                                      card["metrics"].items()}
    assert {sid: r.result for sid, r in load_records(out).items()} == {sid: r.result for sid, r in scored.items()}
    assert generation["generator"] == f"{COMMAND} --calls {calls}" and generation["seeds"] == seeds
    assert generation["signature"]["settings"]["files"][str(HELPERS / "render_generator.py")] == _sha256(
        HELPERS / "render_generator.py")


def test_the_static_baseline_scores_perfect_revisit_memory_and_no_motion(asked: Path, tmp_path: Path) -> None:
    """Every frame of a static rollout is its first (grey for T2V, the initial frame for I2V): the revisit is the
    departure (CLIP 1, LPIPS 0), consecutive frames are equal (TempSSIM 1) and chunks do not drift (Drift 0)."""
    out = tmp_path / "run"
    outcome = _run(out, "static", asked)
    assert outcome.exit_code == 0, outcome.message
    card = _complete_for_every_request(out, 7)
    assert card["provenance"]["extra"]["generation"]["signature"]["model"] == "pinbench static baseline"
    for group in GROUPS:
        value = {m: card["metrics"][f"{group}/{m}"]["value"] for m in METRICS}
        assert value["lpips_alex"] == 0.0, group
        assert value["clip"] == pytest.approx(1.0, abs=1e-6) and value["tempssim"] == pytest.approx(1.0, abs=1e-6)
        assert value["drift"] == pytest.approx(0.0, abs=1e-6), (group, value)
    requests = {r.id: r for r in read_requests(out / "generation" / "requests.jsonl")}
    grey = read_video(out / "rollouts" / "t2v-000.mp4", [0, T2V_FRAMES - 1], backend="pyav").frames
    assert np.abs(grey.astype(int) - 128).max() <= 1
    first = read_video(out / "rollouts" / "s02-tr180.mp4", [0], backend="pyav").frames[0]
    with Image.open(requests["s02-tr180"].path("initial_frame")) as picture:
        initial = np.asarray(picture.convert("RGB"))
    assert np.abs(first.astype(int) - initial.astype(int)).max() <= 2   # yuv444p round trip


def test_the_render_double_is_a_function_of_its_request(asked: Path, tmp_path: Path) -> None:
    """What the command-form test leans on: two renders of one request are the same bytes, another request's
    are not."""
    first, second = read_requests(asked / "requests.jsonl")[:2]
    for name, request in (("a", first), ("b", first), ("c", second)):
        Render().generate(request, tmp_path / f"{name}.mp4")
    assert _sha256(tmp_path / "a.mp4") == _sha256(tmp_path / "b.mp4") != _sha256(tmp_path / "c.mp4")


def test_skip_generation_scores_the_stored_rollouts_without_the_generator_and_names_a_swapped_one(
        asked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """``--skip-generation`` after a generating run: the rollouts it stored are scored as they are, the generator
    never started (its call log keeps the first run's lines), nothing decoded again to check it, and the scorecard
    names who made them. A rollout swapped in since (100 frames of a 253-frame I2V request) is checked against its
    request and fails its sample in one line; the others score (was: RememBench refused the flag)."""
    out, calls = tmp_path / "run", tmp_path / "calls"
    assert _run(out, RENDER, asked, calls=str(calls)).exit_code == 0
    first = _complete_for_every_request(out, 7)
    made = sorted(_calls(calls))
    checked = checked_rollouts(monkeypatch)

    again = _run(out, None, asked, skip_generation=True)
    assert again.exit_code == 0, again.message
    assert sorted(_calls(calls)) == made and len(made) == 7 and checked == []
    card = _complete_for_every_request(out, 7)
    assert card["provenance"]["extra"]["generation"]["generator"] == RENDER
    assert {k: m["value"] for k, m in card["metrics"].items()} == {k: m["value"] for k, m in first["metrics"].items()}

    request, swapped = swap_rollout(out, "s02-tr180", 100)
    capfd.readouterr()
    outcome = _run(out, None, asked, skip_generation=True)
    assert outcome.exit_code == 2 and checked == [swapped], outcome.message
    said = f"invalid rollout: {request.output}: 100 frames, the request asks {I2V_FRAMES}"
    assert f"(e.g. s02-tr180: {said})" in capfd.readouterr().err
    card = _card(out)
    assert card["samples"]["n_ok"] == 6 and sorted(_calls(calls)) == made
    failed = {f["sample_id"]: f["error"] for m in card["metrics"].values() for f in m["failed"]}
    assert failed == {"s02-tr180": said}

    (out / "rollouts" / request.output).unlink()   # a stored rollout removed: named under the run's folder
    outcome = _run(out, None, asked, skip_generation=True)
    assert outcome.exit_code == 2, outcome.message
    failed = {f["sample_id"]: f["error"] for m in _card(out)["metrics"].values() for f in m["failed"]}
    assert failed == {"s02-tr180": "FileNotFoundError: rollout not found: looked for s02-tr180.mp4 and "
                                   f"s02-tr180/rollout.mp4 under {out / 'rollouts'}"}   # was: 'under -o videos'


def test_skip_generation_counts_the_samples_no_run_generated_missing_not_failed(asked: Path, tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture) -> None:
    """The scoring job after a generation array one of whose tasks never ran (a failed Slurm task, as submit lays
    MIND and RememBench out with --generator): that shard's samples counted failed ('rollout not found'), charged to
    the model; never computed, they count missing, as a merge counts a never-run shard's, and the run is partial
    (exit 2); ``pinbench status`` counts and lists them missing with the scorecard's reason (it said '3 failed',
    'rollout not found'), and so does the scoring step's own line (it said '3 failed' after the scorecard's fix).
    Once that shard generates, the same scoring run completes."""
    out = tmp_path / "run"
    shutil.copytree(_fixture_data(asked), out / FIXTURE_DIR)
    recipe = get_recipe("remembench")

    def run(**flags):
        return run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, env={}, **flags))

    assert run(generator=RENDER, skip_scoring=True, shard=Shard.parse("0/2")).exit_code == 0
    never = sorted(r.id for r in read_requests(out / "generation" / "requests.jsonl")
                   if not (out / "rollouts" / r.output).exists())
    assert len(never) == 3
    capsys.readouterr()
    assert run(skip_generation=True).exit_code == 2
    said = [line for line in capsys.readouterr().err.splitlines() if " samples: " in line]
    assert len(said) == 1 and "7 samples: 4 done, 0 reused, 3 missing (no run generated their rollouts) in " in said[0]
    card = _card(out)
    assert card["status"] == "partial" and (card["samples"]["n_ok"], card["samples"]["n_failed"],
                                            card["samples"]["n_missing"]) == (4, 0, 3)
    rows = [row.split("\t") for row in (out / "failures.tsv").read_text().splitlines()[1:]]
    assert sorted({sid for sid, _, _ in rows}) == never
    assert all(why.startswith("missing: no result from any shard (generation: no run stored ") for _, _, why in rows)
    assert all(not m["failed"] for m in card["metrics"].values())
    status = run_status(out, ask_slurm=False)
    assert status.counts == {"done": 4, "failed": 0, "missing": 3, "pending": 0}
    assert sorted(sid for shard in status.shards for sid, _ in shard.missing) == never
    text = render(status)
    assert "7 tasks: 4 done, 0 failed, 3 missing, 0 pending" in text and "failed samples:" not in text
    assert all(f"{sid} (shard 0/1): missing: no result from any shard (generation: no run stored " in text
               for sid in never), text
    # from the store alone too (the scoring run in flight, samples.jsonl not written yet): they were 3 failed
    (out / "samples.jsonl").unlink()
    assert run_status(out, ask_slurm=False).counts == {"done": 4, "failed": 0, "missing": 3, "pending": 0}
    assert run(generator=RENDER, skip_scoring=True, shard=Shard.parse("1/2")).exit_code == 0
    assert run(skip_generation=True).exit_code == 0 and _card(out)["status"] == "complete"
    assert run_status(out, ask_slurm=False).counts == {"done": 7, "failed": 0, "missing": 0, "pending": 0}


def test_skip_generation_refuses_rollouts_given_beside_it_in_one_line(tmp_path: Path) -> None:
    """The rollouts a --skip-generation run scores are the ones its generation stored: -o videos= is refused."""
    with pytest.raises(RecipeError) as info:
        get_recipe("remembench").config("mine", out_dir=tmp_path, skip_generation=True,
                                        options={"videos": str(tmp_path), "annotations": str(tmp_path)}, env={})
    assert str(info.value) == ("-o videos: this run scores the rollouts of its generation step (--generator, or "
                               "--skip-generation: what one stored); drop one of them")


def test_a_generator_that_fails_never_scores_the_rollout_another_generator_left(asked: Path, tmp_path: Path) -> None:
    """A second generator on the same --out that fails every request: the first generator's rollout still lies in
    the rollouts folder, its scoring record is for those very bytes, and that score came back as the second
    generator's (status complete, exit 0, the scorecard naming the failed generator). Each sample fails by name."""
    out = tmp_path / "run"
    assert _run(out, RENDER, asked, limit=1).exit_code == 0
    assert _card(out)["status"] == "complete"
    outcome = _run(out, "command:/bin/false {out}", asked, limit=1)
    assert outcome.exit_code == 2, outcome.message
    card = _card(out)
    assert card["status"] == "failed" and card["samples"]["n_ok"] == 0
    assert card["provenance"]["extra"]["generation"]["generator"] == "command:/bin/false {out}"
    failed = {f["sample_id"]: f["error"] for m in card["metrics"].values() for f in m["failed"]}
    log = out / "generation" / "generator.log"
    assert failed == {"t2v-000": f"no rollout: the generator exited 1 (log: {log})"}


def test_skip_generation_after_a_failed_generator_fails_its_samples_with_why(asked: Path, tmp_path: Path) -> None:
    """--skip-generation after a generator that failed every request, over the rollout an earlier generator left:
    that rollout was scored (its stored score reused) as the failed generator's, status complete, exit 0. Each
    sample now fails with the generating run's reason."""
    out = tmp_path / "run"
    assert _run(out, RENDER, asked, limit=1).exit_code == 0
    assert _run(out, "command:/bin/false {out}", asked, limit=1).exit_code == 2
    outcome = _run(out, None, asked, limit=1, skip_generation=True)
    assert outcome.exit_code == 2, outcome.message
    card = _card(out)
    assert card["status"] == "failed"
    assert card["provenance"]["extra"]["generation"]["generator"] == "command:/bin/false {out}"
    failed = {f["sample_id"]: f["error"] for m in card["metrics"].values() for f in m["failed"]}
    log = out / "generation" / "generator.log"
    assert failed == {"t2v-000": f"no rollout: the generator exited 1 (log: {log})"}
