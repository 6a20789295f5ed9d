"""pinbench.core.fixture_data.build_once: a versioned folder written once across processes, stamped last.

The recipes' fixtures (dynamic-degree, mind, remembench, paibench-c, camerabench) all build their data through it;
their own tests check what the data holds, these check the once, the stamp and the replacement.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pinbench.core.fixture_data import build_once

PART_SHA256 = hashlib.sha256(b"data").hexdigest()   # _writer's one file


def _writer(calls: list[Path], text: str = "data", metadata: dict | None = None,
            pause: float = 0.0) -> Callable[[Path], dict | None]:
    def write(folder: Path) -> dict | None:
        calls.append(folder)
        (folder / "sub").mkdir()
        (folder / "sub" / "part.txt").write_text(text)
        time.sleep(pause)
        return metadata

    return write


def _listing(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir())


def test_three_builders_starting_together_write_once(tmp_path: Path) -> None:
    """Shards of one run start together: the first writes, the others wait and reuse (the lock)."""
    root, calls, results = tmp_path / "fixture_data", [], []
    write = _writer(calls, metadata={"sha256": "ab"}, pause=0.2)  # a window for a second writer to see no stamp
    start = threading.Barrier(3)

    def build() -> None:
        start.wait()
        results.append(build_once(root, 1, write))

    threads = [threading.Thread(target=build) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and results == [{"sha256": "ab"}] * 3
    assert (root / "sub" / "part.txt").read_text() == "data"
    assert _listing(tmp_path) == [".fixture_data.lock", "fixture_data"]


def test_a_writer_that_raises_leaves_nothing_and_the_next_call_writes(tmp_path: Path) -> None:
    root, calls = tmp_path / "fixture_data", []

    def fails(folder: Path) -> None:
        calls.append(folder)
        (folder / "half.txt").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        build_once(root, 1, fails)
    assert _listing(tmp_path) == [".fixture_data.lock"]  # no folder, stamped or not, and no temporary
    assert build_once(root, 1, _writer(calls)) == {} and len(calls) == 2
    assert _listing(root) == ["fixture.json", "sub"]


def test_a_writer_that_makes_a_link_is_refused_naming_it(tmp_path: Path) -> None:
    """The stamp names a link as 'not a regular file' (never followed), which it would be again whatever it pointed
    at: a writer's link could change unseen, so the build refuses it and leaves nothing (review70)."""
    root = tmp_path / "fixture_data"

    def links(folder: Path) -> None:
        (folder / "data.txt").write_text("data")
        (folder / "alias.txt").symlink_to("data.txt")

    with pytest.raises(ValueError, match=r"fixture_data: the fixture's writer made alias.txt, which is not a regular "
                                         r"file \(a link or a FIFO\)"):
        build_once(root, 1, links)
    assert _listing(tmp_path) == [".fixture_data.lock"]


def test_a_killed_writer_leaves_no_stamped_folder_and_the_next_call_rebuilds(tmp_path: Path) -> None:
    """SIGKILL half way (no finally runs): the next builder finds no stamp, clears the dead writer's folder, writes."""
    root = tmp_path / "fixture_data"
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from pinbench.core.fixture_data import build_once

        def write(folder):
            (folder / "half.txt").write_text("half")
            os.kill(os.getpid(), signal.SIGKILL)

        build_once(Path({str(root)!r}), 1, write)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert not (root / "fixture.json").exists()
    leftovers = [name for name in _listing(tmp_path) if name.endswith(".tmp")]
    assert len(leftovers) == 1  # the dead writer's private folder (the rename never came)

    calls: list[Path] = []
    assert build_once(root, 1, _writer(calls, metadata={"seed": 7})) == {"seed": 7} and len(calls) == 1
    assert _listing(tmp_path) == [".fixture_data.lock", "fixture_data"]
    assert _listing(root) == ["fixture.json", "sub"]


def test_another_version_replaces_the_folder_which_readers_see_whole_until_then(tmp_path: Path) -> None:
    root, calls = tmp_path / "fixture_data", []
    build_once(root, 1, _writer(calls, text="version 1"))
    (root / "only-in-1.txt").write_text("old")
    seen = []

    def write_2(folder: Path) -> dict:
        # what a process that does not take the lock sees while version 2 is written: version 1, whole
        seen.append((json.loads((root / "fixture.json").read_text())["version"], (root / "sub/part.txt").read_text()))
        _writer(calls, text="version 2")(folder)
        seen.append((json.loads((root / "fixture.json").read_text())["version"], (root / "sub/part.txt").read_text()))
        return {}

    build_once(root, 2, write_2)
    assert seen == [(1, "version 1"), (1, "version 1")] and len(calls) == 2
    assert _listing(root) == ["fixture.json", "sub"] and (root / "sub/part.txt").read_text() == "version 2"
    assert _listing(tmp_path) == [".fixture_data.lock", "fixture_data"]  # the old folder is gone
    build_once(root, 2, _writer(calls))
    assert len(calls) == 2  # version 2 is reused


@pytest.mark.parametrize("stamp", [b"{", b'{"version": 1', b"\xff\xfe", b"[1]", b'"1"', b"", "directory", "fifo"])
def test_a_stamp_that_is_not_a_json_object_of_this_version_rebuilds(tmp_path: Path, stamp: bytes | str) -> None:
    root, calls = tmp_path / "fixture_data", []
    root.mkdir()
    (root / "stale.txt").write_text("stale")
    if stamp == "directory":
        (root / "fixture.json").mkdir()
        (root / "fixture.json" / "version").write_text("1")
    elif stamp == "fifo":   # read_text would wait for a writer that never comes
        os.mkfifo(root / "fixture.json")
    else:
        (root / "fixture.json").write_bytes(stamp)
    built: list[dict] = []
    thread = threading.Thread(target=lambda: built.append(build_once(root, 1, _writer(calls))), daemon=True)
    thread.start()
    thread.join(timeout=20)   # a read that blocks (the FIFO) fails here, never hangs the suite
    assert built == [{}] and len(calls) == 1
    assert _listing(root) == ["fixture.json", "sub"]
    assert json.loads((root / "fixture.json").read_text()) == {"version": 1, "files": {"sub/part.txt": PART_SHA256}}


def test_the_metadata_round_trips_through_the_stamp(tmp_path: Path) -> None:
    root, calls = tmp_path / "fixture_data", []
    metadata = {"lpips_sha256": "0" * 64, "seed": 2026, "shape": (3, 4)}
    first = build_once(root, "v3", _writer(calls, metadata=metadata), stamp="manifest.json")
    again = build_once(root, "v3", _writer(calls), stamp="manifest.json")
    assert first == again == {"lpips_sha256": "0" * 64, "seed": 2026, "shape": [3, 4]} and len(calls) == 1
    assert json.loads((root / "manifest.json").read_text()) == {"version": "v3", "files": {"sub/part.txt": PART_SHA256},
                                                                **first}
    for key in ("version", "files"):
        with pytest.raises(ValueError, match=f"may not hold '{key}'"):
            build_once(tmp_path / "other", 1, _writer(calls, metadata={key: 2}))
        assert not (tmp_path / "other").exists()


def _swap_in_a_link(root: Path) -> None:
    (root / "sub" / "part.txt").rename(root / "elsewhere.txt")
    (root / "sub" / "part.txt").symlink_to(root / "elsewhere.txt")
    (root / "elsewhere.txt").rename(root.parent / "elsewhere.txt")   # the link's target, bytes equal, outside it


@pytest.mark.parametrize(("edit", "said"), [
    (lambda root: (root / "sub" / "part.txt").write_text("other"), "sub/part.txt has other bytes"),
    (lambda root: (root / "sub" / "part.txt").unlink(), "sub/part.txt is missing"),
    (lambda root: (root / "sub" / "extra.mp4").write_text("x"), "sub/extra.mp4 is not in it"),
    (_swap_in_a_link, "sub/part.txt has other bytes"),   # a link is not followed, even to equal bytes
    (lambda root: (root / "fixture.json").write_text('{"version": 1, "seed": 7}'), "it names no 'files'"),
])
def test_a_folder_whose_files_are_not_those_stamped_is_written_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[Path], None], said: str) -> None:
    """The fixture reference holds for the generated data: a file replaced by hand (another video) was scored as if
    it were the fixture's, and the run passed. Every file's SHA-256 is in the stamp; one that differs, a file added
    or removed, is one line and a rebuild, never a reuse."""
    root, calls = tmp_path / "fixture_data", []
    build_once(root, 1, _writer(calls, metadata={"seed": 7}))
    edit(root)
    capsys.readouterr()
    assert build_once(root, 1, _writer(calls, metadata={"seed": 7})) == {"seed": 7} and len(calls) == 2
    assert capsys.readouterr().err == (f"fixture: {root} is not the data its stamp fixture.json names ({said}): "
                                       f"writing it again\n")
    assert _listing(root) == ["fixture.json", "sub"] and (root / "sub" / "part.txt").read_text() == "data"
    assert not (root / "sub" / "part.txt").is_symlink()
    build_once(root, 1, _writer(calls))
    assert len(calls) == 2 and capsys.readouterr().err == ""   # the rebuilt folder is reused, silently


def test_several_differences_are_one_line_naming_the_first_and_counting_the_rest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "fixture_data"
    build_once(root, 1, _writer([]))
    (root / "sub" / "part.txt").unlink()
    (root / "a.txt").write_text("a")
    (root / "b.txt").write_text("b")
    capsys.readouterr()
    build_once(root, 1, _writer([]))
    assert capsys.readouterr().err.splitlines() == [
        f"fixture: {root} is not the data its stamp fixture.json names (sub/part.txt is missing, and 2 more): "
        f"writing it again"]


@pytest.mark.parametrize("edit, hashed", [
    (lambda root: None, ["sub/part.txt"]),                                         # names agree: the listed file
    (lambda root: (root / "big.bin").write_bytes(b"x" * 4096), []),                # an extra name decides
    (lambda root: (root / "sub" / "part.txt").rename(root / "sub" / "moved.txt"), []),   # a missing one too
])
def test_the_names_are_compared_before_any_file_is_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          edit: Callable[[Path], None], hashed: list[str]) -> None:
    """A large stray file in the folder was hashed at every reuse: a name the stamp does not list (or one it lists
    that is gone) decides without reading a file, and only the names the stamp lists are ever hashed."""
    from pinbench.core import fixture_data

    root = tmp_path / "fixture_data"
    build_once(root, 1, _writer([]))
    edit(root)
    read: list[Path] = []
    real = fixture_data.regular_sha256
    monkeypatch.setattr(fixture_data, "regular_sha256", lambda path: read.append(Path(path)) or real(path))
    build_once(root, 1, _writer([]))
    checked = [path for path in read if path.is_relative_to(root)]   # not the rebuild's private folder
    assert [path.relative_to(root).as_posix() for path in checked] == hashed


@pytest.fixture
def umask() -> Iterator[int]:
    old = os.umask(0o022)
    yield 0o022
    os.umask(old)


def test_the_folder_gets_the_mode_of_any_new_folder_not_0700(tmp_path: Path, umask: int) -> None:
    """A private temporary folder (mkdtemp's 0700), renamed into place, would hide the data from a colleague."""
    build_once(tmp_path / "fixture_data", 1, _writer([]))
    (tmp_path / "plain").mkdir()
    assert stat.S_IMODE((tmp_path / "fixture_data").stat().st_mode) == stat.S_IMODE((tmp_path / "plain").stat().st_mode)


def test_writing_the_data_is_announced_and_a_reuse_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A log (CI, stderr to a file) said nothing for the seconds a recipe's fixture takes to encode; with the
    notice delay at 0 every notice is said, so the write's shows here and the reuse, which takes no time, has none."""
    monkeypatch.setenv("PINBENCH_NOTICE_S", "0")
    root = tmp_path / "data"
    build_once(root, 1, _writer([]))
    said = capsys.readouterr().err.splitlines()
    assert said[0] == f"fixture: writing its data to {root} ..." and said[1].startswith(
        f"fixture: writing its data to {root}: done in "), said
    build_once(root, 1, _writer([]))
    assert capsys.readouterr().err == ""
