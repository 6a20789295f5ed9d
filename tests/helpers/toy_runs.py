"""Run directories of a toy recipe for the tests of what reads finished runs (compare, table): N tasks whose f1
and err follow one shared difficulty (what pairing cancels) plus each run's seeded noise."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec, build_scorecard, write_scorecard

PROVENANCE = json.loads((Path(__file__).parents[1] / "golden" / "scorecard.json").read_text())["provenance"]
N = 40
DIFFICULTY = np.random.default_rng(0).normal(0.5, 0.15, N)  # shared by every run


def write_toy_run(root: Path, name: str, metrics: Sequence[MetricSpec], *, shift: float = 0.0, seed: int = 1,
                  failed: Mapping[str, str] | None = None, drop: tuple[str, ...] = (), version: str = "1.0.0",
                  recipe: str = "toy-bench", prefix: str = "t", samples: bool = True, checkpoint: str | None = None
                  ) -> Path:
    """``root/name`` with scorecard.json and (``samples``) samples.jsonl, a run of ``checkpoint`` (``name`` when
    None); ``shift`` moves f1 up and err down;
    ``failed`` samples fail with their reason, ``drop``ped ones are missing; ``prefix`` names the ids (t00...);
    each result also names its scene (one of 8)."""
    noise = np.random.default_rng(seed).normal(0, 0.005, N)
    records = []
    for i in range(N):
        sid = f"{prefix}{i:02d}"
        if sid in drop:
            records.append(SampleRecord(sid, "failed", None, "missing: no result from any shard", "0" * 64, 0.0))
        elif failed and sid in failed:
            records.append(SampleRecord(sid, "failed", None, failed[sid], "0" * 64, 0.1))
        else:
            result = {"f1": DIFFICULTY[i] + shift + noise[i], "err": 1 - DIFFICULTY[i] - shift + noise[i],
                      "scene": f"scene{i % 8}"}
            records.append(SampleRecord(sid, "ok", result, None, "0" * 64, 0.1))
    card = build_scorecard(recipe=recipe, recipe_version=version, checkpoint=checkpoint or name, mode="full",
                           metrics=list(metrics), records=records, n_expected=N, provenance=PROVENANCE, config={},
                           timings={})
    run = root / name
    write_scorecard(card, run / "scorecard.json")
    if samples:
        (run / "samples.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))
    return run
