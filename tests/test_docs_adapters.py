"""The adapters of the "Bring your model" pages (docs/requests/adapters) run as the pages say: each drives a
fixture run of its recipe (requests -> generation -> rollout check -> scores) to a complete scorecard, every
rollout generated, checked and of the request's frame count, rate and size; each stays under the 40 lines the
pages promise; and every link of the pages names a file that exists.

Runs are kept small: RememBench T2V ``--limit 3``, MIND ``--limit 3`` with LCM alone over 100 frames, PAI-Bench-C
two modalities of its 9-frame fixture.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from pinbench.core.generation import read_requests
from pinbench.core.recipe import get_recipe
from pinbench.core.runner import load_records
from pinbench.media.video import video_info
from pinbench.ops.launch import run_recipe

DOCS = Path(__file__).resolve().parents[1] / "docs"
ADAPTERS = DOCS / "requests" / "adapters"
PAGES = sorted([DOCS / "bring-your-model.md", *(DOCS / "requests").glob("*.md")])
CONTROL = (f"command:{sys.executable} {ADAPTERS / 'control_video.py'} --request {{request}} --out {{out}}")


@pytest.fixture(autouse=True)
def _adapters_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator worker is a child process: it imports the adapters as the pages do (PYTHONPATH)."""
    monkeypatch.setenv("PYTHONPATH", str(ADAPTERS))


def _complete(out: Path, n: int) -> None:
    """The run's scorecard is complete, and each of its ``n`` requests has an ok generation record and a rollout of
    the frames, rate and size it asks (read from the file, not from the run's own check)."""
    card = json.loads((out / "scorecard.json").read_text())
    assert card["status"] == "complete", card["status"]
    requests = read_requests(out / "generation" / "requests.jsonl")
    records = load_records(out / "generation")
    assert len(requests) == n and sorted(records) == sorted(r.id for r in requests)
    assert all(record.ok for record in records.values()), {s: r.error for s, r in records.items() if not r.ok}
    for request in requests:
        info = video_info(out / "rollouts" / request.output)
        assert (info.n_frames, info.width, info.height) == (request.frames, request.width, request.height), request.id
        assert info.fps == pytest.approx(request.fps, rel=1e-3), request.id


def _run(recipe: str, out: Path, generator: str, *, limit: int | None = None, options: dict[str, str] | None = None,
         **generator_options: str) -> None:
    outcome = run_recipe(get_recipe(recipe).config(
        fixture=True, out_dir=out, offline=True, limit=limit, options=options or {}, generator=generator,
        generator_options=generator_options, env={}))
    assert outcome.exit_code == 0, outcome.message


def test_the_prompt_schedule_adapter_makes_remembench_t2v_rollouts(tmp_path: Path) -> None:
    _run("remembench", tmp_path, "python:prompt_schedule:make", limit=3)
    _complete(tmp_path, 3)


def test_by_kind_with_the_image_camera_and_prompt_schedule_adapters_makes_the_whole_remembench_fixture(
        tmp_path: Path) -> None:
    _run("remembench", tmp_path, "python:by_kind:make", prompt_schedule="python:prompt_schedule:make",
         image_camera="python:image_camera:make")
    _complete(tmp_path, 7)
    kinds = {r.kind for r in read_requests(tmp_path / "generation" / "requests.jsonl")}
    assert kinds == {"prompt-schedule", "image-camera"}


def test_by_kind_generates_again_when_a_parts_module_is_edited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """by_kind's signature named its parts' signatures only: an edited part (prompt_schedule.py), whose module pinbench
    does not hash (by_kind's is the factory), kept every rollout it had made, and another --out took them from the
    sample cache. Now each part's module file keys it too."""
    adapters = tmp_path / "adapters"
    shutil.copytree(ADAPTERS, adapters)
    monkeypatch.setenv("PYTHONPATH", str(adapters))
    parts = {"prompt_schedule": "python:prompt_schedule:make", "image_camera": "python:image_camera:make"}

    def made_by(out: Path) -> set[str]:
        _run("remembench", out, "python:by_kind:make", **parts)
        return {record.result["generator"] for record in load_records(out / "generation").values()}

    before = made_by(tmp_path / "run")
    with open(adapters / "prompt_schedule.py", "a", encoding="utf-8") as module:
        module.write("# edited\n")
    after = made_by(tmp_path / "run")
    assert len(before) == len(after) == 1 and before != after


def test_the_context_actions_adapter_makes_mind_continuations(tmp_path: Path) -> None:
    _run("mind", tmp_path, "python:context_actions:make", limit=3,
         options={"metrics": "lcm", "native": "0", "video_max_time": "101"})
    _complete(tmp_path, 3)


def test_the_control_video_command_makes_paibench_c_rollouts(tmp_path: Path) -> None:
    _run("paibench-c", tmp_path, CONTROL, options={"modalities": "edge,depth"}, kinds="control-video",
         conditioning="context,control", prompt_schedule="0")
    _complete(tmp_path, 8)


@pytest.mark.parametrize("adapter", sorted(ADAPTERS.glob("*.py")), ids=lambda p: p.name)
def test_each_adapter_is_under_40_lines(adapter: Path) -> None:
    assert len(adapter.read_text(encoding="utf-8").splitlines()) < 40


def test_the_adapters_are_the_five_the_pages_show() -> None:
    assert sorted(p.name for p in ADAPTERS.glob("*.py")) == [
        "by_kind.py", "context_actions.py", "control_video.py", "image_camera.py", "prompt_schedule.py"]


LINK = re.compile(r"\]\(([^)\s]+)\)")           # a Markdown link's target
INCLUDE = re.compile(r"^```\{literalinclude\} (\S+)", re.MULTILINE)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_of_a_page_names_a_file_that_exists(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    targets = [t.partition("#")[0] for t in LINK.findall(text) + INCLUDE.findall(text)]
    local = [t for t in targets if t and not re.match(r"[a-z]+:", t)]
    assert local, f"{page}: no link read"
    missing = [t for t in local if not (page.parent / t).is_file()]
    assert not missing, f"{page}: links to no file: {missing}"
