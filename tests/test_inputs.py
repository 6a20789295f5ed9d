"""pinbench.core.inputs: every entry of an inputs folder named like an input is a sample, problems included; an
input is keyed by its path under its root, its size and the SHA-256 of its bytes, and each file is read once per
run directory (the digest cache), except under ``--verify-inputs``."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pinbench.core.config import RecipeError
from pinbench.core.inputs import (
    DIGESTS_FILE,
    PAST_SUFFIX,
    SPACED_SUFFIX,
    InputDigests,
    InputFileError,
    InputKey,
    InputTask,
    UnusableInput,
    input_digests,
    input_tasks,
    list_inputs,
)
from pinbench.core.runner import canonical_json


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodedTask(InputTask):
    decoder: str


def test_each_entry_named_like_an_input_is_a_task_and_a_bad_one_carries_its_problem(tmp_path: Path) -> None:
    (tmp_path / "good.mp4").write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.MOV").write_bytes(b"y")
    (tmp_path / "gone.mp4").symlink_to(tmp_path / "nowhere.mp4")
    (tmp_path / "loop.mp4").symlink_to(tmp_path / "loop.mp4")
    (tmp_path / "folder.mp4").mkdir()
    os.mkfifo(tmp_path / "pipe.mp4")
    (tmp_path / "twin.mp4").write_bytes(b"1")
    (tmp_path / "twin.mkv").write_bytes(b"2")
    (tmp_path / "notes.txt").write_text("not an input")
    (tmp_path / ".hidden.mp4").write_bytes(b"z")
    (tmp_path / "more").symlink_to(tmp_path / "sub", target_is_directory=True)   # its videos: not silently dropped
    digests = InputDigests(tmp_path / ".run")
    tasks = {t.name: t for t in input_tasks(tmp_path, list_inputs(tmp_path), digests=digests, make=DecodedTask,
                                            decoder="pyav")}
    assert sorted(tasks) == ["folder.mp4", "gone.mp4", "good.mp4", "loop.mp4", "more", "pipe.mp4", "sub/deep.MOV",
                             "twin.mkv", "twin.mp4"]
    good = tasks["good.mp4"]
    assert (good.sample_id, good.input, good.decoder) == (
        "good", InputKey("good.mp4", 1, hashlib.sha256(b"x").hexdigest()), "pyav")
    assert json.loads(canonical_json(good))["input"] == {"path": "good.mp4", "size": 1,
                                                         "sha256": hashlib.sha256(b"x").hexdigest()}
    assert tasks["sub/deep.MOV"].sample_id == "sub__deep"
    assert tasks["sub/deep.MOV"].path(tmp_path) == tmp_path / "sub" / "deep.MOV"
    problems = {name: task.problem for name, task in tasks.items()}
    assert problems["gone.mp4"].startswith("dangling symlink") and problems["loop.mp4"].startswith("symlink loop")
    assert problems["folder.mp4"] == "a directory, not a file"
    assert problems["more"].startswith("a symlink to a folder, not followed, so nothing under it is scored")
    assert problems["pipe.mp4"] == "not a regular file (a FIFO, socket or device)"
    assert "its sample id is 'twin', as for 'twin.mp4'" in problems["twin.mkv"]
    assert tasks["twin.mkv"].sample_id.startswith("bad-name-") and "input" not in tasks["twin.mkv"].to_json()
    with pytest.raises(UnusableInput, match=rf"^{re.escape(str(tmp_path / 'pipe.mp4'))}: not a regular file"):
        tasks["pipe.mp4"].path(tmp_path)


def test_a_name_that_runs_past_its_suffix_fails_by_name_beside_the_videos_taken(tmp_path: Path) -> None:
    """``x.mp4.`` and ``x.mp4 `` (a dot or space a shell or Windows hides) were skipped without a word while the
    folder's other videos were scored: each is a sample that fails saying why, under an id of its own (``x.mp4 ``
    read as ``x`` had made ``x.mp4`` fail too); ``x.MP4`` is an ``.mp4``, and ``x.mp4.bak`` is no video."""
    for name in ("x.mp4", "x.mp4 ", "y.mp4.", "z.mkv. .", "Upper.MP4", "x.mp4.bak", "notes."):
        (tmp_path / name).write_bytes(name.encode())
    tasks = {t.name: t for t in input_tasks(tmp_path, list_inputs(tmp_path), digests=InputDigests(tmp_path / ".run"),
                                            make=DecodedTask, decoder="pyav")}
    assert sorted(tasks) == ["Upper.MP4", "x.mp4", "x.mp4 ", "y.mp4.", "z.mkv. ."]
    assert (tasks["x.mp4"].sample_id, tasks["x.mp4"].problem) == ("x", None)
    assert (tasks["Upper.MP4"].sample_id, tasks["Upper.MP4"].problem) == ("Upper", None)
    assert tasks["x.mp4 "].problem == ("its name ends in ' ' after .mp4, so it is not read as a .mp4 file: "
                                       "rename it to 'x.mp4'")
    assert tasks["y.mp4."].problem == ("its name ends in '.' after .mp4, so it is not read as a .mp4 file: "
                                       "rename it to 'y.mp4'")
    assert tasks["z.mkv. ."].problem.startswith("its name ends in '. .' after .mkv")
    for name in ("x.mp4 ", "y.mp4.", "z.mkv. ."):
        assert tasks[name].sample_id.startswith("bad-name-") and tasks[name].input is None, name


def test_a_name_past_its_suffix_in_unicode_spaces_fails_by_name_and_the_names_of_an_honest_folder_do_not(
        tmp_path: Path) -> None:
    """A no-break, thin or ideographic space or a zero-width one after the suffix hides as a space does: each was
    skipped without a word. Names an honest folder holds are not caught: a download's ``.part``, a hidden file, a
    double dot or suffix inside the name, a space before the suffix's dot."""
    past = ("n.mp4\u00a0", "t.mp4\u2009", "i.mp4\u3000", "z.mp4\u200b", "d.mp4.\u00a0.")
    honest = ("x.mp4.part", ".h.mp4.", "x..mp4", "x.mp4.mp4", "x .mp4", "x.mp4~", "x. mp4 notes", "x. ")
    for name in (*past, *honest):
        (tmp_path / name).write_bytes(name.encode())
    listed = {v.relative: v for v in list_inputs(tmp_path)}
    assert sorted(listed) == sorted([*past, "x..mp4", "x.mp4.mp4", "x .mp4"])
    for name in past:
        assert listed[name].kind == PAST_SUFFIX and listed[name].problem.endswith(
            f"after .mp4, so it is not read as a .mp4 file: rename it to {name[0] + '.mp4'!r}"), name
    assert listed["n.mp4\u00a0"].problem.startswith("its name ends in '\\xa0' after .mp4")
    assert listed["x..mp4"].problem is None and listed["x.mp4.mp4"].problem is None and listed["x .mp4"].problem is None


def test_a_space_inside_an_input_s_suffix_fails_by_name(tmp_path: Path) -> None:
    """``x. mp4`` (a space, or a zero-width one, before or inside the suffix's letters) was skipped without a word:
    it is a sample that fails by name, under a ``bad-name-`` id (``x`` was ``x.mp4``'s), counted as its own kind."""
    spaced = {"x. mp4": "x.mp4", "m.m p4": "m.mp4", "u.MKV\u200b ": None, "c. MOV": "c.MOV"}
    for name in (*spaced, "x.mp4"):
        (tmp_path / name).write_bytes(name.encode())
    listed = {v.relative: v for v in list_inputs(tmp_path)}
    assert sorted(listed) == sorted([*spaced, "x.mp4"])
    for name, renamed in spaced.items():
        if renamed is not None:
            assert listed[name].kind == SPACED_SUFFIX, name
            suffix = "." + name.partition(".")[2]
            assert listed[name].problem == (f"its suffix {suffix!r} holds a space, so it is not read as a "
                                            f"{Path(renamed).suffix} file: rename it to {renamed!r}"), name
    assert listed["u.MKV\u200b "].kind == PAST_SUFFIX   # only past it: the name past its suffix it was
    tasks = {t.name: t for t in input_tasks(tmp_path, list(listed.values()), digests=InputDigests(tmp_path / ".run"),
                                            make=DecodedTask, decoder="pyav")}
    assert tasks["x.mp4"].sample_id == "x" and tasks["x.mp4"].problem is None
    assert tasks["x. mp4"].sample_id.startswith("bad-name-") and tasks["x. mp4"].input is None


def test_a_folder_named_with_a_space_in_or_past_its_suffix_is_a_folder_as_one_named_like_a_video_is(
        tmp_path: Path) -> None:
    """A folder ``dir. mp4`` or ``dir.mp4 `` was a name to rename to ``dir.mp4`` (still no video); it is listed as
    ``dir.mp4/`` is, a folder that fails by name, and walked as that one is: the videos under each are taken."""
    for name in ("dir.mp4", "dir. mp4", "dir.mp4 ", "dir.m p4"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.mp4").write_bytes(b"x")
    (tmp_path / "linked. mp4").symlink_to(tmp_path / "dir.mp4", target_is_directory=True)
    listed = {v.relative: (v.kind, v.problem) for v in list_inputs(tmp_path)}
    assert listed == {"dir.mp4": ("folder", "a directory, not a file"),
                      "dir. mp4": ("folder", "a directory, not a file"),
                      "dir.mp4 ": ("folder", "a directory, not a file"),
                      "dir.m p4": ("folder", "a directory, not a file"),
                      "linked. mp4": ("folder", listed["linked. mp4"][1]),
                      **{f"{name}/a.mp4": (None, None) for name in ("dir.mp4", "dir. mp4", "dir.mp4 ", "dir.m p4")}}
    assert listed["linked. mp4"][1].startswith("a symlink to a folder, not followed")


def test_two_inputs_whose_ids_differ_only_in_unicode_composition_each_fail_by_name(tmp_path: Path) -> None:
    # 'café' composed (NFC) and decomposed (NFD): two ids that read the same in every table and view
    composed, decomposed = "caf\u00e9.mp4", "cafe\u0301.mp4"
    (tmp_path / composed).write_bytes(b"1")
    (tmp_path / decomposed).write_bytes(b"2")
    (tmp_path / "other.mp4").write_bytes(b"3")
    tasks = {t.name: t for t in input_tasks(tmp_path, list_inputs(tmp_path), digests=InputDigests(tmp_path / ".run"),
                                            make=DecodedTask, decoder="pyav")}
    assert tasks["other.mp4"].sample_id == "other"
    for name, other in ((composed, decomposed), (decomposed, composed)):
        assert tasks[name].sample_id.startswith("bad-name-") and tasks[name].input is None
        assert tasks[name].problem == (f"bad file name: its sample id is {name[:-4]!r}, as for {other!r} (composed "
                                       "otherwise in Unicode, NFC/NFD): rename one so each input has its own id")


def test_two_inputs_whose_ids_differ_only_in_a_space_at_an_end_or_an_invisible_character_each_fail_by_name(
        tmp_path: Path) -> None:
    """``x .mp4`` beside ``x.mp4`` gave the ids ``'x '`` and ``'x'`` (``x\u200b.mp4`` ``'x\u200b'``): rows that read
    as one in every table (review87). Each fails by name; ``a b.mp4`` beside ``ab.mp4`` reads otherwise and stays."""
    names = ("x.mp4", "x .mp4", "x\u200b.mp4", "a b.mp4", "ab.mp4")
    for name in names:
        (tmp_path / name).write_bytes(b"1")
    tasks = {t.name: t for t in input_tasks(tmp_path, list_inputs(tmp_path), digests=InputDigests(tmp_path / ".run"),
                                            make=DecodedTask, decoder="pyav")}
    assert (tasks["a b.mp4"].sample_id, tasks["ab.mp4"].sample_id) == ("a b", "ab")
    shown = {"x.mp4": "x.mp4", "x .mp4": "x .mp4", "x\u200b.mp4": "x\\u200b.mp4"}   # as a listing escapes it
    for name in names[:3]:
        others = ", ".join(repr(shown[other]) for other in sorted(names[:3]) if other != name)
        task = tasks[shown[name]]
        assert task.sample_id.startswith("bad-name-") and task.input is None
        assert task.problem == (f"bad file name: its sample id is {name[:-4]!r}, as for {others} (apart from "
                            "spaces at an end or invisible characters): rename one so each input has its "
                            "own id")


def test_a_mistyped_folder_names_the_folder_beside_it(tmp_path: Path) -> None:
    """``-o videos=my_vidoes`` said only "videos directory not found", with ``my_videos`` beside it."""
    (tmp_path / "my_videos").mkdir()
    (tmp_path / "my_vidoes.txt").write_text("")   # a file is no folder to suggest
    with pytest.raises(RecipeError) as info:
        list_inputs(tmp_path / "my_vidoes")
    assert str(info.value) == (f"{tmp_path / 'my_vidoes'}: videos directory not found "
                               f"(did you mean '{tmp_path / 'my_videos'}'?)")
    with pytest.raises(RecipeError, match=r"gone/my_vidoes: videos directory not found$"):   # nothing close to gone
        list_inputs(tmp_path / "gone" / "my_vidoes")
    with pytest.raises(RecipeError) as info:   # the mistyped part above the folder: it was not looked at
        list_inputs(tmp_path / "my_vidoes" / "run1")
    assert str(info.value) == (f"{tmp_path / 'my_vidoes' / 'run1'}: videos directory not found "
                               f"(did you mean '{tmp_path / 'my_videos' / 'run1'}'?)")


def test_a_folder_that_is_a_dangling_symlink_says_so(tmp_path: Path) -> None:
    """``ls`` shows a symlink whose target is gone (a moved dataset): "not found" alone named a file that is there."""
    (tmp_path / "videos").symlink_to(tmp_path / "moved")
    with pytest.raises(RecipeError) as info:
        list_inputs(tmp_path / "videos")
    assert str(info.value) == (f"{tmp_path / 'videos'}: videos directory not found: a dangling symlink "
                               f"(to {str(tmp_path / 'moved')!r})")


def test_a_folder_whose_inputs_cannot_be_counted_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match=r"none: clips directory not found$"):
        list_inputs(tmp_path / "none", what="clips")
    (tmp_path / "a.txt").write_text("")
    with pytest.raises(RecipeError, match=r": no videos found \(looked for \.mp4, \.mkv, \.webm, \.avi, \.mov\)$"):
        list_inputs(tmp_path)
    # a video or a FIFO where the folder belongs is named as what it is: it was "directory not found"
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "one.mp4").write_bytes(b"x")
    with pytest.raises(RecipeError, match=r"one\.mp4: a regular file, not a directory; name the folder that holds "
                                          r"the videos$"):
        list_inputs(odd / "one.mp4")
    os.mkfifo(odd / "pipe")
    with pytest.raises(RecipeError, match=r"pipe: a FIFO \(named pipe\), not a directory; name the folder"):
        list_inputs(odd / "pipe")
    (odd / "loop").symlink_to(odd / "loop")
    with pytest.raises(RecipeError, match=r"loop: cannot open the videos directory \(Too many levels of symbolic "
                                          r"links\): a symlink loop; name the real folder that holds the videos$"):
        list_inputs(odd / "loop")


def _file(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_key_names_the_file_by_its_place_under_the_root_its_size_and_its_bytes(tmp_path: Path) -> None:
    video = _file(tmp_path / "videos" / "a" / "clip.mp4", b"frames" * 1000)
    key = InputDigests(tmp_path / "run").key(video, tmp_path / "videos")
    assert key == InputKey("a/clip.mp4", 6000, hashlib.sha256(b"frames" * 1000).hexdigest())


def test_a_digest_is_computed_once_per_run_directory(tmp_path: Path) -> None:
    video = _file(tmp_path / "v.mp4", b"x" * 10)
    with input_digests(tmp_path / "run") as first:
        digest = first.sha256(video)
        assert first.sha256(video) == digest and first.hashed == 1
    assert (tmp_path / "run" / DIGESTS_FILE).is_file()
    with input_digests(tmp_path / "run") as again:
        assert again.sha256(video) == digest and again.hashed == 0   # from the cache: the file is not read


@pytest.mark.parametrize("change", ["content and size", "content, mtime put back", "mtime",
                                    "replaced by another file"])
def test_a_changed_file_is_hashed_again(tmp_path: Path, change: str) -> None:
    """An edit in place at the same size with the mtime set back (``cp -p`` over it) is seen too: its ctime moved."""
    video = _file(tmp_path / "v.mp4", b"x" * 10)
    with input_digests(tmp_path / "run") as digests:
        before = digests.sha256(video)
    if change == "content and size":
        video.write_bytes(b"y" * 11)
    elif change == "content, mtime put back":
        stat = video.stat()
        with open(video, "r+b") as fh:
            fh.write(b"y")
        os.utime(video, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert (video.stat().st_size, video.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    elif change == "mtime":
        stat = video.stat()
        os.utime(video, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    else:
        _file(tmp_path / "other.mp4", b"x" * 10).replace(video)   # same bytes, same size, another inode
    with input_digests(tmp_path / "run") as digests:
        after = digests.sha256(video)
        assert digests.hashed == 1
    assert (after == before) == (not change.startswith("content"))


def test_verify_ignores_the_cache_and_stores_what_it_found(tmp_path: Path) -> None:
    """What the cache cannot see (a file whose stat it never looks past); --verify-inputs reads every byte."""
    video = _file(tmp_path / "v.mp4", b"a" * 10)
    with input_digests(tmp_path / "run") as digests:
        old = digests.sha256(video)
    with input_digests(tmp_path / "run") as trusting:
        assert trusting.sha256(video) == old and trusting.hashed == 0
    with input_digests(tmp_path / "run", verify=True) as verifying:
        assert verifying.sha256(video) == old and verifying.hashed == 1
    with input_digests(tmp_path / "run") as later:
        assert later.sha256(video) == old and later.hashed == 0


def test_what_is_not_a_regular_file_under_its_root_is_refused_in_one_line(tmp_path: Path) -> None:
    digests = InputDigests(tmp_path / "run")
    os.mkfifo(tmp_path / "fifo.mp4")
    (tmp_path / "dir.mp4").mkdir()
    for path, reason in ((tmp_path / "fifo.mp4", "not a regular file"), (tmp_path / "dir.mp4", "not a regular file"),
                         (tmp_path / "gone.mp4", "cannot be read")):
        with pytest.raises(InputFileError, match=reason) as info:   # a FIFO is never opened (it would block)
            digests.sha256(path)
        assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)
    with pytest.raises(InputFileError, match="not under its input root"):
        digests.key(_file(tmp_path / "elsewhere" / "v.mp4", b"x"), tmp_path / "videos")


def test_an_unreadable_cache_is_an_empty_one_and_saves_merge(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / DIGESTS_FILE).write_text("{not json")
    a, b = _file(tmp_path / "a.mp4", b"a"), _file(tmp_path / "b.mp4", b"b")
    first, second = InputDigests(run), InputDigests(run)    # two shards that read the cache at the same time
    first.sha256(a)
    second.sha256(b)
    first.save()
    second.save()
    stored = json.loads((run / DIGESTS_FILE).read_text())["files"]
    assert set(stored) == {hashlib.sha256(str(p).encode()).hexdigest() for p in (a, b)}
    with input_digests(run) as digests:
        digests.sha256(a), digests.sha256(b)
        assert digests.hashed == 0


def test_a_rollout_rewritten_at_its_size_with_its_mtime_set_back_is_read_again_in_the_same_process(
        tmp_path: Path) -> None:
    """``regular`` took a changed ctime as a change, then asked ``regular_sha256``, whose per-process memo was keyed
    by size and mtime only: it gave the old bytes' SHA-256, and ``_keep`` stored it under the new state."""
    video = _file(tmp_path / "a.mp4", b"A" * 100)
    digests = InputDigests(tmp_path / "run")
    assert digests.regular(video) == hashlib.sha256(b"A" * 100).hexdigest()
    stat = video.stat()
    with open(video, "r+b") as fh:   # cp -p over it: same inode, same size, the mtime put back
        fh.write(b"B" * 100)
    os.utime(video, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert digests.regular(video) == hashlib.sha256(b"B" * 100).hexdigest()


def test_a_fifo_swapped_in_after_the_stat_is_never_waited_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both stat the path, then opened it by name with ``open``: a FIFO put there between the two blocked the run
    (a symlink was followed). The stat each takes is made to see the regular file that was there."""
    regular = _file(tmp_path / "was.mp4", b"x")
    fifo = tmp_path / "a.mp4"
    os.mkfifo(fifo)

    class Swapped(type(Path())):   # lstat sees the file before it was swapped
        def lstat(self) -> os.stat_result:
            return regular.lstat()

    monkeypatch.setattr("pinbench.core.inputs._regular_stat", lambda path: os.stat(regular))
    digests = InputDigests(tmp_path / "run")
    assert _within(lambda: digests.regular(Swapped(fifo)), fifo) is None
    with pytest.raises(InputFileError, match="not a regular file") as info:
        _within(lambda: digests.sha256(fifo), fifo)
    assert str(info.value) == f"{fifo}: not a regular file"


def _within(call: Callable[[], object], fifo: Path, seconds: float = 5.0) -> object:
    """``call()`` in a thread, its result or what it raised; fails the test when it is still blocked after
    ``seconds`` (then ``fifo`` is opened for writing, so that the thread ends)."""
    found: list[object] = []

    def run() -> None:
        try:
            found.append(call())
        except Exception as exc:  # noqa: BLE001 - handed to the test
            found.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(seconds)
        pytest.fail(f"still blocked on {fifo} after {seconds} s")
    if isinstance(found[0], Exception):
        raise found[0]
    return found[0]


def test_the_digest_cache_names_no_input_folder(tmp_path: Path) -> None:
    """The cache kept each input's absolute path, so a working folder named like a token (or /home/NAME) stood in
    the run directory's .pinbench-input-digests.json, which travels with the run. It keeps the path's SHA-256: no
    folder's name is written, and a rerun still reads no input again."""
    token = "hf_" + "Ab3De6Gh9Jk2Mn5Pq8St"
    video, run = _file(tmp_path / token / "videos" / "a.mp4", b"a"), tmp_path / "run"
    with input_digests(run) as digests:
        digests.sha256(video)
    text = (run / DIGESTS_FILE).read_text()
    assert token not in text and "videos" not in text
    with input_digests(run) as digests:
        assert digests.sha256(video) == hashlib.sha256(b"a").hexdigest() and digests.hashed == 0


@pytest.mark.parametrize("name", ["hf_" + "Ab3De6Gh9Jk2Mn5Pq8St", "ghp_" + "A1b2C3d4E5" * 4])
def test_an_input_named_like_a_token_fails_by_name_under_an_id_of_its_own(tmp_path: Path, name: str) -> None:
    """The id of ``hf_....mp4`` was the token itself, written unredacted into samples.jsonl, samples/run.jsonl and
    the shard manifest (an id names files and records: nothing there redacts it). It fails as a bad name does."""
    (tmp_path / f"{name}.mp4").write_bytes(b"x")
    (tmp_path / "good.mp4").write_bytes(b"y")
    tasks = {t.name: t for t in input_tasks(tmp_path, list_inputs(tmp_path), digests=InputDigests(tmp_path / ".run"),
                                            make=DecodedTask, decoder="pyav")}
    bad = tasks[f"{name}.mp4"]
    assert bad.sample_id.startswith("bad-name-") and name not in bad.sample_id and bad.input is None
    assert bad.problem == "bad file name: its sample id has the shape of a secret token"
    assert tasks["good.mp4"].sample_id == "good" and tasks["good.mp4"].problem is None


def test_an_input_in_a_folder_named_like_a_token_fails_by_name(tmp_path: Path) -> None:
    """``ghp_.../a.mp4`` had the id ``ghp_...__a``: the token glued to "__a" has no token's end, so the id was kept
    and the token written into samples.jsonl, the shard manifest, the report and the view's data whole."""
    token = "ghp_" + "A1b2C3d4E5" * 4
    _file(tmp_path / token / "a.mp4", b"x")
    (tmp_path / "good.mp4").write_bytes(b"y")
    tasks = {t.name: t for t in input_tasks(tmp_path, list_inputs(tmp_path), digests=InputDigests(tmp_path / ".run"),
                                            make=DecodedTask, decoder="pyav")}
    bad = tasks[f"{token}/a.mp4"]
    assert bad.sample_id.startswith("bad-name-") and token not in bad.sample_id
    assert bad.problem == "bad file name: its sample id has the shape of a secret token"
    assert tasks["good.mp4"].sample_id == "good"


@pytest.mark.parametrize(("name", "value", "holder"), [
    ("MY_API_KEY", "sample", "the environment variable MY_API_KEY (named like a secret's: its value is redacted "
                             "everywhere)"),
    ("PINBENCH_SECRET_VALUES", '["sample"]', "a secret-named -g option")], ids=["variable", "option"])
def test_an_input_holding_a_secret_named_variable_s_value_is_told_which_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, holder: str) -> None:
    """An environment variable named like a secret's (``*_KEY``: MY_API_KEY=sample) or a secret-named -g option's value
    (``keep_secret``, kept in PINBENCH_SECRET_VALUES) in a file's name: its id is refused as one holding a secret,
    which was said as 'the shape of a secret token' for sample_001.mp4, naming nothing the user could change. What
    holds it is said (a variable's name is never redacted; the value stays unsaid)."""
    monkeypatch.setenv(name, value)
    (tmp_path / "sample_001.mp4").write_bytes(b"x")
    (tmp_path / "hf_Ab3De6Gh9Jk2Mn5Pq8St.mp4").write_bytes(b"y")
    tasks = {t.name: t for t in input_tasks(tmp_path, list_inputs(tmp_path), digests=InputDigests(tmp_path / ".run"),
                                            make=DecodedTask, decoder="pyav")}
    assert tasks["sample_001.mp4"].problem == f"bad file name: its sample id holds the value of {holder}"
    assert tasks["hf_Ab3De6Gh9Jk2Mn5Pq8St.mp4"].problem == ("bad file name: its sample id has the shape of a secret "
                                                            "token")
