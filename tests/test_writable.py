"""pinbench.ops.writable: the demo's check of its output folder sees every file a run writes, names each cause on
its own line, and its fix, run as written, leaves nothing unwritable (#24 item 4).

The scene of the issue: as root, `make demo` on the host, then the CPU image (user 10001) on the same runs/ after
the old advice (a non-recursive chown of runs/): it stopped at runs/demo, and after a chown of that at every
recipe's .pinbench-locks/.mutex. As root the check runs for real as uid 10001 (the system Python, which that uid
can run); as another user, on a tree whose modes deny that user.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pinbench.ops import writable

COMMON = Path(writable.__file__).resolve().parents[2]
RUN_AS = 10001


def _demo_tree(runs: Path) -> list[Path]:
    """runs/ handed to the container's user the old way (only the top), the rest as a root host demo left it."""
    made = [runs / "demo" / "camerabench" / ".pinbench-locks" / ".mutex", runs / "demo" / "report" / "index.html"]
    for path in made:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    if os.getuid() == 0:
        os.chown(runs, RUN_AS, RUN_AS)
    else:   # the same scene by modes: the user may write runs/ only
        for path in sorted(runs.rglob("*"), key=lambda p: -len(p.parts)):
            path.chmod(0o555 if path.is_dir() else 0o444)
    return made


def _problems(directory: Path, *, in_container: bool = False) -> list[str]:
    """writable_problems as the container's user would see them: for real, as uid 10001 when we are root."""
    if os.getuid() != 0:
        return writable.writable_problems(directory, in_container=in_container)
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 that uid 10001 can run")
    code = (f"import json, sys; sys.path.insert(0, {str(_library_for_uid())!r}); from pinbench.ops.writable import "
            f"writable_problems; print(json.dumps(writable_problems(__import__('pathlib').Path({str(directory)!r}), "
            f"in_container={in_container})))")
    proc = subprocess.run([python, "-c", code], user=RUN_AS, group=RUN_AS, extra_groups=[], capture_output=True,
                          text=True, cwd="/", timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@functools.cache
def _library_for_uid() -> Path:
    """A copy of the library that uid 10001 can read: the checkout itself may sit in a private folder (a clone into
    ``mktemp -d`` is 0700), which the real check would then report instead of the folders under test."""
    root = Path(tempfile.mkdtemp(prefix="pinbench-library-", dir="/tmp"))
    root.chmod(0o755)
    shutil.copytree(COMMON / "pinbench", root / "pinbench", ignore=shutil.ignore_patterns("__pycache__"))
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    atexit.register(shutil.rmtree, root, True)
    return root


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A runs/ folder uid 10001 can reach (pytest's own tmp folders are root's, 0700, when we are root)."""
    base = Path(tempfile.mkdtemp(prefix="pinbench-writable-", dir="/tmp")) if os.getuid() == 0 else tmp_path
    base.chmod(0o755)
    yield base / "runs"
    for path in (base / "runs").rglob("*"):   # writable again, so it can be removed
        path.chmod(0o755 if path.is_dir() else 0o644)
    if base != tmp_path:
        shutil.rmtree(base)


def test_every_unwritable_file_under_the_folder_is_named_by_cause_and_the_fix_works_as_written(runs: Path) -> None:
    mutex, report = _demo_tree(runs)
    problems = _problems(runs / "demo")
    owner = 0 if os.getuid() == 0 else os.getuid()
    uid = RUN_AS if os.getuid() == 0 else os.getuid()
    assert len(problems) == 3 and all("\n" not in line for line in problems)
    folders, files, fix = problems
    assert folders.startswith(f"{runs / 'demo'}: 4 folders owned by uid {owner} that uid {uid} cannot write: ")
    assert files == (f"{runs / 'demo'}: 2 files owned by uid {owner} that uid {uid} cannot write: {mutex}, {report}")
    command, target = fix.split("`")[1], (runs / "demo").resolve()
    assert command == f"sudo chown -R {uid}:{uid} {target} && chmod -R u+rwX {target}"
    subprocess.run(command.removeprefix("sudo "), shell=True, check=True)   # as written (root needs no sudo)
    assert _problems(runs / "demo") == []


def test_a_missing_folder_is_judged_by_the_nearest_one_above_it(runs: Path) -> None:
    _demo_tree(runs)
    (runs / "demo" / "report" / "index.html").unlink()
    problems = _problems(runs / "demo" / "report" / "new")
    assert len(problems) == 2
    assert "1 folder owned by uid" in problems[0] and problems[0].endswith(str(runs / "demo" / "report"))


def test_in_a_container_the_fix_is_for_the_host_folder_mounted_there(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    found = [writable.Unwritable(Path("/opt/pinbench/runs/demo"), "folder", 0)]
    monkeypatch.setattr(writable, "unwritable", lambda directory: found)
    monkeypatch.setattr(writable.os, "getuid", lambda: 10001)
    monkeypatch.setattr(writable.os, "getgid", lambda: 10001)
    monkeypatch.setattr(writable, "mount_point", lambda path: writable.CPU_IMAGE_RUNS)
    fix = writable.writable_problems(Path("runs/demo"), in_container=True)[-1]
    assert fix.startswith("fix: on the host, as root: `chown -R 10001:10001 runs && chmod -R u+rwX runs` (the folder "
                          "of the README's")
    assert "if you are not root there, start the container with `--user \"$(id -u):$(id -g)\"`" in fix
    monkeypatch.setattr(writable, "mount_point", lambda path: Path("/data/out"))
    fix = writable.writable_problems(Path("runs/demo"), in_container=True)[-1]
    assert "`chown -R 10001:10001 <the host folder you mounted at /data/out> && chmod" in fix


def test_the_mount_point_of_a_path(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text("22 1 0:21 / / rw - overlay overlay rw\n"
                     "30 22 8:1 /work/runs /opt/pinbench/runs rw - ext4 /dev/vda rw\n"
                     "31 22 8:1 /x /opt/with\\040space rw - ext4 /dev/vda rw\n")
    assert writable.mount_point(Path("/opt/pinbench/runs/demo/x"), table) == Path("/opt/pinbench/runs")
    assert writable.mount_point(Path("/opt/with space/a"), table) == Path("/opt/with space")
    assert writable.mount_point(Path("/opt/pinbench"), table) is None      # the image's own file system
    assert writable.mount_point(Path("/x"), tmp_path / "none") is None


def test_the_demo_stops_before_any_recipe_with_one_line_per_cause(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from pinbench import cli

    monkeypatch.setattr(writable, "writable_problems",
                        lambda directory, in_container: ["a: 1 folder owned by uid 0", "fix: `chown ...`"])
    ran = []
    monkeypatch.setattr(cli, "_demo_one", lambda *a, **k: ran.append(a))
    result = CliRunner().invoke(cli.app, ["demo", "--out", str(runs / "demo")])
    assert result.exit_code == 2 and ran == []
    assert result.output.splitlines() == ["error: a: 1 folder owned by uid 0", "error: fix: `chown ...`"]
