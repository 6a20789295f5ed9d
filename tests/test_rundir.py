"""One run directory: one recipe/checkpoint/mode, one live process per shard, stale locks taken over.

Holders run in real child processes (``_hold``), so liveness is the kernel's answer, not a stub's.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pinbench import cli
from pinbench.core.config import RunConfig, Shard
from pinbench.core.rundir import (
    IDENTITY_FILE,
    LOCK_DIR,
    TOKEN_ENV,
    LockHeld,
    RunDirError,
    Terminated,
    _refuse_foreign,
    claim_run_dir,
    discard_refused,
    hold_named,
    lock_name,
    terminate_as_exit,
)

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pinbench.core.config import RunConfig
    from pinbench.core.rundir import claim_run_dir
    from pinbench.core.config import Shard
    out, recipe, checkpoint, shard, fixture = sys.argv[1:6]
    cfg = RunConfig(recipe=recipe, checkpoint=checkpoint, out_dir=Path(out), limit=None if fixture == "1" else 3,
                    shard=Shard.parse(shard) if shard != "-" else None, fixture=fixture == "1")
    with claim_run_dir(cfg) as claim:
        print(claim.token, flush=True)
        time.sleep(120)
""")

TRY = textwrap.dedent("""
    import sys
    from pathlib import Path
    from pinbench.core.config import RunConfig
    from pinbench.core.rundir import claim_run_dir
    from pinbench.core.rundir import TOKEN_ENV
    token = {TOKEN_ENV: sys.argv[2]} if len(sys.argv) > 2 else {}
    with claim_run_dir(RunConfig(recipe="toy-bench", checkpoint="Toy-Nano", out_dir=Path(sys.argv[1])),
                       env=token) as claim:
        print("inherited" if claim.inherited else "own")
""")


def _cfg(out: Path, shard: str | None = None, recipe: str = "toy-bench", checkpoint: str = "Toy-Nano",
         **kw: Any) -> RunConfig:
    return RunConfig(recipe=recipe, checkpoint=checkpoint, out_dir=out, limit=kw.pop("limit", 3),
                     shard=Shard.parse(shard) if shard else None, **kw)


class Holder:
    """A child process holding a claim until killed."""

    def __init__(self, out: Path, shard: str | None = None, recipe: str = "toy-bench", fixture: bool = False) -> None:
        checkpoint = "fixture" if fixture else "Toy-Nano"
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out), recipe, checkpoint, shard or "-",
                                      "1" if fixture else "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.token = self.proc.stdout.readline().strip()
        assert self.token, self.proc.stderr.read()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        if holder.proc.poll() is None:
            holder.kill()


def _refused(cfg: RunConfig, match: str) -> str:
    with pytest.raises(RunDirError, match=match) as info:
        with claim_run_dir(cfg, env={}):
            pass
    message = str(info.value)
    assert "\n" not in message
    return message


def _keep(out: Path) -> None:
    """What a run keeps once it has computed a sample: its store's log."""
    (out / "samples").mkdir(exist_ok=True)
    (out / "samples" / "run.jsonl").write_text("")


def test_identity_is_recorded_and_another_run_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with claim_run_dir(_cfg(out), env={}):
        _keep(out)
    assert json.loads((out / IDENTITY_FILE).read_text()) == {"recipe": "toy-bench", "checkpoint": "Toy-Nano",
                                                             "mode": "smoke", "inputs": {}}
    _refused(_cfg(out, recipe="other-bench"), r"holds the run of toy-bench / Toy-Nano \(smoke\).*not other-bench")
    _refused(_cfg(out, checkpoint="Toy-Super"), "not toy-bench / Toy-Super")
    _refused(_cfg(out, limit=None), r"not toy-bench / Toy-Nano \(full\)")
    with claim_run_dir(_cfg(out, limit=5), env={}):  # the same run, resumed with another --limit
        pass


def test_a_directory_from_before_identity_files_is_judged_by_its_scorecard(tmp_path: Path) -> None:
    out = tmp_path / "legacy"
    out.mkdir()
    (out / "scorecard.json").write_text(json.dumps({"recipe": "paibench-c", "checkpoint": "fixture",
                                                    "mode": "fixture"}))
    message = _refused(_cfg(out, recipe="dynamic-degree", checkpoint="fixture", fixture=True),
                       "holds the run of paibench-c")
    assert "scorecard.json" in message and not (out / IDENTITY_FILE).exists()


@pytest.mark.parametrize("content", ["{", "[]", '{"recipe": 1}'])
def test_an_unreadable_identity_is_never_overwritten(tmp_path: Path, content: str) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / IDENTITY_FILE).write_text(content)
    _refused(_cfg(out), IDENTITY_FILE)
    assert (out / IDENTITY_FILE).read_text() == content


def test_out_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    _refused(_cfg(tmp_path / "file"), "not a directory")


def test_what_stands_in_the_way_of_the_run_directory_is_named(tmp_path: Path) -> None:
    """A dangling --out symlink or a file named .pinbench-locks: the message names that entry (it said
    'cannot create the run directory (File exists)' about the run directory)."""
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert _refused(_cfg(tmp_path / "dangling"), "dangling symlink").startswith(f"{tmp_path / 'dangling'}: ")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / LOCK_DIR).write_text("")
    message = _refused(_cfg(tmp_path / "run"), "not a directory")
    assert message.startswith(f"{tmp_path / 'run' / LOCK_DIR}: exists and is not a directory")


def test_a_run_that_kept_nothing_binds_nothing(tmp_path: Path, holders: list[Holder],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A run refused at its inputs (-o videos= naming a file) had written pinbench-run.json, and the corrected
    command was refused: "holds the run of other inputs" about a directory holding no sample. Live, it still binds."""
    out = tmp_path / "run"
    with claim_run_dir(_cfg(out), env={}):
        pass
    with claim_run_dir(_cfg(out), env={}):   # the same run again (a generator fixed, say): nothing to say
        pass
    assert capsys.readouterr().err == ""
    refused, fixed = ({"metrics": {"value": value, "fingerprint": value}} for value in ("lcm,gsc", "lcm"))
    with claim_run_dir(_cfg(out, inputs=refused), env={}):   # say its -o metrics was refused before it kept anything
        pass
    with claim_run_dir(_cfg(out, inputs=fixed), env={}):   # then corrected: still itself, nothing to say
        pass
    assert capsys.readouterr().err == ""
    assert json.loads((out / IDENTITY_FILE).read_text())["inputs"] == fixed
    with claim_run_dir(_cfg(out, recipe="other-bench"), env={}):
        pass
    assert json.loads((out / IDENTITY_FILE).read_text())["recipe"] == "other-bench"
    assert "held the run of toy-bench / Toy-Nano (smoke), which kept nothing" in capsys.readouterr().err
    (out / "scorecard.json").write_text("{}")   # a scorecard binds it as a sample store does
    _refused(_cfg(out), "holds the run of other-bench")
    busy = tmp_path / "busy"
    holders.append(Holder(busy))
    _refused(_cfg(busy, recipe="other-bench"), "holds the run of toy-bench")


def test_a_folder_of_the_users_is_no_run_directory(tmp_path: Path) -> None:
    """--out naming a folder of the user's had its scorecard.json replaced (exit 0), and --out / wrote a run into /:
    a folder holding files and none of a run's is refused before anything is written in it."""
    mine = tmp_path / "paper"
    mine.mkdir()
    (mine / "scorecard.json").write_text("keep")
    (mine / "notes.md").write_text("keep")
    message = _refused(_cfg(mine), "no run directory")
    assert message == (f"{mine}: a folder that is no run directory (it holds notes.md, scorecard.json); a run writes "
                       "scorecard.json, samples.jsonl and report/ there: pass a new or empty folder as --out")
    assert sorted(p.name for p in mine.iterdir()) == ["notes.md", "scorecard.json"]   # no .pinbench-locks either
    assert (mine / "scorecard.json").read_text() == "keep"
    with pytest.raises(RunDirError, match="^/: a folder that is no run directory"):
        _refuse_foreign(Path("/"))
    (tmp_path / "empty").mkdir()
    with claim_run_dir(_cfg(tmp_path / "empty"), env={}):   # an empty folder is a new run directory
        pass


def test_out_below_a_file_names_that_file(tmp_path: Path) -> None:
    """It named afile/sub/.pinbench-locks ('Not a directory'), not the file in the way."""
    (tmp_path / "afile").write_text("x")
    message = _refused(_cfg(tmp_path / "afile" / "sub"), "not a folder")
    assert message == (f"{tmp_path / 'afile' / 'sub'}: its parent {tmp_path / 'afile'} is a regular file, not a "
                       "folder; --out names a run directory")


@pytest.mark.parametrize(("shard", "entry", "kind", "said"), [
    (None, "scorecard.json", "folder", "a folder where the run writes a file"),
    (None, "report", "file", "a regular file where the run keeps a folder"),
    (None, "report/figures", "file", "a regular file where the run keeps a folder"),
    (None, "figures", "fifo", "a FIFO (named pipe) where the run keeps a folder"),
    (None, "figures", "dangling", "a dangling symlink where the run keeps a folder"),
    (None, "shards/0-of-1.json", "folder", "a folder where the run writes a file"),
    ("0/2", "shards", "file", "a regular file where the run keeps a folder"),
    ("1/2", "shards/1-of-2.json", "folder", "a folder where the run writes a file")])
def test_an_entry_the_run_writes_of_the_other_kind_is_named_before_anything_runs(
        tmp_path: Path, shard: str | None, entry: str, kind: str, said: str) -> None:
    """Before, the run computed every sample and ended with "[Errno 21] Is a directory: '.scorecard.json.x.tmp' ->
    ...", "[Errno 17] File exists: '.../shards'" or "[Errno 20] Not a directory: '.../report/figures'"; the claim
    it refuses leaves no lock behind, and a shard is refused only what it writes itself."""
    out = tmp_path / "run"
    with claim_run_dir(_cfg(out, shard), env={}):   # a run directory, then the entry
        pass
    path = out / entry
    path.parent.mkdir(parents=True, exist_ok=True)
    {"folder": path.mkdir, "file": lambda: path.write_text(""), "fifo": lambda: os.mkfifo(path),
     "dangling": lambda: path.symlink_to(tmp_path / "nowhere")}[kind]()
    assert _refused(_cfg(out, shard), "move it away") == f"{path}: {said}; move it away"
    assert [p.name for p in (out / LOCK_DIR).iterdir() if p.suffix == ".lock"] == []
    if shard is None and entry != "shards/0-of-1.json":
        with claim_run_dir(_cfg(out, "0/2"), env={}):   # a shard writes none of the merge's files
            pass


def test_a_live_run_refuses_a_second_one_and_names_its_holder(tmp_path: Path, holders: list[Holder]) -> None:
    out = tmp_path / "run"
    holders.append(Holder(out))
    message = _refused(_cfg(out), "in use: this run is already running")
    assert f"pid {holders[0].proc.pid} on {socket.gethostname()}" in message
    _refused(_cfg(out, "0/2"), "an unsharded run is running in it")
    lock = json.loads((out / LOCK_DIR / "run.lock").read_text())
    assert lock["pid"] == holders[0].proc.pid and lock["started"].endswith("Z") and lock["shard"] is None


def test_a_stale_lock_is_taken_over_with_a_message(tmp_path: Path, holders: list[Holder],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    holder = Holder(out)
    holders.append(holder)
    holder.kill()  # SIGKILL: no chance to release the lock
    assert (out / LOCK_DIR / "run.lock").exists()
    with claim_run_dir(_cfg(out), env={}) as claim:
        assert json.loads(claim.lock.read_text())["pid"] == os.getpid()
    assert f"taking over the stale lock {out / LOCK_DIR / 'run.lock'}: pid {holder.proc.pid}" in capsys.readouterr().err
    assert not (out / LOCK_DIR / "run.lock").exists()  # released on exit


def test_sigterm_releases_the_claim(tmp_path: Path, holders: list[Holder]) -> None:
    """Slurm ends a task at its time limit, on preemption or ``scancel`` with SIGTERM. Before, the lock stayed, and a
    resubmitted task that Slurm placed on another node was refused ("held on another host") until it was deleted
    by hand; now the process exits 143 through SystemExit and its claim is released."""
    holder = Holder(tmp_path / "run", shard="1/2")
    holders.append(holder)
    lock = tmp_path / "run" / LOCK_DIR / "shard-1-of-2.lock"
    assert lock.is_file()
    holder.proc.send_signal(signal.SIGTERM)
    assert holder.proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert not lock.exists()
    with claim_run_dir(_cfg(tmp_path / "run", "1/2"), env={}) as claim:
        assert not claim.inherited
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL   # the handler lives only as long as a claim


def test_a_sigterm_during_an_import_is_raised_once_the_import_is_done(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """C code that imports an extension module runs importlib's Python code and clears what it raises (Cython's
    module creation): a Terminated raised there was lost, and ``pinbench requests`` ran to the end and exited 0
    when SIGTERM came as MIND's fixture imported ``numpy.random``. Now the signal that comes inside an import is
    raised from the first frame after it. Here a module signals itself while it is imported: its import completes
    (before, Terminated came out of its second line), then Terminated comes."""
    (tmp_path / "signalled_while_imported.py").write_text(
        "import signal\nsignal.raise_signal(signal.SIGTERM)\nCOMPLETED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    imported = []
    with pytest.raises(Terminated) as caught, terminate_as_exit():
        import signalled_while_imported

        imported.append(signalled_while_imported.COMPLETED)
        for _ in range(500):   # the deferred signal comes RETRY_S into this (short sleeps: it may reach another thread)
            time.sleep(0.01)
    assert imported == [True] and caught.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.getsignal(signal.SIGALRM) == signal.SIG_DFL
    sys.modules.pop("signalled_while_imported", None)


def test_a_block_that_ends_before_a_deferred_signal_is_raised_ends_terminated(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal deferred out of an import is not lost when the block ends first: its end raises it."""
    (tmp_path / "signalled_at_the_end.py").write_text("import signal\nsignal.raise_signal(signal.SIGTERM)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(Terminated):
        with terminate_as_exit():
            import signalled_at_the_end  # noqa: F401
    sys.modules.pop("signalled_at_the_end", None)


def test_a_deferred_signal_outlives_an_exception_that_ends_the_block_first(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A module signalled while it is imported that then fails: its error ended the block and the deferred signal was
    dropped (the process exited with that error, or ran on where a caller caught it). Now the block still ends
    terminated, exit 143 as for any SIGTERM, the error kept as the Terminated's context."""
    (tmp_path / "signalled_then_failing.py").write_text(
        "import signal\nsignal.raise_signal(signal.SIGTERM)\nraise ValueError('broken module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(Terminated) as caught:
        try:
            with terminate_as_exit():
                import signalled_then_failing  # noqa: F401
        except ValueError:
            pass   # a caller that goes on after this error must not go on after the signal
    assert caught.value.code == 128 + signal.SIGTERM
    assert isinstance(caught.value.__context__, ValueError) and str(caught.value.__context__) == "broken module"
    assert signal.getsignal(signal.SIGTERM) == signal.getsignal(signal.SIGALRM) == signal.SIG_DFL


def test_a_sigterm_during_an_import_that_does_not_end_is_raised_after_a_while(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that works inside an import (a script's module-level loop) is still ended: the deferral waits
    DEFER_S at most, then raises where it is."""
    (tmp_path / "working_while_imported.py").write_text(
        "import signal, time\nsignal.raise_signal(signal.SIGTERM)\nfor _ in range(3000):\n    time.sleep(0.01)\n"
        "COMPLETED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    started = time.monotonic()
    with pytest.raises(Terminated), terminate_as_exit():
        import working_while_imported  # noqa: F401
    assert 2.0 <= time.monotonic() - started < 20 and "working_while_imported" not in sys.modules


SIGNALLED_IN_NUMBAS_COMPILE = textwrap.dedent("""
    import signal, sys
    import numba
    from numba.core import codegen
    from pinbench.core.rundir import Terminated, terminate_as_exit

    hook = codegen.JITCodeLibrary._object_compiled_hook.__func__
    signalled = []

    def signalling(cls, ll_module, buf):   # llvmlite calls it through its ctypes callback, on numba's first compile
        if not signalled:
            signalled.append(True)
            signal.raise_signal(signal.SIGTERM)
        hook(cls, ll_module, buf)

    codegen.JITCodeLibrary._object_compiled_hook = classmethod(signalling)
    try:
        with terminate_as_exit():
            numba.njit(lambda x: x + 1)(1)
            print("ran on after SIGTERM", signalled)
    except Terminated as exc:
        sys.exit(exc.code)
""")


@pytest.mark.parametrize("defer_s", [None, 0.0])
def test_a_sigterm_during_numbas_compile_ends_the_process(defer_s: float | None) -> None:
    """numba compiles through llvmlite's object cache hook, a ctypes callback: what a SIGTERM raised there was only
    printed ("Exception ignored on calling ctypes callback function") and consecutive_ssim went on (2 of 10 SIGTERMs
    sent during its first compile). Here the hook signals itself: the process exits 143, no traceback. With DEFER_S
    gone by (0.0: a loaded machine, where 2 s of the compile passed in callbacks), it still waits for a frame outside
    the callback: raised there once the deadline passed, it was lost (exit 0, once in a loaded test run)."""
    script = SIGNALLED_IN_NUMBAS_COMPILE if defer_s is None else SIGNALLED_IN_NUMBAS_COMPILE.replace(
        "from pinbench.core.rundir import", f"import pinbench.core.rundir\npinbench.core.rundir.DEFER_S = {defer_s}\n"
        "from pinbench.core.rundir import")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (128 + signal.SIGTERM, "", "")


def test_sighup_releases_the_claim_unless_it_is_ignored(tmp_path: Path, holders: list[Holder]) -> None:
    """A lost SSH session sends SIGHUP: the process died with its lock left and a --runtime docker stage's container
    running. Now it exits 129 through SystemExit; under nohup (SIGHUP ignored) the run goes on."""
    holder = Holder(tmp_path / "run")
    holders.append(holder)
    lock = tmp_path / "run" / LOCK_DIR / "run.lock"
    holder.proc.send_signal(signal.SIGHUP)
    assert holder.proc.wait(timeout=30) == 128 + signal.SIGHUP
    assert not lock.exists()
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)   # what nohup does; a child inherits it
    try:
        ignoring = Holder(tmp_path / "nohup")
    finally:
        signal.signal(signal.SIGHUP, previous)
    holders.append(ignoring)
    ignoring.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert ignoring.proc.poll() is None and (tmp_path / "nohup" / LOCK_DIR / "run.lock").exists()


def test_a_reused_pid_does_not_keep_a_lock_alive(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with claim_run_dir(_cfg(out), env={}):
        pass
    fake = {"pid": os.getppid(), "host": socket.gethostname(), "process_start": "1", "started": "2020-01-01T00:00:00Z",
            "shard": None, "token": "t", "argv": ["pinbench", "run"]}
    (out / LOCK_DIR / "run.lock").write_text(json.dumps(fake))
    with claim_run_dir(_cfg(out), env={}):
        pass


def test_a_lock_held_on_another_host_is_refused_with_what_to_delete(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with claim_run_dir(_cfg(out), env={}):
        pass
    lock = out / LOCK_DIR / "shard-1-of-2.lock"
    lock.write_text(json.dumps({"pid": 4242, "host": "node-17", "started": "2026-01-01T00:00:00Z", "shard": "1/2",
                                "token": "t", "argv": ["pinbench", "run"]}))
    message = _refused(_cfg(out, "1/2"), "this shard is already running: pid 4242 on node-17")
    assert f"if that process is gone, delete {lock}" in message
    lock.write_text("{garbage")
    _refused(_cfg(out), f"unreadable lock {lock}")


def test_shards_share_a_directory_but_not_a_shard(tmp_path: Path, holders: list[Holder]) -> None:
    out = tmp_path / "run"
    holders.append(Holder(out, "0/2"))
    with claim_run_dir(_cfg(out, "1/2"), env={}) as claim:  # the other shard runs beside it
        assert claim.lock.name == "shard-1-of-2.lock" and not claim.inherited
    _refused(_cfg(out, "0/2"), "this shard is already running")
    _refused(_cfg(out), "shard shard-0-of-2 of a sharded run is running in it")
    _refused(_cfg(out, "1/4"), r"shards of another split are running in it \(shard-0-of-2")
    holders[0].kill()
    with claim_run_dir(_cfg(out), env={}):  # the merge run, once every shard is done
        pass


def test_a_child_inherits_its_parents_claim_and_leaves_it_in_place(tmp_path: Path, holders: list[Holder]) -> None:
    out = tmp_path / "run"
    holder = Holder(out)
    holders.append(holder)
    with claim_run_dir(_cfg(out), env={TOKEN_ENV: holder.token}) as claim:
        assert claim.inherited
    assert (out / LOCK_DIR / "run.lock").exists()
    _refused(_cfg(out), "already running")  # a token that is not the holder's inherits nothing
    with claim_run_dir(_cfg(tmp_path / "mine"), env={}) as outer:  # re-entrant in one process
        with claim_run_dir(_cfg(tmp_path / "mine"), env={}) as inner:
            assert inner.inherited and inner.token == outer.token
        assert outer.lock.exists()


def test_lock_names() -> None:
    assert lock_name(None) == "run" and lock_name(Shard(2, 8)) == "shard-2-of-8"


# --------------------------------------------------------------------------------- through the CLI


def test_a_second_recipe_in_the_same_out_is_refused_before_its_code_runs(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: the dynamic-degree fixture scored PAI-Bench-C's videos in a shared --out."""
    out = tmp_path / "shared"
    with claim_run_dir(_cfg(out, recipe="paibench-c", checkpoint="fixture", fixture=True), env={}):
        _keep(out)
    before = sorted(p.name for p in out.iterdir())
    code, err = _cli(capsys, "run", "dynamic-degree", "--fixture", "--out", out)
    assert code == 2 and "holds the run of paibench-c / fixture (fixture)" in err
    assert "not dynamic-degree / fixture (fixture)" in err and err.count("\n") == 1
    assert sorted(p.name for p in out.iterdir()) == before  # no fixture_data/, no samples/


def test_a_concurrent_run_in_the_same_out_exits_2_in_one_line(tmp_path: Path, holders: list[Holder],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "busy"
    holders.append(Holder(out, recipe="dynamic-degree", fixture=True))
    started = time.monotonic()
    code, err = _cli(capsys, "run", "dynamic-degree", "--fixture", "--out", out)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert f"pid {holders[0].proc.pid}" in err and time.monotonic() - started < 30
    assert not (out / "samples").exists()


def _cli(capsys: pytest.CaptureFixture[str], *args: Any) -> tuple[int, str]:
    try:
        cli.main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def test_docker_stages_inherit_the_claim_of_the_calling_process(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from fake_docker import FakeDockerClient
    from toy_recipe import toy_recipe

    from pinbench.ops import docker_runtime

    recipe = toy_recipe(tmp_path / "recipes")
    videos = tmp_path / "videos"
    videos.mkdir()
    cfg = recipe.config("Toy-Nano", out_dir=tmp_path / "out", runtime="docker", options={"videos": str(videos)},
                        env={})
    seen: list[bool] = []

    def container(image: str, argv: list[str], **kwargs: Any) -> int:
        """Test double for the engine: the container's `pinbench run` claims the mounted directory."""
        assert (tmp_path / "out" / LOCK_DIR / "run.lock").exists()
        other = subprocess.run([sys.executable, "-c", TRY, str(cfg.out_dir)], capture_output=True, text=True)
        assert "this run is already running" in other.stderr  # any other process is refused meanwhile
        # The container is another process: it gets in only with the token the stage's environment carries.
        inside = subprocess.run([sys.executable, "-c", TRY, str(cfg.out_dir), kwargs["env"].get(TOKEN_ENV, "")],
                                capture_output=True, text=True)
        seen.append(inside.returncode == 0 and inside.stdout.strip() == "inherited")
        return 0

    monkeypatch.setattr(docker_runtime, "run_in_container", container)
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    # The engine test double answers the image look-ups every stage needs before the first one starts.
    assert docker_runtime.run_in_docker(recipe, cfg, client=FakeDockerClient(), caller=(1000, 1000),
                                        log=lambda line: None) == 0
    assert seen == [True, True, True]  # fetch, generate, score
    assert not (tmp_path / "out" / LOCK_DIR / "run.lock").exists()


# ------------------------------------------------------------------------------ a directory belongs to its inputs


def _videos(folder: Path, n: int) -> Path:
    folder.mkdir()
    for i in range(n):
        (folder / f"v{i}.mp4").write_bytes(b"x" * (10 + i))
    return folder


def test_the_identity_keeps_no_secret_an_option_or_path_holds(tmp_path: Path) -> None:
    """-o VALUE holding a token (a path, an endpoint's password) was written whole to pinbench-run.json as its
    value and, for a string, as its fingerprint too; another token is still other inputs."""
    from toy_recipe import DECLARATION, toy_recipe

    token, other = "ghp_" + "A1b2C3d4E5" * 4, "ghp_" + "Z9y8X7w6V5" * 4
    options = {**DECLARATION["options"], "endpoint": {"type": "str", "help": "where the model answers"}}
    recipe, videos = toy_recipe(tmp_path / "recipes", options=options), _videos(tmp_path / token, 1)
    out = tmp_path / "run"
    with claim_run_dir(recipe.config("Toy-Nano", out_dir=out, options={"videos": str(videos), "endpoint": token},
                                     env={}), env={}):
        _keep(out)
    written = (out / IDENTITY_FILE).read_text()
    assert token not in written and json.loads(written)["inputs"]["endpoint"]["value"] == "***"
    with claim_run_dir(recipe.config("Toy-Nano", out_dir=out, options={"videos": str(videos), "endpoint": token},
                                     env={}), env={}):
        pass   # the same token: the same inputs
    _refused(recipe.config("Toy-Nano", out_dir=out, options={"videos": str(videos), "endpoint": other}, env={}),
             r"-o endpoint=\*\*\* then, \*\*\* now")


def test_a_run_on_other_inputs_is_refused_and_names_what_differs(tmp_path: Path) -> None:
    """Issue #21.3: the same --out with another videos folder, or an option that changes results, is refused in
    one line naming the option; a move of the same files elsewhere, or an option that changes nothing, is not."""
    from toy_recipe import toy_recipe

    recipe, videos = toy_recipe(tmp_path / "recipes"), _videos(tmp_path / "videos", 3)
    out = tmp_path / "run"
    first = recipe.config("Toy-Nano", out_dir=out, options={"videos": str(videos)}, env={})
    with claim_run_dir(first, env={}):
        _keep(out)
    assert json.loads((out / IDENTITY_FILE).read_text())["inputs"]["videos"]["value"] == str(videos)
    other = _videos(tmp_path / "other", 2)
    message = _refused(recipe.config("Toy-Nano", out_dir=out, options={"videos": str(other)}, env={}),
                       f"holds the run of other inputs \\(-o videos={videos} then, {other} now\\)")
    assert "pass another --out, or --move-aside" in message and "\n" not in message
    _refused(recipe.config("Toy-Nano", out_dir=out, options={"videos": str(videos), "mode": "slow"}, env={}),
             "-o mode=fast then, slow now")
    (videos / "v0.mp4").write_bytes(b"longer than before")  # the folder's content changed under the same name
    _refused(recipe.config("Toy-Nano", out_dir=out, options={"videos": str(videos)}, env={}),
             r"\(its content changed: v0.mp4 changed\)\);")
    (videos / "v0.mp4").write_bytes(b"x" * 10)
    moved = tmp_path / "mounted" / "elsewhere"
    moved.parent.mkdir()
    videos.rename(moved)  # the same files at another path: the same inputs
    with claim_run_dir(recipe.config("Toy-Nano", out_dir=out, options={"videos": str(moved)}, env={}), env={}):
        pass


def test_a_changed_input_folder_is_named_by_its_files(tmp_path: Path) -> None:
    """A rerun on a folder whose files changed names the first three added, removed or changed (by path under the
    folder) and how many more, from the listing kept beside the identity (which holds one fingerprint per option);
    a directory from before that listing says only that the content changed."""
    from toy_recipe import toy_recipe

    from pinbench.core.rundir import INPUT_FILES

    recipe, videos = toy_recipe(tmp_path / "recipes"), _videos(tmp_path / "videos", 6)
    (videos / "sub").mkdir()
    (videos / "sub" / "deep.mp4").write_bytes(b"d")
    out = tmp_path / "run"
    def cfg() -> RunConfig:  # the inputs as they are now
        return recipe.config("Toy-Nano", out_dir=out, options={"videos": str(videos)}, env={})

    with claim_run_dir(cfg(), env={}):
        _keep(out)
    assert "v0.mp4" not in (out / IDENTITY_FILE).read_text()  # the identity stays one fingerprint per option
    (videos / "v0.mp4").write_bytes(b"changed")
    (videos / "v7.mp4").write_bytes(b"new")
    _refused(cfg(), r"\(its content changed: v0.mp4 changed, v7.mp4 added\)\);")
    (videos / "sub" / "deep.mp4").unlink()
    for name in ("v1.mp4", "v2.mp4"):
        (videos / name).unlink()
    _refused(cfg(), r"\(its content changed: sub/deep.mp4 removed, v0.mp4 changed, v1.mp4 removed; and 2 more\)\);")
    (out / INPUT_FILES).unlink()  # a run directory from before the listing
    _refused(cfg(), r"\(its content changed\)\);")


def test_the_input_listing_names_no_file_named_like_a_token(tmp_path: Path) -> None:
    """The listing kept beside the identity held every input's name, a token's (hf_....mp4) too, in the run
    directory: such a name is kept as *** and 12 digits of its SHA-256, and a change in it is still named apart."""
    import hashlib

    from toy_recipe import toy_recipe

    from pinbench.core.rundir import INPUT_FILES

    recipe, videos = toy_recipe(tmp_path / "recipes"), _videos(tmp_path / "videos", 2)
    token = "hf_" + "Ab3De6Gh9Jk2Mn5Pq8St"
    (videos / f"{token}.mp4").write_bytes(b"t")
    out = tmp_path / "run"
    def cfg() -> RunConfig:  # the inputs as they are now
        return recipe.config("Toy-Nano", out_dir=out, options={"videos": str(videos)}, env={})

    with claim_run_dir(cfg(), env={}):
        _keep(out)
    listing = (out / INPUT_FILES).read_text()
    assert token not in listing and "v0.mp4" in listing
    (videos / f"{token}.mp4").write_bytes(b"changed")
    shown = hashlib.sha256(f"{token}.mp4".encode()).hexdigest()[:12]
    _refused(cfg(), rf"\(its content changed: \*\*\* {shown} changed\)\);")


def test_move_aside_keeps_the_earlier_run_and_frees_the_directory(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pinbench.cli import app
    from pinbench.core.rundir import move_aside

    out = tmp_path / "run"
    with claim_run_dir(_cfg(out), env={}):
        (out / "scorecard.json").write_text("{}")
    moved = move_aside(out)
    assert moved.parent == tmp_path and moved.name.startswith("run.aside-") and (moved / "scorecard.json").is_file()
    assert not out.exists() and move_aside(out) is None
    result = CliRunner().invoke(app, ["run", "dynamic-degree", "--fixture", "--out", str(moved), "--move-aside"])
    assert "moved the earlier run to" in result.output and result.exit_code == 0, result.output
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith(moved.name + ".aside-")]
    assert (aside / "scorecard.json").read_text() == "{}"  # the earlier run, kept as it was
    assert json.loads((moved / "scorecard.json").read_text())["recipe"] == "dynamic-degree"  # the new one


def test_a_second_move_aside_in_the_same_second_takes_the_next_name(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Two moves of one --out within a second named one folder: the second ended in "[Errno 39] Directory not
    empty" (and a file there in "Not a directory")."""
    from pinbench.core import rundir

    out = tmp_path / "run"
    taken = tmp_path / "run.aside-20261206T031610Z"
    monkeypatch.setattr(rundir, "aside_path", lambda _: taken)
    taken.mkdir()
    (taken / "scorecard.json").write_text("first")
    (tmp_path / "run.aside-20261206T031610Z-2").write_text("a file")
    out.mkdir()
    (out / "scorecard.json").write_text("second")
    moved = rundir.move_aside(out)
    assert moved == tmp_path / "run.aside-20261206T031610Z-3" and not out.exists()
    assert (moved / "scorecard.json").read_text() == "second" and (taken / "scorecard.json").read_text() == "first"


KILLED_CLAIM = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from pinbench.core.config import RunConfig
    from pinbench.core.rundir import claim_run_dir
    os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)  # killed between the write and the rename
    with claim_run_dir(RunConfig(recipe="toy-bench", checkpoint="Toy-Nano", out_dir=Path(sys.argv[1]), limit=3)):
        pass
""")


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_claim_killed_while_writing_the_identity_leaves_no_temporary_file_after_the_next_claim(
        tmp_path: Path) -> None:
    """#30 B6: one .pinbench-run.json.*.tmp was left in 10 kills of MIND runs."""
    out = tmp_path / "run"
    killed = subprocess.run([sys.executable, "-c", KILLED_CLAIM, str(out)], capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    (left,) = _temporaries(out)
    assert left.startswith(f".{IDENTITY_FILE}.")
    with claim_run_dir(_cfg(out, "1/2")):  # any claim: the identity is written under the claims' mutex only
        assert _temporaries(out) == []


def _left_by_a_killed_writer(path: Path) -> Path:
    """What ``atomic_path`` leaves when its process is killed before the rename (test double of that process)."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    return Path(name)


def test_an_unsharded_claim_removes_what_killed_writers_left_and_a_shard_claim_only_its_own(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with claim_run_dir(_cfg(out)):
        pass
    theirs = [_left_by_a_killed_writer(out / name) for name in ("scorecard.json", "report/index.html",
                                                                "shards/1-of-2.json", "samples/run.jsonl",
                                                                "samples/shard-1-of-2.jsonl")]
    mine = [_left_by_a_killed_writer(out / name) for name in ("shards/0-of-2.json", "samples/shard-0-of-2.jsonl")]
    with claim_run_dir(_cfg(out, "0/2")):  # shard 1 may be live: only shard 0's own files are certain to be dead
        assert [p.exists() for p in theirs + mine] == [True] * len(theirs) + [False] * len(mine)
    with claim_run_dir(_cfg(out)):  # no shard runs beside an unsharded run
        assert not any(p.exists() for p in theirs)


def test_a_lock_names_its_holders_command_with_what_it_leaves_out_and_no_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "run"
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz0123")
    argv = ["pinbench", "run", "toy-bench", "--checkpoint", "Toy-Nano", "--out", str(out), "-o", "a=1", "-o",
            "token=hf_abcdefghijklmnopqrstuvwxyz0123", "-o", "b=2", "-o", "c=3"]
    monkeypatch.setattr(sys, "argv", argv)
    with claim_run_dir(_cfg(out), env={}) as claim:
        kept = json.loads(claim.lock.read_text())["argv"]
    assert kept[:10] == argv[:10] and "hf_abc" not in json.dumps(kept)
    assert kept[10] == "token=***" and kept[12:] == ["... (3 more)"]


def test_a_refused_claim_keeps_a_directory_another_shard_holds(tmp_path: Path) -> None:
    """A refused shard removes the directory its claim created only when no other process holds a lock there: the
    other shards' run goes on in it."""
    out = tmp_path / "new" / "run"
    with claim_run_dir(_cfg(out, "0/2"), env={}) as first:
        assert first.created == tmp_path / "new"
        with claim_run_dir(_cfg(out, "1/2"), env={}) as second:
            assert second.created is None
            discard_refused(first)
            assert (out / IDENTITY_FILE).is_file()
        discard_refused(first)
        assert not (tmp_path / "new").exists()


def test_a_folder_above_the_out_that_cannot_be_looked_into_holds_no_run_as_far_as_out_is_told(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user's folder (mode 0700) above --out: ``Path.exists`` raises PermissionError there (root, as these
    tests run, is never refused, hence the stand-in); ``enclosing_run`` says no run, not a traceback."""
    from pinbench.core.rundir import IDENTITY_FILE, enclosing_run

    locked = tmp_path / "locked"
    real_exists = Path.exists

    def exists(path: Path, *args: Any, **kwargs: Any) -> bool:
        if path == locked / IDENTITY_FILE:
            raise PermissionError(13, "Permission denied", str(path))
        return real_exists(path, *args, **kwargs)
    monkeypatch.setattr(Path, "exists", exists)
    assert enclosing_run(locked / "out") is None
    (tmp_path / IDENTITY_FILE).write_text("{}")   # a run above it is still found (an unreadable identity: one)
    assert enclosing_run(locked / "out") == (tmp_path.resolve(), str(tmp_path.resolve() / IDENTITY_FILE))


def test_a_live_lock_that_names_no_token_is_another_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock file naming no token (written by hand, or by another tool) was taken for this process's own where this
    process holds no claim token (``None == None``): ``alone_in`` said the run was alone, so a generating run removed
    the partial rollouts of the live process holding it, and a claim of that lock's shard failed on a KeyError."""
    from pinbench.core.rundir import alone_in

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    out = tmp_path / "run"
    (out / LOCK_DIR).mkdir(parents=True)
    (out / LOCK_DIR / f"{lock_name(None)}.lock").write_text(json.dumps(
        {"pid": os.getppid(), "host": socket.gethostname(), "started": "2026-01-01T00:00:00Z", "shard": None}))
    with alone_in(out) as alone:
        assert not alone
    _refused(_cfg(out), f"^{out}: in use: this run is already running: pid {os.getppid()} ")


def test_a_tokenless_lock_naming_this_pid_is_a_stale_one_taken_over(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A lock naming this process's pid and host but no token was written by a process gone whose pid this one now
    has (a container's, whose pids repeat): every claim this process makes names a token. It was taken for this
    process's own claim, which then failed on a KeyError ('token')."""
    out = tmp_path / "run"
    (out / LOCK_DIR).mkdir(parents=True)
    lock = out / LOCK_DIR / f"{lock_name(None)}.lock"
    lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": "2026-01-01T00:00:00Z",
                                "shard": None}))
    with claim_run_dir(_cfg(out), env={}) as claim:
        assert not claim.inherited and json.loads(lock.read_text())["token"] == claim.token
    assert f"taking over the stale lock {lock}" in capsys.readouterr().err


def test_a_lock_naming_no_possible_pid_or_a_command_that_is_no_list_is_read_never_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A lock edited by hand or written by another tool: a pid past any pid on this host made ``os.kill`` raise
    OverflowError, a traceback from a run's claim; an ``argv`` of 5 one of "'int' object is not iterable"
    where the holder is named. The pid names no process (the lock is stale, taken over); such an argv names no
    command."""
    out = tmp_path / "run"
    with claim_run_dir(_cfg(out), env={}) as claim:
        lock = claim.lock
    lock.write_text(json.dumps({"pid": 2 ** 70, "host": socket.gethostname(), "started": "x", "argv": 5}))
    with claim_run_dir(_cfg(out), env={}):
        pass
    assert f"taking over the stale lock {lock}: pid {2 ** 70} on {socket.gethostname()} since x (unsharded: ?)" in (
        capsys.readouterr().err)
    held = tmp_path / "held.lock"
    held.write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": "x", "argv": 5}))
    fd = os.open(held, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(LockHeld) as refused:
            hold_named(held, 0o644)
        assert refused.value.who == "pid 1 on elsewhere since x: "
    finally:
        os.close(fd)
