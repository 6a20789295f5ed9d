"""Evaluator invocation, GT reuse by SHA-256, result stamps and weight checks (no GPU)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from pinbench.core.pins import HFPin, URLPin
from pinbench.ops.downloads import ChecksumError
from pinbench_recipes.paibench_c.evaluate import (
    REVISION_STAMP,
    WEIGHT_PATHS,
    EvaluationError,
    Evaluator,
    GTCache,
    ensure_weights,
    evaluator_command,
    gt_cache_key,
    is_current,
    run_evaluator,
    stamp_gt,
    stamp_inputs,
)

COMMIT = "5864378a0e13e527336d916cc8e018afb0ef5fe3"


def test_command_is_the_upstream_calculate_metrics_call(tmp_path: Path) -> None:
    ev = Evaluator(root=tmp_path / "cg", python=tmp_path / "venv" / "bin" / "python", commit=COMMIT)
    argv = evaluator_command(ev, n_gpus=4, videos_parent=Path("/runs/out/edge"), gt_dir=Path("/runs/out/gt/k"),
                             output=Path("/runs/out/edge/metrics.json"), force_gt=True)
    assert argv == [str(tmp_path / "venv" / "bin" / "torchrun"), "--standalone", "--nproc_per_node", "4",
                    "compute_metrics.py", "calculate-metrics", "--gt_path", "/runs/out/gt/k",
                    "--videos_path", "/runs/out/edge", "--output_path", "/runs/out/edge/metrics.json",
                    "--force_recompute_gt_seg", "--force_recompute_gt_depth"]
    reuse = evaluator_command(ev, n_gpus=1, videos_parent=Path("v"), gt_dir=Path("g"), output=Path("o"),
                              force_gt=False)
    assert reuse[-2:] == ["--no_force_recompute_gt_seg", "--no_force_recompute_gt_depth"]


def test_evaluator_at_another_commit_is_refused(tmp_path: Path, fake_evaluator) -> None:
    root, python = fake_evaluator
    Evaluator(root, python, COMMIT).check()
    with pytest.raises(EvaluationError, match=f"is at commit {COMMIT}, the pin is {'0' * 40}"):
        Evaluator(root, python, "0" * 40).check()
    with pytest.raises(EvaluationError, match="no compute_metrics.py"):
        Evaluator(tmp_path / "elsewhere", python, COMMIT).check()


def test_gt_dir_links_the_dataset_and_hides_its_cached_pkls(tmp_path: Path) -> None:
    dataset = tmp_path / "dataset"
    for sub in ("videos", "captions", "sam2_pkls", "depth_npzs"):
        (dataset / sub).mkdir(parents=True)
    (dataset / "sam2_pkls" / "task_0000.pkl").write_bytes(b"stale upstream GT")
    gt = GTCache(tmp_path / "gt" / "k", "k")
    gt.prepare(dataset)
    gt.prepare(dataset)   # idempotent
    assert os.readlink(gt.root / "videos") == str(dataset / "videos")
    assert (gt.root / "sam2_pkls").is_dir() and not (gt.root / "sam2_pkls").is_symlink()
    assert not (gt.root / "sam2_pkls" / "task_0000.pkl").exists()


def test_gt_dir_links_a_dataset_given_by_a_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run" / "dataset" / "videos").mkdir(parents=True)
    (tmp_path / "run" / "dataset" / "videos" / "task_0000.mp4").write_bytes(b"video")
    (tmp_path / "run" / "dataset" / "captions").mkdir()
    monkeypatch.chdir(tmp_path)   # as `pinbench demo --out runs/demo` from the repository root
    gt = GTCache(Path("run") / "gt" / "k", "k")
    gt.prepare(Path("run") / "dataset")
    assert (gt.root / "videos" / "task_0000.mp4").read_bytes() == b"video"


def test_gt_files_are_reused_only_when_recorded_with_the_same_sha(tmp_path: Path) -> None:
    gt = GTCache(tmp_path / "gt", "key1")
    (gt.root / "sam2_pkls").mkdir(parents=True)
    (gt.root / "depth_npzs").mkdir()
    tasks = ["task_0000", "task_0001"]
    assert gt.prune(tasks) == 0
    for rel in gt.files(tasks):
        (gt.root / rel).write_bytes(rel.encode())
    gt.record(tasks, "edge")
    assert gt.prune(tasks) == 4
    (gt.root / "depth_npzs" / "task_0001.npz").write_bytes(b"half-written by a killed run")
    (gt.root / "sam2_pkls" / "task_0002.pkl").write_bytes(b"never recorded")
    assert gt.prune([*tasks, "task_0002"]) == 3
    assert not (gt.root / "depth_npzs" / "task_0001.npz").exists()
    assert not (gt.root / "sam2_pkls" / "task_0002.pkl").exists()
    assert gt.summary()["computed_in"] == ["edge"]
    with pytest.raises(EvaluationError, match="GT cache for key key1, this run is key2"):
        GTCache(gt.root, "key2").prune(tasks)


def test_gt_key_depends_on_dataset_evaluator_and_build() -> None:
    base = gt_cache_key(dataset_revision="a" * 40, evaluator_commit=COMMIT, build="sha256:1")
    assert base == gt_cache_key(dataset_revision="a" * 40, evaluator_commit=COMMIT, build="sha256:1")
    assert base != gt_cache_key(dataset_revision="b" * 40, evaluator_commit=COMMIT, build="sha256:1")
    assert base != gt_cache_key(dataset_revision="a" * 40, evaluator_commit=COMMIT, build="sha256:2")


def test_metrics_are_current_only_for_the_same_inputs_and_bytes(tmp_path: Path) -> None:
    inputs = stamp_inputs(videos={"task_0000": "ab"}, gt_key="k", gt_policy="reuse", evaluator_commit=COMMIT)
    metrics = tmp_path / "metrics.json"
    metrics.write_text('{"per_video": []}')
    assert not is_current(tmp_path, inputs)
    stamp = {"inputs": inputs, "metrics_sha256": hashlib.sha256(metrics.read_bytes()).hexdigest()}
    (tmp_path / "eval_stamp.json").write_text(json.dumps(stamp))
    assert is_current(tmp_path, inputs)
    other = stamp_inputs(videos={"task_0000": "cd"}, gt_key="k", gt_policy="reuse", evaluator_commit=COMMIT)
    assert not is_current(tmp_path, other)
    stamp_gt(tmp_path, "g1")
    assert is_current(tmp_path, inputs, "g1")
    assert not is_current(tmp_path, inputs, "g2")  # GT recomputed since: the metrics are stale
    metrics.write_text('{"per_video": [1]}')
    assert not is_current(tmp_path, inputs)


def _weights(root: Path, dino_revision: str) -> tuple[dict[str, URLPin], HFPin]:
    urls = {}
    for name in ("sam2_hiera_large", "dover", "video_depth_anything_small"):
        target = root / WEIGHT_PATHS[name]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(name.encode())
        urls[name] = URLPin(f"https://example.invalid/{target.name}", hashlib.sha256(name.encode()).hexdigest(),
                            target.name)
    dino = root / WEIGHT_PATHS["grounding_dino_tiny"]
    dino.mkdir(parents=True)
    (dino / "config.json").write_text("{}")
    (dino / REVISION_STAMP).write_text(dino_revision)
    return urls, HFPin("IDEA-Research/grounding-dino-tiny", "c" * 40)


def test_weights_are_verified_and_a_mismatch_stops_scoring(tmp_path: Path) -> None:
    ev = Evaluator(tmp_path, tmp_path / "python", COMMIT)
    urls, dino = _weights(tmp_path, "c" * 40)
    urls["dover"] = URLPin(urls["dover"].url, None, "DOVER.pth")
    states = ensure_weights(ev, urls, dino)
    assert states == {"sam2_hiera_large": "verified", "dover": "unverified",
                      "video_depth_anything_small": "verified", "grounding_dino_tiny": "verified"}
    (tmp_path / WEIGHT_PATHS["sam2_hiera_large"]).write_bytes(b"tampered")
    with pytest.raises(ChecksumError, match="sam2_hiera_large.pt: sha256 mismatch"):
        ensure_weights(ev, urls, dino)


def test_grounding_dino_at_another_revision_is_refused(tmp_path: Path) -> None:
    urls, dino = _weights(tmp_path, "e" * 40)
    with pytest.raises(EvaluationError, match=f"revision {'e' * 40}, the pin is {'c' * 40}"):
        ensure_weights(Evaluator(tmp_path, tmp_path / "python", COMMIT), urls, dino)


def test_missing_weights_are_linked_from_the_fetch_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinbench.ops.cache import url_path

    cache = tmp_path / "cache"
    monkeypatch.setenv("PINBENCH_CACHE", str(cache))
    root = tmp_path / "cg"
    urls, dino = _weights(root, "c" * 40)
    target = root / WEIGHT_PATHS["dover"]
    cached = url_path(urls["dover"], cache)
    cached.parent.mkdir(parents=True)
    cached.write_bytes(target.read_bytes())
    target.unlink()
    ensure_weights(Evaluator(root, tmp_path / "python", COMMIT), urls, dino)
    assert target.is_symlink() and target.resolve() == cached.resolve()


@pytest.mark.parametrize("content", [b"[1]", b"\xff", b'{"inputs": '])
def test_a_stamp_that_is_no_json_object_is_not_current(tmp_path: Path, content: bytes) -> None:
    """A stamp holding a list raised AttributeError (a traceback); one not in UTF-8 ended the run in a line naming
    no file. Either way the evaluation is simply done again."""
    inputs = stamp_inputs(videos={"task_0000": "ab"}, gt_key="k", gt_policy="reuse", evaluator_commit=COMMIT)
    (tmp_path / "metrics.json").write_text('{"per_video": []}')
    (tmp_path / "eval_stamp.json").write_bytes(content)
    assert not is_current(tmp_path, inputs)


@pytest.mark.parametrize("name", ["metrics.json", "eval_stamp.json"])
def test_a_folder_where_the_evaluation_writes_is_one_line(tmp_path: Path, name: str) -> None:
    """It raised IsADirectoryError out of the run ("error: [Errno 21] Is a directory"); now the modality fails by
    name (its tasks counted failed) and the folder is left alone."""
    (tmp_path / name).mkdir()

    class NeverCalled:
        def calculate_metrics(self, **_: object) -> list[str]:
            raise AssertionError("the evaluator ran")

    gt = GTCache(tmp_path / "gt", "k")
    with pytest.raises(EvaluationError, match=f"{name}: is a directory, where the evaluation writes a file"):
        run_evaluator(NeverCalled(), modality_dir=tmp_path, gt=gt, task_ids=["task_0000"], gpu_ids=["0"],
                      force_gt=True, inputs={})
    assert (tmp_path / name).is_dir()


@pytest.mark.parametrize("content", ["[]", '{"key": "k"}', '{"key": "k", "files": {}, "comp'])
def test_a_manifest_that_is_not_one_is_one_line_naming_it(tmp_path: Path, content: str) -> None:
    """A list or an object without 'files' raised AttributeError / KeyError (tracebacks), a cut one a line naming
    no file ("error: Expecting value: ...")."""
    gt = GTCache(tmp_path / "gt", "k")
    gt.root.mkdir(parents=True)
    gt.manifest_path.write_text(content)
    with pytest.raises(EvaluationError) as info:
        gt.summary()
    assert str(info.value).startswith(f"{gt.manifest_path}: not a GT manifest")


def test_the_real_evaluators_canny_exception_is_recorded_naming_the_video(tmp_path: Path) -> None:
    """The evaluator logs "Got exception <e> for compute_canny_error_video_f1", naming no video: the task whose Canny
    values it nulled failed as "null/NaN in metrics.json (the evaluator's step raised)", neither video nor reason."""
    from pinbench_recipes.paibench_c.evaluate import parse_all
    from pinbench_recipes.paibench_c.metrics_json import CANNY_METRICS, EVALUATOR_METRICS

    (tmp_path / "edge").mkdir()
    scored = dict.fromkeys(EVALUATOR_METRICS, 0.5)
    per_video = [{"pred_video_uuid": "t1", **scored},
                 {"pred_video_uuid": "t2", **scored, **dict.fromkeys(CANNY_METRICS)}]
    (tmp_path / "edge" / "metrics.json").write_text(json.dumps({"global": scored, "per_video": per_video}))
    (tmp_path / "edge" / "evaluator.log").write_text(
        "Processing batch 1/1\nGot exception division by zero for compute_canny_error_video_f1\n")
    parsed = parse_all(tmp_path, ["edge"], ["t1", "t2"], {}, EVALUATOR_METRICS)["edge"]
    assert parsed is not None and "t1" not in parsed.reasons
    assert parsed.reasons["t2"] == dict.fromkeys(CANNY_METRICS, "null in metrics.json: the evaluator's Canny step "
                                                                "raised on edge/videos/t2.mp4: division by zero")


def test_a_canny_reason_from_the_log_reaches_the_record_escaped_and_redacted(tmp_path: Path) -> None:
    """The log's video name and exception text went into the sample's errors as written: a terminal escape in a
    seed variant's name (t1__<ESC>[2J.mp4 is t1's), a NUL, or a token in the exception's text, where the errors of a
    record are neither escaped nor redacted on their way to the run's files."""
    from pinbench_recipes.paibench_c.evaluate import parse_all
    from pinbench_recipes.paibench_c.metrics_json import CANNY_METRICS, EVALUATOR_METRICS

    token = "hf_" + "Ab3De6Gh9Jk2Mn5Pq8St" * 2
    (tmp_path / "edge").mkdir()
    scored = dict.fromkeys(EVALUATOR_METRICS, 0.5)
    per_video = [{"pred_video_uuid": t, **scored, **dict.fromkeys(CANNY_METRICS)} for t in ("t1", "t2")]
    (tmp_path / "edge" / "metrics.json").write_text(json.dumps({"global": scored, "per_video": per_video}))
    (tmp_path / "edge" / "evaluator.log").write_text(
        f"Got exception t1__\x1b[2J.mp4: bad {token} for compute_canny_error_video_f1\n"
        "Got exception oops\x00\x1b[31m for compute_canny_error_video_f1\n")
    parsed = parse_all(tmp_path, ["edge"], ["t1", "t2"], {}, EVALUATOR_METRICS)["edge"]
    assert parsed is not None
    assert parsed.reasons["t1"]["canny_f1_score"] == ("null in metrics.json: the evaluator's Canny step raised on "
                                                      "edge/videos/t1__\\u001b[2J.mp4: bad ***")
    assert parsed.reasons["t2"]["canny_f1_score"].endswith("edge/videos/t2.mp4: oops\\u0000\\u001b[31m")


@pytest.mark.parametrize("fails", [False, True])
def test_a_file_where_the_evaluators_output_folder_goes_is_one_line_that_hides_no_evaluator_error(
        tmp_path: Path, fails: bool) -> None:
    """A file planted at ``<modality>/segmentation``: moving the evaluator's outputs out of ``pending/`` (in a
    ``finally``) raised FileExistsError, a traceback that also hid the evaluator's own error. Now one line naming
    the file, after the evaluator's error where it failed."""
    (tmp_path / "videos").mkdir()
    for task in ("task_0000", "task_0001"):   # one of two scored: the evaluator is given pending/
        (tmp_path / "videos" / f"{task}.mp4").write_bytes(b"v")
    (tmp_path / "segmentation").write_text("planted")

    class Segments:
        def calculate_metrics(self, *, videos_parent: Path, output: Path, **_: object) -> list[str]:
            (videos_parent / "segmentation").mkdir()
            (videos_parent / "segmentation" / "task_0000.pkl").write_bytes(b"mask")
            if fails:
                raise EvaluationError("evaluator failed for edge (exit 1); see evaluator.log")
            output.write_text('{"per_video": []}')
            return ["compute_metrics.py"]

    gt = GTCache(tmp_path / "gt", "k")
    with pytest.raises(EvaluationError) as caught:
        run_evaluator(Segments(), modality_dir=tmp_path, gt=gt, task_ids=["task_0000"], gpu_ids=["0"],
                      force_gt=True, inputs={})
    said = (f"{tmp_path / 'segmentation'}: not a folder, where the evaluator's outputs go (its own are in "
            f"{tmp_path / 'pending'} until the next evaluation); move it away")
    assert str(caught.value) == ("evaluator failed for edge (exit 1); see evaluator.log; " if fails else "") + said
    assert (tmp_path / "segmentation").read_text() == "planted"
