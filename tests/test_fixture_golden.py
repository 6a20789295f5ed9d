"""All five fixtures give the per-sample values and metric values that main 87e8f14 gave (before Core v3).

The golden file was written by ``tools/fixture_golden.py`` from a ``pinbench demo`` of 87e8f14; this test runs
the demo of the current tree and compares what a score depends on: every record's status, result and error,
every derived record, every metric's value, and each run's status. Floats must agree to 1e-12 (relative).
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from pinbench.cli import app

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "fixtures_87e8f14.json"
# Keys added since 87e8f14 on purpose (no value changed): where, and why.
ADDED_SINCE = {
    "camerabench.derived.binary_split__Static.result.note": "#20 item 4: a single-class split's record says so",
}
# #19 item 7: PAI-Bench-C's --fixture runs run.py's real procedure (87e8f14 ran a separate one), which records per
# task the native cross-check beside the evaluator's values and the reasons for missing ones (``errors``).
PAIBENCH_C_NATIVE = [f"{modality}/native/{metric}" for modality in ("edge", "blur", "depth", "seg")
                     for metric in ("canny_f1_score", "canny_precision", "canny_recall", "blur_ssim", "seg_m_iou",
                                    "seg_recall")]
ADDED_SINCE |= {f"paibench-c.samples.task_{i:04d}.result.{key}": "#19 item 7: the real procedure's records"
                for i in range(4) for key in [*PAIBENCH_C_NATIVE, "errors"]}
ADDED_SINCE |= {f"paibench-c.metrics.{key}": "#19 item 7: the real procedure's cross-check"
                for key in PAIBENCH_C_NATIVE}


def _golden_tool() -> Any:
    spec = importlib.util.spec_from_file_location("fixture_golden", REPO / "tools" / "fixture_golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _differences(old: Any, new: Any, where: str = "$") -> list[str]:
    if isinstance(old, float) or isinstance(new, float):
        if isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(old, bool) \
                and math.isclose(old, new, rel_tol=1e-12, abs_tol=1e-15):
            return []
        return [f"{where}: {old!r} then, {new!r} now"]
    if isinstance(old, dict) and isinstance(new, dict):
        found = [f"{where}.{k}: only in 87e8f14" for k in old.keys() - new.keys()]
        found += [f"{where}.{k}: new" for k in new.keys() - old.keys()]
        for key in sorted(old.keys() & new.keys()):
            found += _differences(old[key], new[key], f"{where}.{key}")
        return found
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{where}: {len(old)} items then, {len(new)} now"]
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) for d in _differences(a, b, f"{where}[{i}]")]
    return [] if old == new else [f"{where}: {old!r:.80} then, {new!r:.80} now"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from typer.testing import CliRunner

    out = tmp_path_factory.mktemp("golden") / "demo"
    result = CliRunner().invoke(app, ["demo", "--out", str(out)])
    assert result.exit_code == 0, result.output[-2000:]
    return out


def test_every_fixture_gives_the_values_of_87e8f14(demo: Path) -> None:
    golden = json.loads(GOLDEN.read_text())
    now = _golden_tool().golden(demo)
    assert sorted(golden) == ["camerabench", "dynamic-degree", "mind", "paibench-c", "remembench"]
    assert set(golden) <= set(now)  # a recipe added since has no value of 87e8f14 (the demo checks its fixture)
    for recipe in golden:
        assert now[recipe]["status"] == "complete"
        for part in ("samples", "derived", "metrics"):
            added = sorted(f"{where}: new" for where in ADDED_SINCE if where.startswith(f"{recipe}.{part}."))
            assert sorted(_differences(golden[recipe][part], now[recipe][part], f"{recipe}.{part}")) == added


def test_the_keys_added_to_paibench_c_hold_the_values_of_87e8f14(demo: Path) -> None:
    """Each native value recomputes an evaluator value of 87e8f14 (the fixture's evaluator double and the cross-check
    share the arithmetic), so it must equal it; and no task has a reason for a missing value."""
    golden = json.loads(GOLDEN.read_text())["paibench-c"]
    now = _golden_tool().golden(demo)["paibench-c"]
    for sample_id, record in now["samples"].items():
        then = golden["samples"][sample_id]["result"]
        assert record["result"]["errors"] == {}
        assert _differences({k: then[k.replace("/native/", "/")] for k in PAIBENCH_C_NATIVE},
                            {k: record["result"][k] for k in PAIBENCH_C_NATIVE}, sample_id) == []
    assert _differences({k: golden["metrics"][k.replace("/native/", "/")] for k in PAIBENCH_C_NATIVE},
                        {k: now["metrics"][k] for k in PAIBENCH_C_NATIVE}) == []


def test_every_fixture_scorecard_round_trips_through_the_typed_scorecard(demo: Path) -> None:
    """#19 item 6: the typed scorecard holds a real scorecard of each fixture exactly: its JSON form is the file's,
    byte for byte, key order included (derived blocks, cohorts, groups and every kind of interval among them)."""
    from pinbench.core.scorecard import Scorecard, load_scorecard

    paths = sorted(demo.glob("*/scorecard.json"))
    assert [p.parent.name for p in paths] == ["camerabench", "dynamic-degree", "mind", "paibench-c", "remembench"]
    for path in paths:
        text = path.read_text()
        card = load_scorecard(path)
        assert json.dumps(card.to_json(), indent=2) + "\n" == text, path
        assert Scorecard.from_json(json.loads(text)) == card, path


def test_the_comparison_sees_a_changed_value() -> None:
    golden = json.loads(GOLDEN.read_text())
    changed = json.loads(GOLDEN.read_text())
    name = next(iter(changed["dynamic-degree"]["metrics"]))
    changed["dynamic-degree"]["metrics"][name] += 1e-9
    assert _differences(golden["dynamic-degree"]["metrics"], changed["dynamic-degree"]["metrics"]) != []
    assert _differences({"a": [1, 2]}, {"a": [1, 2, 3]}) == ["$.a: 2 items then, 3 now"]
