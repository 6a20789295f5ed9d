"""The official run's working directory, command and outer timeout (CPU); the run itself on the GPU CI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pinbench_recipes.mind.official import (
    CACHE_WEIGHTS,
    COMMIT_STAMP,
    OfficialRunError,
    Runtime,
    command,
    earlier_runs,
    execute,
    gpu_mask,
    lay_out,
    new_work_dir,
)
from pinbench_recipes.mind.plan import make_plan
from pinbench_recipes.mind.tests.conftest import ALL_METRICS, PIN, Layout


@pytest.mark.parametrize(("gpus", "parent", "expected"), [(1, None, "0"), (2, None, "0,1"), (2, "0,1,2", "0,1"),
                                                         (2, "", "0,1"), (1, "0", "0")])
def test_gpu_mask_is_zero_to_n_minus_one(gpus: int, parent: str | None, expected: str) -> None:
    assert gpu_mask(gpus, parent) == expected


@pytest.mark.parametrize(("gpus", "parent", "words"), [(2, "4,5", "worker index"), (1, "GPU-3f2a", "worker index"),
                                                      (2, "1,0", "worker index"), (3, "0,1", "shows 2 GPU"),
                                                      (0, None, "at least one GPU")])
def test_gpu_mask_refuses_what_would_send_vipe_elsewhere(gpus: int, parent: str | None, words: str) -> None:
    with pytest.raises(OfficialRunError, match=words):
        gpu_mask(gpus, parent)


def test_command_and_environment(tmp_path: Path, runtime: Runtime) -> None:
    work = new_work_dir(tmp_path / "official")
    parent = {"PATH": "/usr/bin", "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz", "MY_API_KEY": "x" * 10,
              "CUDA_VISIBLE_DEVICES": "0,1,2,3", "LANG": "C.UTF-8"}
    argv, env = command(work, runtime, metrics=["lcm", "gsc"], video_max_time=None, gpus=2, parent_env=parent)
    assert argv == [sys.executable, str(runtime.mind_dir / "src" / "process.py"), "--gt_root", str(work.gt_root),
                    "--test_root", str(work.test_root), "--num_gpus", "2", "--metrics", "lcm,gsc",
                    "--output", str(work.output), "--dino_path", str(runtime.dino_dir)]
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["MIND_CACHE_DIR"] == str(work.cache)
    assert env["PYTHONPATH"] == str(runtime.mind_dir / "src")
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)   # its `python` and `vipe`
    assert env["HF_HUB_OFFLINE"] == "1" and env["TORCH_HOME"] == str(runtime.torch_home)
    assert "HF_TOKEN" not in env and "MY_API_KEY" not in env and env["LANG"] == "C.UTF-8"
    argv, _ = command(work, runtime, metrics=ALL_METRICS, video_max_time=240, gpus=1, parent_env={})
    assert argv[-2:] == ["--video_max_time", "240"]


def test_work_directory_layout(tmp_path: Path, layout: Layout, runtime: Runtime) -> None:
    pre = make_plan(layout.gt_root, layout.generated_root, metrics=ALL_METRICS, video_max_time=None)
    hashes = {s.key.sample_id: f"hash-{i}" for i, s in enumerate(pre.samples)}
    work = new_work_dir(tmp_path / "official")
    lay_out(work, pre.samples, metrics=ALL_METRICS, runtime=runtime, task_hashes=hashes)

    # every directory process.py lists exists, and only the planned samples are in them
    for perspective in ("1st_data", "3rd_data"):
        for test in ("mem_test", "action_space_test", "mirror_test"):
            assert (work.test_root / perspective / test).is_dir()
    assert sorted(os.listdir(work.test_root / "1st_data" / "mem_test")) == ["data-1"]
    assert sorted(os.listdir(work.test_root / "1st_data" / "mirror_test" / "loop-1")) == ["path-1.mp4", "path-2.mp4"]
    generated = work.test_root / "1st_data" / "mem_test" / "data-1" / "video.mp4"
    assert generated.is_symlink() and generated.resolve() == (layout.generated("1st_data", "mem_test", "data-1")
                                                              / "video.mp4").resolve()

    # the GT copy: real directories, read-only inputs linked, images.txt a writable copy of its own
    gt_dir = work.gt_root / "1st_data" / "test" / "mem_test" / "data-1"
    assert gt_dir.is_dir() and not gt_dir.is_symlink()
    assert (gt_dir / "video.mp4").is_symlink() and (gt_dir / "action.json").is_symlink()
    poses = gt_dir / "images.txt"
    assert poses.is_file() and not poses.is_symlink()
    original = layout.gt("1st_data", "mem_test", "data-1") / "images.txt"
    before = original.read_text()
    poses.write_text("overwritten by ViPE\n")
    assert original.read_text() == before
    assert not (work.gt_root / "1st_data" / "test" / "action_space_test" / "data-2" / "images.txt").exists()

    # a fresh cache holding the staged weights where get_*_path() looks; ./vipe in the CWD; the plan
    for name, relative in CACHE_WEIGHTS.items():
        assert (work.cache / relative).read_bytes() == name.encode()
    assert (work.cwd / "vipe").resolve() == (runtime.mind_dir / "vipe").resolve()
    assert json.loads(work.plan.read_text())["samples"] == hashes


def test_samples_without_a_generated_video_are_left_out(tmp_path: Path, layout: Layout, runtime: Runtime) -> None:
    import shutil

    shutil.rmtree(layout.generated("1st_data", "mem_test", "data-1"))
    pre = make_plan(layout.gt_root, layout.generated_root, metrics=ALL_METRICS, video_max_time=None)
    work = new_work_dir(tmp_path / "official")
    lay_out(work, pre.samples, metrics=ALL_METRICS, runtime=runtime,
            task_hashes={s.key.sample_id: "h" for s in pre.samples})
    assert os.listdir(work.test_root / "1st_data" / "mem_test") == []
    assert "1st_data.mem_test.data-1" not in json.loads(work.plan.read_text())["samples"]


def test_every_invocation_gets_its_own_directory_and_cache(tmp_path: Path) -> None:
    first, second = new_work_dir(tmp_path / "official"), new_work_dir(tmp_path / "official")
    assert (first.root.name, second.root.name) == ("run-001", "run-002") and first.cache != second.cache


def test_a_sweep_of_killed_staging_directories_waits_for_one_being_made(tmp_path: Path) -> None:
    """Shards share official/: a staging directory has no owner until its creator writes one, and a shard sweeping
    killed ones in that instant took it (seen on Slurm: the creator's owner.json had nowhere to go)."""
    import threading

    from pinbench.core.files import write_atomic
    from pinbench.core.rundir import this_process
    from pinbench_recipes.mind.official import STAGING_PREFIX, WorkDir, creating_work_dirs
    from pinbench_recipes.mind.steps import _sweep_killed

    parent = tmp_path / "official"
    parent.mkdir()
    staging = parent / f"{STAGING_PREFIX}being-made"
    with creating_work_dirs(parent):
        staging.mkdir()   # what new_work_dir has made before it writes the owner
        sweeper = threading.Thread(target=_sweep_killed, args=(parent, {}, {}))
        sweeper.start()
        sweeper.join(0.5)
        assert sweeper.is_alive() and staging.is_dir()   # it waits for the lock
        write_atomic(WorkDir(staging).owner, json.dumps(this_process()) + "\n")
        staging.rename(parent / "run-001")
    sweeper.join(10)
    assert not sweeper.is_alive() and (parent / "run-001" / "owner.json").is_file()


def test_an_lcm_runtime_needs_no_visual_or_dino_weight(tmp_path: Path, runtime: Runtime) -> None:
    """process.py loads MUSIQ, the LAION head and CLIP for ``visual`` only, DINOv3 for ``dino`` only (was: an
    ``-o metrics=lcm`` run refused to start until all four were fetched, CLIP's URL dead)."""
    from dataclasses import replace

    from pinbench_recipes.mind.official import cache_weights_read, reads_dino

    assert cache_weights_read(["lcm", "action"]) == () and not reads_dino(["lcm", "gsc"])
    assert cache_weights_read(["visual"]) == tuple(CACHE_WEIGHTS) and reads_dino(["dino"])
    lcm = replace(runtime, dino_dir=None, weights={})
    assert [p for p in lcm.problems(PIN) if "ffmpeg" not in p] == []
    work = new_work_dir(tmp_path / "official")
    argv, _ = command(work, lcm, metrics=["lcm"], video_max_time=None, gpus=1, parent_env={})
    assert "--dino_path" not in argv


def test_runtime_problems_name_each_missing_piece(runtime: Runtime) -> None:
    assert [p for p in runtime.problems(PIN) if "ffmpeg" not in p] == []
    (runtime.mind_dir / COMMIT_STAMP).write_text("0" * 40)
    runtime.weights["clip_vit_l14"].unlink()
    problems = runtime.problems(PIN)
    assert any("the pin is " + PIN in p for p in problems)
    assert any("clip_vit_l14" in p and "pinbench fetch mind" in p for p in problems)
    # the fetch named is this run's (ops.network.fetching_as), as every other way on says it
    from pinbench.core.recipe import get_recipe
    from pinbench.ops.network import fetching_as

    recipe = get_recipe("mind")
    cfg = recipe.config("mind-world-v2w", options={"metrics": "visual"}, out_dir=runtime.mind_dir.parent / "run",
                        check_required=False)
    with fetching_as(recipe, cfg):
        problems = runtime.problems(PIN)
    assert any(p.endswith("staged weight 'clip_vit_l14' not found (`pinbench fetch mind -c mind-world-v2w -o "
                          "metrics=visual`)") for p in problems), problems


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan killed in a container may wait for a PID 1 that never reaps it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_outer_timeout_kills_the_whole_process_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hung pool: the worker's child survives its parent unless the whole group is killed. The timeout counts from
    the hang (the grandchild's pid written, by rename): counted from the start, a loaded machine's two Python starts
    could outlast its 2 s."""
    work = new_work_dir(tmp_path / "official")
    work.cwd.mkdir()
    pid_file = tmp_path / "grandchild.pid"
    script = tmp_path / "hang.py"
    script.write_text(textwrap.dedent(f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(pid_file)!r} + ".partial", "w").write(str(child.pid))
        os.replace({str(pid_file)!r} + ".partial", {str(pid_file)!r})
        time.sleep(600)
    """))

    class HungBeforeItsTimeout(subprocess.Popen):
        def wait(self, timeout: float | None = None) -> int:
            deadline = time.monotonic() + 60
            while not pid_file.exists() and self.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            return super().wait(timeout)

    monkeypatch.setattr(subprocess, "Popen", HungBeforeItsTimeout)
    started = time.monotonic()
    outcome = execute(work, [sys.executable, str(script)], dict(os.environ), timeout_s=2)
    assert outcome.timed_out and outcome.returncode is None and time.monotonic() - started < 60
    grandchild = int(pid_file.read_text())
    time.sleep(0.2)
    assert not _running(grandchild)
    assert "hang.py" in work.log.read_text()


def test_finished_run_reports_its_exit_code(tmp_path: Path) -> None:
    work = new_work_dir(tmp_path / "official")
    work.cwd.mkdir()
    outcome = execute(work, [sys.executable, "-c", "print('done'); raise SystemExit(3)"], dict(os.environ),
                      timeout_s=60)
    assert outcome.returncode == 3 and not outcome.timed_out and "done" in work.log.read_text()


def test_earlier_runs_with_a_plan_and_a_result(tmp_path: Path) -> None:
    parent = tmp_path / "official"
    done, empty, broken = new_work_dir(parent), new_work_dir(parent), new_work_dir(parent)
    done.plan.write_text(json.dumps({"samples": {"1st_data.mem_test.a": "h1"}}))
    done.output.write_text('{"data": []}')
    empty.plan.write_text(json.dumps({"samples": {}}))          # killed before process.py wrote anything
    broken.plan.write_text("{cut")
    broken.output.write_text('{"data": []}')
    assert [(w.root.name, plan) for w, plan in earlier_runs(parent)] == [("run-001", {"1st_data.mem_test.a": "h1"})]


def _in_recipe_image() -> bool:
    import torch

    return torch.cuda.is_available() and (Path(os.environ.get("MIND_DIR", "/opt/mind")) / COMMIT_STAMP).is_file()


@pytest.mark.gpu
@pytest.mark.skipif(not _in_recipe_image(), reason="needs CUDA inside the mind image (MIND_DIR) and fetched weights")
def test_official_run_on_the_fixture_in_the_recipe_image(tmp_path: Path) -> None:
    """GPU CI, inside the recipe image: process.py itself on the fixture layout at the official canvas.

    Checks that the working directory is enough for the pinned process.py (no download, no wget), that every
    planned sample gets a record and that the native LCM block agrees with the official one frame by frame.
    """
    from pinbench.media.lpips import load_lpips
    from pinbench_recipes.mind import native
    from pinbench_recipes.mind.fixture import build_fixture
    from pinbench_recipes.mind.results import import_results, load_result_file
    from pinbench_recipes.mind.samples import AGREEMENT, compare_blocks
    from pinbench_recipes.mind.weights import recipe_pins, runtime_from_env

    data = build_fixture(tmp_path / "fixture")
    pre = make_plan(data.gt_root, data.generated_root, metrics=ALL_METRICS, video_max_time=None)
    assert pre.ok, pre.problems
    runtime = runtime_from_env(recipe_pins(), ALL_METRICS)  # the cache must hold `pinbench fetch mind`
    assert runtime.problems(PIN) == []
    work = new_work_dir(tmp_path / "official")
    lay_out(work, pre.samples, metrics=ALL_METRICS, runtime=runtime,
            task_hashes={s.key.sample_id: "gpu-ci" for s in pre.samples})
    argv, env = command(work, runtime, metrics=ALL_METRICS, video_max_time=None, gpus=1, parent_env=dict(os.environ))
    outcome = execute(work, argv, env, timeout_s=3600)
    assert outcome.returncode == 0, work.log.read_text()[-4000:]
    report = import_results(load_result_file(work.output), [s.key for s in pre.samples])
    assert all(i.ok for i in report.samples.values()), report.summary()
    pins = recipe_pins()
    lpips_model = load_lpips(runtime.torch_home / "hub" / "checkpoints" / "alexnet-owt-7be5be79.pth",
                             expected_sha256=pins.urls["alexnet"].sha256, device="cuda")
    for sample in pre.samples:
        if hasattr(sample, "actions"):
            block = native.continuation_block(sample.gt_dir / "video.mp4", sample.video,
                                              mark_time=sample.actions.mark_time, total_time=sample.actions.total_time,
                                              generated_frames=sample.video_frames, video_max_time=None,
                                              lpips_model=lpips_model)
            diffs = compare_blocks(report.samples[sample.key].record["lcm"], block)
            assert all(diffs[f] <= AGREEMENT[f] for f in diffs), (sample.key, diffs)
