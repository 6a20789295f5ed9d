"""The RememBench recipe, top to bottom: prepare, generate (bring your own), score, aggregate, diff, report.

``pinbench run remembench --checkpoint NAME -o videos=DIR -o annotations=FILE`` scores T2V rollouts;
``-o split=i2v`` scores I2V rollouts (revisit frames from Pi3X on a GPU, or ``-o poses_dir=``);
``--checkpoint t2v-reference-pairs`` is the GPU-free check that reproduces the release's published
T2V medians; ``--fixture`` runs everything on synthetic data on CPU.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pinbench.core.files import counted, write_atomic
from pinbench.core.generation import Request
from pinbench.core.options import is_offline
from pinbench.core.run import Run, RunOutcome
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec
from pinbench.ops.machine_pins import pins_for_provenance
from pinbench_recipes.remembench import models, outputs, prepare, requests, scenes, summary, weights
from pinbench_recipes.remembench.fixture import FixtureData, build_fixture
from pinbench_recipes.remembench.release import Release, dataset_option, open_release

METRICS = ("clip", "lpips_alex", "tempssim", "drift")


def run(run: Run) -> RunOutcome:
    # 1. prepare: options, the release (checksum-verified), rows and cohort, annotations, models
    opts, cfg = run.options, run.cfg
    with run.step("prepare"):
        fixture, release = open_run_release(run)
    if cfg.checkpoint == prepare.REFERENCE_PAIRS_CHECKPOINT and not fixture:
        return _run_reference_pairs(run, release)
    with run.step("prepare"):
        groups, cohorts = prepare.cohort(release, fixture, opts, cfg.limit)
        splits = list(cohorts)
        annotations = (prepare.load_annotations(str(fixture.annotations) if fixture else opts.annotations, release,
                                                cfg.checkpoint) if "t2v" in splits else None)
        files, model_labels = models.model_files(opts, fixture, need_pi3x="i2v" in splits,
                                          download=not (cfg.offline or is_offline()))
        device = weights.torch_device(opts.device)
        poses_dir = fixture.poses_dir if fixture else opts.poses_dir

    # 2. generate: the cohort's rollouts with --generator (with --skip-generation: those an earlier such run stored,
    #    each checked against its request), else yours (-o videos=DIR); a missing one fails its sample
    with run.step("generate"):
        videos = fixture.videos if fixture else opts.videos
        if run.scores_generated:
            with run.digests() as digests:
                asked = requests.build(groups, release=release, images=fixture.images if fixture else opts.images,
                                       root=run.requests_root, digests=digests)
            videos = run.generate(asked)
        with run.digests() as digests:
            tasks = prepare.build_tasks(groups, videos=videos, annotations=annotations, poses_dir=poses_dir,
                                        models=model_labels, recipe_version=run.recipe.version, digests=digests,
                                        device=device, decoder=opts.decoder,
                                        not_generated=run.generation_failures)

    # 3. score: decode each rollout once, all four metrics; stored per sample, a rerun resumes. Not shared through
    #    the sample cache: a result names its departure | revisit strip, a file of this run directory.
    with run.step("score"):
        records = run.score(tasks, models.scorer(files, device, run.out_dir, videos, poses_dir), label="remembench",
                            validate=lambda result: all(k in result for k in METRICS), cache=False)

    # 4. aggregate: medians over scenes per group; per-scene JSONL, the paper's scores.json, figures
    with run.step("aggregate"):
        rows = scenes.scene_rows(tasks, records)
        outputs.write_jsonl(rows, run.out_dir / scenes.SCENES_FILE)
        outputs.write_scores(groups, rows, run.out_dir / "scores.json")
        specs = [MetricSpec(f"{g.prefix}/{name}", key=name,
                            sample_ids=[t.sample_id for t in tasks if t.group == g.prefix])
                 for g in groups for name in METRICS]

    # 5. diff against the reference for this checkpoint and mode (if one exists), report
    warnings = [annotations.warning] if annotations and annotations.warning else []
    warnings += _size_warnings(records)
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    return run.finish(
        specs, records, pins=_pins_for_provenance(release, fixture, models_read=fixture is None,
                                                  pi3x=files.pi3x is not None), seeds=_seeds(groups),
        extra={"cohort": cohorts, "annotations": annotations.source if annotations else None,
               "warnings": warnings, "release": release.provenance(), "models": model_labels,
               "outputs": {"scenes": scenes.SCENES_FILE, "scores": "scores.json"}},
        provenance={"release": release.provenance(), "models": model_labels},
        figures=lambda: outputs.pair_figures(groups, rows, run.out_dir, run.out_dir / "figures"),
    )


def open_run_release(run: Run) -> tuple[FixtureData | None, Release]:
    """The fixture (``--fixture``) and the release a run reads (checksum-verified, downloaded when allowed)."""
    opts, cfg = run.options, run.cfg
    dataset = dataset_option(opts)
    prepare.check_annotations(cfg)  # refused before any download
    fixture = run.fixture(build_fixture)
    release = open_release(*dataset, download=not (cfg.offline or is_offline()),
                           local_dir=fixture.dataset_dir if fixture else opts.dataset_dir)
    return fixture, release


def run_requests(run: Run, root: Path) -> list[Request]:
    """The generation requests of a run (``pinbench requests``): its cohort's, their files under ``root``."""
    fixture, release = open_run_release(run)
    groups, _ = prepare.cohort(release, fixture, run.options, run.cfg.limit)
    with run.digests() as digests:
        return requests.build(groups, release=release, images=fixture.images if fixture else run.options.images,
                              root=root, digests=digests)


def _size_warnings(records: Sequence[SampleRecord]) -> list[str]:
    """One line when rollouts are not at their split's resolution: scored anyway, as the paper's score.py does."""
    off = [(r.sample_id, r.result) for r in records if r.ok and r.result and r.result.get("at_paper_size") is False]
    if not off:
        return []
    sample, result = off[0]
    return [f"{counted(len(off), 'rollout')} {'is' if len(off) == 1 else 'are'} not at their split's resolution "
            f"(e.g. {sample}: {result['width']}x"
            f"{result['height']}, the split has {result['paper_size'][0]}x{result['paper_size'][1]}); scored at "
            "their own resolution as the paper's score.py does, but LPIPS and TempSSIM depend on resolution, so "
            "these scores do not compare with runs at the split's resolution"]


def _pins_for_provenance(release: Release, fixture: FixtureData | None, *, models_read: bool,
                         pi3x: bool) -> dict[str, Any]:
    """The pins the run read (``pins_for_provenance``), the dataset's id/revision those actually used: the paper's
    code and the release always; CLIP and the LPIPS trunk when real models scored (not the fixture's, not the
    reference pairs' medians); Pi3X's code and weights when it found the I2V revisit frames. The fixture's note
    names no folder: two fixture runs in two folders read the same release, and compare would list the folders
    as a difference."""
    used = ["upstream/mosaichunk", "huggingface/dataset"]
    if models_read:
        used += ["huggingface/clip", "urls/alexnet"]
    if pi3x:
        used += ["upstream/pi3", "huggingface/pi3x"]
    pins = pins_for_provenance(weights.load_recipe_pins(), used)
    pins["huggingface"]["dataset"].update(repo_id=release.repo_id, revision=release.revision)
    if fixture is not None:
        pins["huggingface"]["dataset"]["note"] = "fixture: synthetic release (remembench/fixture.py)"
    return pins


def _seeds(groups: Sequence[prepare.Group]) -> dict[str, str]:
    """Each scored row's generation seed, as the exact decimal string of the release."""
    return {row.sample_id: row.seed_text for g in groups for row in g.rows}


def _run_reference_pairs(run: Run, release: Any) -> RunOutcome:
    """GPU-free check: medians of the published pair measurements vs the release's summary and the paper."""
    with run.step("prepare"):
        pairs = summary.read_pairs(release.path(summary.PAIRS_FILE))
        published = summary.read_summary(release.path(summary.SUMMARY_FILE))
        rows, problems = summary.compare_summary(summary.medians(pairs), published)
        write_atomic(run.out_dir / "summary_check.json",
                     json.dumps({"rows": rows, "problems": problems, "warning": summary.PAPER_PAIRS_WARNING},
                                indent=2) + "\n")
        tasks = [summary.PairTask(p.sample_id, summary.group_name(p.method, p.budget), p.clip, p.lpips_alex, p.line)
                 for p in pairs][: run.cfg.limit]
    records = run.store(tasks, {t.sample_id: {"clip": t.clip, "lpips_alex": t.lpips_alex} for t in tasks},
                        label="reference pairs")
    specs = [MetricSpec(f"{group}/{metric}", key=metric, sample_ids=[t.sample_id for t in tasks if t.group == group])
             for group in dict.fromkeys(t.group for t in tasks) for metric in summary.METRICS]
    unverified = f"UNVERIFIED: {summary.SUMMARY_REPRODUCTION['reason']}"
    outcome = run.finish(
        specs, records, pins=_pins_for_provenance(release, None, models_read=False, pi3x=False),
        extra={"summary_check": {"problems": problems, "file": summary.SUMMARY_FILE,
                                 "match": "exact float64 equality of numpy.median and the file's numbers"},
               "warnings": [summary.PAPER_PAIRS_WARNING, unverified], "release": release.provenance()},
        provenance={"release": release.provenance(), "summary_reproduction": summary.SUMMARY_REPRODUCTION},
    )
    if problems:
        outcome.exit_code = max(outcome.exit_code, 1)
        outcome.message += f"\n{summary.SUMMARY_FILE} NOT reproduced: " + "; ".join(problems)
    else:
        outcome.message += f"\n{summary.SUMMARY_FILE} reproduced exactly (all 12 medians, float64-equal)"
    if summary.SUMMARY_REPRODUCTION["state"] != "verified":
        outcome.message += f"\n{unverified}"
    print("\n".join(outcome.message.splitlines()[-2:]), file=sys.stderr)
    return outcome
