"""Every number the authors' project page publishes (mosaichunk/mosaichunk.github.io) is a reference, with its page,
path and commit: the results table (CLIP, LPIPS, TempSSIM, Drift per arm and budget; T2V, I2V 180-degree rotation
and rotation + translation), the budget curve at full precision and the fractional-budget evaluations.

The numbers are read from the transcribed extract in ``../shared/data/remembench/`` (each checked against the page),
never from the reference files under test; the test skips where that folder is absent.
"""

from __future__ import annotations

import json

import pytest
from shared_data import shared_data

from pinbench.core.recipe import get_recipe
from pinbench.core.reference import load_reference

RECIPE = get_recipe("remembench")
PAGE = "https://github.com/mosaichunk/mosaichunk.github.io"
DATA_JS = "00818c5e2e797be5ed3f20d03b75ed13d9201a92"
METRICS = ("clip", "lpips_alex", "tempssim", "drift")
ARMS = {"Base": "base", "MoC": "moc", "Ours": "mosaichunk", "MosaiChunk": "mosaichunk", "WorldKV": "worldkv",
        "MosaiChunk-Pose": "mosaichunk-pose"}
PREFIX = {"t2v": "t2v", "rotation": "i2v/rotation_180", "translation": "i2v/translation_180"}


EXTRACT = shared_data("remembench")
pytestmark = pytest.mark.skipif(EXTRACT is None, reason="../shared/data/remembench (the project page's numbers, see "
                                                        "shared/data/README.md) is not beside this checkout")


def _budget(b: float) -> str:
    return f"{b:g}chunk"


def _metric(checkpoint: str, name: str):
    ref = load_reference(RECIPE.dir / "references" / f"{checkpoint}.yaml", RECIPE)
    assert ref.source["url"] == PAGE and ref.source["commit"] == DATA_JS and "assets/data.js" in ref.source["citation"]
    assert ref.tier == "cross_hw" and ref.mode == "full"
    assert name in ref.metrics, (checkpoint, name, sorted(ref.metrics))
    return ref.metrics[name]


def test_every_number_the_project_page_publishes_is_a_reference() -> None:
    extract = json.loads((EXTRACT / "data_js_extract.json").read_text())
    fractional = json.loads((EXTRACT / "fractional-results.json").read_text())
    curve = {"t2v": extract["budgetCurve"]["T2V"], "rotation": extract["budgetCurve"]["I2V_rotation180"]}
    full = {(split, ARMS[m], b): v for split, series in curve.items() for m, points in series.items()
            if m != "n" for b, v in points}
    checked = 0
    # the results table: 3 decimals, or the budget curve's full-precision value that rounds to it
    for split, arms in extract["results"].items():
        for method, values in arms.items():
            for b in (1, 2):
                for i, metric in enumerate(METRICS):
                    table = values[(b - 1) * 4 + i]
                    checkpoint = f"{'t2v' if split == 't2v' else 'i2v'}-{ARMS[method]}-{_budget(b)}"
                    ref = _metric(checkpoint, f"{PREFIX[split]}/{metric}")
                    precise = full.get((split, ARMS[method], b)) if metric == "clip" else None
                    assert ref.value == (precise if precise is not None else table), (checkpoint, metric)
                    assert round(ref.value, 3) == table
                    checked += 1
    # the budget curve at full precision: every arm and budget (WorldKV, MosaiChunk-Pose, the fractional budgets)
    for (split, arm, b), value in full.items():
        checkpoint = f"{'t2v' if split == 't2v' else 'i2v'}-{arm}-{_budget(b)}"
        assert _metric(checkpoint, f"{PREFIX[split]}/clip").value == value
        checked += 1
    # the fractional-budget evaluations (CLIP and LPIPS of MosaiChunk at 0.5 and 1.5 chunks)
    for split, entry in fractional.items():
        for key, metric in (("clip", "clip"), ("lpips", "lpips_alex")):
            for b, value in entry[key]:
                checkpoint = f"{'t2v' if split == 't2v' else 'i2v'}-mosaichunk-{_budget(b)}"
                assert _metric(checkpoint, f"{PREFIX[split]}/{metric}").value == value
                checked += 1
    assert checked == 72 + 22 + 12


def test_i2v_references_name_the_cohort_they_apply_to() -> None:
    """Both settings in one reference: 150 rotation scenes + 100 outdoor translation scenes."""
    both = load_reference(RECIPE.dir / "references" / "i2v-mosaichunk-2chunk.yaml", RECIPE)
    assert both.n_samples == 250 and {n.split("/")[1] for n in both.metrics} == {"rotation_180", "translation_180"}
    rotation_only = load_reference(RECIPE.dir / "references" / "i2v-worldkv-2chunk.yaml", RECIPE)
    assert rotation_only.n_samples == 150 and list(rotation_only.metrics) == ["i2v/rotation_180/clip"]


def test_every_reference_is_a_known_checkpoint_and_the_readme_lists_the_i2v_ones() -> None:
    files = {p.stem for p in (RECIPE.dir / "references").glob("*.yaml")} - {"fixture"}
    assert files <= set(RECIPE.checkpoints)
    readme = (RECIPE.dir / "README.md").read_text()
    assert "publishes no I2V" not in readme and "| `i2v-<method>-<budget>chunk.yaml` |" in readme
