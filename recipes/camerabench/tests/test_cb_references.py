"""The leaderboard references: complete, consistent with their own per-split values, and loadable."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinbench.core.pins import load_pins
from pinbench.core.reference import load_reference
from pinbench_recipes.camerabench.dataset import BINARY_SPLITS, N_CAPTIONS, VQA_SKILLS

REFERENCES = Path(__file__).resolve().parents[1] / "references"
LEADERBOARD = ["qwen2.5-vl-7b", "qwen2.5-vl-7b-cam-motion", "gpt-4o"]


@pytest.mark.parametrize("checkpoint", LEADERBOARD)
def test_leaderboard_reference_is_complete_and_consistent(checkpoint: str) -> None:
    ref = load_reference(REFERENCES / f"{checkpoint}.yaml")
    values = {name: m.value for name, m in ref.metrics.items()}
    per_split = [values[f"binary/{split}/average_precision"] for split in BINARY_SPLITS]
    # the published Avg agrees with the mean of its 15 one-decimal values within their rounding (0.1 points)
    assert abs(sum(per_split) / 15 - values["binary/overall_average_precision"]) <= 0.001 + 1e-12
    assert {n for n, m in ref.metrics.items() if m.primary} == {"binary/overall_average_precision",
                                                               "vqa/overall_question_acc"}
    # a full run of the leaderboard families: the binary and VQA samples (the group records are derived, not samples)
    assert ref.n_samples == sum(n for n, _ in BINARY_SPLITS.values()) + sum(n for _, n in VQA_SKILLS.values()) == 11222
    assert N_CAPTIONS == 1071


def test_headline_values() -> None:
    values = {c: {n: m.value for n, m in load_reference(REFERENCES / f"{c}.yaml").metrics.items()}
              for c in LEADERBOARD}
    assert values["qwen2.5-vl-7b"]["binary/overall_average_precision"] == 0.358
    assert values["qwen2.5-vl-7b"]["vqa/overall_question_acc"] == 0.259
    assert values["qwen2.5-vl-7b-cam-motion"]["binary/overall_average_precision"] == 0.600
    assert values["qwen2.5-vl-7b-cam-motion"]["vqa/overall_question_acc"] == 0.453
    assert values["gpt-4o"]["binary/overall_average_precision"] == 0.364
    assert values["gpt-4o"]["vqa/overall_question_acc"] == 0.298


def test_pins_load_and_pin_what_they_should() -> None:
    pins = load_pins(REFERENCES.parent / "pins.yaml")
    assert pins.upstream["t2v_metrics"].commit == "7c062088c08e6fbbb9c2f8095c86d4f9bc8a7fb7"
    base = pins.huggingface["qwen2_5_vl_7b_instruct"]
    assert base.revision == "cc594898137f460bfe9f0759e9844b3ce807cfb5" and len(base.sha256) == 5
    assert pins.huggingface["qwen2_5_vl_7b_cam_motion"].resolve_required
    assert pins.huggingface["videos"].repo_type == "dataset"
