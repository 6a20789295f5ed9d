"""Generation: resume by validity (never by existence), byte-exact collection, launch commands.

The real cosmos-framework is replaced by a fake ``cosmos_framework.scripts.inference`` module (a test
double run by the same launch code); the real one is exercised by the GPU test at the end.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pinbench.core.files import sha256_file
from pinbench_recipes.paibench_c.generate import (
    MIN_FRAMES,
    CosmosFrameworkGenerator,
    GenerationError,
    ValidityCache,
    collect_videos,
    pending_rows,
    vision_path,
)
from pinbench_recipes.paibench_c.tests.conftest import read_invocations, rows_for


def test_valid_output_is_kept_truncated_and_short_ones_are_regenerated(tmp_path: Path, make_clip) -> None:
    raw = tmp_path / "raw"
    make_clip(vision_path(raw, "task_0000"))
    truncated = make_clip(vision_path(raw, "task_0001"))
    data = truncated.read_bytes()
    truncated.write_bytes(data[: len(data) * 2 // 3])           # a killed writer: exists, non-empty, invalid
    make_clip(vision_path(raw, "task_0002"), n_frames=MIN_FRAMES - 1)   # decodes, but too few frames
    rows = rows_for(["task_0000", "task_0001", "task_0002", "task_0003"], tmp_path / "gt.mp4")
    pending = pending_rows(rows, raw)
    assert [r["name"] for r in pending] == ["task_0001", "task_0002", "task_0003"]
    assert vision_path(raw, "task_0000").exists()
    assert not vision_path(raw, "task_0001").exists() and not vision_path(raw, "task_0002").exists()


def test_validity_cache_remembers_successes_and_notices_changes(tmp_path: Path, make_clip) -> None:
    video = make_clip("v.mp4")
    cache = ValidityCache(tmp_path / "cache.json")
    assert cache.is_valid(video, MIN_FRAMES)
    cache.save()
    reloaded = ValidityCache(tmp_path / "cache.json")
    data = video.read_bytes()
    video.write_bytes(data[:-500])                                # size changes: decoded again, invalid
    assert not reloaded.is_valid(video, MIN_FRAMES)
    assert not reloaded.is_valid(tmp_path / "missing.mp4", MIN_FRAMES)


def test_collection_copies_byte_for_byte_and_reuses_equal_copies(tmp_path: Path, make_clip) -> None:
    raw, videos = tmp_path / "raw", tmp_path / "videos"
    for i in range(2):
        make_clip(vision_path(raw, f"task_000{i}"), seed=i)
    rows = rows_for(["task_0000", "task_0001", "task_0002"], tmp_path / "gt.mp4")
    first = collect_videos(rows, raw, videos)
    for name in ("task_0000", "task_0001"):
        assert (videos / f"{name}.mp4").read_bytes() == vision_path(raw, name).read_bytes()
        assert first[name].ok and first[name].copied and first[name].sha256 == sha256_file(videos / f"{name}.mp4")
    assert not first["task_0002"].ok and "no output" in first["task_0002"].error
    second = collect_videos(rows, raw, videos)
    assert not second["task_0000"].copied and second["task_0000"].sha256 == first["task_0000"].sha256
    # A stale, different copy is replaced by the source bytes.
    (videos / "task_0001.mp4").write_bytes(b"not the generated video")
    third = collect_videos(rows, raw, videos)
    assert third["task_0001"].copied
    assert (videos / "task_0001.mp4").read_bytes() == vision_path(raw, "task_0001").read_bytes()


def test_collection_keeps_a_valid_copy_when_raw_outputs_were_pruned(tmp_path: Path, make_clip) -> None:
    raw, videos = tmp_path / "raw", tmp_path / "videos"
    make_clip(vision_path(raw, "task_0000"))
    rows = rows_for(["task_0000"], tmp_path / "gt.mp4")
    sha = collect_videos(rows, raw, videos)["task_0000"].sha256
    vision_path(raw, "task_0000").unlink()
    again = collect_videos(rows, raw, videos)["task_0000"]
    assert again.ok and again.sha256 == sha and not again.copied


def test_collection_refuses_videos_of_other_tasks(tmp_path: Path, make_clip) -> None:
    videos = tmp_path / "videos"
    make_clip(videos / "task_0099.mp4")
    with pytest.raises(GenerationError, match=r"task_0099.mp4.*use a separate --out"):
        collect_videos(rows_for(["task_0000"], tmp_path / "gt.mp4"), tmp_path / "raw", videos)


def _generator(fake_framework: tuple[Path, Path], gpus: list[str], **kw) -> CosmosFrameworkGenerator:
    framework_dir, python = fake_framework
    return CosmosFrameworkGenerator(framework_dir=framework_dir, python=python,
                                    checkpoint_dir=Path("/cache/hub/models--nvidia--Cosmos3-Nano/snapshots/x"),
                                    gpu_ids=gpus, **kw)


def test_worker_launches_one_single_gpu_process_per_gpu_interleaved(tmp_path: Path, fake_framework) -> None:
    gen = _generator(fake_framework, ["0", "1"], offline=True)
    rows = rows_for([f"task_{i:04d}" for i in range(5)], tmp_path / "gt.mp4")
    shards = gen.split(rows, tmp_path / "work")
    assert [[json.loads(x)["name"] for x in s.read_text().splitlines()] for s in shards] == [
        ["task_0000", "task_0002", "task_0004"], ["task_0001", "task_0003"]]
    launches = gen.launches(shards, tmp_path / "raw", tmp_path / "logs")
    assert [launch.env["CUDA_VISIBLE_DEVICES"] for launch in launches] == ["0", "1"]
    argv = launches[0].argv
    assert argv[:3] == [str(fake_framework[1]), "-m", "cosmos_framework.scripts.inference"]
    for flag in ("--parallelism-preset=latency", "--no-guardrails", "--keep-going"):
        assert flag in argv
    assert argv[argv.index("-i") + 1] == str(shards[0]) and argv[argv.index("-o") + 1] == str(tmp_path / "raw")
    assert argv[argv.index("--checkpoint-path") + 1].endswith("snapshots/x")
    assert "--seed" not in argv                       # the per-task seed in the row applies
    assert launches[0].env["HF_HUB_OFFLINE"] == "1" and launches[0].env["LD_LIBRARY_PATH"] == ""
    assert launches[0].cwd == fake_framework[0]


def test_torchrun_launch_is_one_job_over_all_gpus(tmp_path: Path, fake_framework) -> None:
    gen = _generator(fake_framework, ["0", "1", "2", "3"], launch="torchrun")
    rows = rows_for(["task_0000", "task_0001"], tmp_path / "gt.mp4")
    [launch] = gen.launches(gen.split(rows, tmp_path / "work"), tmp_path / "raw", tmp_path / "logs")
    assert launch.argv[:3] == [str(fake_framework[1].parent / "torchrun"), "--standalone", "--nproc-per-node=4"]
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    with pytest.raises(ValueError, match="launch 'mpi'"):
        _generator(fake_framework, ["0"], launch="mpi")


def test_generate_then_resume_regenerates_only_the_invalid_output(tmp_path: Path, fake_framework) -> None:
    gen = _generator(fake_framework, ["0", "1"])
    raw, work = tmp_path / "raw", tmp_path / "work"
    rows = rows_for([f"task_{i:04d}" for i in range(4)], tmp_path / "gt.mp4")
    gen.generate(pending_rows(rows, raw), raw, work)
    first = read_invocations(raw)
    assert sorted(i["gpus"] for i in first) == ["0", "1"]
    assert all(collect_videos(rows, raw, tmp_path / "videos")[r["name"]].ok for r in rows)
    before = {r["name"]: vision_path(raw, r["name"]).stat().st_mtime_ns for r in rows}
    broken = vision_path(raw, "task_0002")
    broken.write_bytes(broken.read_bytes()[:300])
    pending = pending_rows(rows, raw)
    assert [r["name"] for r in pending] == ["task_0002"]
    gen.generate(pending, raw, work)
    second = read_invocations(raw)[len(first):]
    assert len(second) == 1 and second[0]["gpus"] == "0"            # only GPU 0 had work left
    for name, mtime in before.items():
        if name != "task_0002":
            assert vision_path(raw, name).stat().st_mtime_ns == mtime  # valid outputs untouched
    assert collect_videos(rows, raw, tmp_path / "videos")["task_0002"].ok


def test_a_failing_worker_is_reported_and_finished_samples_survive(tmp_path: Path, fake_framework,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FAIL", "task_0001")
    gen = _generator(fake_framework, ["0", "1"])
    raw = tmp_path / "raw"
    rows = rows_for(["task_0000", "task_0001", "task_0002"], tmp_path / "gt.mp4")
    with pytest.raises(GenerationError, match=r"worker_1.log \(exit 3\)"):
        gen.generate(rows, raw, tmp_path / "work")
    collected = collect_videos(rows, raw, tmp_path / "videos")
    assert collected["task_0000"].ok and collected["task_0002"].ok and not collected["task_0001"].ok


@pytest.mark.gpu
def test_real_cosmos_framework_generates_one_valid_edge_sample(tmp_path: Path) -> None:
    """GPU CI: one edge task through the real framework in the generation image (needs the fetched model)."""
    import torch

    from pinbench.core.recipe import get_recipe
    from pinbench.ops.downloads import locate
    from pinbench_recipes.paibench_c.fetch import effective_pins, locate_inputs
    from pinbench_recipes.paibench_c.rows import build_rows

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    framework = Path(os.environ.get("PAIBENCH_C_FRAMEWORK_DIR", "/opt/cosmos-framework"))
    cfg = get_recipe("paibench-c").config("Cosmos3-Nano", out_dir=tmp_path, limit=1)
    pins = effective_pins(cfg)   # the dataset revision a first `pinbench fetch` resolved on this machine
    inputs = locate_inputs(cfg, pins, need_model=True)
    rows = build_rows(inputs.tasks, "edge", inputs.dataset_dir)
    gen = CosmosFrameworkGenerator(framework_dir=framework, python=framework / ".venv" / "bin" / "python",
                                   checkpoint_dir=locate(pins.huggingface["cosmos3_nano"]), gpu_ids=["0"])
    gen.generate(rows, tmp_path / "raw", tmp_path)
    assert collect_videos(rows, tmp_path / "raw", tmp_path / "videos")[rows[0]["name"]].ok


def _hf_cache_with_main(hub: Path, repo_id: str, commit: str) -> None:
    """huggingface_hub's cache layout (blobs, snapshots as links, refs/main), as a hub download leaves it."""
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "abc123").write_text("{}")
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "tokenizer_config.json").symlink_to(Path("../../blobs/abc123"))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def test_the_generation_tokenizer_is_recorded(tmp_path: Path) -> None:
    from pinbench_recipes.paibench_c.generate import (
        BUNDLED_PROCESSOR_LOG,
        SOURCES_FILE,
        processor_source,
        record_processor,
    )

    pinned, main = "1" * 40, "2" * 40
    log = tmp_path / "edge" / "logs" / "worker_0.log"
    log.parent.mkdir(parents=True)
    log.write_text("loading\n")
    hub = tmp_path / "hub"
    _hf_cache_with_main(hub, "nvidia/Cosmos3-Nano", main)
    record = processor_source([log], "nvidia/Cosmos3-Nano", pinned, hub)
    assert record == {"source": "hub", "repo": "nvidia/Cosmos3-Nano", "requested": "main", "resolved": main}
    assert record_processor(tmp_path, record) is None
    assert json.loads((tmp_path / SOURCES_FILE).read_text())["processor"]["resolved"] == main

    log.write_text(f"x\n{BUNDLED_PROCESSOR_LOG} at /cache/hub/...\n")
    bundled = processor_source([log], "nvidia/Cosmos3-Nano", pinned, hub)
    assert bundled == {"source": "checkpoint-bundled", "repo": "nvidia/Cosmos3-Nano", "revision": pinned}
    problem = record_processor(tmp_path, bundled)
    assert problem is not None and "generation tokenizer changed between runs" in problem
    unseen = processor_source([], "nvidia/Cosmos3-Nano", pinned, tmp_path / "no-cache")
    assert unseen["resolved"] is None and record_processor(tmp_path, unseen) is None    # never replaces a known one
    assert json.loads((tmp_path / SOURCES_FILE).read_text())["processor"]["resolved"] == main
