"""``pinbench doctor remembench``: the evaluator weights and the release are usable, and every rollout the
selected cohort expects is under ``-o videos`` and decodes ("0 of 600 rollouts found under DIR" stops a run
before CLIP, LPIPS or Pi3X load)."""

from __future__ import annotations

from typing import Any

from pinbench.core.config import RecipeError, RunConfig
from pinbench.core.files import counted
from pinbench.core.findings import Finding, ok, problem
from pinbench.core.inputs import folder_not_found
from pinbench.core.run import ROLLOUTS
from pinbench.ops.doctor import video_findings
from pinbench_recipes.remembench import prepare, weights
from pinbench_recipes.remembench.dataset import PAPER
from pinbench_recipes.remembench.release import dataset_option, open_release


def doctor(cfg: RunConfig, pins: Any) -> list[Finding]:
    opts = cfg.options
    try:
        dataset = dataset_option(opts)
    except RecipeError as exc:
        return [problem("options", str(exc))]
    try:
        release = open_release(*dataset, local_dir=opts.dataset_dir, download=False)
    except Exception as exc:  # not fetched, bad local copy, bad checksums
        release = None
        findings = [problem("cache", f"RememBench release: {type(exc).__name__}: {exc}", "huggingface/dataset")]
    else:
        findings = [ok("cache", f"RememBench release {release.repo_id}@{release.revision} at {release.root}",
                       "huggingface/dataset")]
    try:
        prepare.check_annotations(cfg)
    except RecipeError as exc:
        findings.append(problem("options", str(exc)))
    if cfg.checkpoint == prepare.REFERENCE_PAIRS_CHECKPOINT:
        return findings  # medians of the published pairs: the release files only, no evaluator weights
    recipe_pins, baked = weights.load_recipe_pins(), weights.baked_dir(opts.weights_dir)
    checks = [("clip", "huggingface/clip",
               lambda: weights.resolve_clip(recipe_pins, opts.clip_dir, baked, False)),
              ("lpips trunk", "urls/alexnet",
               lambda: weights.resolve_alexnet(recipe_pins, opts.lpips_trunk, baked, False))]
    if opts.split == "i2v" and opts.poses_dir is None:
        checks.append(("pi3x", "huggingface/pi3x",
                       lambda: weights.resolve_pi3x(recipe_pins, opts.pi3x_weights, baked, False)))
    for name, pin, resolve in checks:
        try:
            findings.append(ok("cache", f"{name}: {resolve()[-1]}", pin))
        except Exception as exc:  # missing or mismatching weights, as the run would report them
            findings.append(problem("cache", f"{name}: {type(exc).__name__}: {exc}", pin))
    if release is None:   # no rows to count yet; a -o videos that is no folder is said now, not after the fetch
        videos = opts.videos if cfg.generator is None and not cfg.skip_generation else None
        if videos is not None and not videos.is_dir():
            findings.append(problem("inputs", folder_not_found(videos, "videos") if not videos.exists()
                                    else f"{videos}: not a directory; name the folder that holds the rollouts"))
        return findings
    try:
        groups, _ = prepare.load_groups(release, opts.split, opts.settings, PAPER)
    except Exception as exc:  # DatasetError: rows that do not match the paper's settings
        return [*findings, problem("inputs", f"cannot list the expected rollouts: {exc}")]
    if cfg.generator is not None:   # the run makes its rollouts: none to look for yet
        return findings
    # with --skip-generation, those an earlier --generator run stored in the run directory
    videos = cfg.out_dir / ROLLOUTS if cfg.skip_generation else opts.videos
    rows = [row for group in prepare.limit_groups(groups, cfg.limit) for row in group.rows]
    expected = {row.sample_id: prepare.find_video(videos, row.sample_id)[0] for row in rows}
    findings += video_findings(expected, videos or "(no -o videos= given)", "rollouts", decoder=opts.decoder)
    twice = [row.sample_id for row in rows if videos is not None
             and sum((videos / name).is_file() for name in prepare.find_video(videos, row.sample_id)[1]) > 1]
    if twice:
        findings.append(problem("inputs", f"{counted(len(twice), 'sample')} {'has' if len(twice) == 1 else 'have'} "
                                f"two rollouts under {videos} "
                                f"(<id>.mp4 and <id>/rollout.mp4), and each would fail: {', '.join(twice[:5])}"
                                + (", ..." if len(twice) > 5 else "")))
    return findings
