"""Test helpers for the annotation page: the real command in a subprocess, and fixture copies to alter."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pinbench_recipes.remembench.fixture import build_fixture
from pinbench_recipes.remembench.tests.conftest import restamp, write_checksums

START_TIMEOUT = 90


@dataclass
class Page:
    """A running ``pinbench annotate remembench`` and the address it printed."""

    process: subprocess.Popen
    url: str
    stdout: list[str]
    stderr: Path

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port)

    @property
    def token(self) -> str:
        return urlsplit(self.url).path.strip("/")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (what a crash or an OOM kill does)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> str:
        """SIGTERM, as Ctrl-C: the rest of its output."""
        self.process.send_signal(signal.SIGTERM)
        rest, _ = self.process.communicate(timeout=30)
        return rest


@contextmanager
def annotation_page(fixture_dir: Path, out: Path, *args: str) -> Iterator[Page]:
    """Start the command on the fixture under ``fixture_dir``, writing ``out``; stopped when the block ends."""
    stderr = out.parent / f"{out.name}.server-{len(list(out.parent.glob('*.server-*')))}.stderr"
    command = [sys.executable, "-m", "pinbench", "annotate", "remembench", "--fixture", str(fixture_dir),
               "--out", str(out), "--annotator", "tester", *args]
    with open(stderr, "w") as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True,
                                   env={**os.environ, "PINBENCH_OFFLINE": "1"})
    watchdog = threading.Timer(START_TIMEOUT, process.kill)
    watchdog.start()
    lines: list[str] = []
    try:
        while not lines or not lines[-1].startswith("annotation page: "):
            line = process.stdout.readline()
            if not line:
                raise AssertionError(f"the server exited ({process.wait()}) before printing its address: "
                                     f"{''.join(lines)} {stderr.read_text()}")
            lines.append(line)
    finally:
        watchdog.cancel()
    page = Page(process, lines[-1].split(": ", 1)[1].strip(), lines, stderr)
    try:
        yield page
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def fixture_copy(fixture_root: Path, dest: Path) -> Path:
    """A copy of the built fixture to alter (the original is shared by the tests)."""
    shutil.copytree(fixture_root, dest)
    return build_fixture(dest).root


def rewrite_release(root: Path, *, t2v_rows: list[dict] | None = None, pairs: list[dict] | None = None) -> None:
    """Replace the fixture release's T2V rows and/or add published pairs, then its checksums and the fixture's stamp
    (``restamp``)."""
    release = root / "RememBench"
    if t2v_rows is not None:
        (release / "data/t2v/test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in t2v_rows))
    if pairs is not None:
        (release / "evaluation").mkdir(exist_ok=True)
        (release / "evaluation/t2v_reference_pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pairs))
    write_checksums(release)
    restamp(root)


def t2v_rows(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "RememBench/data/t2v/test.jsonl").read_text().splitlines()]


def published_pair(scene_id: str, method: str, budget: int, departure: int, revisit: int) -> dict:
    return {"scene_id": scene_id, "method": method, "comparison_budget_chunks": budget,
            "departure_frame": departure, "revisit_frame": revisit, "clip": 0.9, "lpips_alex": 0.3}
