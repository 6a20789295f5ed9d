"""``pinbench check``: a run directory written by Run.finish is consistent; each kind of tampering is named.

The run directory is a real one: the toy recipe (a real recipe.yaml) through ``Run.finish``, with a
reference recorded from its own complete run. ``get_recipe`` inside pinbench.core.check is replaced by a test
double that returns the toy recipe, since the toy is not an installed recipe.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from deadline import within
from loose_task import LooseTask
from stored import store_records
from toy_recipe import toy_recipe

from pinbench import cli
from pinbench.core import check as check_module
from pinbench.core.check import check_run
from pinbench.core.config import Implementation, RunConfig
from pinbench.core.fixture_data import build_once
from pinbench.core.proposal import record_reference
from pinbench.core.recipe import Recipe, load_declaration
from pinbench.core.run import Run
from pinbench.core.rundir import IDENTITY_FILE, LOCK_DIR, claim_run_dir
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec, load_scorecard
from pinbench.core.store import encode_line, record_bytes
from pinbench.ops.launch import run_recipe, write_run_report

IDS = ["s0", "s1", "s2", "s3"]
PINS = {"urls": {"trunk": {"url": "https://example.org/trunk.pth", "sha256": None}}}


def _records(failed: tuple[str, ...] = ()) -> list[SampleRecord]:
    return [SampleRecord(sid, "failed", None, "ValueError: bad frame", "0" * 64, 0.1) if sid in failed else
            SampleRecord(sid, "ok", {"f1": 0.5 + 0.1 * i, "err": 0.25 * (i + 1)}, None, "0" * 64, 0.1)
            for i, sid in enumerate(IDS)]


SPECS = [MetricSpec("f1"), MetricSpec("err"),
         MetricSpec("near/f1", key="f1", sample_ids=["s0", "s1"]),
         MetricSpec("far/f1", key="f1", sample_ids=["s2", "s3"])]


def _finish(recipe: Recipe, cfg: RunConfig, records: list[SampleRecord]) -> Any:
    """The end of a run whose samples were stored as run_samples stores them (the store check reads them)."""
    store_records(cfg.out_dir, records, cfg.shard)
    return Run(recipe, cfg, report=write_run_report).finish(SPECS, records, pins=PINS)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete smoke run of the toy with a recorded reference and a PASS diff, written once per module."""
    root = tmp_path_factory.mktemp("template")
    recipe = toy_recipe(root / "recipes")
    cfg = recipe.config("Toy-Nano", out_dir=root / "run", limit=4, env={})
    with pytest.MonkeyPatch.context() as patch, claim_run_dir(cfg, env={}):
        patch.setattr(check_module, "get_recipe", lambda name: recipe)
        first = _finish(recipe, cfg, _records())
        card = load_scorecard(first.scorecard_path)
        record_reference(card, recipe.reference_file("Toy-Nano", "smoke"), recipe=recipe, tier="same_hw")
        outcome = _finish(recipe, cfg, _records())
    assert outcome.exit_code == 0, outcome.message
    assert "result: PASS (exit 0)" in (cfg.out_dir / "diff.txt").read_text()
    return root


@pytest.fixture
def toy(tmp_path: Path, template: Path, monkeypatch: pytest.MonkeyPatch) -> Recipe:
    """This test's own copy of the toy recipe (with the template's reference)."""
    shutil.copytree(template / "recipes", tmp_path / "recipes")
    recipe = load_declaration(tmp_path / "recipes" / "toy_bench" / "recipe.yaml", "toy_bench")
    monkeypatch.setattr(check_module, "get_recipe", lambda name: recipe)  # test double: the toy is not installed
    return recipe


@pytest.fixture
def run_dir(tmp_path: Path, template: Path, toy: Recipe) -> Path:
    """This test's own copy of the template run directory."""
    return Path(shutil.copytree(template / "run", tmp_path / "run"))


def _edit_json(path: Path, change: Callable[[Any], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=1))


def _edit_samples(path: Path, change: Callable[[list[dict]], None]) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    change(rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("where", ["victim.txt", "../victim.txt"])
def test_a_samples_path_outside_the_run_directory_is_neither_written_nor_read(
        where: str, run_dir: Path, toy: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """samples.path edited to another file (absolute, or with ..): the rerun's finish found the scorecard unchanged
    and wrote the run's records over that file (another run's samples.jsonl, any file), and compare, view, report
    and table read it as this run's."""
    from pinbench.core.scorecard import ScorecardError
    from pinbench.results.compare import load_run

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    named = str(victim) if where == "victim.txt" else "../victim.txt"
    cfg = toy.config("Toy-Nano", out_dir=run_dir, limit=4, env={})
    with claim_run_dir(cfg, env={}):
        _finish(toy, cfg, _records())   # the scorecard of this very directory: the next finish keeps it
    _edit_json(run_dir / "scorecard.json", lambda d: d["samples"].update(path=named))
    with pytest.raises(ScorecardError, match=re.escape(f"{run_dir / 'scorecard.json'}: samples.path {named!r} is not "
                                                     "a file inside the run directory")):
        load_run(run_dir)
    with claim_run_dir(cfg, env={}):
        outcome = _finish(toy, cfg, _records())
    assert outcome.exit_code == 0, outcome.message
    assert victim.read_text() == "precious" and load_scorecard(run_dir / "scorecard.json").samples.path == \
        "samples.jsonl"


@pytest.mark.parametrize("named", ["samples/run.jsonl", "pinbench-run.json"])
def test_a_rerun_never_writes_records_over_another_file_of_the_run_a_scorecard_names(
        named: str, run_dir: Path, toy: Recipe) -> None:
    """samples.path edited to a file of the run itself: the rerun kept the scorecard and wrote the records over that
    file (the sample store, whose lines then no longer read; the run's identity)."""
    cfg = toy.config("Toy-Nano", out_dir=run_dir, limit=4, env={})
    with claim_run_dir(cfg, env={}):
        _finish(toy, cfg, _records())   # the scorecard of this very directory: the next finish keeps it
    _edit_json(run_dir / "scorecard.json", lambda d: d["samples"].update(path=named))
    with claim_run_dir(cfg, env={}):
        outcome = _finish(toy, cfg, _records())
    assert outcome.exit_code == 0, outcome.message
    assert load_scorecard(run_dir / "scorecard.json").samples.path == "samples.jsonl"
    assert check_run(run_dir).problems == []


def test_a_reference_is_never_recorded_from_a_scorecard_its_records_contradict(
        run_dir: Path, toy: Recipe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A value edited in scorecard.json became the reference's value: record-reference read the scorecard alone."""
    from typer.testing import CliRunner

    monkeypatch.setattr(cli, "get_recipe", lambda name: toy)
    args = ["record-reference", str(run_dir), "--out", str(tmp_path / "ref.yaml"), "--dry-run"]
    assert CliRunner().invoke(cli.app, args).exit_code == 0
    _edit_json(run_dir / "scorecard.json", lambda d: d["metrics"]["f1"].update(value=0.95))
    refused = CliRunner().invoke(cli.app, args)
    assert refused.exit_code == 2 and refused.output.splitlines() == [
        f"error: refusing to record from {run_dir / 'scorecard.json'}: its records say otherwise: "
        f"{run_dir / 'samples.jsonl'}: metric f1: value 0.95 in the scorecard, 0.65 recomputed from the records "
        f"(`pinbench check {run_dir}`)"]
    (run_dir / "samples.jsonl").unlink()   # a scorecard copied alone is recorded from; a run directory's is not
    refused = CliRunner().invoke(cli.app, args)
    assert refused.exit_code == 2 and refused.output.splitlines() == [
        f"error: refusing to record from {run_dir / 'scorecard.json'}: its values cannot be checked against its "
        f"records: {run_dir / 'samples.jsonl'}: absent from the run directory (pinbench-run.json) "
        f"(`pinbench check {run_dir}`)"]
    _edit_json(run_dir / "scorecard.json", lambda d: d["samples"].update(path=None))   # a TypeError traceback
    refused = CliRunner().invoke(cli.app, args)
    assert refused.exit_code == 2 and refused.output.splitlines() == [
        f"error: refusing to record from {run_dir / 'scorecard.json'}: its values cannot be checked against its "
        f"records: {run_dir / 'scorecard.json'}: names no per-sample file (samples.path is null) "
        f"(`pinbench check {run_dir}`)"]


def test_a_run_written_by_the_finish_is_clean_and_lists_unverified_inputs(run_dir: Path) -> None:
    result = check_run(run_dir)
    assert result.problems == [] and result.exit_code == 0
    assert len(result.notes) == 1 and result.notes[0].startswith("unverified input urls/trunk: no sha256")
    assert result.lines()[-1] == f"check: {run_dir} is consistent"
    card = json.loads((run_dir / "scorecard.json").read_text())
    assert card["metrics"]["near/f1"]["sample_ids"] == ["s0", "s1"] and card["metrics"]["near/f1"]["n_expected"] == 2
    assert check_run(run_dir / "scorecard.json").problems == []  # the scorecard's path works too


def test_a_samples_file_with_crlf_line_ends_holds_the_same_records(run_dir: Path) -> None:
    """Read as text (universal newlines) for the records and as bytes for the store, line by line alike."""
    path = run_dir / "samples.jsonl"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert check_run(run_dir).problems == []


def _set_value(sid: str, key: str, value: Any) -> Callable[[list[dict]], None]:
    def change(rows: list[dict]) -> None:
        next(r for r in rows if r["sample_id"] == sid)["result"][key] = value
    return change


def _fail(sid: str) -> Callable[[list[dict]], None]:
    def change(rows: list[dict]) -> None:
        row = next(r for r in rows if r["sample_id"] == sid)
        row.update(status="failed", result=None, error="RuntimeError: gone")
    return change


def _edit_store(sid: str, change: Callable[[bytes], bytes | None]) -> Callable[[Path], None]:
    """Rewrite every stored line of one sample (``change`` returns the new line, or None to drop it)."""
    def tamper(run_dir: Path) -> None:
        log = run_dir / "samples" / "run.jsonl"
        lines = []
        for line in log.read_bytes().splitlines():
            mine = json.loads(line)["record"]["sample_id"] == sid
            new = change(line) if mine else line
            if new is not None:
                lines.append(new)
        log.write_bytes(b"".join(line + b"\n" for line in lines))
    return tamper


def _respace(path: Path, sid: str) -> None:
    """One record of the samples file written with spaces: the same JSON, other bytes than the store holds."""
    lines = path.read_bytes().splitlines()
    index = next(i for i, line in enumerate(lines) if json.loads(line)["sample_id"] == sid)
    lines[index] = json.dumps(json.loads(lines[index])).encode()
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def _resigned(line: bytes) -> bytes:
    """The line with s1's err edited and a digest that matches the edit (what a careful forger writes)."""
    record = json.loads(line)["record"]
    record["result"]["err"] = 9.0
    return encode_line(record_bytes(record)).rstrip(b"\n")


TAMPERING: list[tuple[str, Callable[[Path], None], str]] = [
    ("a stored record edited", _edit_store("s1", lambda line: line.replace(b'"err":0.5', b'"err":0.75')),
     "sample store: "),
    ("a stored record edited, its digest kept", _edit_store("s1", lambda line: line.replace(b'"err":0.5', b'"err":7')),
     "the record of sample 's1' does not match its digest"),
    ("a stored record deleted", _edit_store("s1", lambda line: None),
     "sample 's1' is in samples.jsonl, but the store holds no record of it"),
    ("a stored record re-signed", _edit_store("s1", _resigned),
     "sample 's1' is in samples.jsonl, but the store holds other records of it"),
    ("an interval widened", lambda d: _edit_json(d / "scorecard.json", lambda c: c["metrics"]["f1"]["interval"].update(
        low=0.0, high=1.0)), "metric f1: interval (0.0, 1.0, 'BCa') in the scorecard, ("),
    ("samples file deleted", lambda d: (d / "samples.jsonl").unlink(), "samples.jsonl: missing"),
    ("a record dropped", lambda d: _edit_samples(d / "samples.jsonl", lambda rows: rows.pop(1)),
     "samples.jsonl: 3 records, the scorecard counts 4"),
    ("a record dropped, its sample ok", lambda d: _edit_samples(d / "samples.jsonl", lambda rows: rows.pop(1)),
     "samples.jsonl: 3 ok records, the scorecard counts 4"),
    ("samples file a folder", lambda d: ((d / "samples.jsonl").unlink(), (d / "samples.jsonl").mkdir()),
     "samples.jsonl: is a directory, not a file"),
    ("samples file a symlink", lambda d: ((d.parent / "other.jsonl").write_bytes((d / "samples.jsonl").read_bytes()),
                                          (d / "samples.jsonl").unlink(),
                                          (d / "samples.jsonl").symlink_to(d.parent / "other.jsonl")),
     "samples.jsonl: a symlink (to "),
    ("a value edited", lambda d: _edit_samples(d / "samples.jsonl", _set_value("s0", "err", 9.0)),
     "metric err: value 0.625 in the scorecard, 0.875 recomputed from the records"),
    ("a cohort value edited", lambda d: _edit_samples(d / "samples.jsonl", _set_value("s0", "f1", 0.0)),
     "metric f1: value"),
    ("a scored sample now failed", lambda d: _edit_samples(d / "samples.jsonl", _fail("s2")),
     "metric f1: the scorecard says n_scored 4 (records give 3), n_failed 0 (records give 1)"),
    ("a corrupt line", lambda d: (d / "samples.jsonl").write_text("{\n"), "samples.jsonl:1"),
    ("a samples line re-spaced", lambda d: _respace(d / "samples.jsonl", "s1"),
     "sample 's1' is in samples.jsonl, but the store holds other records of it"),
    ("samples file not UTF-8", lambda d: (d / "samples.jsonl").write_bytes(
        (d / "samples.jsonl").read_bytes().replace(b'"error":null', b'"error":"\xff"', 1)),
     "'utf-8' codec can't decode byte 0xff in position"),
    ("samples path outside", lambda d: _edit_json(d / "scorecard.json",
                                                  lambda c: c["samples"].update(path="../elsewhere.jsonl")),
     "is not a file inside the run directory"),
    ("report deleted", lambda d: (d / "report" / "index.html").unlink(), "report/index.html: missing"),
    ("scorecard value edited", lambda d: _edit_json(d / "scorecard.json",
                                                    lambda c: c["metrics"]["f1"].update(value=0.7)),
     "metric f1: value 0.7 in the scorecard, 0.65"),
    ("cohorts swapped", lambda d: _edit_json(d / "scorecard.json",
                                             lambda c: c["metrics"]["near/f1"].update(sample_ids=["s0", "s2"])),
     "metric near/f1: value"),
    ("scorecard NaN", lambda d: (d / "scorecard.json").write_text(
        re.sub(r'"value": [0-9.]+', '"value": NaN', (d / "scorecard.json").read_text(), count=1)),
     "non-finite number NaN"),
    ("identity of another run", lambda d: _edit_json(d / IDENTITY_FILE, lambda i: i.update(checkpoint="Toy-Super")),
     "the directory belongs to checkpoint 'Toy-Super', the scorecard is for 'Toy-Nano'"),
    ("diff.txt stale", lambda d: (d / "diff.txt").write_text("result: FAIL (exit 1)\n"),
     "diff.txt: says 'result: FAIL (exit 1)', the diff against"),
    ("diff.txt deleted", lambda d: (d / "diff.txt").unlink(), "diff.txt: missing"),
]


@pytest.mark.parametrize(("name", "tamper", "expected"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_each_kind_of_tampering_is_one_named_problem(run_dir: Path, name: str, tamper: Callable[[Path], None],
                                                     expected: str) -> None:
    tamper(run_dir)
    result = check_run(run_dir)
    assert result.exit_code == 2 and result.problems, name
    assert any(expected in p for p in result.problems), result.problems
    assert all("\n" not in p for p in result.problems)


def test_a_diff_txt_older_than_the_reference_names_the_way_on(run_dir: Path) -> None:
    """A reference recorded from a run (``pinbench record-reference``) left that very run's check with a problem
    and no way on: its diff.txt, written when no reference applied, says no result. The same run command again
    rewrites it (every sample reused); ``pinbench diff`` only prints."""
    (run_dir / "diff.txt").write_text("reported, not diffed (status complete)\n")
    (problem,) = check_run(run_dir).problems
    assert problem.startswith(f"{run_dir / 'diff.txt'}: says 'no result', the diff against ")
    assert problem.endswith("the run's reference changed since (recorded, edited or removed), or diff.txt did: "
                            "the same `pinbench run` command again rewrites it, every sample reused")

def test_a_mismatch_diffed_before_its_result_line_said_why_is_no_stale_diff(run_dir: Path, toy: Recipe) -> None:
    """A run diffed before the result line said why the reference does not apply (29f7840) wrote ``result: MISMATCH
    (exit 3)`` alone: the verdict the diff gives now, which check called stale ("the run's reference changed
    since"). The sample count is the one problem."""
    path = toy.reference_file("Toy-Nano", "smoke")
    data = yaml.safe_load(path.read_text())
    data["n_samples"] = 5
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    (run_dir / "diff.txt").write_text("result: MISMATCH (exit 3)\n")
    (problem,) = check_run(run_dir).problems
    assert problem.endswith("the reference is for sample count 5, the run has 4"), problem
    (run_dir / "diff.txt").write_text("result: MISMATCH (exit 3): the reference is of 6 samples, this run has 4\n")
    assert any("diff.txt: says 'result: MISMATCH (exit 3): the reference is of 6 samples" in p
               for p in check_run(run_dir).problems)


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("n_samples", 5, "the reference is for sample count 5, the run has 4"),
    ("recipe_version", "0.9.0", "the reference is for recipe_version '0.9.0'"),
])
def test_a_reference_that_does_not_apply_is_a_problem(run_dir: Path, toy: Recipe, field: str, value: Any,
                                                      expected: str) -> None:
    path = toy.reference_file("Toy-Nano", "smoke")
    data = yaml.safe_load(path.read_text())
    data[field] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert any(expected in p for p in check_run(run_dir).problems)


def test_a_partial_run_and_a_named_failure_without_record(tmp_path: Path, toy: Recipe) -> None:
    cfg = toy.config("Toy-Nano", out_dir=tmp_path / "partial", limit=4, env={})
    with claim_run_dir(cfg, env={}):
        outcome = _finish(toy, cfg, _records(failed=("s1",)))
    assert outcome.exit_code == 2  # partial: never 0
    problems = check_run(cfg.out_dir).problems
    assert len(problems) == 1 and "status partial: f1: 3/4 scored (1 failed, 0 missing)" in problems[0]
    _edit_samples(cfg.out_dir / "samples.jsonl", lambda rows: rows.pop(1))
    assert any("metric f1: failed sample 's1' has no record" in p for p in check_run(cfg.out_dir).problems)


def test_check_names_another_process_still_writing(tmp_path: Path, toy: Recipe) -> None:
    """A live lock that is not ours: the directory is not a finished result yet."""
    cfg = toy.config("Toy-Nano", out_dir=tmp_path / "busy", limit=4, env={})
    (cfg.out_dir / LOCK_DIR).mkdir(parents=True)
    (cfg.out_dir / LOCK_DIR / "shard-0-of-2.lock").write_text(json.dumps(
        {"pid": os.getppid(), "host": socket.gethostname(), "started": "2026-01-01T00:00:00Z", "shard": "0/2",
         "token": "x", "argv": ["pinbench", "run"]}))
    _finish(toy, cfg, _records())
    checked = check_run(cfg.out_dir)
    assert checked.exit_code == 2
    assert any(f"a run is still writing here: pid {os.getppid()}" in p for p in checked.problems)


def test_a_run_without_generation_records_reads_no_rollout(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rollout check (``_check_rollouts``) costs a score-only run (CameraBench's 11,222 samples) one stat: no
    generation store read, no file hashed."""
    def never(*_: object) -> None:
        raise AssertionError("a score-only run's check read generation records or hashed a file")

    monkeypatch.setattr(check_module, "load_records", never)
    monkeypatch.setattr(check_module, "regular_sha256", never)
    assert check_run(run_dir).problems == []


@pytest.mark.parametrize(("make", "says"), [
    (lambda p: p.symlink_to(p), "a symlink loop"), (lambda p: p.write_text("x"), "a regular file"),
    (lambda p: p.symlink_to(p.parent / "gone"), "a dangling symlink"), (lambda p: None, "no such directory")])
def test_what_stands_where_a_run_directory_was_named(tmp_path: Path, make, says: str) -> None:
    """Status and check name what is there: each said "no such directory, or not a directory", a loop included."""
    from pinbench.ops.status import run_status

    path = tmp_path / "run"
    make(path)
    with pytest.raises(ValueError) as status:
        run_status(path, ask_slurm=False)
    assert str(status.value) == f"{path}: not a run directory ({says})"
    assert check_run(path).problems == [str(status.value)]


def test_not_a_run_directory(tmp_path: Path) -> None:
    """Check says of a folder no run wrote in what status says (it said only ``scorecard.json: file not found``)."""
    from pinbench.ops.status import run_status

    for name in ("nope", "empty"):
        with pytest.raises(ValueError) as status:
            run_status(tmp_path / name, ask_slurm=False)
        assert check_run(tmp_path / name).problems == [str(status.value)]
        (tmp_path / "empty").mkdir(exist_ok=True)
    empty = tmp_path / "empty"
    assert str(status.value) == f"{empty}: not a run directory (no shard manifests, submissions or scorecard)"
    (empty / "slurm").mkdir()
    for text in ("", "\n  \n"):   # a record file holding no submission: status showed a run of 0 tasks, check
        (empty / "slurm" / "submissions.jsonl").write_text(text)   # a missing scorecard
        with pytest.raises(ValueError) as again:
            run_status(empty, ask_slurm=False)
        assert str(again.value) == str(status.value) and check_run(empty).problems == [str(status.value)]
    (empty / "pinbench-run.json").write_text("{}")   # claimed by a run: its scorecard is awaited
    assert check_run(empty).problems[0].startswith(f"{empty / 'scorecard.json'}: file not found")
    (tmp_path / "runs" / "dynamic-degree" / "my-model").mkdir(parents=True)   # a mistyped recipe names the run meant
    mistyped = tmp_path / "runs" / "dynamic-degre" / "my-model"
    assert check_run(mistyped).problems == [f"{mistyped}: not a run directory (no such directory) (did you mean "
                                            f"'{tmp_path / 'runs' / 'dynamic-degree' / 'my-model'}'?)"]


def test_the_cli_exit_codes(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def pinbench_check() -> int:
        try:
            cli.main(["check", str(run_dir)])
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    assert pinbench_check() == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"check: {run_dir} is consistent"
    (run_dir / "report" / "index.html").unlink()
    assert pinbench_check() == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("problem: ") and out[-1] == f"check: 1 problem in {run_dir}"


def _check_in_a_fresh_process(run_dir: Path, blas_threads: str | None = None, command: str = "check") -> str:
    """What ``pinbench check RUN_DIR`` (or another ``command`` of one path) prints in a new interpreter, then
    ``HEAVY [...]``: the heavy modules loaded, ``UNUSED [...]``: the modules it never needs that other commands
    load, and ``BLAS [...]``: the thread counts of the OpenBLAS numpy loaded (threadpoolctl's view; ``BLAS ?``
    without threadpoolctl), ``ENV``: the OPENBLAS_NUM_THREADS the process has afterwards."""
    code = ("import sys\nfrom pinbench.cli import main\n"
            f"try:\n    main([{command!r}, {str(run_dir)!r}])\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'cv2', 'av', 'decord', "
            "'huggingface_hub', 'matplotlib', 'docker', 'jsonschema') or m.startswith('pinbench_recipes.'))\n"
            "print('HEAVY', heavy)\n"
            "print('UNUSED', sorted(m for m in ('rich.console', 'importlib.metadata') if m in sys.modules))\n"
            "import os\nprint('ENV', os.environ.get('OPENBLAS_NUM_THREADS'))\n"
            "try:\n    import threadpoolctl\nexcept ImportError:\n    print('BLAS ?')\nelse:\n"
            "    print('BLAS', sorted({i['num_threads'] for i in threadpoolctl.threadpool_info() "
            "if i['internal_api'] == 'openblas'}))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = blas_threads
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout


def test_check_imports_no_torch_and_no_plotting(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = _check_in_a_fresh_process(tmp_path / "empty")
    assert "empty: not a run directory" in out and "HEAVY []" in out, out


def test_check_runs_one_blas_thread_and_loads_no_console_or_package_metadata(run_dir: Path) -> None:
    """OpenBLAS starts a thread per core that spins a while: a quarter of the CPU time of checking a full
    CameraBench run on two cores, for a check that does no linear algebra. Rich's console and the package
    metadata are 25 ms of imports that only a run needs. The environment is left as it was: a process that goes on
    (or its children) keeps its own BLAS threads. A run directory: numpy is loaded where an interval is recounted."""
    pytest.importorskip("threadpoolctl")
    out = _check_in_a_fresh_process(run_dir)
    assert "UNUSED []" in out and "BLAS [1]" in out and "ENV None" in out, out
    chosen = _check_in_a_fresh_process(run_dir, blas_threads="2")  # the user's choice is kept
    assert "ENV 2" in chosen and ("BLAS [2]" in chosen or (os.cpu_count() or 1) < 2), chosen


@pytest.mark.parametrize("command", ["diff", "report"])
def test_diff_and_report_load_numpy_with_one_blas_thread_and_leave_the_environment(tmp_path: Path, run_dir: Path,
                                                                                  command: str) -> None:
    """They read scorecards and draw tables: a third of their CPU time on a full CameraBench run went to OpenBLAS's
    spinning threads. The diff of a run's scorecard loads no numpy at all (#32: it is loaded where an interval is
    computed); the report's module loads it (of an absent scorecard: no folder written)."""
    pytest.importorskip("threadpoolctl")
    scorecard = run_dir / "scorecard.json" if command == "diff" else tmp_path / "absent" / "scorecard.json"
    out = _check_in_a_fresh_process(scorecard, command=command)
    assert f"BLAS {'[]' if command == 'diff' else '[1]'}" in out and "ENV None" in out, out


def test_check_of_a_real_run_directory_imports_no_torch(tmp_path: Path) -> None:
    """The whole check (reference, recount, diff) on a dynamic-degree fixture run, in a fresh process."""
    from pinbench.core.recipe import get_recipe

    recipe = get_recipe("dynamic-degree")
    out = tmp_path / "dd"
    assert run_recipe(recipe.config(fixture=True, out_dir=out, offline=True, env={})).exit_code == 0
    out_text = _check_in_a_fresh_process(out)
    assert f"check: {out} is consistent" in out_text and "HEAVY []" in out_text, out_text


def test_gpu_ci_checks_every_run_directory() -> None:
    workflow = yaml.safe_load((Path(__file__).resolve().parents[1] / ".github" / "workflows" / "gpu.yml").read_text())
    steps = workflow["jobs"]["smoke"]["steps"]
    runs = [step.get("run", "") for step in steps]
    recipe_step = next(i for i, run in enumerate(runs) if "make recipe-" in run)
    check_step = next(i for i, run in enumerate(runs) if run.startswith(".venv/bin/pinbench check \"$RUN_DIR\""))
    assert check_step > recipe_step and steps[check_step]["if"] == "success() || failure()"


def test_a_result_string_holding_a_unicode_line_separator_checks_clean(tmp_path: Path, toy: Recipe) -> None:
    """Records keep U+2028 raw (ensure_ascii=False); the samples file and the store still agree line by line."""
    cfg = toy.config("Toy-Nano", out_dir=tmp_path / "caption", limit=4, env={})
    records = [SampleRecord(r.sample_id, r.status, {**r.result, "caption": "pans\u2028left\x85"}, None, "0" * 64,
                            0.1) for r in _records()]
    with claim_run_dir(cfg, env={}):
        assert _finish(toy, cfg, records).exit_code == 0
    assert "\u2028".encode() in (cfg.out_dir / "samples.jsonl").read_bytes()
    assert check_run(cfg.out_dir).problems == []


# ------------------------------------------------------------------ the store as the finish pinned it (#30 A1, A2)


def _log(run_dir: Path) -> Path:
    return run_dir / "samples" / "run.jsonl"


def _append(path: Path, line: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as fh:
        fh.write(line + b"\n")


def _stored_line(run_dir: Path, sid: str) -> bytes:
    lines = _log(run_dir).read_bytes().splitlines()
    return next(line for line in lines if json.loads(line)["record"]["sample_id"] == sid)


def _cut_last_line(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])


AFTER_THE_FINISH: list[tuple[str, Callable[[Path], None], list[str]]] = [
    ("a second record, re-signed", lambda d: _append(_log(d), _resigned(_stored_line(d, "s1"))),
     ["samples/run.jsonl:9: appended after the finish (a record of sample 's1')",
      "samples/run.jsonl:9: a second record of sample 's1', of the same inputs and code as the one the scorecard "
      "counts, that says otherwise"]),
    ("a record appended again", lambda d: _append(_log(d), _stored_line(d, "s2")),
     ["samples/run.jsonl:9: appended after the finish (a record of sample 's2')"]),
    ("a log of a shard", lambda d: _append(d / "samples" / "shard-0-of-2.jsonl", _stored_line(d, "s0")),
     ["samples/shard-0-of-2.jsonl: a log the finish did not pin (written after it; 1 line)"]),
    ("a file no writer keeps", lambda d: _append(d / "samples" / "a.jsonl", _resigned(_stored_line(d, "s1"))),
     ["samples/a.jsonl: not a log any writer keeps (run.jsonl, shard-I-of-N.jsonl), never read"]),
    ("a store of a step", lambda d: _append(d / "native" / "samples" / "run.jsonl", _stored_line(d, "s0")),
     ["native/samples: a sample store the finish did not pin (written after it)"]),
    ("a record re-signed in place", _edit_store("s1", _resigned),
     ["samples/run.jsonl: changed after the finish within its first 8 lines",
      "the store holds other records of it (", "samples/run.jsonl:2"]),
    ("the last line cut", lambda d: _cut_last_line(_log(d)),
     ["samples/run.jsonl: ", " bytes shorter than the finish left it (8 lines): cut or edited after it"]),
    ("the log deleted", lambda d: _log(d).unlink(),
     ["samples/run.jsonl: pinned by the finish (8 lines), now absent"]),
]


@pytest.mark.parametrize(("name", "tamper", "expected"), AFTER_THE_FINISH, ids=[t[0] for t in AFTER_THE_FINISH])
def test_any_change_to_the_store_after_the_finish_is_named_with_its_file_and_line(
        run_dir: Path, name: str, tamper: Callable[[Path], None], expected: list[str]) -> None:
    """#30 A1: an appended record with a recomputed digest was "sound", and check said consistent."""
    assert len(_log(run_dir).read_bytes().splitlines()) == 8  # the template's two finishes stored each record twice
    tamper(run_dir)
    result = check_run(run_dir)
    said = "\n".join(result.problems)
    assert result.exit_code == 2 and all(text in said for text in expected), result.problems
    assert all("\n" not in p for p in result.problems)


def test_the_finish_after_a_damaged_line_leaves_a_store_check_accepts(run_dir: Path, toy: Recipe, capsys) -> None:
    """#30 A2: after a damaged line, the rerun passed but check exited 2 from then on. The finish (a merge's too)
    moves what no run reads into samples/quarantine/, and check names that as a note."""
    _edit_store("s1", lambda line: line.replace(b'"err":0.5', b'"err":7'))(run_dir)
    _append(run_dir / "samples" / "a.jsonl", _resigned(_stored_line(run_dir, "s2")))
    assert any("does not match its digest" in p for p in check_run(run_dir).problems)
    cfg = toy.config("Toy-Nano", out_dir=run_dir, limit=4, env={})
    with claim_run_dir(cfg, env={}):
        assert _finish(toy, cfg, _records()).exit_code == 0  # the rerun stores s1 again, then finishes
    said = capsys.readouterr().out
    assert "does not match its digest (changed after it was written): moved to " in said
    assert "a.jsonl: not a log any writer keeps" in said
    result = check_run(run_dir)
    assert result.problems == [] and any(n.startswith(f"{run_dir / 'samples' / 'quarantine'}: what runs moved out")
                                         for n in result.notes), result.notes


def test_the_finish_never_takes_a_line_with_a_counted_records_digest_on_other_bytes(run_dir: Path, toy: Recipe,
                                                                                   capsys) -> None:
    """#32: the finish finds the records it counts by their digests, then compares the bytes: a line edited in place
    to the same length, its digest kept, is damaged and moved aside, never taken for the record it names."""
    _edit_store("s1", lambda line: line.replace(b'"f1":0.6', b'"f1":0.9'))(run_dir)
    cfg = toy.config("Toy-Nano", out_dir=run_dir, limit=4, env={})
    with claim_run_dir(cfg, env={}):
        assert _finish(toy, cfg, _records()).exit_code == 0
    assert capsys.readouterr().out.count("does not match its digest (changed after it was written): moved to ") == 2
    assert check_run(run_dir).problems == []


def test_the_finish_never_takes_a_line_whose_digest_is_in_capitals_for_the_record(run_dir: Path, toy: Recipe,
                                                                                  capsys) -> None:
    """#32: the finish finds the records it counts by their digests' 32 bytes; a line that spells a counted record's
    digest in capital hex (the same bytes, as no writer writes them) is damaged and moved aside as before."""
    _edit_store("s1", lambda line: line[:11] + line[11:75].upper() + line[75:])(run_dir)
    cfg = toy.config("Toy-Nano", out_dir=run_dir, limit=4, env={})
    with claim_run_dir(cfg, env={}):
        assert _finish(toy, cfg, _records()).exit_code == 0
    assert capsys.readouterr().out.count("does not match its digest (changed after it was written): moved to ") == 2
    assert check_run(run_dir).problems == []


def _coded(code: str, err: float | None = None) -> list[SampleRecord]:
    """``_records()`` as an implementation of ``code`` computed them, each with ``err`` as its err if given."""
    return [SampleRecord(r.sample_id, r.status, {**r.result, **({} if err is None else {"err": err})}, None,
                         r.input_hash, r.seconds, implementation=Implementation("1.0", code, None))
            for r in _records()]


def _finished_after_a_code_change(toy: Recipe, out_dir: Path) -> RunConfig:
    """A run finished with the records of code b...b, its store holding those of code a...a (other values) before."""
    cfg = toy.config("Toy-Nano", out_dir=out_dir, limit=4, env={})
    store_records(out_dir, _coded("a" * 64, err=1.5))
    with claim_run_dir(cfg, env={}):
        assert _finish(toy, cfg, _coded("b" * 64)).exit_code == 0
    return cfg


def test_the_records_of_other_code_in_the_store_are_not_parsed(tmp_path: Path, toy: Recipe,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """#32: a store line that spells none of the counted records' code digests is no second record of them; check
    parsed each (11,222 lines of a CameraBench rerun after a code change: two fifths of its store check)."""
    cfg = _finished_after_a_code_change(toy, tmp_path / "run")
    parsed: list[str] = []
    monkeypatch.setattr(check_module, "loads_finite_json", lambda text: parsed.append(text) or json.loads(text))
    assert check_run(cfg.out_dir).problems == [] and parsed == []


def test_a_second_record_spelling_its_code_with_an_escape_is_still_named(tmp_path: Path, toy: Recipe) -> None:
    """The code digest looked for in a store line's bytes is spelled as it is only in a line without a backslash: a
    second record of the counted code written \\u0062bbb... is parsed, and named."""
    cfg = _finished_after_a_code_change(toy, tmp_path / "run")
    record = _coded("b" * 64, err=7.5)[1].to_json()
    body = record_bytes(record).replace(b'"code":"b', b'"code":"\\u0062')
    assert json.loads(body) == record
    _append(_log(cfg.out_dir), encode_line(body).rstrip(b"\n"))
    assert any("run.jsonl:9: a second record of sample 's1'" in p for p in check_run(cfg.out_dir).problems)


def test_a_scorecard_that_pins_no_store_still_checks_and_says_so(run_dir: Path) -> None:
    """Scorecards of schema 2.2 and before pin no store: checked as before, with a note."""
    _edit_json(run_dir / "scorecard.json", lambda card: (card.pop("store"), card.update(schema_version="2.2")))
    result = check_run(run_dir)
    assert result.problems == [] and any("schema 2.2 pins no sample store" in n for n in result.notes)
    _append(_log(run_dir), _resigned(_stored_line(run_dir, "s1")))  # still seen: it contradicts a counted record
    assert any("run.jsonl:9: a second record of sample 's1'" in p for p in check_run(run_dir).problems)


# ----------------------------------------------------------------------- FIFOs in the run directory (#30 B4, B5)

TASKS = [LooseTask(sid, x=i) for i, sid in enumerate(IDS)]


def _toy_procedure(run: Run) -> Any:
    """The toy's procedure through the Run: fixture data, input digests, a per-sample step, the finish; so a run
    opens every file of its directory a recipe's run does."""
    run.fixture(lambda root: build_once(root, 1, lambda folder: (folder / "data.txt").write_text("toy") and None))
    with run.digests():
        pass
    records = run.score(TASKS, lambda task: {"f1": 0.5 + 0.1 * task["x"], "err": 0.25 * (task["x"] + 1)})
    return run.finish(SPECS, records, pins=PINS)


def _run_toy(recipe: Recipe, out: Path) -> Any:
    cfg = recipe.config("Toy-Nano", out_dir=out, fixture=True, env={})
    with claim_run_dir(cfg, env={}):
        return Run(recipe, cfg, report=write_run_report).execute(_toy_procedure)


@pytest.fixture(scope="module")
def fixture_run(template: Path) -> Path:
    """A complete --fixture run of the toy through its procedure, written once per module."""
    recipe = load_declaration(template / "recipes" / "toy_bench" / "recipe.yaml", "toy_bench")
    out = template / "fixture-run"
    assert _run_toy(recipe, out).exit_code == 0
    return out


# (the path, whether check reads it, whether the run refuses it); a run replaces the others (write, then rename)
RUN_DIR_FILES = [
    ("samples/run.jsonl", True, True), ("samples", True, True), (IDENTITY_FILE, True, True),
    (f"{LOCK_DIR}/run.lock", True, True), (f"{LOCK_DIR}/.mutex", False, True),
    (f"{LOCK_DIR}/.input-digests", False, True), (".fixture_data.lock", False, True), ("scorecard.json", True, False),
    ("samples.jsonl", True, False),
    ("diff.txt", True, False), ("report/index.html", True, False), ("failures.tsv", False, False),
    (".pinbench-input-digests.json", False, False), ("fixture_data/fixture.json", False, False),
    ("shards/0-of-1.json", False, False),
]


@pytest.mark.parametrize(("name", "checked", "refused"), RUN_DIR_FILES, ids=[f[0] for f in RUN_DIR_FILES])
def test_a_fifo_anywhere_in_the_run_directory_is_named_never_waited_on(
        fixture_run: Path, toy: Recipe, tmp_path: Path, name: str, checked: bool, refused: bool) -> None:
    """#30 B4: a FIFO at samples/run.jsonl, pinbench-run.json or .pinbench-locks/run.lock hung run and check; at
    .fixture_data.lock the refusal named no file ("not seekable"). Each path, check then the run, in time."""
    out = Path(shutil.copytree(fixture_run, tmp_path / "run"))
    fifo = out / name
    shutil.rmtree(fifo) if fifo.is_dir() else fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    result = within(10, lambda: check_run(out), fifo=fifo)
    assert all("\n" not in p for p in result.problems)
    assert any(str(fifo) in p for p in result.problems) == checked, result.problems
    try:
        within(20, lambda: _run_toy(toy, out), fifo=fifo)
    except (ValueError, RuntimeError, OSError) as exc:  # what the command line says in one line
        assert refused and str(fifo) in str(exc) and "not a" in str(exc) and "\n" not in str(exc), exc
    else:
        assert not refused
        assert check_run(out).problems == []


def test_the_finish_names_a_counted_sample_that_a_second_record_contradicts(run_dir: Path, toy: Recipe,
                                                                            capsys) -> None:
    """#32: the finish reads each log a block at a time and a sample's lines again only when it has several: a
    second, re-signed record of a counted sample still contradicts it there, and both lines are named."""
    _append(_log(run_dir), _resigned(_stored_line(run_dir, "s1")))
    cfg = toy.config("Toy-Nano", out_dir=run_dir, limit=4, env={})
    with claim_run_dir(cfg, env={}):
        outcome = _finish(toy, cfg, _records())
    log = _log(run_dir)
    assert outcome.exit_code == 0
    assert (f"{log}:9: a record of sample 's1' that another record of the same inputs and code contradicts ({log}:2, "
            f"{log}:6, {log}:11): neither is read: moved to {log.parent / 'quarantine' / 'run.jsonl'}"
            in capsys.readouterr().out)
    assert check_run(run_dir).problems == []


def test_a_scorecard_a_rerun_kept_aside_is_checked_against_its_records_alone(run_dir: Path) -> None:
    """A rerun that replaced a scorecard with other numbers keeps it in ``scorecard.aside-<time>/`` with its records
    files alone (``run._keep_aside``); check named its stores, which stay the run directory's, "now absent", each
    sample "not in the store" and its report missing: 9 problems in the fixture of mind for a folder pinbench made.
    Its values are still checked against its records."""
    aside = run_dir / "scorecard.aside-20261206T040104Z"
    aside.mkdir()
    for name in ("scorecard.json", "samples.jsonl", "derived.jsonl"):
        if (run_dir / name).is_file():
            shutil.copy(run_dir / name, aside / name)
    result = check_run(aside)
    assert result.problems == []
    assert (f"{aside}: a scorecard a rerun kept aside, with its records files alone: its values are checked against "
            f"them; its stores, rollouts and report are {run_dir}'s (pinbench check {run_dir})") in result.notes
    _edit_json(aside / "scorecard.json", lambda card: card["metrics"]["f1"].update(value=0.123))
    assert [p for p in check_run(aside).problems if "metric f1: value 0.123 in the scorecard" in p]
    second = aside.with_name(f"{aside.name}-2")   # the name of a second aside within that second
    shutil.copytree(aside, second)
    assert [p for p in check_run(second).problems if "metric f1: value 0.123 in the scorecard" in p]
    _edit_json(second / "scorecard.json", lambda card: card["samples"].update(path=None))   # was a TypeError
    assert check_run(second).problems == [
        f"{second / 'scorecard.json'}: names no per-sample file (samples.path is null)"]
    assert not [p for p in check_run(second).problems if p.endswith("(every run writes its report)")]
    shutil.copy(run_dir / "pinbench-run.json", aside)   # a run given that folder as --out: checked as one
    assert [p for p in check_run(aside).problems if p.endswith("(every run writes its report)")]


def test_a_scorecard_moved_into_another_recipes_run_directory_is_not_read_as_kept_aside(run_dir: Path) -> None:
    """A scorecard moved by hand into a scorecard.aside-<time>/ of a run directory of another recipe was checked
    as that directory's kept-aside scorecard (its rollouts and stores read as the other recipe's run's)."""
    aside = run_dir / "scorecard.aside-20261206T040104Z"
    aside.mkdir()
    for name in ("scorecard.json", "samples.jsonl", "derived.jsonl"):
        if (run_dir / name).is_file():
            shutil.copy(run_dir / name, aside / name)
    _edit_json(run_dir / "pinbench-run.json", lambda identity: identity.update(recipe="other-bench"))
    assert check_run(aside).problems == [
        f"{run_dir / 'pinbench-run.json'}: the directory belongs to recipe 'other-bench', the scorecard kept aside in "
        f"it ({aside / 'scorecard.json'}) is for 'toy-bench'"]


@pytest.mark.parametrize("identity", ["unparseable", "no recipe", "fifo", "folder"])
def test_a_scorecard_kept_aside_where_the_run_directorys_identity_is_unreadable_is_one_problem_naming_it(
        run_dir: Path, identity: str) -> None:
    """A kept-aside scorecard whose run directory's pinbench-run.json could not be read was checked as a run
    directory of its own: its stores, rollouts and report were each said absent, never the file at fault
    (review66)."""
    aside = run_dir / "scorecard.aside-20261206T040104Z"
    aside.mkdir()
    for name in ("scorecard.json", "samples.jsonl", "derived.jsonl"):
        if (run_dir / name).is_file():
            shutil.copy(run_dir / name, aside / name)
    file = run_dir / "pinbench-run.json"
    if identity == "unparseable":
        file.write_text('{"recipe": ')
    elif identity == "no recipe":
        _edit_json(file, lambda data: data.pop("recipe"))
    else:
        file.unlink()
        os.mkfifo(file) if identity == "fifo" else file.mkdir()
    problems = check_run(aside).problems
    assert len(problems) == 1 and problems[0].startswith(f"{file}: ") and "\n" not in problems[0], problems


def test_a_samples_path_holding_a_nul_is_one_problem_naming_the_scorecard(run_dir: Path) -> None:
    """samples.path "samples.jsonl\\u0000" passed the inside-the-run-directory rule; check, compare and view then
    ended in 'error: embedded null byte', naming no file (check never raises for bad input)."""
    _edit_json(run_dir / "scorecard.json", lambda d: d["samples"].update(path="samples.jsonl\0"))
    assert check_run(run_dir).problems == [
        f"{run_dir / 'scorecard.json'}: samples.path 'samples.jsonl\\x00' is not a file inside the run directory"]
