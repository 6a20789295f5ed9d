"""Generation: Cosmos3 behind the generator protocol, launch commands, byte-exact collection for the evaluator.

The real cosmos-framework is replaced by a fake ``cosmos_framework.scripts.inference`` module (a test
double run by the same launch code); the real one is exercised by the GPU test at the end. Resume by validity
(never by existence) is the generation step's own (tests/test_generation.py).
"""

from __future__ import annotations

import builtins
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from pinbench.core.files import sha256_file
from pinbench.core.inputs import InputDigests
from pinbench.media.video import is_valid_video
from pinbench_recipes.paibench_c.generate import (
    MIN_FRAMES,
    CosmosFrameworkGenerator,
    GenerationError,
    ValidityCache,
    collect_videos,
    vision_path,
)
from pinbench_recipes.paibench_c.tests.conftest import read_invocations, rows_for


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
    rollouts, videos = tmp_path / "rollouts", tmp_path / "videos"
    for i in range(2):
        make_clip(rollouts / f"task_000{i}.mp4", seed=i)
    names = ["task_0000", "task_0001", "task_0002"]
    first = collect_videos(names, rollouts, videos, InputDigests(tmp_path),
                           failures={"task_0002": "GeneratorError: out of memory"})
    for name in ("task_0000", "task_0001"):
        assert (videos / f"{name}.mp4").read_bytes() == (rollouts / f"{name}.mp4").read_bytes()
        assert first[name].ok and first[name].copied and first[name].sha256 == sha256_file(videos / f"{name}.mp4")
    assert not first["task_0002"].ok and "generation failed: GeneratorError: out of memory" in first["task_0002"].error
    second = collect_videos(names, rollouts, videos, InputDigests(tmp_path))
    assert not second["task_0000"].copied and second["task_0000"].sha256 == first["task_0000"].sha256
    assert "no rollout" in second["task_0002"].error
    # A stale, different copy is replaced by the rollout's bytes.
    (videos / "task_0001.mp4").write_bytes(b"not the generated video")
    third = collect_videos(names, rollouts, videos, InputDigests(tmp_path))
    assert third["task_0001"].copied
    assert (videos / "task_0001.mp4").read_bytes() == (rollouts / "task_0001.mp4").read_bytes()


class VideoOpens:
    """Test double of ``open``: notes each video (a path naming ``.mp4``) opened, then opens it as ``open`` does."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self._open = builtins.open

    def __call__(self, file: Any, *args: Any, **kwargs: Any) -> Any:
        if ".mp4" in str(file):
            self.paths.append(Path(file).name)
        return self._open(file, *args, **kwargs)


def test_an_unchanged_rerun_opens_no_video(tmp_path: Path, make_clip, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both digests are the run directory's: the rollouts' from the generation step, the copies' as they were made.
    Collection read every rollout and its copy in full on every run (2.04x ``cat`` of them, tools/bench_folder.py)."""
    rollouts, videos, names = tmp_path / "rollouts", tmp_path / "videos", ["task_0000", "task_0001"]
    digests = InputDigests(tmp_path)
    for i, name in enumerate(names):
        digests.regular(make_clip(rollouts / f"{name}.mp4", seed=i))   # as the generation step's check of its kept
    validity = ValidityCache(tmp_path / "validity.json")
    opens = VideoOpens()
    monkeypatch.setattr(builtins, "open", opens)
    first = collect_videos(names, rollouts, videos, digests, cache=validity)
    # each rollout read once, by its copy (the rest: the copy's hidden temporary file, written then hashed)
    assert sorted(p for p in opens.paths if not p.startswith(".")) == ["task_0000.mp4", "task_0001.mp4"]
    digests.save()
    validity.save()
    opens.paths.clear()
    again = collect_videos(names, rollouts, videos, InputDigests(tmp_path), cache=ValidityCache(validity.path))
    assert opens.paths == []
    monkeypatch.undo()
    assert all(first[n].copied and not again[n].copied and again[n].sha256 == first[n].sha256 == sha256_file(
        videos / f"{n}.mp4") == sha256_file(rollouts / f"{n}.mp4") for n in names)


@pytest.mark.parametrize("change", ["edited in place, mtime put back", "replaced by rename"])
def test_a_copy_changed_at_its_size_and_mtime_is_copied_again(tmp_path: Path, make_clip, change: str) -> None:
    """The copy's digest is kept by its state: an edit in place moves its ctime, a file renamed over it has another
    inode."""
    rollouts, videos = tmp_path / "rollouts", tmp_path / "videos"
    rollout = make_clip(rollouts / "task_0000.mp4")
    digests = InputDigests(tmp_path)
    assert collect_videos(["task_0000"], rollouts, videos, digests)["task_0000"].copied
    copy, stat = videos / "task_0000.mp4", (videos / "task_0000.mp4").stat()
    time.sleep(0.05)   # past the clock tick of the copy's rename: the filesystem's ctime is coarser than its ns
    if change == "replaced by rename":
        other = tmp_path / "other.mp4"
        other.write_bytes(b"\0" * stat.st_size)
        other.replace(copy)
    else:
        with open(copy, "r+b") as fh:
            fh.write(b"\0" * 64)
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (copy.stat().st_size, copy.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    again = collect_videos(["task_0000"], rollouts, videos, digests)["task_0000"]
    assert again.copied and copy.read_bytes() == rollout.read_bytes()


def test_a_rollout_gone_or_too_short_is_not_collected(tmp_path: Path, make_clip) -> None:
    rollouts, videos = tmp_path / "rollouts", tmp_path / "videos"
    make_clip(rollouts / "task_0000.mp4")
    assert collect_videos(["task_0000"], rollouts, videos, InputDigests(tmp_path))["task_0000"].ok
    make_clip(rollouts / "task_0000.mp4", n_frames=MIN_FRAMES - 1)
    again = collect_videos(["task_0000"], rollouts, videos, InputDigests(tmp_path))["task_0000"]
    assert not again.ok and "invalid rollout" in again.error and not (videos / "task_0000.mp4").exists()


def test_a_rollout_that_is_no_regular_file_fails_its_task_saying_what_it_is(tmp_path: Path, make_clip) -> None:
    """A symlink loop ended the whole run ("[Errno 40] Too many levels of symbolic links"); a folder or a FIFO
    was called "undecodable or < N frames"."""
    rollouts, videos = tmp_path / "rollouts", tmp_path / "videos"
    make_clip(rollouts / "task_0000.mp4")
    (rollouts / "task_0001.mp4").symlink_to("task_0001.mp4")
    (rollouts / "task_0002.mp4").mkdir()
    os.mkfifo(rollouts / "task_0003.mp4")
    (rollouts / "task_0004.mp4").symlink_to(tmp_path / "gone.mp4")
    got = collect_videos([f"task_000{i}" for i in range(6)], rollouts, videos, InputDigests(tmp_path))
    assert got["task_0000"].ok
    for name, words in [("task_0001", "symlink loop"), ("task_0002", "a directory, not a file"),
                        ("task_0003", "not a regular file (a FIFO"), ("task_0004", "dangling symlink"),
                        ("task_0005", "no rollout")]:
        assert not got[name].ok and got[name].error.startswith(f"generation failed: {words}"), got[name].error
        assert str(rollouts / f"{name}.mp4") in got[name].error


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


def test_a_worker_on_a_mig_instance_logs_in_the_log_folder(tmp_path: Path, fake_framework) -> None:
    """A MIG instance named ``MIG-GPU-<uuid>/1/0`` (CUDA_VISIBLE_DEVICES, as ``gpu_devices`` takes it): its worker's
    log was ``worker_MIG-GPU-<uuid>/1/0.log``, a path into folders that do not exist."""
    mig = "MIG-GPU-5a1b2c3d-0000-1111-2222-333344445555"
    gen = _generator(fake_framework, [f"{mig}/1/0", f"{mig}/2/0"])
    shards = gen.split(rows_for(["task_0000", "task_0001"], tmp_path / "gt.mp4"), tmp_path / "work")
    launches = gen.launches(shards, tmp_path / "raw", tmp_path / "logs")
    assert [launch.log for launch in launches] == [tmp_path / "logs" / f"worker_{mig}_{k}_0.log" for k in (1, 2)]
    assert [launch.env["CUDA_VISIBLE_DEVICES"] for launch in launches] == [f"{mig}/1/0", f"{mig}/2/0"]


def test_torchrun_launch_is_one_job_over_all_gpus(tmp_path: Path, fake_framework) -> None:
    gen = _generator(fake_framework, ["0", "1", "2", "3"], launch="torchrun")
    rows = rows_for(["task_0000", "task_0001"], tmp_path / "gt.mp4")
    [launch] = gen.launches(gen.split(rows, tmp_path / "work"), tmp_path / "raw", tmp_path / "logs")
    assert launch.argv[:3] == [str(fake_framework[1].parent / "torchrun"), "--standalone", "--nproc-per-node=4"]
    assert launch.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    with pytest.raises(ValueError, match="launch 'mpi'"):
        _generator(fake_framework, ["0"], launch="mpi")


def test_cosmos3_makes_a_batch_in_one_launch_per_modality_and_renames_each_rollout(tmp_path: Path,
                                                                                     fake_framework) -> None:
    """The protocol's batch: every edge request in one launch of the framework (both GPUs), each vision.mp4 renamed,
    byte for byte, to the place the run checks it; the rows hold the files where the run staged them."""
    from pinbench.core.generation import Conditioning, Request
    from pinbench_recipes.paibench_c.generate import Cosmos3

    gt = tmp_path / "staged" / "gt.mp4"
    gt.parent.mkdir()
    gt.write_bytes(b"the GT video")
    requests = [Request(id=f"edge.task_000{i}", kind="control-video", recipe="paibench-c",
                        output=f"edge/task_000{i}.mp4", frames=121, fps=30, width=96, height=72, seed="1",
                        conditioning=(Conditioning("context", "gt.mp4", "0" * 64),), root=gt.parent,
                        settings={"modality": "edge", "row": rows_for([f"task_000{i}"], Path("x"))[0]})
                for i in range(3)]
    outs = [tmp_path / "rollouts" / "edge" / f".task_000{i}.partial.mp4" for i in range(3)]
    Cosmos3(_generator(fake_framework, ["0", "1"]), model="m", weights="w").generate_batch(
        list(zip(requests, outs, strict=True)))
    invocations = read_invocations(tmp_path / "rollouts" / "edge" / "raw")
    assert sorted(i["gpus"] for i in invocations) == ["0", "1"]
    assert all(out.is_file() for out in outs)
    rows = [json.loads(line) for shard in sorted((tmp_path / "rollouts" / "edge").glob("shard_*.jsonl"))
            for line in shard.read_text().splitlines()]
    assert {row["vision_path"] for row in rows} == {str(gt)}


def test_a_failing_worker_is_reported_and_finished_samples_survive(tmp_path: Path, fake_framework,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FAIL", "task_0001")
    gen = _generator(fake_framework, ["0", "1"])
    raw = tmp_path / "raw"
    rows = rows_for(["task_0000", "task_0001", "task_0002"], tmp_path / "gt.mp4")
    with pytest.raises(GenerationError, match=r"worker_1.log \(exit 3\)"):
        gen.generate(rows, raw, tmp_path / "work")
    assert [vision_path(raw, r["name"]).is_file() for r in rows] == [True, False, True]


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
    assert is_valid_video(vision_path(tmp_path / "raw", rows[0]["name"]), MIN_FRAMES)


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


@pytest.mark.parametrize(("content", "says"), [
    (b'{"processor": ', "Expecting value"), (b"[1]", "not a record of the generation's tokenizer"),
    (b'{"processor": ["hub"]}', "not a record"), (b'{"processor": {"resolved": 7}}', "not a record"),
    (b"\xff", "not UTF-8"), (None, "is a directory, not a file"),
])
def test_a_damaged_tokenizer_record_is_one_line_naming_it(tmp_path: Path, content: bytes | None, says: str) -> None:
    """A hand-corrupted generation_sources.json ended the run in a JSONDecodeError or AttributeError traceback: it
    is a problem line naming the file, and left as it is (a record of earlier runs, not a cache to rebuild)."""
    from pinbench_recipes.paibench_c.generate import SOURCES_FILE, record_processor

    path = tmp_path / SOURCES_FILE
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    line = record_processor(tmp_path, {"source": "checkpoint-bundled", "repo": "r", "revision": "1" * 40})
    assert line is not None and "\n" not in line and line.startswith(f"{path}: ") and says in line, line
    assert line.endswith("this run's is not recorded (remove the file to record it)")
    assert path.is_dir() if content is None else path.read_bytes() == content


@pytest.mark.parametrize("content", [b"[1]", b"\xff"])
def test_a_validity_cache_that_is_no_json_object_is_empty(tmp_path: Path, make_clip, content: bytes) -> None:
    """A list raised AttributeError (a traceback), bytes not in UTF-8 ended the run naming no file: it is a cache,
    so every video is decoded again."""
    (tmp_path / "cache.json").write_bytes(content)
    cache = ValidityCache(tmp_path / "cache.json")
    assert cache.is_valid(make_clip("v.mp4"), MIN_FRAMES)
