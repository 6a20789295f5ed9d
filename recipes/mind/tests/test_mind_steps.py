"""Run steps: resume by input hash, salvage of an interrupted invocation, imports, the native tasks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pinbench.core.inputs import InputDigests
from pinbench.core.runner import pending_tasks, run_samples
from pinbench_recipes.mind import steps
from pinbench_recipes.mind.ingest import Canvas
from pinbench_recipes.mind.official import WorkDir
from pinbench_recipes.mind.plan import make_plan
from pinbench_recipes.mind.results import ResultFileError, load_result_file
from pinbench_recipes.mind.tests.conftest import ALL_METRICS, Layout, continuation_record, mirror_record

VERSIONS = {"recipe": "1.0.0", "mind": "8f9c59c621f9c9d16f5db2fc0b7f042cf2505aa7"}


def plan(layout: Layout, metrics=("lcm",)):
    pre = make_plan(layout.gt_root, layout.generated_root, metrics=metrics, video_max_time=None)
    assert pre.ok, pre.problems
    digests = InputDigests(layout.gt_root.parent)
    return pre, [steps.sample_task(s, metrics=metrics, video_max_time=None, versions=VERSIONS, digests=digests)
                 for s in pre.samples]


def records_for(pre) -> list[dict]:
    """What process.py writes for the base layout's continuation samples (100 / 200 / 100 frames scored)."""
    frames = {"data-1": (10, 122, 112, 100), "data-2": (5, 220, 215, 200), "data-3": (0, 105, 105, 100)}
    out = []
    for sample in pre.samples:
        mark, total, n, scored = frames[sample.key.path]
        out.append(continuation_record(sample.key.path, sample.key.perspective, sample.key.test_type, mark=mark,
                                       total=total, frames=n, scored=scored))
    return out


class FakeProcessPy:
    """TEST DOUBLE for process.py: writes the records of the samples laid out in the work directory."""

    def __init__(self, pre) -> None:
        self.records = {r["path"]: r for r in records_for(pre)}
        self.calls: list[list[str]] = []

    def __call__(self, work: WorkDir) -> None:
        planned = json.loads(work.plan.read_text())["samples"]
        self.calls.append(sorted(planned))
        names = [sid.split(".", 2)[2] for sid in planned]
        work.output.write_text(json.dumps({"data": [self.records[n] for n in names], "video_max_time": None}))


def test_task_hash_follows_the_generated_video(layout: Layout) -> None:
    _, before = plan(layout)
    layout.add_generated("1st_data", "mem_test", "data-1", frames=112, seed=9)
    _, after = plan(layout)
    assert before[0].video_sha256 != after[0].video_sha256
    assert before[1] == after[1]


def test_official_scores_then_resume_without_rescoring(tmp_path: Path, layout: Layout, runtime) -> None:
    pre, tasks = plan(layout)
    fake = FakeProcessPy(pre)
    official = steps.run_official(tmp_path, pre, pending_tasks(tmp_path, tasks).mine, runtime=runtime, score=fake)
    assert all(i.ok for i in official.samples.values()) and len(fake.calls) == 1
    run_samples(tasks, lambda t: {"ok": True}, tmp_path, progress=False)     # the final records
    assert pending_tasks(tmp_path, tasks).mine == []

    # a regenerated video: only that sample goes to process.py again, in a new invocation
    layout.add_generated("1st_data", "mem_test", "data-1", frames=112, seed=9)
    pre, tasks = plan(layout)
    pending = pending_tasks(tmp_path, tasks).mine
    assert [t.sample_id for t in pending] == ["1st_data.mem_test.data-1"]
    steps.run_official(tmp_path, pre, pending, runtime=runtime, score=FakeProcessPy(pre))
    assert sorted(p.name for p in (tmp_path / "official").iterdir()) == ["run-001", "run-002"]


def test_interrupted_invocation_is_salvaged(tmp_path: Path, layout: Layout, runtime) -> None:
    pre, tasks = plan(layout)
    steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=FakeProcessPy(pre))
    # killed before our records were written: the Result.json of run-001 is still there
    fake = FakeProcessPy(pre)
    official = steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=fake)
    assert fake.calls == [] and all(i.ok for i in official.samples.values())
    assert official.sources[0]["reused_samples"] == sorted(t.sample_id for t in tasks)


def test_salvage_needs_unchanged_inputs(tmp_path: Path, layout: Layout, runtime) -> None:
    pre, tasks = plan(layout)
    steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=FakeProcessPy(pre))
    layout.add_generated("3rd_data", "mem_test", "data-3", frames=105, seed=7)
    pre, tasks = plan(layout)
    fake = FakeProcessPy(pre)
    steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=fake)
    assert fake.calls == [["3rd_data.mem_test.data-3"]]


def test_no_result_file_fails_the_invocations_samples_by_name(tmp_path: Path, layout: Layout, runtime) -> None:
    pre, tasks = plan(layout)
    official = steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=lambda work: None)
    assert {i.failure for i in official.samples.values()} == {
        f"process.py wrote no Result.json (see {tmp_path / 'official' / 'run-001' / 'process.log'})"}


def test_missing_generated_video_is_failed_without_running(tmp_path: Path, layout: Layout, runtime) -> None:
    shutil.rmtree(layout.generated("1st_data", "mem_test", "data-1"))
    pre, tasks = plan(layout)
    fake = FakeProcessPy(pre)
    official = steps.run_official(tmp_path, pre, tasks, runtime=runtime, score=fake)
    assert "no generated video" in official.samples["1st_data.mem_test.data-1"].failure
    assert "1st_data.mem_test.data-1" not in fake.calls[0]


def test_imported_file_must_match_video_max_time(tmp_path: Path, layout: Layout, write_result) -> None:
    pre, tasks = plan(layout)
    with pytest.raises(ResultFileError, match="video_max_time is 240"):
        steps.import_file(load_result_file(write_result(records_for(pre), video_max_time=240)), pre, tasks)
    official = steps.import_file(load_result_file(write_result(records_for(pre))), pre, tasks)
    assert all(i.ok for i in official.samples.values())


def test_imported_mirror_samples_without_a_generated_root(layout: Layout, write_result) -> None:
    pre = make_plan(layout.gt_root, None, metrics=ALL_METRICS, video_max_time=None)
    assert pre.ok and not any(s.key.test_type == "mirror_test" for s in pre.samples)
    digests = InputDigests(layout.gt_root.parent)
    tasks = [steps.sample_task(s, metrics=ALL_METRICS, video_max_time=None, versions=VERSIONS, digests=digests)
             for s in pre.samples]
    result = load_result_file(write_result([mirror_record("loop-9", "3rd_data")]))
    mirror = steps.SampleTask(sample_id="3rd_data.mirror_test.loop-9", versions=VERSIONS)
    official = steps.import_file(result, pre, [*tasks, mirror])
    assert official.samples["3rd_data.mirror_test.loop-9"].ok
    assert official.samples["1st_data.mem_test.data-1"].failure.startswith("no record")


def test_native_tasks_line_up_with_the_samples(layout: Layout) -> None:
    """Shard I/N of the native tasks is shard I/N of the samples, so a shard has the native block of its own."""
    pre, tasks = plan(layout, metrics=("visual", "gsc"))   # without lcm a rollout has nothing to compare
    native = steps.native_tasks(pre, canvas=Canvas(72, 128), lpips_sha256=None,
                                digests=InputDigests(layout.gt_root.parent))
    assert [t.sample_id for t in native] == [t.sample_id for t in tasks] and len(tasks) == 5
    assert [t.nothing is not None for t in native] == [s.key.test_type != "mirror_test" for s in pre.samples]
    empty = next(t for t in native if t.nothing is not None)
    score = steps.native_scorer(None, pre.gt_root, pre.generated_root)
    assert score(empty) == {"nothing": empty.nothing}   # computes nothing, loads nothing
