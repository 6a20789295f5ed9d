"""MIND generation (#29): a fixture run goes requests -> generation -> rollout check -> scores through the recipe's
own run.py, for mem_test and action_space_test, with the render test double (``tests/helpers/render_generator.py``,
python and command forms), the ``static`` baseline and the ``replay`` oracle; mirror requests are refused.

What a request states is checked against the fixture's GT files (``action.json`` read as raw JSON, the GT video's
container and bytes) and the alignment rule of ``../shared/specs/mind.md`` §2 (frame 0 of the rollout is GT frame
``mark_time``; the rollout holds the continuation only), never against the request builder. The runs score
``--limit 3`` (1st_data: the two mem_test scenes and the action_space_test one) with ``-o video_max_time=101``
(100 frames each, the fewest process.py scores) and only the LCM block: the official CPU double costs ~45 ms a
frame pair.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import sys
from pathlib import Path

import av
import numpy as np
import pytest
from render_generator import Render
from rollout_checks import checked_rollouts, swap_rollout
from typer.testing import CliRunner

from pinbench.cli import app
from pinbench.core.config import RecipeError
from pinbench.core.generation import read_requests
from pinbench.core.recipe import get_recipe
from pinbench.core.run import FIXTURE_DIR
from pinbench.core.runner import load_records
from pinbench.media.video import read_video
from pinbench.ops.launch import run_recipe

HELPERS = Path(__file__).resolve().parents[3] / "tests" / "helpers"
RENDER = "python:render_generator:render"
COMMAND = f"command:{sys.executable} {HELPERS / 'render_generator.py'} --request {{request}} --out {{out}}"
LIMITED = ("1st_data.mem_test.scene-a", "1st_data.mem_test.scene-e", "1st_data.action_space_test.scene-b")
COHORTS = ("1st_data/mem_test", "1st_data/action_space_test")
LCM = ("lcm_mse", "lcm_psnr", "lcm_ssim", "lcm_lpips")
ACTION_KEYS = ("ws", "ad", "ud", "lr")


@pytest.fixture(autouse=True)
def _helpers_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator worker is a child process: it imports the test double from the tests' helpers folder."""
    monkeypatch.setenv("PYTHONPATH", str(HELPERS))


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pinbench requests mind --fixture -o metrics=lcm``: the folder of its requests (and of the fixture it read,
    which every run here copies instead of building it again)."""
    work = tmp_path_factory.mktemp("mind-requests")
    out = work / "requests"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)   # the fixture's data goes to the fixture run's directory, runs/mind/...
        result = CliRunner().invoke(app, ["requests", "mind", "--fixture", "-o", "metrics=lcm", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 5 requests" in result.output and "context-actions" in result.output
    return out


def _fixture_data(asked: Path) -> Path:
    """The data ``asked``'s requests were made from: the fixture run's (``pinbench requests --fixture`` built it)."""
    return asked.parent / "runs" / "mind" / "fixture-fixture" / FIXTURE_DIR


def _run(out: Path, generator: str | None, asked: Path, *, native: str = "0", timeout: float | None = None,
         skip_generation: bool = False, **generator_options: str):
    if not (out / FIXTURE_DIR).exists():
        shutil.copytree(_fixture_data(asked), out / FIXTURE_DIR)
    recipe = get_recipe("mind")
    return run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, limit=len(LIMITED),
                                    options={"metrics": "lcm", "native": native, "video_max_time": "101"},
                                    generator=generator, generator_options=generator_options,
                                    generation_timeout_s=timeout, skip_generation=skip_generation, env={}))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _card(out: Path) -> dict:
    return json.loads((out / "scorecard.json").read_text())


def test_requests_state_the_continuation_process_py_compares(asked: Path) -> None:
    gt_root = _fixture_data(asked) / "MIND-Data"
    requests = read_requests(asked / "requests.jsonl")
    samples = sorted(gt_root.glob("*/test/*/*/action.json"))
    assert sorted(r.id for r in requests) == sorted(
        f"{p.parts[-5]}.{p.parts[-3]}.{p.parts[-2]}" for p in samples)   # every GT continuation, no mirror
    assert {r.settings["test_type"] for r in requests} == {"mem_test", "action_space_test"}
    for request in requests:
        perspective, test, name = request.id.split(".")
        gt = gt_root / perspective / "test" / test / name
        actions = json.loads((gt / "action.json").read_text())
        mark, total = actions["mark_time"], actions["total_time"]
        with av.open(str(gt / "video.mp4")) as container:
            stream = container.streams.video[0]
            size, rate = (stream.width, stream.height), float(stream.average_rate)
        assert request.kind == "context-actions" and request.seed is None
        assert request.output == f"{perspective}/{test}/{name}/video.mp4"
        assert request.frames == total - mark   # the whole continuation, whatever -o video_max_time says
        assert (request.width, request.height) == size and request.fps == rate
        context, action_file = request.file("context"), request.file("actions")
        assert context.frames == (0, mark)       # GT frames before mark_time, never after
        assert context.sha256 == _sha256(gt / "video.mp4") == _sha256(request.path("context"))
        assert action_file.sha256 == _sha256(gt / "action.json") == _sha256(request.path("actions"))
        assert request.settings["actions"] == [{k: entry[k] for k in ACTION_KEYS} for entry in
                                               actions["data"][mark:total]]
        assert (request.settings["mark_time"], request.settings["total_time"]) == (mark, total)
        assert (request.settings["perspective"], request.settings["test_type"]) == (perspective, test)


def test_the_requests_do_not_depend_on_video_max_time(asked: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap is on the frames process.py reads, not on the rollout: the plan refuses a rollout shorter than its
    continuation (was: requests of 101 frames, which the plan then refused, so such a run could never score)."""
    monkeypatch.chdir(asked.parent)   # the fixture's data built for ``asked``, not built again
    result = CliRunner().invoke(app, ["requests", "mind", "--fixture", "-o", "metrics=lcm", "-o", "video_max_time=101",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "requests.jsonl").read_bytes() == (asked / "requests.jsonl").read_bytes()


def test_mirror_requests_are_refused_in_one_line_before_anything_is_generated(asked: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["requests", "mind", "--fixture", "--out", str(tmp_path / "requests")])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert result.output.startswith("error: mind: a generating run cannot score gsc: MIND publishes no mirror-test "
                                    "actions")
    assert result.output.endswith("; drop gsc from -o metrics: -o metrics=lcm,visual,dino,action\n")   # the way on
    assert not (tmp_path / "requests").exists()
    # the run's options refuse it (recipe.yaml's not_generated), before its code is imported or its data built:
    # it refused after 8 s of both, and left pinbench-run.json in --out
    recipe = get_recipe("mind")
    with pytest.raises(RecipeError, match="cannot score gsc: MIND publishes no mirror-test actions") as info:
        recipe.config(fixture=True, out_dir=tmp_path / "run", offline=True, generator="replay", env={})
    assert "\n" not in str(info.value)
    with pytest.raises(RecipeError, match="drop gsc from -o metrics$"):   # --skip-generation scores generated ones
        recipe.config(fixture=True, skip_generation=True, options={"metrics": "gsc"}, env={})
    cfg = recipe.config(fixture=True, generator="replay", options={"metrics": "lcm"}, env={})
    assert cfg.options.metrics == ("lcm",)


@pytest.mark.parametrize(("edit", "words"), [
    # past the 97 entries process.py reads (the plan checks those): a KeyError ended `pinbench requests`
    (lambda data: data["data"][-1].pop("ad"), "lacks finite numeric ws/ad/ud/lr action codes (no ad)"),
    (lambda data: data["data"][-1].update(ws=math.nan), "(ws: NaN)"),   # was written into the request
    # fewer entries than continuation frames: a request with fewer actions than frames, without a word
    (lambda data: data["data"].pop(), "'data' holds 131 entries: a rollout follows one action per frame"),
])
def test_an_action_the_rollout_cannot_follow_is_refused_in_one_line_naming_the_file(asked: Path, tmp_path: Path,
                                                                                   edit, words: str) -> None:
    gt = tmp_path / "MIND-Data"
    shutil.copytree(_fixture_data(asked) / "MIND-Data", gt)
    action = gt / "1st_data" / "test" / "mem_test" / "scene-a" / "action.json"
    data = json.loads(action.read_text())
    edit(data)
    action.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["requests", "mind", "-o", f"gt={gt}", "-o", "metrics=lcm", "--out",
                                      str(tmp_path / "requests")])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: {action}: ") and words in result.output, result.output


def test_requests_read_each_action_json_once(asked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan parses every GT action.json; the request's codes came from a second parse of the same file."""
    from pinbench_recipes.mind import layout

    reads: list[Path] = []
    read = layout.read_json_file
    monkeypatch.setattr(layout, "read_json_file", lambda path, *a, **kw: reads.append(path) or read(path, *a, **kw))
    result = CliRunner().invoke(app, ["requests", "mind", "-o", f"gt={_fixture_data(asked) / 'MIND-Data'}", "-o",
                                      "metrics=lcm", "--out", str(tmp_path / "requests")])
    assert result.exit_code == 0, result.output
    assert reads and len(reads) == len(set(reads)), sorted(reads)


def _complete_for_every_request(out: Path) -> dict:
    card = _card(out)
    requests = read_requests(out / "generation" / "requests.jsonl")
    assert sorted(r.id for r in requests) == sorted(LIMITED)
    assert card["status"] == "complete", card["status_reasons"]
    assert card["samples"]["n_expected"] == card["samples"]["n_ok"] == len(requests)
    for cohort in COHORTS:
        asked = sorted(r.id for r in requests if f"{r.settings['perspective']}/{r.settings['test_type']}" == cohort)
        for metric in LCM:
            entry = card["metrics"][f"{cohort}/{metric}"]
            assert entry["n_expected"] == entry["n_scored"] == len(asked) and sorted(entry["sample_ids"]) == asked
            assert math.isfinite(entry["value"])
    return card


def test_the_python_then_the_command_form_render_every_request_and_each_is_scored(asked: Path,
                                                                                 tmp_path: Path) -> None:
    """The python form, then the command form in the same run directory: another generator, so every rollout is
    made again by a separate program from its request file, byte for byte the same; every score is the stored
    one."""
    out = tmp_path / "run"
    outcome = _run(out, RENDER, asked)
    assert outcome.exit_code == 0, outcome.message
    card = _complete_for_every_request(out)
    generation = card["provenance"]["extra"]["generation"]
    assert generation["generator"] == RENDER and generation["signature"]["model"] == "test render generator"
    assert generation["n_requests"] == 3 and generation["seeds"] == {} and set(generation["seconds"]) == set(LIMITED)
    requests = read_requests(out / "generation" / "requests.jsonl")
    lines = [json.loads(line) for line in (out / "generation" / "requests.jsonl").read_text().splitlines()]
    digest = hashlib.sha256(json.dumps([hashlib.sha256(json.dumps(line, sort_keys=True, separators=(",", ":"))
                                                       .encode()).hexdigest() for line in lines],
                                       separators=(",", ":")).encode()).hexdigest()
    assert generation["requests"] == digest
    rollouts = {r.id: _sha256(out / "rollouts" / r.output) for r in requests}
    checked = CliRunner().invoke(app, ["rollouts", "check", "mind", str(out / "rollouts"), "--requests",
                                       str(out / "generation" / "requests.jsonl")])
    assert checked.exit_code == 0 and "3 of 3 rollouts are what their requests ask for" in checked.output
    scored = {sid: r.result for sid, r in load_records(out).items()}

    calls = tmp_path / "calls"
    again = _run(out, f"{COMMAND} --calls {calls}", asked)
    assert again.exit_code == 0, again.message
    assert sorted(calls.read_text().split()) == sorted(LIMITED)
    assert {r.id: _sha256(out / "rollouts" / r.output) for r in requests} == rollouts
    command = _complete_for_every_request(out)
    assert command["provenance"]["extra"]["generation"]["generator"] == f"{COMMAND} --calls {calls}"
    assert {k: m["value"] for k, m in command["metrics"].items()} == {k: m["value"] for k, m in
                                                                      card["metrics"].items()}
    assert {sid: r.result for sid, r in load_records(out).items()} == scored


def test_the_replay_oracle_scores_lcm_mse_0_and_psnr_as_upstream_scores_identical_frames(asked: Path,
                                                                                        tmp_path: Path) -> None:
    """The GT continuation itself: every frame is the GT's, so MSE and LPIPS are exactly 0 and SSIM 1, officially
    and natively. PSNR of identical frames is +inf: process.py writes Infinity, WorldFoundry's reader drops it
    (no finite frame to average), and the recipe fails that metric of the sample by name, saying so, never
    averaging an infinity or dropping the sample from the denominator."""
    out = tmp_path / "run"
    outcome = _run(out, "replay", asked, native="1")
    assert outcome.exit_code == 2, outcome.message   # partial: lcm_psnr is +inf for every sample
    card = _card(out)
    assert card["provenance"]["extra"]["generation"]["signature"]["model"] == "mind replay oracle: the GT continuation"
    for cohort in COHORTS:
        for prefix in ("", "native/"):
            metric = {m: card["metrics"][f"{cohort}/{prefix}{m}"] for m in LCM}
            assert metric["lcm_mse"]["value"] == 0.0 and metric["lcm_lpips"]["value"] == 0.0, (cohort, prefix)
            assert metric["lcm_ssim"]["value"] == pytest.approx(1.0, abs=1e-6)
            psnr = metric["lcm_psnr"]
            assert psnr["value"] is None and psnr["n_scored"] == 0 and psnr["n_expected"] == len(psnr["failed"]) > 0
            assert all("+inf: every frame is identical to the GT's" in f["error"] for f in psnr["failed"]), psnr
    assert card["metrics"]["memory_consistency_score"]["value"] == 1.0   # psnr has no value to normalise
    for sid, record in load_records(out).items():
        assert record.result["lcm_psnr_infinite_frames"] == record.result["official_frames"] == 100, sid
    request = next(r for r in read_requests(out / "generation" / "requests.jsonl") if r.id == LIMITED[2])
    mark = request.settings["mark_time"]
    rollout = read_video(out / "rollouts" / request.output, [0, request.frames - 1], backend="pyav").frames
    gt = read_video(request.path("context"), [mark, mark + request.frames - 1], backend="pyav").frames
    assert np.array_equal(rollout, gt)   # frame 0 is GT frame mark_time, the last is the GT's last


def test_the_static_baseline_holds_the_last_context_frame(asked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capfd: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    monkeypatch.setenv("PINBENCH_NOTICE_S", "0")   # every notice said: a log (CI) was silent for their 20 s
    outcome = _run(out, "static", asked, native="1")
    assert outcome.exit_code == 0, outcome.message
    said = capfd.readouterr().err
    for step in ("mind: official scores (the --fixture stand-in for process.py, or what an earlier invocation left)",
                 "mind: native cross-check (LPIPS loaded, LCM and GSC recomputed)"):
        assert f"{step} ...\n" in said and f"{step}: done in " in said, said
    card = _complete_for_every_request(out)
    assert card["provenance"]["extra"]["generation"]["signature"]["model"] == "pinbench static baseline"
    # the folders inside the run directory, named from it: two runs do not "ran differently" by their own folders
    assert (card["provenance"]["extra"]["gt_root"], card["provenance"]["extra"]["generated_root"]) == (
        "fixture_data/MIND-Data", "rollouts")
    assert all(card["metrics"][f"{c}/lcm_mse"]["value"] > 0 for c in COHORTS)   # the world moves on; it does not
    for request in read_requests(out / "generation" / "requests.jsonl"):
        mark = request.settings["mark_time"]
        frames = read_video(out / "rollouts" / request.output, [0, request.frames - 1], backend="pyav").frames
        last_context = read_video(request.path("context"), [mark - 1], backend="pyav").frames[0]
        assert np.array_equal(frames[0], frames[1])
        assert np.abs(frames[0].astype(int) - last_context.astype(int)).max() <= 2   # yuv444p round trip


def test_failed_generations_fail_their_samples_by_name_and_the_others_score(asked: Path, tmp_path: Path) -> None:
    """Each request its own hostility (the render double's ``each``): a failed one leaves no sample directory and a
    missing test directory is made, as MIND's layout needs (was: the plan refused the whole run, "generated video
    is missing" for the empty directory of a failed rollout, "generated test directory is missing" for the
    3rd_data tests a --limit run does not generate)."""
    out = tmp_path / "run"
    outcome = _run(out, RENDER, asked, timeout=3, mode="each")
    requests = {r.id: r for r in read_requests(out / "generation" / "requests.jsonl")}
    modes = {sid: Render("each").mode_of(request) for sid, request in requests.items()}
    failing = {sid for sid, mode in modes.items() if mode != "render"}
    assert failing and failing != set(modes), modes   # the fixture's requests give both (else pick another mode)
    assert outcome.exit_code == 2 and outcome.scorecard_path is not None, outcome.message
    card = _card(out)
    assert card["samples"]["n_expected"] == 3 and card["samples"]["n_ok"] == 3 - len(failing)
    failed = {f["sample_id"]: f["error"] for c in COHORTS for f in card["metrics"][f"{c}/lcm_mse"]["failed"]}
    assert set(failed) == failing
    for sid in failing:
        lead = "invalid rollout: " if modes[sid] in ("truncated", "frames", "symlink") else "no rollout: "
        assert failed[sid].startswith(lead), (modes[sid], failed[sid])
        assert not (out / "rollouts" / requests[sid].output).parent.exists()
    assert (out / "rollouts" / "3rd_data" / "mem_test").is_dir()


def test_skip_generation_scores_the_stored_rollouts_without_the_generator_and_names_a_swapped_one(
        asked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """``--skip-generation`` after a generating run: the rollouts it stored are scored as they are, the generator
    never started (its call log keeps the first run's 3 lines), nothing decoded again to check it, and the
    scorecard names who made them. A rollout swapped in since (50 frames of a 131-frame continuation) is checked
    against its request and fails its sample in one line; the others score (was: MIND refused the flag; and such
    a rollout stopped the whole plan, "fewer than the GT continuation")."""
    out, calls = tmp_path / "run", tmp_path / "calls"
    assert _run(out, RENDER, asked, calls=str(calls)).exit_code == 0
    first = _complete_for_every_request(out)
    checked = checked_rollouts(monkeypatch)

    again = _run(out, None, asked, skip_generation=True)
    assert again.exit_code == 0, again.message
    assert sorted(calls.read_text().split()) == sorted(LIMITED) and checked == []
    card = _complete_for_every_request(out)
    assert card["provenance"]["extra"]["generation"]["generator"] == RENDER
    assert {k: m["value"] for k, m in card["metrics"].items()} == {k: m["value"] for k, m in first["metrics"].items()}

    request, swapped = swap_rollout(out, LIMITED[0], 50)
    capfd.readouterr()
    outcome = _run(out, None, asked, skip_generation=True)
    assert outcome.exit_code == 2 and checked == [swapped], outcome.message
    said = f"invalid rollout: {request.output}: 50 frames, the request asks {request.frames}"
    assert f"(e.g. {LIMITED[0]}: {said})" in capfd.readouterr().err
    card = _card(out)
    assert card["samples"]["n_ok"] == 2 and sorted(calls.read_text().split()) == sorted(LIMITED)
    failed = {f["sample_id"]: f["error"] for c in COHORTS for f in card["metrics"][f"{c}/lcm_mse"]["failed"]}
    assert failed == {LIMITED[0]: said}


def test_skip_generation_without_a_generating_run_before_it_is_refused_in_one_line(asked: Path,
                                                                                  tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.raises(RecipeError) as info:
        _run(out, None, asked, skip_generation=True)
    assert str(info.value) == (f"--skip-generation: {out / 'generation' / 'generator.json'} is missing: it scores "
                               f"the rollouts that a run with --generator stored in {out / 'rollouts'}; run one first")
    assert not (out / "rollouts").exists() and not (out / "generation" / "requests.jsonl").exists()


def test_skip_generation_counts_a_continuation_no_run_generated_missing(asked: Path, tmp_path: Path) -> None:
    """A continuation whose generation never ran (its Slurm task failed; here a generating run of --limit 2) was
    scored failed ('no generated video: the model produced none'); never computed, it counts missing, and the
    suite's derived record is computed from the same records (pinbench check finds them consistent)."""
    from pinbench.core.check import check_run

    out = tmp_path / "run"
    shutil.copytree(_fixture_data(asked), out / FIXTURE_DIR)
    recipe = get_recipe("mind")

    def run(limit: int, **flags):
        return run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, limit=limit, env={},
                                        options={"metrics": "lcm", "native": "0", "video_max_time": "101"}, **flags))

    assert run(2, generator="replay", skip_scoring=True).exit_code == 0
    assert run(len(LIMITED), skip_generation=True).exit_code == 2
    card = _card(out)
    assert (card["samples"]["n_failed"], card["samples"]["n_missing"]) == (0, 1)
    assert card["metrics"]["1st_data/action_space_test/lcm_mse"]["missing"] == [LIMITED[2]]
    assert not [p for p in check_run(out).problems if "derived" in p]
    # pinbench status from the store alone (the scoring run in flight, samples.jsonl not written yet): it said failed
    from pinbench.ops.status import run_status

    (out / "samples.jsonl").unlink()
    status = run_status(out, ask_slurm=False)
    assert status.counts == {"done": 2, "failed": 0, "missing": 1, "pending": 0}
    assert [sid for shard in status.shards for sid, _ in shard.missing] == [LIMITED[2]]


@pytest.mark.parametrize("flags", [{"generator": "replay"}, {"skip_generation": True}], ids=["generator", "skip"])
def test_the_doctor_checks_the_lpips_trunk_the_native_check_of_generated_rollouts_reads(tmp_path: Path,
                                                                                     flags: dict) -> None:
    """The native cross-check scores generated rollouts as it scores given ones (was: the doctor checked the LPIPS
    trunk only with -o videos=, so a run that made or stored its rollouts met a missing one after the GPU work)."""
    from pinbench_recipes.mind.doctor import pins_read

    cfg = get_recipe("mind").config("m", out_dir=tmp_path, options={"gt": str(tmp_path), "metrics": "lcm"}, env={},
                                    **flags)
    assert "urls/alexnet" in pins_read(cfg)


def test_a_rerun_with_another_generator_keeps_the_earlier_scorecard_aside_and_its_own_rerun_changes_nothing(
        asked: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Another generator on the same ``--out``: the earlier scorecard, and the records files it names, are moved to
    ``scorecard.aside-<time>/`` and the run's ending says where, then what ran differently (was: replaced without a
    word). Its own rerun then changes nothing and says so (was: the scorecard named as official sources the
    ``process.py`` directory of the earlier generator's rollouts too, so it changed and was written again)."""
    out = tmp_path / "run"
    assert _run(out, RENDER, asked).exit_code == 0
    first = (out / "scorecard.json").read_bytes()
    capfd.readouterr()
    assert _run(out, "static", asked).exit_code == 0
    said = capfd.readouterr().out.splitlines()
    [aside] = out.glob("scorecard.aside-*")
    assert sorted(p.name for p in aside.iterdir()) == ["derived.jsonl", "samples.jsonl", "scorecard.json"]
    assert (aside / "scorecard.json").read_bytes() == first
    earlier = json.loads(first)["provenance"]["timestamp"]
    at = said.index(f"mind: the earlier scorecard (of {earlier}, other rollouts) moved to {aside}; to see what "
                    f"changed: pinbench compare {aside} {out}")
    following = [line for line in said[at + 1:] if line.startswith("mind:   ran differently: ")]
    assert following and len(following) <= 3
    assert following[0].startswith(f"mind:   ran differently: different generators: earlier {RENDER} ")
    second = (out / "scorecard.json").read_bytes()
    assert second != first

    assert _run(out, "static", asked).exit_code == 0
    assert "mind: nothing changed since the scorecard of" in capfd.readouterr().out
    assert (out / "scorecard.json").read_bytes() == second and len(list(out.glob("scorecard.aside-*"))) == 1
