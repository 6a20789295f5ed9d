"""Seeded Script 1 outputs in the official file shapes, for every sample of a CameraBench data folder.

Why: no per-sample Script 1 score files are published anywhere, yet the score-only path (``-o scores=DIR``) must
be tested and measured at the benchmark's real size on the real data (11,222 samples of the pinned folder). The
scores are seeded draws that lean towards the right answer, so the aggregates are neither trivial nor perfect;
they mean nothing about any model. The files are written by ``official_json.write_score_dir``, the writer this
recipe's own Script 1 uses, so they have exactly the shapes upstream's Script 2 reads.

    python -m pinbench_recipes.camerabench.synthetic DATA_DIR SCORES_DIR [--seed N] [--families binary,vqa,caption]
"""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

import numpy as np

from pinbench_recipes.camerabench.dataset import CameraBenchData, load_dataset
from pinbench_recipes.camerabench.official_json import (
    BinaryScore,
    Caption,
    Combos,
    Failure,
    Script1Outputs,
    VqaScores,
    write_score_dir,
)
from pinbench_recipes.camerabench.vqa_metrics import COMBOS

MODEL_NAME = "synthetic-seeded"
TIMESTAMP = datetime(2026, 1, 1)


def synthetic_outputs(data: CameraBenchData, seed: int = 0) -> Script1Outputs:
    """One seeded output per binary sample (P(Yes)), per VQA pair (yes/no scores of the four combinations) and per
caption (``synthetic_captions``)."""
    rng = np.random.default_rng(seed)
    outputs = Script1Outputs()
    for sample in data.binary:
        lean = 0.15 if sample.label else -0.15
        outputs.binary[sample.sample_id] = BinaryScore(float(np.clip(rng.random() + lean, 0.0, 1.0)))
    for pair in data.vqa:
        yes = {combo: float(rng.random()) for combo in COMBOS}
        yes["pos_text_pos_image"] = min(1.0, yes["pos_text_pos_image"] + 0.2)
        outputs.vqa[pair.sample_id] = VqaScores(Combos.of(yes), Combos.of({c: 1.0 - v for c, v in yes.items()}))
    outputs.caption = synthetic_captions(data, seed)
    return outputs


def synthetic_captions(data: CameraBenchData, seed: int = 0) -> dict[str, Caption | Failure]:
    """A seeded caption per caption sample: its reference with words dropped (30 %), replaced by a word of
    another reference (20 %) or, once in ten, swapped with the next; never empty. Its own generator, so the
    binary and VQA draws are the same with or without captions."""
    rng = np.random.default_rng([seed, 1])
    vocabulary = [w for s in data.captions for w in s.reference.split()]
    captions: dict[str, Caption | Failure] = {}
    for sample in data.captions:
        words = sample.reference.split()
        out = []
        for word in words:
            draw = rng.random()
            if draw < 0.3:
                continue
            out.append(vocabulary[rng.integers(len(vocabulary))] if draw < 0.5 else word)
        for i in range(len(out) - 1):
            if rng.random() < 0.1:
                out[i], out[i + 1] = out[i + 1], out[i]
        captions[sample.sample_id] = Caption(" ".join(out or words[:1]))
    return captions


def write_synthetic_scores(data_dir: Path, dest: Path, *, seed: int = 0,
                           families: tuple[str, ...] = ("binary", "vqa")) -> list[Path]:
    """Official-shape score files for every sample of ``data_dir``'s families in ``dest``; the paths written."""
    data = load_dataset(Path(data_dir), list(families))
    return write_score_dir(dest, data, synthetic_outputs(data, seed), model_name=MODEL_NAME, checkpoint=None,
                           timestamp=TIMESTAMP, video_dir="videos", extra_metadata={"synthetic_seed": seed})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", default="binary,vqa")
    args = parser.parse_args()
    paths = write_synthetic_scores(args.data_dir, args.dest, seed=args.seed, families=tuple(args.families.split(",")))
    print(f"wrote {len(paths)} score files to {args.dest}")


if __name__ == "__main__":
    main()
