"""``pinbench doctor camerabench``: every input this run reads, checked as the run checks it, and no other.

A score-only run (``-o scores=DIR``) reads the pinned data (``-o data=DIR`` checked against data_manifest.json,
or the cache) and the score files: it needs neither model nor video pins, so their null revisions never stop
it. A Script 1 run reads the data, the weights and processor snapshots and the videos the data names.
"""

from __future__ import annotations

from pathlib import Path

from pinbench.core.config import RecipeError, RunConfig
from pinbench.core.findings import Finding, ok, problem, warning
from pinbench.core.pins import Pins
from pinbench.ops import doctor as ops_doctor
from pinbench.ops.doctor import hf_finding
from pinbench_recipes.camerabench import inputs
from pinbench_recipes.camerabench.data_files import DATA_PIN
from pinbench_recipes.camerabench.dataset import CameraBenchData
from pinbench_recipes.camerabench.official_json import BINARY_GLOB, CAPTION_GLOB, VQA_GLOB, Failure, ScoreFileError
from pinbench_recipes.camerabench.videos import VideoSetError, locate_videos


def doctor(cfg: RunConfig, pins: Pins | None) -> list[Finding]:
    try:
        model = inputs.script1_model(cfg)
    except RecipeError as exc:
        return [problem("inputs", str(exc))]
    findings: list[Finding] = []
    data = _data(cfg, findings)
    if model is None:
        if data is not None:
            findings += _score_files(cfg, data)
        return findings
    if not cfg.skip_generation:
        findings.append(_gpu(cfg))
    if pins is None:
        return findings
    for name in dict.fromkeys((model.weights_pin, inputs.PROCESSOR_PIN)):  # the base model is both
        findings.append(hf_finding(name, pins.huggingface[name]))
    if data is not None:
        findings.append(_videos(cfg, pins, inputs.run_subset(cfg, data)))
    return findings


def _gpu(cfg: RunConfig) -> Finding:
    """Script 1 is Qwen2.5-VL-7B in bf16 on one CUDA GPU. Without one, flash_attention_2 (the default, as upstream)
    cannot load at all, and another kernel runs a GPU model on CPU: either way it is said now."""
    gpus = ops_doctor.visible_gpus()
    if gpus:
        index, name, gb = gpus[0]
        return ok("gpu", f"Script 1 on GPU {index} {name} {gb:.0f} GB (Qwen2.5-VL-7B in bf16, ~17 GB of weights)")
    way = "-o scores=DIR runs Script 2 alone on CPU over Script 1 files made elsewhere"
    if cfg.options.attn == "flash_attention_2":
        return problem("gpu", "no GPU visible (nvidia-smi not found or failing): Script 1 runs Qwen2.5-VL-7B with "
                              f"flash_attention_2, which needs a CUDA GPU; run it on a GPU machine, or {way}")
    return warning("gpu", f"no GPU visible (nvidia-smi not found or failing): Script 1 would run Qwen2.5-VL-7B "
                          f"({cfg.options.attn}) on CPU, very slowly (a GPU model); {way}")


def _data(cfg: RunConfig, findings: list[Finding]) -> CameraBenchData | None:
    """The pinned data as the run loads it (manifest, then the official counts); None after a problem."""
    local = cfg.options.data
    where = ("inputs", "") if local is not None else ("cache", DATA_PIN)
    try:
        root = inputs.data_dir(cfg, download=False)
        data = inputs.load_data(cfg, root, official=True)
    except RecipeError as exc:
        findings.append(problem(where[0], str(exc), where[1]))
        return None
    findings.append(ok(where[0], f"data {root}: the files of data_manifest.json, byte for byte, and the "
                                 "official counts", where[1]))
    return data


def _score_files(cfg: RunConfig, whole: CameraBenchData) -> list[Finding]:
    """The score files read as the run reads them; samples of this run without a row, or with an error, named."""
    folder = Path(cfg.options.scores)
    try:
        outputs = inputs.score_outputs(folder, whole, cfg.options.families)
    except ScoreFileError as exc:
        return [problem("inputs", str(inputs.input_error(exc)))]
    data = inputs.run_subset(cfg, whole)
    ids = [s.sample_id for s in data.binary] + [p.sample_id for p in data.vqa] + [s.sample_id for s in data.captions]
    values = {**outputs.binary, **outputs.vqa, **outputs.caption}
    missing = [sid for sid in ids if sid not in values]
    failed = [sid for sid in ids if isinstance(values.get(sid), Failure)]
    line = f"score files in {folder}: {len(ids) - len(missing) - len(failed)} of {len(ids)} samples scored"
    if failed:
        line += f"; {len(failed)} will fail with their Script 1 error (e.g. {failed[0]})"
    if missing:
        line += f"; {len(missing)} have no row and will fail as missing (e.g. {missing[0]})"   # failed, not missing
    found = [(warning if missing or failed else ok)("inputs", line)]   # said by run too, which then starts
    if outputs.ignored:
        found.append(warning("inputs", f"score files in {folder}: not read, no official name ({BINARY_GLOB}, "
                                       f"{VQA_GLOB}, {CAPTION_GLOB}, directly in the folder): "
                                       f"{', '.join(outputs.ignored)}"))
    return found


def _videos(cfg: RunConfig, pins: Pins, data: CameraBenchData) -> Finding:
    """Every video the run's samples name: the local folder, or the pinned snapshot narrowed to them."""
    local = cfg.options.videos
    if local is None:
        return hf_finding(inputs.VIDEOS_PIN, inputs.videos_pin(pins, data))
    try:
        found = locate_videos(Path(local), data.video_names())
    except VideoSetError as exc:
        return problem("inputs", f"camerabench: {exc}")
    return ok("inputs", f"videos {local}: all {len(found.paths)} the data names")
