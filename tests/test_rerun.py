"""A rerun that finds nothing to do answers from the run directory's manifest (pinbench.core.rerun, #32 item 3).

The toy recipe's procedure through ``Run.execute``: a finished run whose every sample is ok leaves
``.pinbench-rerun.json``; a rerun with the same inputs, code, options and directory answers from it without calling
the procedure, and records its invocation in the shard manifest only. Each thing a rerun would read, changed once,
makes it run the procedure again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from loose_task import LooseTask
from toy_recipe import toy_recipe

from pinbench.core import rerun
from pinbench.core.config import RunConfig
from pinbench.core.recipe import Recipe
from pinbench.core.run import Run, answer_unchanged
from pinbench.core.rundir import claim_run_dir
from pinbench.core.scorecard import MetricSpec
from pinbench.ops.launch import write_run_report

IDS = ["s0", "s1", "s2", "s3"]


class Procedure:
    """Test double for a recipe's ``run(run)``: one per-sample step over the videos folder's files, then the finish;
    counts its calls."""

    def __init__(self, fail: str | None = None) -> None:
        self.calls, self.fail = 0, fail

    def __call__(self, run: Run):
        self.calls += 1
        folder = Path(run.options.videos)
        tasks = [LooseTask(sid, frames=(folder / f"{sid}.mp4").read_text()) for sid in IDS]

        def score(task: dict) -> dict:
            if task["sample_id"] == self.fail:
                raise ValueError("truncated video")
            return {"f1": task["frames"].count("v") / 10, "err": 0.25}

        return run.finish([MetricSpec("f1"), MetricSpec("err")], run.score(tasks, score), pins={})


@pytest.fixture
def toy(tmp_path: Path) -> Recipe:
    return toy_recipe(tmp_path / "recipes")


@pytest.fixture
def videos(tmp_path: Path) -> Path:
    folder = tmp_path / "videos"
    folder.mkdir()
    for i, sid in enumerate(IDS):
        (folder / f"{sid}.mp4").write_bytes(b"v" * (i + 1))
    return folder


def _cfg(recipe: Recipe, out: Path, videos: Path, **flags) -> RunConfig:
    return recipe.config("Toy-Nano", out_dir=out, limit=4, options={"videos": str(videos)}, **flags)


def _run(recipe: Recipe, cfg: RunConfig, procedure: Procedure):
    with claim_run_dir(cfg):
        return Run(recipe, cfg, report=write_run_report).execute(procedure)


def _files(run: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(run).as_posix(): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in run.rglob("*") if p.is_file()}


def test_a_finished_run_answers_its_rerun_from_the_manifest(toy: Recipe, videos: Path, tmp_path: Path,
                                                            capsys) -> None:
    out, procedure = tmp_path / "run", Procedure()
    first = _run(toy, _cfg(toy, out, videos), procedure)
    assert first.exit_code == 0 and (out / rerun.RERUN_FILE).is_file()
    before = _files(out)
    capsys.readouterr()
    again = _run(toy, _cfg(toy, out, videos), procedure)
    assert procedure.calls == 1   # the recipe's procedure never ran
    assert (again.exit_code, again.scorecard_path, again.report_path) == (0, first.scorecard_path, first.report_path)
    said = capsys.readouterr().out
    assert "nothing changed since the scorecard of" in said and rerun.RERUN_FILE in said
    assert "result:" in said or "status" in said   # the scorecard's results, said again
    after = _files(out)
    assert [p for p in sorted(before.keys() | after.keys()) if before.get(p) != after.get(p)] == ["shards/0-of-1.json"]
    manifest = json.loads((out / "shards" / "0-of-1.json").read_text())
    assert manifest["summary"] == {"total": 4, "done": 0, "reused": 4, "failed": 0} and manifest["finished"]
    assert [s["sample_id"] for s in manifest["samples"]] == IDS


def _edit_input(recipe: Recipe, out: Path, videos: Path) -> dict:
    (videos / "s2.mp4").write_bytes(b"vwv")   # its size kept (the directory's identity), not its mtime
    return {}


def _edit_flag(recipe: Recipe, out: Path, videos: Path) -> dict:
    return {"offline": True}


def _edit_run_dir(recipe: Recipe, out: Path, videos: Path) -> dict:
    (out / "report" / "index.html").write_text("edited")
    return {}


def _rewrite_run_dir_file_keeping_size_and_mtime(recipe: Recipe, out: Path, videos: Path) -> dict:
    """The scorecard rewritten in place, at its size, its mtime put back (``os.utime``): only its ctime shows it."""
    scorecard = out / "scorecard.json"
    state = scorecard.stat()
    text = scorecard.read_bytes()
    scorecard.write_bytes(text.replace(b"1", b"2", 1) if b"1" in text else text.replace(b"0", b"9", 1))
    os.utime(scorecard, ns=(state.st_atime_ns, state.st_mtime_ns))
    assert (scorecard.stat().st_size, scorecard.stat().st_mtime_ns) == (state.st_size, state.st_mtime_ns)
    assert scorecard.read_bytes() != text
    return {}


def _edit_store(recipe: Recipe, out: Path, videos: Path) -> dict:
    with (out / "samples" / "run.jsonl").open("ab") as log:
        log.write(b"\n")
    return {}


def _edit_declaration(recipe: Recipe, out: Path, videos: Path) -> dict:
    with (recipe.dir / "recipe.yaml").open("a") as declaration:
        declaration.write("# edited\n")
    return {}


def _edit_env(recipe: Recipe, out: Path, videos: Path) -> dict:
    os.environ["TOY_HOME"] = "/elsewhere"   # undone by the monkeypatch of the test
    return {}


def _edit_read(recipe: Recipe, out: Path, videos: Path) -> dict:
    (videos.parent / "resolved-pins.yaml").write_text("now: resolved\n")
    return {}


@pytest.mark.parametrize("edit", [_edit_input, _edit_flag, _edit_run_dir,
                                  _rewrite_run_dir_file_keeping_size_and_mtime, _edit_store, _edit_declaration,
                                  _edit_env, _edit_read],
                         ids=["an input file", "a flag", "a file of the run directory",
                              "a file of the run directory rewritten at its size and mtime", "a store log",
                              "a file of the recipe", "a declared environment variable",
                              "a file read that no option names"])
def test_anything_a_rerun_would_read_changed_runs_the_procedure(toy: Recipe, videos: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch, edit) -> None:
    monkeypatch.setenv("TOY_HOME", "/toy")
    out, procedure = tmp_path / "run", Procedure()
    monkeypatch.setattr(rerun, "_read", set())
    rerun.depends_on(videos.parent / "resolved-pins.yaml")   # absent when the run reads it
    _run(toy, _cfg(toy, out, videos), procedure)
    cfg = _cfg(toy, out, videos, **edit(toy, out, videos))
    assert rerun.unchanged(toy, cfg) is None
    _run(toy, cfg, procedure)
    assert procedure.calls == 2


def test_verify_inputs_never_answers_from_the_manifest(toy: Recipe, videos: Path, tmp_path: Path) -> None:
    """Not even the manifest of a run with --verify-inputs: each one hashes every input again."""
    out, procedure = tmp_path / "run", Procedure()
    for _ in range(2):
        cfg = _cfg(toy, out, videos)
        cfg.verify_inputs = True
        _run(toy, cfg, procedure)
    assert procedure.calls == 2


def test_a_run_with_a_failed_sample_leaves_no_manifest_and_its_rerun_computes_it_again(
        toy: Recipe, videos: Path, tmp_path: Path) -> None:
    out, procedure = tmp_path / "run", Procedure()
    _run(toy, _cfg(toy, out, videos), procedure)
    assert (out / rerun.RERUN_FILE).is_file()
    (videos / "s1.mp4").write_bytes(b"vw")   # its size kept (the directory's identity), not its mtime
    failing = Procedure(fail="s1")
    assert _run(toy, _cfg(toy, out, videos), failing).exit_code != 0
    assert not (out / rerun.RERUN_FILE).exists()   # the earlier run's manifest went with its scorecard
    _run(toy, _cfg(toy, out, videos), failing)
    assert failing.calls == 2


def test_the_cli_answer_claims_nothing_it_cannot_answer(toy: Recipe, videos: Path, tmp_path: Path) -> None:
    """``pinbench run`` asks ``answer_unchanged`` before its doctor: a directory without a finished run is left as it
    is (not even created); a finished one answers."""
    out = tmp_path / "run"
    assert answer_unchanged(toy, _cfg(toy, out, videos)) is None and not out.exists()
    _run(toy, _cfg(toy, out, videos), Procedure())
    answered = answer_unchanged(toy, _cfg(toy, out, videos))
    assert answered is not None and answered.exit_code == 0 and answered.scorecard_path == out / "scorecard.json"


def test_a_manifest_that_is_not_one_is_never_trusted(toy: Recipe, videos: Path, tmp_path: Path) -> None:
    out, procedure = tmp_path / "run", Procedure()
    _run(toy, _cfg(toy, out, videos), procedure)
    data = json.loads((out / rerun.RERUN_FILE).read_text())
    for broken in ({**data, "version": 0}, {**data, "manifests": ["../../elsewhere/0-of-1.json"]}, [data]):
        (out / rerun.RERUN_FILE).write_text(json.dumps(broken))
        assert rerun.unchanged(toy, _cfg(toy, out, videos)) is None


def test_a_run_on_inputs_under_a_token_shaped_folder_keeps_no_manifest(toy: Recipe, tmp_path: Path) -> None:
    """The manifest keeps every input path whole (a rerun fingerprints them again), so .pinbench-rerun.json held a
    token-shaped folder's name: no manifest then, no file of the run directory names it, and a rerun computes."""
    token = "hf_" + "Ab3De6Gh9Jk2Mn5Pq8St"
    folder = tmp_path / token / "videos"
    folder.mkdir(parents=True)
    for i, sid in enumerate(IDS):
        (folder / f"{sid}.mp4").write_bytes(b"v" * (i + 1))
    out, procedure = tmp_path / "run", Procedure()
    assert _run(toy, _cfg(toy, out, folder), procedure).exit_code == 0
    assert not (out / rerun.RERUN_FILE).exists()
    assert [p for p in out.rglob("*") if p.is_file() and token in p.read_text(errors="replace")] == []
    assert _run(toy, _cfg(toy, out, folder), procedure).exit_code == 0 and procedure.calls == 2


def test_another_link_to_a_shared_run_dir_file_keeps_the_answer_a_rewrite_of_one_of_one_link_does_not(
        tmp_path: Path) -> None:
    """The sample cache shares a kept rollout by hard link, and each run directory that takes it moves the ctime of
    the inode all share: keyed with its ctime, a paibench-c run computed again after another run took its rollouts.
    A file of one link keeps its ctime in the key (its rewrite at its size, mtime put back, is seen)."""
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    (run_dir / "rollouts").mkdir(parents=True)
    cache.mkdir()
    shared, own = run_dir / "rollouts" / "a.mp4", run_dir / "scorecard.json"
    shared.write_bytes(b"rollout")
    own.write_bytes(b"card-1")
    os.link(shared, cache / "a.mp4")
    before = rerun.run_dir_state(run_dir)
    ctime = shared.stat().st_ctime_ns
    os.link(shared, cache / "taken-by-another-run.mp4")
    shared.chmod(0o444)
    assert shared.stat().st_ctime_ns != ctime or os.stat(shared).st_nlink == 3
    assert rerun.run_dir_state(run_dir) == before
    state = own.stat()
    own.write_bytes(b"card-2")
    os.utime(own, ns=(state.st_atime_ns, state.st_mtime_ns))
    assert rerun.run_dir_state(run_dir) != before
