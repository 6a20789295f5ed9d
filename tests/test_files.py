"""pinbench.core.files: atomic writes leave files as readable as any new file, and no temporary behind; the
exclusive lock holds; JSON with finite numbers only parses as json.loads with its hooks."""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pinbench.core import files
from pinbench.core.config import RunConfig
from pinbench.core.files import atomic_path, exclusive, loads_finite_json, system_path, write_atomic
from pinbench.core.rundir import LOCK_DIR, claim_run_dir


@pytest.fixture
def umask() -> Iterator[int]:
    old = os.umask(0o022)
    yield 0o022
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_atomic_write_gets_the_mode_of_a_new_file_not_0600(tmp_path: Path, umask: int) -> None:
    """mkstemp made every scorecard, report and reference 0600: unreadable by a colleague sharing the runs."""
    written = write_atomic(tmp_path / "scorecard.json", "{}")
    (tmp_path / "plain.json").write_text("{}")
    assert _mode(written) == _mode(tmp_path / "plain.json") == 0o644
    with atomic_path(tmp_path / "clip.mp4", suffix=".mp4") as tmp:
        tmp.write_bytes(b"x")
    assert _mode(tmp_path / "clip.mp4") == 0o644
    os.umask(0o077)
    assert _mode(write_atomic(tmp_path / "private.json", "{}")) == 0o600  # a stricter umask is honoured
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4", "plain.json", "private.json", "scorecard.json"]


def test_a_run_lock_is_readable_by_other_users(tmp_path: Path, umask: int) -> None:
    cfg = RunConfig(recipe="toy-bench", checkpoint="Toy-Nano", out_dir=tmp_path / "run", limit=3)
    with claim_run_dir(cfg, env={}) as claim:
        assert _mode(claim.lock) == 0o644 and claim.lock.parent.name == LOCK_DIR


def test_exclusive_holds_an_flock_that_others_cannot_take(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    with exclusive(lock), open(lock, "a+b") as other:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(lock, "a+b") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the block ends


def test_write_if_changed_leaves_a_file_holding_the_bytes_alone(tmp_path: Path) -> None:
    from pinbench.core.files import write_if_changed

    path = tmp_path / "out.json"
    write_if_changed(path, "a\n")
    os.utime(path, ns=(1, 1))
    write_if_changed(path, b"a\n")
    assert path.stat().st_mtime_ns == 1                  # the same bytes: not written again
    write_if_changed(path, "b\n")
    assert path.read_text() == "b\n" and path.stat().st_mtime_ns != 1
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("b\n")
    path.unlink()
    path.symlink_to(elsewhere)                           # a link holding the bytes is replaced by a file
    write_if_changed(path, "b\n")
    assert not path.is_symlink() and path.read_text() == "b\n" and elsewhere.read_text() == "b\n"


@pytest.mark.parametrize("text", ['{"a": 1.5, "b": [1, -2e-7, "x"]}', '  [1.0] ', "\ufeff{}", '{"a": NaN}',
                                  '{"a": -Infinity}', "[1e999]", "[-1e999, 2]", '{"a": 1', "", "{} []",
                                  b'{"a": 0.5}', b"\xef\xbb\xbf[1.0]", '"\u2028"'])
def test_loads_finite_json_is_json_loads_with_its_hooks(text: str | bytes) -> None:
    """One decoder serves every call (json.loads with hooks built one per call): the same values and the same
    errors as json.loads with the finite-number hooks, a byte-order mark and bytes included."""
    def outcome(parse):
        try:
            value = parse(text)
        except ValueError as exc:
            return type(exc), str(exc)
        return value, [type(v) for v in (value if isinstance(value, list) else [value])]

    expected = outcome(lambda t: json.loads(t, parse_constant=files._non_finite_constant,
                                            parse_float=files._finite_number))
    assert outcome(loads_finite_json) == expected


@pytest.mark.parametrize("line", ["[1E+0309]", "[1e400]", "{\"a\": 1e400}", "[" + "9" * 310 + ".0]",
                                  "[" + "9" * 200 + ".5e108]", "[" + "9" * 199 + ".5e99]", "[" + "1" * 400 + "]",
                                  "[1.5e-999, 2e50]", '["E+0999 in a string", 1.25]', "[-Infinity]",
                                  '{"code": "a3e412e0000f", "x": 0.25}', "[1e+400 ]", "[2E400\t, 1]"])
def test_a_jsonl_file_is_parsed_as_each_of_its_lines_alone(tmp_path: Path, line: str) -> None:
    """#32: a file in which no number can overflow is parsed without the float hook; the values, their types and the
    refusals are those of each line parsed with the finite-number hooks (a digest's hex digits are no exponent)."""
    text = '{"code": "3e412ab", "n": 1.5}\n' + line + "\n"

    def outcome(parse):
        try:
            values = parse()
        except ValueError as exc:
            return "refused", "non-finite" in str(exc)
        return values, [type(v) for value in values for v in (value if isinstance(value, list) else [value])]

    expected = outcome(lambda: [json.loads(piece, parse_constant=files._non_finite_constant,
                                           parse_float=files._finite_number) for piece in text.splitlines()])
    assert outcome(lambda: files.parse_finite_jsonl(text, tmp_path / "x.jsonl", lambda value: value, "row")) == expected


def test_jsonl_lines_end_at_cr_lf_and_lone_cr_and_errors_count_them(tmp_path: Path) -> None:
    """A line ends at \\n, \\r\\n or \\r (as bytes split them), blank lines are skipped, and a bad line is named by
    its number counted that way."""
    text = '{"a": 1}\r\n{"a": 2}\r{"a": 3}\n\r\n'
    assert files.parse_finite_jsonl(text, tmp_path / "x.jsonl", lambda value: value, "row") == [
        {"a": 1}, {"a": 2}, {"a": 3}]
    with pytest.raises(ValueError, match=r"x\.jsonl:5: bad row"):
        files.parse_finite_jsonl(text + '{"a": \r', tmp_path / "x.jsonl", lambda value: value, "row")


@pytest.mark.parametrize("chunk", [4 << 20, 7], ids=["one-read", "lines-cut-across-reads"])
def test_a_jsonl_file_read_a_few_bytes_at_a_time_names_the_line_and_byte_of_the_whole_file(
        tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``read_finite_jsonl`` reads ``JSONL_CHUNK`` bytes of whole lines at a time (``pinbench status`` keeps a few
    records of a large samples file): a bad line is named by its number in the file, \r\n and \r counted as one
    end each, and a byte that is not UTF-8 by its offset in the file, whatever the reads."""
    monkeypatch.setattr(files, "JSONL_CHUNK", chunk)
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\r\n{"a": 2}\r\n\r{"a": 3}\n')
    assert files.read_finite_jsonl(path, lambda value: value, "row") == [{"a": 1}, {"a": 2}, {"a": 3}]
    path.write_bytes(b'{"a": 1}\r\n{"a": 2}\r\n\r{"a": 3}\n{"a": }\n')
    with pytest.raises(ValueError, match=rf"^{path}:5: bad row"):
        files.read_finite_jsonl(path, lambda value: value, "row")
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": "\xff"}\n')
    with pytest.raises(files.FileError, match=rf"^{path}: not UTF-8 text \(byte 25\)$"):
        files.read_finite_jsonl(path, lambda value: value, "row")


def test_a_line_longer_than_many_reads_is_read_in_time_linear_in_its_length(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line longer than a read was joined to what came before it and searched for its end again at every read:
    a 20 MiB line in reads of 1 KiB took about a minute. Its value and the lines after it are read whole, numbered as
    ever; the deadline is only a backstop, over ten times what the whole test takes here."""
    monkeypatch.setattr(files, "JSONL_CHUNK", 1 << 10)
    path = tmp_path / "x.jsonl"
    path.write_bytes(json.dumps({"s": "x" * (20 << 20)}).encode() + b'\r\n{"s": "y"}\n{"s": }\n')
    start = time.monotonic()
    rows = files.iter_finite_jsonl_file(path, lambda value: value, "row")
    assert [len(row["s"]) for row in itertools.islice(rows, 2)] == [20 << 20, 1]
    with pytest.raises(ValueError, match=rf"^{path}:3: bad row"):
        next(rows)
    assert time.monotonic() - start < 10


def test_a_raw_unicode_line_separator_inside_a_string_stays_in_its_row(tmp_path: Path) -> None:
    """``json.dumps(ensure_ascii=False)`` leaves U+2028, U+2029 and U+0085 raw inside strings, where
    ``str.splitlines`` split the row (the recipes' readers then refused valid data as unterminated strings)."""
    rows = [{"q": f"a{sep}b", "n": n} for n, sep in enumerate("\u2028\u2029\x85")]
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    assert list(files.iter_jsonl(path)) == list(enumerate(rows, start=1))
    assert files.read_finite_jsonl(path, lambda value: value, "row") == rows


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_number_in_a_jsonl_row_is_refused_naming_file_and_line(tmp_path: Path, literal: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{"a": ' + literal + "}\n")
    with pytest.raises(files.FileError) as info:
        list(files.iter_jsonl(path, "row"))
    assert str(info.value).startswith(f"{path}:3: bad row: holds the non-finite number {literal}")
    assert "\n" not in str(info.value)


def test_a_jsonl_line_that_is_no_object_or_no_json_is_named_by_its_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\r\n[1]\n')
    with pytest.raises(files.FileError, match=rf"^{path}:2: expected a JSON object, got list$"):
        list(files.iter_jsonl(path))
    path.write_text('{"a": 1}\r{"a": }\n')
    with pytest.raises(files.FileError, match=rf"^{path}:2: invalid JSON: Expecting value \(column 7\)$"):
        list(files.iter_jsonl(path))


def test_a_jsonl_value_is_read_from_its_line_alone(tmp_path: Path) -> None:
    """Each line is parsed where it lies in the file's text (no copy of it as a list of lines): a value that would
    go on past its line's end (whitespace between tokens may be a newline) is still refused by that line, as a
    parse of the line alone refuses it; values of one line each, numbers too, are read as they are."""
    path = tmp_path / "x.jsonl"
    assert files.parse_finite_jsonl('1\n"a"\n  [2] \n{"b": 3}', path, lambda value: value, "row") == [
        1, "a", [2], {"b": 3}]
    for text, column, problem in [('{"a": 1,\n"b": 2}\n', 9, "Expecting property name enclosed in double quotes"),
                                  ('{"a": 1}\n[1,\n2]\n', 4, "Expecting value"),
                                  ('{"a":\n1}', 6, "Expecting value")]:
        line = 2 if text.startswith('{"a": 1}') else 1
        path.write_text(text)
        with pytest.raises(files.FileError) as info:
            list(files.iter_jsonl(path, "row"))
        assert str(info.value) == f"{path}:{line}: bad row: invalid JSON: {problem} (column {column})"


def test_json_nested_beyond_the_parsers_depth_is_bad_json_named_by_its_file(tmp_path: Path) -> None:
    """``[[[...]]]`` thousands deep: the parser's RecursionError reached the user as its own words, naming no file
    (pinbench diff and check of such a scorecard.json said only "maximum recursion depth exceeded ...")."""
    from pinbench.core.scorecard import ScorecardError, load_scorecard

    deep = "[" * 100_000 + "]" * 100_000
    for text in (deep, deep.encode()):   # the decoder's path and json.loads's
        with pytest.raises(json.JSONDecodeError, match="nested too deeply to parse"):
            loads_finite_json(text)
    rows = tmp_path / "x.jsonl"
    rows.write_text('{"a": 1}\n' + deep + "\n")
    with pytest.raises(files.FileError, match=rf"^{rows}:2: bad row: invalid JSON: nested too deeply to parse"):
        list(files.iter_jsonl(rows, "row"))
    card = tmp_path / "scorecard.json"
    card.write_text('{"a": ' + deep + "}")
    with pytest.raises(ScorecardError, match=rf"^{card}: invalid JSON: nested too deeply to parse$"):
        load_scorecard(card)


def test_a_run_file_nested_beyond_the_parsers_depth_is_named_or_costs_the_work_again(tmp_path: Path) -> None:
    """``[[[...]]]`` thousands deep in a run's own files: the identity is refused by name, a cache, stamp or lock is
    read as absent (a view's preview record too), a shard manifest, scorecard or Slurm submission ``status`` reads
    is named (each ended ``pinbench run``, ``view`` or ``status`` with "maximum recursion depth exceeded ...",
    naming no file)."""
    from pinbench.core.fixture_data import _stamped
    from pinbench.core.rerun import RERUN_FILE, RerunManifest
    from pinbench.core.rundir import IDENTITY_FILE, RunDirError, read_identity
    from pinbench.core.shard_manifest import _parse
    from pinbench.media.preview import cached_preview
    from pinbench.ops.status import _scorecard
    from pinbench.ops.submit import last_submission, submissions_path

    deep = "[" * 100_000 + "]" * 100_000
    for name in (IDENTITY_FILE, RERUN_FILE, "stamp.json", "cache.json", "0-of-1.json", "scorecard.json"):
        (tmp_path / name).write_text(deep)
    with pytest.raises(json.JSONDecodeError, match="nested too deeply to parse"):
        files.loads_json(deep.encode())
    with pytest.raises(RunDirError, match=rf"^{tmp_path / IDENTITY_FILE}: unreadable"):
        read_identity(tmp_path)
    assert RerunManifest.read(tmp_path) is None and _stamped(tmp_path / "stamp.json", 1) is None
    assert files.read_json_object(tmp_path / "cache.json") is None   # a lock too (``pinbench.core.rundir``)
    manifest = tmp_path / "0-of-1.json"
    with pytest.raises(ValueError, match=rf"^{manifest}: unreadable shard manifest .*nested too deeply"):
        _parse(manifest)
    assert str(_scorecard(tmp_path)).startswith(f"{tmp_path / 'scorecard.json'}: not a scorecard")
    submissions = submissions_path(tmp_path)
    submissions.parent.mkdir()
    submissions.write_text(deep + "\n")
    with pytest.raises(ValueError, match=rf"^{submissions}:1: unreadable submission record \(nested too deeply"):
        last_submission(tmp_path)
    (tmp_path / f"{'a' * 64}.json").write_text(deep)   # a view's preview record
    assert cached_preview(tmp_path, "a" * 64) is None


def _raised(call: Callable[[], object]) -> str:
    """The one line of the ValueError ``call()`` raises."""
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


def test_a_jsonl_file_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    """``read_finite_jsonl`` read with ``read_text``, which waits for a writer to a FIFO that never comes."""
    fifo = tmp_path / "x.jsonl"
    os.mkfifo(fifo)
    for read in (lambda: list(files.iter_jsonl(fifo)), lambda: files.read_finite_jsonl(fifo, lambda v: v, "row")):
        assert _load_within(lambda read=read: _raised(read), fifo) == f"{fifo}: a FIFO (named pipe), not a regular file"


@pytest.mark.parametrize(("make", "kind"), [
    (lambda p: None, files.MissingFile), (lambda p: p.symlink_to(p.parent / "absent"), files.MissingFile),
    (lambda p: p.mkdir(), files.NotRegularFile), (lambda p: os.mkfifo(p), files.NotRegularFile),
    (lambda p: p.symlink_to(p), files.FileError),   # a loop: unreadable, neither absent nor of another kind
])
def test_what_stands_in_a_files_place_is_told_by_the_errors_class(tmp_path: Path, make, kind) -> None:
    """A caller that says more of an absent file (the evaluator did not finish) matched the reason's words."""
    path = tmp_path / "x.json"
    make(path)
    with pytest.raises(files.FileError) as info:
        files.read_regular_bytes(path)
    assert type(info.value) is kind, info.value


class _OneLineError(ValueError):
    """A recipe's own error, made of one string (``DatasetError(msg)``)."""


@pytest.mark.parametrize(("text", "reason"), [
    (None, "file not found"),
    (b"\xff{}", "not UTF-8 text (byte 0)"),
    (b'{"a": 1,\n "b": }', "invalid JSON at line 2, column 7: Expecting value"),
    (b'{"a": "cut', "invalid JSON at line 1, column 7: Unterminated string starting"),   # was "... starting at"
    (b"[" * 100_000 + b"]" * 100_000, "invalid JSON: nested too deeply to parse"),
    (b"", "no JSON value: the file is empty"),   # was "invalid JSON at line 1, column 1: Expecting value"
    (b" \r\n", "no JSON value: the file holds only whitespace"),
    (b'{"a": NaN}', "holds the non-finite number NaN; only finite numbers are allowed"),
])
@pytest.mark.parametrize("error", [files.FileError, _OneLineError])
def test_a_bad_json_file_is_one_line_of_the_callers_error(tmp_path: Path, text: bytes | None, reason: str,
                                                          error: type[ValueError]) -> None:
    """``read_data_file(path, AnnotationError)`` made a one-string error of two arguments: the line read
    "(PosixPath('...'), 'file not found')". Each recipe also turned the read's and the parse's errors into its own
    line by hand; ``read_json_file`` does it once."""
    path = tmp_path / "x.json"
    if text is not None:
        path.write_bytes(text)
    with pytest.raises(error) as info:
        files.read_json_file(path, error, parse=loads_finite_json)
    assert str(info.value) == f"{path}: {reason}"
    path.write_text('{"a": [1, 2.5]}')
    assert files.read_json_file(path, error) == {"a": [1, 2.5]}


@pytest.mark.parametrize(("make", "kind"), [(lambda p: None, files.MissingFile),
                                            (lambda p: p.mkdir(), files.NotRegularFile)])
def test_the_json_reader_keeps_the_class_that_tells_what_stands_in_the_files_place(tmp_path: Path, make, kind) -> None:
    """``read_json_file`` (``read_data_file``) made a plain FileError of MissingFile: PAI-Bench-C, which says of an
    absent metrics.json that the evaluator did not finish, could not use it."""
    path = tmp_path / "x.json"
    make(path)
    with pytest.raises(files.FileError) as info:
        files.read_json_file(path)
    assert type(info.value) is kind, info.value


@pytest.mark.parametrize("error", [files.FileError, _OneLineError])
@pytest.mark.parametrize(("text", "reason"), [
    (None, "file not found"),
    ('{"a": 1}\n[1]\n', "2: bad row: expected a JSON object, got list"),
    ('{"a": 1}\n{"a": "\\ud800"}\n', "2: bad row: a string holds the lone surrogate \\ud800 (half a UTF-16 pair), "
                                      "which no UTF-8 file can hold"),
])
def test_a_jsonl_file_is_refused_with_the_callers_error(tmp_path: Path, error: type[ValueError], text: str | None,
                                                        reason: str) -> None:
    """RememBench and CameraBench each caught iter_jsonl's FileError and raised their DatasetError of its text."""
    path = tmp_path / "x.jsonl"
    if text is not None:
        path.write_text(text)
    with pytest.raises(error) as info:
        list(files.iter_jsonl(path, "row", error))
    assert isinstance(info.value, error) and str(info.value) == f"{path}{':' if text else ': '}{reason}"
    if error is files.FileError and text:
        assert info.value.line == 2


@pytest.mark.parametrize(("text", "line", "lone"), [
    ('{"a": "\\ud800"}', 1, "\\ud800"),
    ('{"a": "\\ud83d\\ude00",\n "b": ["x\\uDFFF"]}', 2, "\\uDFFF"),
    ('{"a": "\\ud800\\\\\\udc00"}', 1, "\\ud800"),   # an escaped backslash between two halves: no pair
    ('{"a": "\\\\ud800", "b": "\\ud83d\\ude00", "c": "\\u005cud800"}', None, None),   # no surrogate in any string
])
def test_a_lone_surrogate_in_a_json_file_is_refused_naming_the_file_and_line(
        tmp_path: Path, text: str, line: int | None, lone: str | None) -> None:
    """``"\\ud800"`` passed ``read_json_file`` (and ``iter_jsonl``) and failed later, naming no file, when what it
    went into was written as UTF-8."""
    path, rows = tmp_path / "x.json", tmp_path / "x.jsonl"
    path.write_text(text)
    rows.write_text(text.replace("\n", "") + "\n")
    if lone is None:
        assert files.read_json_file(path) == json.loads(text)
        assert [row for _, row in files.iter_jsonl(rows)] == [json.loads(text)]
        return
    said = f"a string holds the lone surrogate {lone} (half a UTF-16 pair), which no UTF-8 file can hold"
    with pytest.raises(files.FileError) as info:
        files.read_json_file(path, parse=loads_finite_json)
    assert str(info.value) == f"{path}: line {line}: {said}"
    with pytest.raises(files.FileError) as info:
        list(files.iter_jsonl(rows, "row"))
    assert str(info.value) == f"{rows}:1: bad row: {said}"


# ------------------------------------------------------------------------------------ tolerant JSON caches

def _caches(tmp_path: Path) -> list[tuple[str, Path, Callable[[], dict]]]:
    """The three stat- or content-keyed caches: (name, the path of its file, what it holds once loaded)."""
    from pinbench.core.imports import ImportCache
    from pinbench.core.inputs import DIGESTS_FILE, InputDigests
    from pinbench.ops.doctor import DecodedFiles

    run, imports, frames = tmp_path / "run", tmp_path / "imports.json", tmp_path / "first-frames.json"
    run.mkdir()
    return [("input digests", run / DIGESTS_FILE, lambda: InputDigests(run)._cache),
            ("import cache", imports, lambda: ImportCache(imports)._load()),
            ("first frames", frames, lambda: DecodedFiles(frames, "pyav")._known)]


_SOUND = {"input digests": {"/v.mp4": {"size": 1, "mtime_ns": 2, "inode": 3, "ctime_ns": 4, "sha256": "a" * 64}},
          "import cache": {"/r/run.py": ["k", ["pinbench.core.files"]]},
          "first frames": {"/v.mp4": {"state": [100, 2, 3, 4], "facts": [10, 8.0, 64, 48, "h264", 1.25, "mp4"]}}}
_FORMATS = {"input digests": 3, "import cache": 2, "first frames": 3}


def test_the_import_cache_holds_each_module_name_once(tmp_path: Path) -> None:
    """Held for a process's life: a name many files import is one object, not one per occurrence in the file."""
    from pinbench.core.files import write_json_cache
    from pinbench.core.imports import ImportCache

    path = tmp_path / "imports.json"
    write_json_cache(path, 2, {"/a.py": ["k1", ["pinbench.core.files", "pinbench.core.runner"]],
                               "/b.py": ["k2", ["pinbench.core.files"]],
                               "/c.py": ["k3", ["pinbench.core.runner", "pinbench.core.files"]]})
    entries = ImportCache(path)._load()
    assert entries == {"/a.py": ("k1", ["pinbench.core.files", "pinbench.core.runner"]),
                       "/b.py": ("k2", ["pinbench.core.files"]),
                       "/c.py": ("k3", ["pinbench.core.runner", "pinbench.core.files"])}
    a, b, c = (entries[f"/{name}.py"][1] for name in "abc")
    assert a[0] is b[0] is c[1] and a[1] is c[0]


def test_the_import_cache_forgets_the_files_that_are_gone_past_its_size(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Keyed by path, it kept the entries of every deleted temporary folder and checkout for ever: past
    IMPORT_CACHE_FILES entries, a write drops them. Below it they stay (a container's files, gone from here)."""
    from pinbench.core import imports
    from pinbench.core.files import read_json_object, write_json_cache

    monkeypatch.setattr(imports, "IMPORT_CACHE_FILES", 3)
    path, kept, gone = tmp_path / "imports.json", tmp_path / "kept.py", str(tmp_path / "gone" / "run.py")
    kept.write_text("import pinbench.core.files\n")
    write_json_cache(path, 2, {gone: ["k", ["pinbench.core.files"]], str(kept): ["k", ["pinbench.core.files"]]})
    learnt = []
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text("import pinbench.core.runner\n")
        cache = imports.ImportCache(path)
        assert cache.imported_modules(tmp_path / f"{name}.py", name, False) == {"pinbench.core.runner"}
        cache.save()
        learnt.append(sorted(read_json_object(path)["files"]))
    assert learnt == [sorted([gone, str(kept), str(tmp_path / "a.py")]),
                      sorted([str(kept), str(tmp_path / "a.py"), str(tmp_path / "b.py")])]


def _load_within(load: Callable[[], object], fifo: Path | None, seconds: float = 10.0) -> object:
    """``load()`` in a thread; fails the test when it is still running after ``seconds`` (blocked on ``fifo``, which
    is then opened for writing so that the thread ends)."""
    found: list[object] = []
    thread = threading.Thread(target=lambda: found.append(load()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the blocked open returns, reads end of file
        thread.join(seconds)
        pytest.fail(f"loading the cache was still blocked after {seconds} s")
    return found[0]


@pytest.mark.parametrize("kind", ["fifo", "folder", "regular"])
def test_a_cache_file_that_is_a_fifo_or_a_folder_is_an_empty_cache_at_once(tmp_path: Path, kind: str) -> None:
    """read_text of a FIFO waited for a writer that never comes: the command hung. Each cache reads its file with
    read_json_cache, which opens without blocking and reads regular files only (a sound one, all of it)."""
    for name, path, load in _caches(tmp_path):
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "folder":
            path.mkdir()
        else:
            path.write_text(json.dumps({"format": _FORMATS[name], "files": _SOUND[name]}))
        held = _load_within(load, path if kind == "fifo" else None)
        assert (len(held) == 1) if kind == "regular" else (held == {}), (name, held)


def test_a_cache_file_that_is_a_symlink_to_dev_zero_is_an_empty_cache(tmp_path: Path) -> None:
    """/dev/zero never ends: read in full, it takes all memory. Each cache loads its file, a symlink to it, in a
    child process with 2 GiB of address space and a time limit."""
    paths = []
    for _, path, _ in _caches(tmp_path):
        path.symlink_to("/dev/zero")
        paths.append(str(path))
    code = ("import resource, sys\nfrom pathlib import Path\n"
            "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
            "from pinbench.core.imports import ImportCache\nfrom pinbench.core.inputs import InputDigests\n"
            "from pinbench.ops.doctor import DecodedFiles\n"
            "digests, imports, frames = map(Path, sys.argv[1:])\n"
            "print(InputDigests(digests.parent)._cache, ImportCache(imports)._load(), "
            "DecodedFiles(frames, 'pyav')._known)\n")
    out = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["{}", "{}", "{}"], out.stderr[-2000:]


def test_a_file_that_grows_past_the_limit_while_read_is_refused(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Its size, read first, said it was small (it grew since): the reading stops at the limit."""
    path = tmp_path / "grown"
    path.write_bytes(b"x" * 5000)
    fstat = os.fstat
    monkeypatch.setattr(files.os, "fstat", lambda fd: os.stat_result((*fstat(fd)[:6], 10, *fstat(fd)[7:10])))
    with pytest.raises(files.FileError, match="grown: more than the 100 bytes such a file holds"):
        files.read_regular_bytes(path, limit=100)
    assert files.read_regular_bytes(path, limit=5000) == b"x" * 5000


def test_file_digests_need_no_python_3_11_hashlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mind, camerabench and paibench_c images run pinbench on Python 3.10, whose hashlib has no file_digest:
    sha256_file and git_blob_id through it raised AttributeError there. Digests of a file over one chunk."""
    import hashlib

    from pinbench.ops.downloads import git_blob_id

    monkeypatch.delattr(hashlib, "file_digest", raising=False)   # as on Python 3.10
    data = bytes(range(256)) * (5 << 12) + b"tail"
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert files.sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert git_blob_id(path) == hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_a_count_of_one_is_singular_and_every_other_plural() -> None:
    """Run, status, check and doctor lines said "1 samples", "1 problem(s)"."""
    from pinbench.core.files import counted

    assert [counted(n, "sample") for n in (0, 1, 2)] == ["0 samples", "1 sample", "2 samples"]
    assert [counted(n, "entry", "entries") for n in (1, 3)] == ["1 entry", "3 entries"]


def test_a_file_of_the_longest_name_is_written_atomically(tmp_path: Path) -> None:
    """Its temporary name beside it is cut to fit a file name (with a digest of the whole), where mkstemp's affixes
    made a valid name of 250 bytes a "File name too long" error."""
    names = ["a" * 255, "\u00e9" * 125 + ".mp4"]
    for name in names:
        assert write_atomic(tmp_path / name, "x").read_text() == "x"
    with atomic_path(tmp_path / names[1], suffix=".mp4") as tmp:
        tmp.write_bytes(b"y")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
    assert (tmp_path / names[1]).read_bytes() == b"y"


def test_a_file_under_a_symlink_then_dotdot_is_written_where_the_system_puts_it(tmp_path: Path) -> None:
    """``lnk/../x`` is the folder above the symlink's target for the system, but mkstemp names its file by
    ``os.path.abspath``, which drops ``lnk/..``: ``pinbench run --out lnk/../x`` failed with "No such file or
    directory" on its first temporary file."""
    (tmp_path / "deep" / "a").mkdir(parents=True)
    (tmp_path / "lnk").symlink_to(tmp_path / "deep" / "a")
    target = tmp_path / "lnk" / ".." / "x" / "f.txt"
    assert write_atomic(target, "x").read_text() == "x"
    assert (tmp_path / "deep" / "x" / "f.txt").read_text() == "x" and not (tmp_path / "x").exists()


def test_a_run_directory_under_a_symlink_then_dotdot_is_where_the_system_puts_it(tmp_path: Path) -> None:
    """``--out lnk/../x``: the run's folder is made where the system puts it (beside the symlink's target), and every
    file the run names is there; ``os.path.abspath`` (mkstemp's, a lock's) looked for them beside the symlink."""
    from pinbench.core.recipe import get_recipe

    (tmp_path / "deep" / "a").mkdir(parents=True)
    (tmp_path / "lnk").symlink_to(tmp_path / "deep" / "a")
    assert system_path(tmp_path / "lnk" / ".." / "x") == tmp_path / "deep" / "x"
    assert system_path(tmp_path / "lnk" / "x") == tmp_path / "lnk" / "x"   # no "..": as given, the symlink kept
    cfg = get_recipe("dynamic-degree").config(fixture=True, out_dir=tmp_path / "lnk" / ".." / "x")
    assert cfg.out_dir == tmp_path / "deep" / "x"


def test_a_path_option_under_a_symlink_then_dotdot_is_the_folder_the_system_reads(tmp_path: Path) -> None:
    """``-o videos=lnk/../clips``: the run read the folder beside the symlink's target through it, but what
    normalises a path (``os.path.relpath`` of a view's links, ``abspath`` of a digest cache's keys) named the
    folder beside the symlink; the value is now that folder as the system reads it, a relative one from the
    folder ``pinbench submit`` reads it from (``cwd``); one without ``..`` stays as given."""
    from pinbench.core.recipe import get_recipe

    (tmp_path / "deep" / "a").mkdir(parents=True)
    (tmp_path / "deep" / "clips").mkdir()
    (tmp_path / "clips").mkdir()   # the folder a normalised path names: another one
    (tmp_path / "lnk").symlink_to(tmp_path / "deep" / "a")
    recipe = get_recipe("dynamic-degree")
    given = tmp_path / "lnk" / ".." / "clips"
    cfg = recipe.config("mine", out_dir=tmp_path / "run", options={"videos": str(given)}, env={})
    assert cfg.options.videos == tmp_path / "deep" / "clips"
    assert os.path.relpath(cfg.options.videos, tmp_path) == "deep/clips"
    assert cfg.inputs["videos"]["value"] == str(tmp_path / "deep" / "clips")
    relative = recipe.config("mine", out_dir=Path("run"), options={"videos": "lnk/../clips"}, env={}, cwd=tmp_path)
    assert relative.options.videos == tmp_path / "deep" / "clips"
    plain = recipe.config("mine", out_dir=tmp_path / "run", options={"videos": "lnk/clips"}, env={})
    assert plain.options.videos == Path("lnk/clips")


# ------------------------------------------------------------------------------------ parsed YAML kept as JSON

def test_a_yaml_text_is_parsed_once_and_again_after_an_edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parse of a YAML text is kept in <cache>/yaml/ by the text's SHA-256: a later read neither parses nor imports
    the parser, and gives back an equal value, not the same object (a caller may change it); an edit is parsed again;
    a cut cache file is parsed again too."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "recipe.yaml"
    path.write_text("name: toy\nmetrics:\n  f1: {direction: higher, tolerance: {abs: 0.01}}\nn: 3\nx: -0.0\n")
    parse = files._parse_yaml
    calls: list[Path] = []
    monkeypatch.setattr(files, "_parse_yaml", lambda *a: calls.append(a[0]) or parse(*a))
    expected = {"name": "toy", "metrics": {"f1": {"direction": "higher", "tolerance": {"abs": 0.01}}},
                "n": 3, "x": -0.0}
    first, second = files.read_yaml(path), files.read_yaml(path)
    assert first == second == expected and first is not second and calls == [path]
    assert type(second["n"]) is int and str(second["x"]) == "-0.0"
    path.write_text("name: toy2\n")
    assert files.read_yaml(path) == {"name": "toy2"} and calls == [path, path]
    kept = list((tmp_path / "cache" / files.YAML_CACHE_DIR).glob("*.json"))
    assert len(kept) == 2
    for held in kept:
        held.write_text(held.read_text()[:-3])
    assert files.read_yaml(path) == {"name": "toy2"} and len(calls) == 3


def test_a_kept_yaml_parse_edited_by_hand_or_of_another_text_is_not_given(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept JSON was given back whatever it said: a value edited in it, or another text's entry under this
    text's name, read as the file's parse (a reference's values, a recipe's declaration). Now the text is parsed."""
    import hashlib

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    path, other = tmp_path / "reference.yaml", tmp_path / "other.yaml"
    path.write_text("f1: 0.5\n")
    other.write_text("f1: 0.9\n")
    assert files.read_yaml(path) == {"f1": 0.5} and files.read_yaml(other) == {"f1": 0.9}
    kept, of_other = (tmp_path / "cache" / files.YAML_CACHE_DIR / f"{hashlib.sha256(p.read_bytes()).hexdigest()}.json"
                      for p in (path, other))
    kept.write_text(kept.read_text().replace("0.5", "0.7"))
    assert files.read_yaml(path) == {"f1": 0.5}
    kept.write_bytes(of_other.read_bytes())
    assert files.read_yaml(path) == {"f1": 0.5}


@pytest.mark.parametrize("text, value", [
    ("when: 2024-05-01\n", {"when": __import__("datetime").date(2024, 5, 1)}),
    ("1: one\n", {1: "one"}),
    ("true: yes\n", {True: True}),
    ("tags: !!set {a: null}\n", {"tags": {"a"}}),
    ("v: .inf\n", {"v": float("inf")}),
])
def test_a_yaml_value_json_cannot_hold_is_parsed_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          text: str, value: object) -> None:
    """A date, a key that is no string, a set, a non-finite number: kept as JSON they would come back as something
    else (a string, "1", "true", a list, an error). They are never kept, so every read gives what the parser gives."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "data.yaml"
    path.write_text(text)
    assert files.read_yaml(path) == value and files.read_yaml(path) == value
    assert type(next(iter(files.read_yaml(path)))) is type(next(iter(value)))   # type: ignore[call-overload]
    assert not list((tmp_path / "cache" / files.YAML_CACHE_DIR).glob("*.json"))


def test_the_yaml_cache_keeps_the_newest_files_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every edit of a YAML file adds an entry; beyond YAML_CACHE_FILES the oldest go."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(files, "YAML_CACHE_FILES", 3)
    path = tmp_path / "data.yaml"
    for i in range(5):
        path.write_text(f"n: {i}\n")
        assert files.read_yaml(path) == {"n": i}
    folder = tmp_path / "cache" / files.YAML_CACHE_DIR
    kept = [json.loads(p.read_text().partition("\n")[2]) for p in folder.glob("*.json")]
    assert sorted(d["n"] for d in kept) == [2, 3, 4]


@pytest.mark.parametrize("secret", ["hf_" + "Ab3De6Gh9Jk2Mn5Pq8St", "ghp_" + "A1b2C3d4E5" * 4,
                                    "https://user:pa55word@example.com/v1", "plain-value-of-env"])
def test_a_yaml_text_holding_a_secret_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  secret: str) -> None:
    """Every YAML text's parse was kept under <cache>/yaml/, a generator config's token with it, in a folder a
    cluster may share: a text holding a secret is parsed each time, and a copy kept before this is removed."""
    import hashlib

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MY_SERVICE_TOKEN", "plain-value-of-env")   # a secret by its variable's name, not its shape
    config, plain = tmp_path / "generator.yaml", tmp_path / "plain.yaml"
    config.write_text(f"endpoint: {secret}\nsteps: 4\n")
    plain.write_text("steps: 4\n")
    assert files.read_yaml(config) == {"endpoint": secret, "steps": 4} == files.read_yaml(config)
    assert files.read_yaml(plain) == {"steps": 4}
    kept = list((tmp_path / "cache" / files.YAML_CACHE_DIR).glob("*.json"))
    assert len(kept) == 1 and secret not in kept[0].read_text() and "steps" in kept[0].read_text()
    before = tmp_path / "cache" / files.YAML_CACHE_DIR / f"{hashlib.sha256(config.read_bytes()).hexdigest()}.json"
    before.write_text(f'old\n{{"endpoint": "{secret}"}}')      # kept by a pinbench from before
    assert files.read_yaml(config) == {"endpoint": secret, "steps": 4}
    assert not before.exists()


def test_a_kept_yaml_parse_is_its_owners_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept parse was written as any file (0o644 under the usual umask) into a cache a cluster may share."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "data.yaml"
    path.write_text("n: 1\n")
    assert files.read_yaml(path) == {"n": 1}
    kept = list((tmp_path / "cache" / files.YAML_CACHE_DIR).glob("*.json"))
    assert len(kept) == 1 and kept[0].stat().st_mode & 0o777 == 0o600


def test_a_yaml_cache_of_an_older_format_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files kept before 0o600 (and before a text holding a secret was refused) stayed readable by all, with their
    tokens, as long as their own text was not read again: the first parse kept now removes the older folders, and
    leaves the cache root's other folders (the hub's downloads) alone."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    older = tmp_path / "cache" / "yaml"
    older.mkdir(parents=True)
    (older / "a.json").write_text('x\n{"endpoint": "hf_Ab3De6Gh9Jk2Mn5Pq8St"}')
    (older / "a.json").chmod(0o644)
    (tmp_path / "cache" / "hub").mkdir()
    path = tmp_path / "data.yaml"
    path.write_text("n: 1\n")
    assert files.read_yaml(path) == {"n": 1}
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["hub", "yaml-3"]


def test_a_yaml_cache_of_a_newer_format_is_left_to_its_pinbench(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A newer pinbench sharing the cache root (another checkout's venv) keeps its parses in ``yaml-N`` above this
    format: each removed the other's folder at every parse it kept, both parsing again forever. Only the older
    formats (``yaml``, ``yaml-N`` below this one) are removed."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    for name in ("yaml-1", "yaml-4", "yaml-13"):
        (tmp_path / "cache" / name).mkdir(parents=True)
    path = tmp_path / "data.yaml"
    path.write_text("n: 1\n")
    assert files.read_yaml(path) == {"n": 1}
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["yaml-13", "yaml-3", "yaml-4"]


def test_an_aligned_table_pads_each_column_to_its_widest_cell() -> None:
    """The one renderer of the plain-text tables (diff, compare, status, demo): two spaces apart, no trailing space,
    a rule under the header unless asked not to."""
    table = [["metric", "A"], ["x", "0.25"], ["longer", ""]]
    assert files.aligned(table) == ["metric  A", "------  ----", "x       0.25", "longer"]
    assert files.aligned(table, rule=False) == ["metric  A", "x       0.25", "longer"]


def test_an_aligned_table_pads_by_display_width() -> None:
    """A cell of wide characters (CJK, emoji) takes two columns each and a combining mark none: padded by ``len`` the
    columns after such a cell stood out of line in a terminal."""
    table = [["sample", "score"], ["日本語", "1"], ["cafe\u0301", "2"], ["👍", "3"]]
    assert files.aligned(table) == ["sample  score", "------  -----", "日本語  1", "cafe\u0301    2", "👍      3"]


def test_an_aligned_table_of_latin_text_imports_no_rich() -> None:
    """A table of ASCII and Latin text ("±", "ü") is measured by ``len``: rich, imported for display widths, cost the
    rerun of a finished run 1.4 % of its instructions for its reference table's "±"."""
    code = ("import sys; from pinbench.core.files import aligned; "
            "print(aligned([['metric', 'tolerance'], ['clip', '\\u00b10.02'], ['\\u00fcber', '1']]) == "
            "['metric  tolerance', '------  ---------', 'clip    \\u00b10.02', '\\u00fcber    1'], "
            "'rich' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "False"]
