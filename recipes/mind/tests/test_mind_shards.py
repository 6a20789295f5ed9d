"""--shard I/N in the official mode: each shard sends only its samples to process.py, the merge scores nothing.

``process.py`` needs GPUs and the recipe image: here a clearly named test double stands in for it (and for the
image's runtime), reading the working directory the real code lays out and writing process.py's records of
exactly the samples laid out in it. Everything around it (the plan, tasks, the shard's pending samples, the
working directory, the import, the per-sample results, the merge, the scorecard) is the real code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinbench.core.config import RunConfig, Shard
from pinbench.core.recipe import get_recipe
from pinbench.core.sample_cache import prune
from pinbench.core.shard_manifest import manifest_path
from pinbench.ops.launch import run_recipe
from pinbench_recipes.mind import run as run_module
from pinbench_recipes.mind import steps
from pinbench_recipes.mind.official import WorkDir
from pinbench_recipes.mind.tests.conftest import Layout, continuation_record, mirror_record

RECIPE = get_recipe("mind")
# process.py's records of the base layout (conftest): 3 continuation samples, 2 mirror directories
RECORDS = {
    "1st_data.mem_test.data-1": continuation_record("data-1", mark=10, total=122, frames=112, scored=100),
    "1st_data.action_space_test.data-2": continuation_record("data-2", "1st_data", "action_space_test", mark=5,
                                                             total=220, frames=215, scored=200),
    "3rd_data.mem_test.data-3": continuation_record("data-3", "3rd_data", mark=0, total=105, frames=105, scored=100),
    "1st_data.mirror_test.loop-1": mirror_record("loop-1", videos={"path-1.mp4": 12, "path-2.mp4": 8}),
    "3rd_data.mirror_test.loop-1": mirror_record("loop-1", "3rd_data", videos={"path-1.mp4": 10}),
}


class ProcessPyDouble:
    """TEST DOUBLE for process.py on GPUs: writes the records of the samples laid out in its working directory."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, work: WorkDir) -> None:
        planned = sorted(json.loads(work.plan.read_text())["samples"])
        self.calls.append(planned)
        work.output.write_text(json.dumps({"data": [RECORDS[sid] for sid in planned], "video_max_time": None}))


@pytest.fixture
def process_py(monkeypatch: pytest.MonkeyPatch, runtime) -> ProcessPyDouble:
    """The official mode with the test double in place of the image's runtime and of process.py."""
    double = ProcessPyDouble()
    monkeypatch.setattr(run_module, "official_runtime", lambda pins, metrics: runtime)
    monkeypatch.setattr(steps, "process_py", lambda runtime, **settings: double)
    return double


def _cfg(out: Path, layout: Layout, **kwargs) -> RunConfig:
    options = {"gt": str(layout.gt_root), "videos": str(layout.generated_root), "native": "0"}
    return RECIPE.config("my-model", out_dir=out, offline=True, options=options, env={}, **kwargs)


def _rows(out: Path) -> list[tuple]:
    return [(r["sample_id"], r["status"], r["result"]) for r in map(json.loads, (out / "samples.jsonl").read_text()
                                                                    .splitlines())]


def test_official_shards_send_only_their_samples_to_process_py(tmp_path: Path, layout: Layout,
                                                              process_py: ProcessPyDouble) -> None:
    plain = tmp_path / "plain"
    assert run_recipe(_cfg(plain, layout)).exit_code == 0
    ids = [sid for sid, _, _ in _rows(plain)]
    assert process_py.calls == [sorted(ids)] and len(ids) == 5

    out = tmp_path / "sharded"
    for index in range(2):
        outcome = run_recipe(_cfg(out, layout, shard=Shard(index, 2)))
        assert (outcome.exit_code, outcome.scorecard_path) == (0, None), outcome.message
    assert process_py.calls[1:] == [sorted(ids[0::2]), sorted(ids[1::2])]   # one invocation per shard, its own
    assert not (out / "scorecard.json").exists()

    merged = run_recipe(_cfg(out, layout, skip_scoring=True))
    assert merged.exit_code == 0, merged.message
    assert len(process_py.calls) == 3                                        # the merge ran nothing
    assert _rows(out) == _rows(plain)
    card, expected = (json.loads((d / "scorecard.json").read_text()) for d in (out, plain))
    assert card["metrics"] == expected["metrics"] and card["samples"]["n_expected"] == 5

def test_a_results_file_without_rollouts_scores_its_mirror_directories(tmp_path: Path, layout: Layout,
                                                                     write_result) -> None:
    """Without -o videos the mirror directories are known from the file only: they are samples, in every shard."""
    results = write_result(list(RECORDS.values()))
    out = tmp_path / "run"
    options = {"gt": str(layout.gt_root), "results": str(results), "native": "0"}
    for index in range(2):
        cfg = RECIPE.config("my-model", out_dir=out, offline=True, options=options, env={}, shard=Shard(index, 2))
        assert run_recipe(cfg).exit_code == 0
    outcome = run_recipe(RECIPE.config("my-model", out_dir=out, offline=True, options=options, env={},
                                       skip_scoring=True))
    assert outcome.exit_code == 0, outcome.message
    card = json.loads((out / "scorecard.json").read_text())
    assert card["samples"]["n_expected"] == 5 and card["status"] == "complete"
    gsc = card["metrics"]["1st_data/mirror_test/gsc_mse"]
    assert (gsc["n_expected"], gsc["n_scored"], gsc["value"]) == (1, 1, pytest.approx(0.01))
    assert card["extra"]["official_sources"] == [{"results_file": str(results), "stored_by": "the shards' imports"}]



def _sharded(out: Path, layout: Layout, count: int) -> None:
    """``pinbench submit --shards COUNT``'s jobs: each shard, then the merge."""
    for index in range(count):
        outcome = run_recipe(_cfg(out, layout, shard=Shard(index, count)))
        assert (outcome.exit_code, outcome.scorecard_path) == (0, None), outcome.message
    merged = run_recipe(_cfg(out, layout, skip_scoring=True))
    assert merged.exit_code == 0, merged.message


def test_another_run_directory_takes_the_official_scores_from_the_sample_cache(
        tmp_path: Path, layout: Layout, process_py: ProcessPyDouble, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen on the local Slurm: ``submit --shards 3 --out A`` then ``--shards 2 --out B`` (or a plain run) on one
    sample cache ran process.py again for every sample of B: a record of the results step assembles in a millisecond,
    under the cache's MIN_SECONDS, and ``run.pending`` asked only B's store. A changed rollout is scored again."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / "sample-cache"))
    _sharded(tmp_path / "A", layout, 3)
    assert len(process_py.calls) == 3 and sum(map(len, process_py.calls)) == 5   # one invocation per shard

    _sharded(tmp_path / "B", layout, 2)
    plain = run_recipe(_cfg(tmp_path / "C", layout))
    assert plain.exit_code == 0, plain.message
    assert len(process_py.calls) == 3 and not (tmp_path / "B" / "official").exists()   # no official step at all
    assert not (tmp_path / "C" / "official").exists()
    summaries = [json.loads(manifest_path(tmp_path / out, index, count).read_text())["summary"]
                 for out, count in (("B", 2), ("C", 1)) for index in range(count)]
    assert [(s["done"], s["reused"]) for s in summaries] == [(0, 3), (0, 2), (0, 5)]   # "4 done, 0 reused" before
    ids = sorted(RECORDS)
    for out in ("B", "C"):   # the same per-sample scores, from the cache and computed
        assert _rows(tmp_path / out) == _rows(tmp_path / "A")
        card, expected = (json.loads((tmp_path / d / "scorecard.json").read_text()) for d in (out, "A"))
        assert card["metrics"] == expected["metrics"] and card["status"] == "complete"
        assert card["extra"]["official_sources"] == [{"stored_by": steps.CACHED, "reused_samples": ids}]
    sources = json.loads((tmp_path / "A" / "scorecard.json").read_text())["extra"]["official_sources"]
    assert len(sources) == 3 and all("work_dir" in s for s in sources)   # A's merge names its shards' invocations

    layout.add_generated("1st_data", "mem_test", "data-1", frames=112, seed=7)   # another rollout: scored again
    again = run_recipe(_cfg(tmp_path / "D", layout))
    assert again.exit_code == 0, again.message
    assert process_py.calls[3:] == [["1st_data.mem_test.data-1"]]
    card = json.loads((tmp_path / "D" / "scorecard.json").read_text())
    assert [s.get("reused_samples") for s in card["extra"]["official_sources"]] == [
        None, [sid for sid in ids if sid != "1st_data.mem_test.data-1"]]


def test_a_prune_between_the_pending_samples_and_their_results_fails_none(
        tmp_path: Path, layout: Layout, process_py: ProcessPyDouble, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run's end-of-run prune (or ``pinbench cache prune``) removing the entries ``run.pending`` found before
    the results step read them: each such sample failed with a KeyError (no official score of it), though the run
    had read its record."""
    cache = tmp_path / "sample-cache"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    assert run_recipe(_cfg(tmp_path / "A", layout)).exit_code == 0
    official = run_module._official

    def official_then_pruned(*args):   # noqa: ANN202
        """TEST DOUBLE for a prune landing at that moment: the official step, then the cache emptied."""
        outcome = official(*args)
        assert prune(cache, 0).removed == len(RECORDS)
        return outcome

    monkeypatch.setattr(run_module, "_official", official_then_pruned)
    outcome = run_recipe(_cfg(tmp_path / "B", layout))
    assert outcome.exit_code == 0, outcome.message
    assert len(process_py.calls) == 1 and _rows(tmp_path / "B") == _rows(tmp_path / "A")
    card = json.loads((tmp_path / "B" / "scorecard.json").read_text())
    assert card["extra"]["official_sources"] == [{"stored_by": steps.CACHED, "reused_samples": sorted(RECORDS)}]


def test_an_unusable_cache_entry_is_said_once_and_its_sample_sent_to_process_py(
        tmp_path: Path, layout: Layout, process_py: ProcessPyDouble, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A torn entry was named twice, by ``run.pending`` and by the results step, each with its own cache object."""
    cache = tmp_path / "sample-cache"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    assert run_recipe(_cfg(tmp_path / "A", layout)).exit_code == 0
    torn = sorted(cache.glob("*/*.jsonl"))[0]
    torn.write_bytes(torn.read_bytes()[:40])
    capsys.readouterr()
    outcome = run_recipe(_cfg(tmp_path / "B", layout))
    assert outcome.exit_code == 0, outcome.message
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sample cache:")]
    assert len(said) == 1 and str(torn) in said[0], said
    assert len(process_py.calls[1]) == 1 and _rows(tmp_path / "B") == _rows(tmp_path / "A")


def test_a_results_file_is_imported_again_in_another_run_directory(
        tmp_path: Path, layout: Layout, write_result, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``-o results=FILE`` a second run directory took every sample from the sample cache, and its scorecard's
    source said the file gave none of them (``n_expected`` 0) and held all five as "unexpected records"."""
    cache = tmp_path / "sample-cache"
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(cache))
    options = {"gt": str(layout.gt_root), "results": str(write_result(list(RECORDS.values()))), "native": "0"}

    def sources(out: str) -> list[tuple[int, list[str]]]:
        cfg = RECIPE.config("my-model", out_dir=tmp_path / out, offline=True, options=options, env={})
        assert run_recipe(cfg).exit_code == 0
        card = json.loads((tmp_path / out / "scorecard.json").read_text())
        return [(s["n_expected"], s["unexpected_records"]) for s in card["extra"]["official_sources"]]

    assert sources("A") == sources("B") == [(5, [])]
    assert not list(cache.glob("*/*.jsonl"))   # a record that assembles an imported file's scores is not kept
    monkeypatch.setattr(run_module, "MIN_SECONDS", 0)   # a slow machine: each record took 10 ms or more, kept
    assert sources("C") == sources("D") == [(5, [])]
    assert len(list(cache.glob("*/*.jsonl"))) == len(RECORDS)
