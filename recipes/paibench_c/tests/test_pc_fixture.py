"""``--fixture``: run.py's real procedure on the synthetic data, with the fixture's test doubles for cosmos-framework
and the evaluator (generation, GT cache, metrics.json, native cross-check, scorecard, diff, report)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from stored import store_snapshot

import pinbench_recipes.paibench_c.fixture as fixture
from pinbench.core.config import RecipeError, RunConfig, Shard
from pinbench.core.recipe import get_recipe
from pinbench.core.run import Run
from pinbench.media.video import write_video
from pinbench.ops.generation import Generating
from pinbench.ops.launch import run_recipe
from pinbench_recipes.paibench_c.evaluate import CANNY_METRICS, GTCache
from pinbench_recipes.paibench_c.metrics_json import parse_metrics_json
from pinbench_recipes.paibench_c.results import NATIVE_METRICS
from pinbench_recipes.paibench_c.rows import MODALITIES

TASKS = [f"task_{i:04d}" for i in range(fixture.N_TASKS)]


def _cfg(path: Path, **kwargs) -> RunConfig:
    return get_recipe("paibench-c").config(out_dir=path, fixture=True, env={}, **kwargs)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("fixture")
    return out, run_recipe(_cfg(out))


def test_fixture_passes_its_reference_and_writes_the_report(first_run) -> None:
    out, outcome = first_run
    assert outcome.exit_code == 0, outcome.message
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "complete" and card["mode"] == "fixture"
    assert len(card["metrics"]) == 4 * (len(fixture.FIXTURE_METRICS) + len(NATIVE_METRICS))
    assert "result: PASS" in (out / "diff.txt").read_text()
    assert (out / "report" / "index.html").is_file()
    assert set(card["extra"]["test_doubles"]) == {"generator", "evaluator"}
    checks = card["extra"]["cross_check"]   # the native recomputation equals the double's values, bit for bit
    assert len(checks) == 4 * len(NATIVE_METRICS) and all(c["max_abs_diff"] == 0 for c in checks.values())
    # the layout of the real dataset and of a real run
    for folder in ("videos", "canny", "blur", "depth_vids", "sam2_vids", "captions"):
        assert len(list((out / "fixture_data" / "dataset" / folder).iterdir())) == fixture.N_TASKS
    assert len(list((out / "edge" / "videos").glob("task_*.mp4"))) == fixture.N_TASKS
    requests = [json.loads(x) for x in (out / "generation" / "requests.jsonl").read_text().splitlines()]
    depth = next(r for r in requests if r["id"] == "depth.task_0000")
    assert depth["settings"]["row"]["depth"]["control_path"].endswith("depth_vids/task_0000.mp4")


def test_scores_order_by_perturbation_strength(first_run) -> None:
    out, _ = first_run
    metrics = json.loads((out / "scorecard.json").read_text())["metrics"]
    f1 = [metrics[f"{m}/canny_f1_score"]["value"] for m in ("edge", "seg")]
    assert f1[0] > f1[1]          # the weakest perturbation (edge) keeps the most edges
    assert metrics["edge/depth_si_rmse"]["value"] < metrics["seg/depth_si_rmse"]["value"]

def test_the_evaluator_double_scores_gt_against_itself_perfectly(first_run, tmp_path: Path) -> None:
    """GT-versus-GT through the double's contract (videos/, GT pickles and npz, metrics.json): every metric at its
    perfect value, so the masks and depth it stores and reads back are exactly the ones it computed."""
    out, _ = first_run
    dataset = out / "fixture_data" / "dataset"
    gt = GTCache(tmp_path / "gt", "k")
    gt.prepare(dataset)
    (tmp_path / "gt_as_pred").mkdir()
    (tmp_path / "gt_as_pred" / "videos").symlink_to(dataset / "videos", target_is_directory=True)
    for force in (True, False):   # GT computed, then read back
        output = tmp_path / f"metrics_{force}.json"
        fixture.EvaluatorDouble().calculate_metrics(modality_dir=tmp_path / "gt_as_pred",
                                                    videos_parent=tmp_path / "gt_as_pred", gt_dir=gt.root,
                                                    output=output, task_ids=TASKS, gpu_ids=[], force_gt=force,
                                                    batch_size=None)
        values = parse_metrics_json(output, TASKS, fixture.FIXTURE_METRICS).per_task
        perfect = {"canny_f1_score": 1.0, "canny_precision": 1.0, "canny_recall": 1.0, "blur_ssim": 1.0,
                   "depth_si_rmse": 0.0, "seg_m_iou": 1.0, "seg_recall": 1.0}
        assert values == {task: perfect for task in TASKS}
    assert len(list((gt.root / "sam2_pkls").glob("*.pkl"))) == len(list((gt.root / "depth_npzs").glob("*.npz"))) \
        == fixture.N_TASKS


def test_a_uniform_colour_rollout_fails_only_its_canny_metrics_with_the_evaluators_reason(first_run,
                                                                                           tmp_path: Path) -> None:
    """Uniform-colour rollouts (at the sizes the fixture's requests ask) had every metric fail with "no valid video,
    or the evaluator skipped it": the evaluator's double dropped the video on its degenerate edge map. As the
    evaluator's Canny step, it nulls the Canny metrics alone, logs why, and that reason is each one's failure."""
    out, _ = first_run
    rollouts = tmp_path / "rollouts"
    for line in (out / "generation" / "requests.jsonl").read_text().splitlines():
        request = json.loads(line)
        frames = np.full((request["frames"], request["height"], request["width"], 3), (90, 120, 200), np.uint8)
        (rollouts / request["output"]).parent.mkdir(parents=True, exist_ok=True)
        write_video(rollouts / request["output"], frames, request["fps"])
    run = tmp_path / "run"
    outcome = run_recipe(_cfg(run, generator="folder", generator_options={"dir": str(rollouts)},
                              options={"native": "off"}))
    card = json.loads((run / "scorecard.json").read_text())
    failed = {name for name, metric in card["metrics"].items() if metric["n_failed"]}
    assert outcome.exit_code == 2 and failed == {f"{m}/{c}" for m in MODALITIES for c in CANNY_METRICS}, failed
    reasons = {line.split("\t")[2] for line in (run / "failures.tsv").read_text().splitlines()[1:]}
    named = [m for r in reasons if (m := re.fullmatch(
        r"null in metrics.json: the evaluator's Canny step raised on (?P<modality>\w+)/videos/(?P<video>[^/]+\.mp4): "
        r"DegenerateEdgeMapError \(prediction edge map has no edge pixel; F1 is undefined\)", r.split(": ", 1)[1]))]
    assert len(named) == len(reasons) and {m["modality"] for m in named} == set(MODALITIES), reasons   # its video


def test_a_changed_scoring_path_fails_the_diff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(fixture.PERTURBATION, "edge", (25.0, 3, 1.0))
    outcome = run_recipe(_cfg(tmp_path / "changed"))
    assert outcome.exit_code == 1
    assert "edge/canny_f1_score" in (tmp_path / "changed" / "diff.txt").read_text()


def _per_sample(out: Path) -> dict[str, tuple]:
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return {r["sample_id"]: (r["status"], r["result"], r["error"]) for r in rows}


def test_a_shard_that_would_score_is_refused(tmp_path: Path) -> None:
    """Shards generate (``--skip-scoring``), then one run scores every task (tests/test_fixtures.py runs that
    layout): a shard never scores its part alone."""
    with pytest.raises(RecipeError, match="--shard applies to generation only"):
        run_recipe(_cfg(tmp_path / "sharded", shard=Shard(0, 2)))


def test_fixture_honours_limit_skip_scoring_modalities_and_decoder(tmp_path: Path) -> None:
    skipped = run_recipe(_cfg(tmp_path / "gen", skip_scoring=True))
    assert skipped.exit_code == 0 and skipped.scorecard_path is None
    assert not (tmp_path / "gen" / "samples").exists()
    assert len(list((tmp_path / "gen" / "rollouts" / "seg").glob("*.mp4"))) == fixture.N_TASKS
    limited = run_recipe(_cfg(tmp_path / "one", limit=1, options={"modalities": "edge", "decoder": "pyav"}))
    card = json.loads(limited.scorecard_path.read_text())
    assert card["samples"]["n_expected"] == 1 and set(card["metrics"]) == {
        f"edge/{m}" for m in fixture.FIXTURE_METRICS} | {f"edge/native/{m}" for m in NATIVE_METRICS}
    assert card["extra"]["options"]["decoder"] == "pyav" and limited.exit_code == 3  # the 4-task reference: n/a
    assert list(_per_sample(tmp_path / "one")) == ["task_0000"]
    # The decoder is the cross-check's (the evaluator decodes with OpenCV): another one recomputes that alone. The
    # directory is the first run's (the command line refuses that: a run directory holds one set of inputs), so
    # the run is made here without claiming it: the recipe's own keys are under test.
    def scored() -> tuple[bytes, dict[str, bytes]]:
        return (tmp_path / "one" / "edge" / "metrics.json").read_bytes(), store_snapshot(tmp_path / "one" / "native"
                                                                                          / "samples")

    before = scored()
    recipe = get_recipe("paibench-c")
    Run(recipe, _cfg(tmp_path / "one", limit=1, options={"modalities": "edge", "decoder": "opencv"}),
        generation=Generating(None, recipe)).execute(recipe.load(recipe.entry))
    after = scored()
    assert after[0] == before[0] and before[1] and after[1] != before[1]


def test_the_gt_policy_and_the_cross_check_switch_apply_to_the_fixture(first_run, tmp_path: Path) -> None:
    plain, _ = first_run
    out = tmp_path / "force"
    outcome = run_recipe(_cfg(out, options={"gt": "force", "native": "off"}))
    assert outcome.exit_code == 0, outcome.message
    assert all(json.loads((out / m / "eval_stamp.json").read_text())["force_gt"] for m in MODALITIES)
    assert not (out / "native").exists()
    evaluated = {sid: (status, {k: v for k, v in result.items() if "/native/" not in k}, error)
                 for sid, (status, result, error) in _per_sample(plain).items()}
    assert _per_sample(out) == evaluated   # the GT the double recomputes in every modality is the same GT


def test_options_the_fixture_does_not_use_are_refused() -> None:
    recipe = get_recipe("paibench-c")
    for option in ("launch", "eval_batch_size", "evaluator_weights", "model"):
        value = {"launch": "torchrun", "evaluator_weights": "on"}.get(option, "1")
        with pytest.raises(RecipeError, match=f"-o {option} does not apply to paibench-c --fixture runs"):
            recipe.config(fixture=True, options={option: value}, env={})


def test_a_second_out_takes_the_evaluation_from_the_sample_cache(tmp_path: Path, monkeypatch, capfd) -> None:
    """Issue #28 item 3: another --out over the same videos, GT, options and code evaluates nothing (the evaluator
    double writes no metrics.json there, no cross-check runs) and scores what the first run scored; the scorecard
    names the tasks taken from the cache and gives no evaluator summary of its own. An option that changes values
    (the cross-check's decoder) evaluates again."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / "sample-cache"))
    first, second, other = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert run_recipe(_cfg(first)).exit_code == 0
    capfd.readouterr()
    assert run_recipe(_cfg(second)).exit_code == 0
    said = capfd.readouterr().err
    assert "evaluator: 4 tasks: 4 reused from the sample cache" in said and "native cross-check" not in said
    assert not any((second / m / "metrics.json").exists() for m in MODALITIES)
    assert _per_sample(second) == _per_sample(first)   # the same per-sample scores
    card = json.loads((second / "scorecard.json").read_text())
    assert card["extra"]["from_sample_cache"] == TASKS and card["extra"]["evaluator_global"] == {}
    assert card["extra"]["cross_check"] == json.loads((first / "scorecard.json").read_text())["extra"]["cross_check"]
    assert run_recipe(_cfg(other, options={"decoder": "pyav"})).exit_code == 0
    assert all((other / m / "metrics.json").is_file() for m in MODALITIES)
    assert json.loads((other / "scorecard.json").read_text())["extra"]["from_sample_cache"] == []


def test_the_evaluator_is_given_only_the_tasks_no_record_stands_for(tmp_path: Path, monkeypatch) -> None:
    """The evaluator scores every video of the folder it is given: with some tasks' records in the sample cache (run
    A on 2 tasks, B on all 4) or in the run directory (A again on all 4) it was given all 4 videos per modality. Now it
    is given the 2 pending ones (``pending/videos``), its outputs land in the modality folder as in a full
    evaluation, and every per-sample record and scorecard metric equals a fresh run's. Each record carries the
    seconds of the evaluation and cross-check that computed it, also where it was taken from the cache (it had 0)."""
    given: list[tuple[str, list[str]]] = []
    scored = fixture.EvaluatorDouble.calculate_metrics

    def counted(self, *, modality_dir: Path, videos_parent: Path, **kwargs):   # noqa: ANN202
        given.append((modality_dir.name, sorted(p.stem for p in (videos_parent / "videos").glob("*.mp4"))))
        return scored(self, modality_dir=modality_dir, videos_parent=videos_parent, **kwargs)

    monkeypatch.setattr(fixture.EvaluatorDouble, "calculate_metrics", counted)
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    fresh = tmp_path / "fresh"
    assert run_recipe(_cfg(fresh)).exit_code == 0
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / "sample-cache"))
    first, second = tmp_path / "a", tmp_path / "b"
    run_recipe(_cfg(first, limit=2))   # a smoke run without a reference: exit 3
    given.clear()
    assert run_recipe(_cfg(second)).exit_code == 0
    assert given == [(m, TASKS[2:]) for m in MODALITIES]
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    assert run_recipe(_cfg(first)).exit_code == 0
    assert given == [(m, TASKS[2:]) for m in MODALITIES] * 2
    cards = {d: json.loads((d / "scorecard.json").read_text()) for d in (fresh, first, second)}
    for out in (first, second):
        assert _per_sample(out) == _per_sample(fresh)
        assert cards[out]["metrics"] == cards[fresh]["metrics"]
        assert cards[out]["extra"]["cross_check"] == cards[fresh]["extra"]["cross_check"]
        assert not any((out / m / "pending").exists() for m in MODALITIES)
    # the masks of both of A's evaluations beside each other, as one evaluation of all 4 leaves them
    for out, tasks in ((first, TASKS), (second, TASKS[2:])):
        assert sorted(p.stem for p in (out / "seg" / "segmentation").glob("*.pkl")) == tasks
    assert cards[second]["extra"]["from_sample_cache"] == TASKS[:2]
    # the evaluator's global means of A again and B are over the 2 tasks they evaluated: said so, not as the run's
    assert cards[fresh]["extra"]["evaluator_global"]["covers"] == "4 of 4 tasks (the ones this run evaluated)"
    for out in (first, second):
        shown = cards[out]["extra"]["evaluator_global"]
        assert (shown["covers"], shown["tasks"]) == ("2 of 4 tasks (the ones this run evaluated)", TASKS[2:])
        report = (out / "report" / "index.html").read_text()
        assert "2 of 4 tasks (the ones this run evaluated)" in report and "task_0002, task_0003" in report
    seconds = {out: _seconds(out) for out in (first, second)}
    assert all(s > 0 for s in seconds[second].values())
    assert [seconds[second][t] for t in TASKS[:2]] == [seconds[first][t] for t in TASKS[:2]]   # from A's records


def test_a_smaller_limit_in_the_same_out_scores_its_tasks_alone(tmp_path: Path, monkeypatch) -> None:
    """A --limit run in a folder a run of every task filled was refused ("videos not in this run's task list ...
    the evaluator would score them; use a separate --out"): the evaluator is given only its tasks' videos
    (``staged``), so it runs, and its records are those of the full run."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", "off")
    out = tmp_path / "a"
    assert run_recipe(_cfg(out)).exit_code == 0
    full = _per_sample(out)
    outcome = run_recipe(_cfg(out, limit=2))
    assert outcome.exit_code == 3 and "the reference is of 4 samples, this run has 2" in outcome.message
    assert _per_sample(out) == {t: full[t] for t in TASKS[:2]}


def _seconds(out: Path) -> dict[str, float]:
    return {r["sample_id"]: r["seconds"] for r in map(json.loads, (out / "samples.jsonl").read_text().splitlines())}


def test_gt_force_evaluates_again_whatever_the_sample_cache_holds(tmp_path: Path, monkeypatch) -> None:
    """-o gt=force asks for the GT computed again: a second --out evaluates (and cross-checks the seg arithmetic
    against the GT it computed) rather than take an earlier run's records, whose seg metrics it would otherwise drop
    (no GT computed in the run)."""
    monkeypatch.setenv("PINBENCH_SAMPLE_CACHE", str(tmp_path / "sample-cache"))
    first, second = tmp_path / "a", tmp_path / "b"
    assert run_recipe(_cfg(first, options={"gt": "force"})).exit_code == 0
    assert run_recipe(_cfg(second, options={"gt": "force"})).exit_code == 0
    assert all((second / m / "metrics.json").is_file() for m in MODALITIES)
    cards = [json.loads((d / "scorecard.json").read_text()) for d in (first, second)]
    assert cards[1]["extra"]["from_sample_cache"] == []
    assert sorted(cards[1]["metrics"]) == sorted(cards[0]["metrics"])
