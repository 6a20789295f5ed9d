"""A run's generation step: the requests' rollouts made by the generator given on the command line, each one stored
as soon as it is checked, reused only by the same request and the same generator.

``--generator`` takes three forms, one protocol (``pinbench.core.generation``): ``python:pkg.module:factory``,
``NAME`` (shipped, declared by the recipe, or registered under the entry-point group ``pinbench.generators``) and
``command:ARGV``; docs/bring-your-model.md says what each takes, and how GPUs and time limits apply.

Why a worker process: a Python generator holds its model across requests, but one that hangs must be stopped
without stopping the run. It runs in a child (``python -m pinbench.ops.generation``) that builds it once and answers
one request at a time; past ``--generation-timeout`` seconds the child is killed, the request fails by name, and the
next request starts a fresh child. What a generator prints goes to the run's log, secrets redacted
(``_RedactedLog``), never into the protocol.

Every rollout is checked against its request before it is kept (``check_rollout``), and renamed into place only
after the check, so a kill at any point leaves either a checked, recorded rollout or nothing that is reused.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import errno
import functools
import glob
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import io
import json
import os
import re
import resource
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import tokenize
import traceback
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from stat import S_ISREG
from typing import Any

from pinbench.core.config import RecipeError, Shard, device_file_name, gpu_devices
from pinbench.core.files import (
    FileError,
    FileState,
    atomic_path,
    blocking_parent,
    clipped,
    counted,
    exclusive,
    fitting_name,
    loads_finite_json,
    read_data_file,
    read_regular_text,
    regular_sha256,
    sha256_file,
    sha256_regular,
    symlink_on_the_way,
    write_if_changed,
)
from pinbench.core.generation import (
    KINDS,
    PARTIAL_ROLLOUT,
    REQUESTS_FILE,
    ROLES,
    Capabilities,
    Generated,
    Generator,
    Request,
    Signature,
    refuse,
    requests_digest,
    requests_text,
    unasked_lines,
)
from pinbench.core.inputs import InputDigests, InputFileError
from pinbench.core.jsonfields import JsonBlock
from pinbench.core.notices import notice
from pinbench.core.options import OFFLINE_VARS, OptionError, boolean
from pinbench.core.processes import exited, reap
from pinbench.core.provenance import one_line, printable, redact, scrub, secret_flag_values
from pinbench.core.recipe import Recipe
from pinbench.core.run import GENERATION, Run, die_with_parent
from pinbench.core.rundir import Refused, alone_in, lock_name, process_stat
from pinbench.core.runner import Reason, RunSummary, SampleFailed, SampleRecord, Stale, input_hash, load_records
from pinbench.core.sample_cache import PRUNE, SIZE_ENV, SampleCache, misplaced, planted
from pinbench.core.store import Stored
from pinbench.core.task import Task

ENTRY_POINTS = "pinbench.generators"
SHIPPED = {"static": "pinbench.ops.generators:static", "diffusers": "pinbench.ops.generators:diffusers",
           "folder": "pinbench.ops.generators:folder"}
# shipped generators that need nothing beyond pinbench, so every recipe image holds them (``--runtime docker`` runs
# them there); not ``diffusers``: no recipe's requirements.lock has its package
IN_EVERY_IMAGE = frozenset({"static", "folder"})
DEFAULT_TIMEOUT_S = 3 * 3600.0
GENERATOR_FILE = "generator.json"   # in the run's GENERATION folder: who made its stored rollouts
FPS_TOLERANCE = 1e-3   # relative: a container's rate is a fraction (24000/1001 written as 23.976)


@dataclass(frozen=True, slots=True)
class RolloutTask(Task):
    """A rollout to make: its request's digest (the generator is judged by the stored record's signature, so that
    the summary says "generator changed" rather than "inputs or options changed") and, for the ``folder``
    generator, the SHA-256 of the file it copies (``folder_sources``; None: another generator, not hashed), so that
    a file changed there makes its own rollout again and no other."""

    request: str
    source: str | None = None


class GeneratorError(Reason, RuntimeError):
    """A generator failed one request, or did not finish it in time (said in one line, its record without a class
    name; the sample fails by name, the run goes on)."""


class InvalidRollout(Reason, ValueError):
    """A rollout the generator made that is not what its request asks (``check_rollout``), or made elsewhere than
    where it was told: its record says ``invalid rollout: OUTPUT: ...``, a file that is there, not a missing one."""


INVALID, NO_ROLLOUT = "invalid rollout: ", "no rollout: "   # the leads of a reason that says what is at its place


def not_made(error: str) -> str:
    """Why a sample is not scored, from its failed generation record's ``error``: one that says what is at its place
    as it is (an invalid rollout: the file is there), any other said as ``no rollout: ...``."""
    return error if error.startswith((INVALID, NO_ROLLOUT)) else f"{NO_ROLLOUT}{error}"


class RolloutBlocked(SampleFailed):
    """Where a rollout goes is taken by what no rollout may replace (a folder, a file where its folder goes): said
    in one line naming it, the sample fails, and what is there is left as it is (it may be someone's)."""


@dataclass(frozen=True)
class GeneratorSpec:
    """``--generator`` as given, its ``-g`` options and the per-request time limit."""

    spec: str
    options: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        command_of(self.spec)   # refused before any run: it does not split, or names no placeholder

    @property
    def command(self) -> list[str] | None:
        return command_of(self.spec)


def command_of(spec: str) -> list[str] | None:
    """The argv of a ``command:`` spec (``command_argv``); None for the other forms."""
    return command_argv(spec) if spec.startswith("command:") else None


def command_argv(spec: str) -> list[str]:
    """A ``command:`` spec's argv; RecipeError, one line naming the flag and the command (redacted), when it does not
    split (an unclosed quote), names a placeholder that is not one (``{output}`` for ``{out}`` was passed to the
    command as it was written), names no ``{out}`` or no program at all."""
    try:
        argv = shlex.split(spec.removeprefix("command:"))
    except ValueError as exc:
        # a secret flag's value (--token VALUE) is kept only once it splits: hidden here from its words
        shown = redact(spec, secret_flag_values(spec.split()))
        raise RecipeError(f"--generator {shown}: {exc} (it is split as a shell would split it)") from None
    flag = f"--generator {redact(spec, secret_flag_values(argv))}"   # its secret flags' values hidden
    if not argv:   # refused here, before the run begins (--move-aside, the docker image check), as no {out} is
        raise RecipeError(f"{flag}: names no program to run: give command:PROGRAM ARGS... with {{out}} among them")
    braced = [b for arg in argv for b in _braced(arg)]   # every {name}, ${name} and {{literal}} of its words
    unpaired = [b for b in braced if not b.paired]
    if unpaired:   # Python's format refuses it too ("Single '}' encountered")
        b = unpaired[0]
        raise RecipeError(f"{flag}: {b.text}: an unpaired brace around {{{b.name}}} (each {{{{ and }}}} is a literal "
                          f"brace, as Python's format reads them): write {{{b.name}}} for the path, {{{{{b.name}}}}} "
                          f"for a literal {{{b.name}}}")
    unknown = sorted({b.name for b in braced if b.placeholder and b.name not in PLACEHOLDERS})
    if unknown:
        name = unknown[0]
        raise RecipeError(f"{flag}: unknown placeholder {{{name}}} (known: "
                          f"{', '.join(f'{{{p}}}' for p in PLACEHOLDERS)}; write {{{{{name}}}}} for a literal "
                          f"{{{name}}})")
    at, strings = _wrapped(argv)   # the program, after the wrappers before it (in env -S's string, if any)
    program = [b.name for b in (_braced(argv[at]) if at < len(argv) and not strings else [])
               if b.text == argv[at] and b.placeholder and b.name in PLACEHOLDERS]
    if program:   # (command:{out} ran the rollout's path, which is not there yet, for every sample)
        raise RecipeError(f"{flag}: its program is {{{program[0]}}}, a path the run fills in, not a program: give "
                          "command:PROGRAM ARGS... with {out} among the arguments")
    script = None if strings else _interpreted(argv, at)   # python {request} ran the request's JSON as Python
    run_as = [b.name for b in _braced(script or "") if b.placeholder and b.name in PLACEHOLDERS]
    if run_as:
        name = os.path.basename(argv[at])
        raise RecipeError(f"{flag}: {name} runs {{{run_as[0]}}} as its script, a path the run fills in (the "
                          f"request's JSON, the rollout), not a program: name the script first: {name} gen.py "
                          "{request} {out}")
    split = [b.name for words in _wrapped(argv)[1] for b in _braced(words) if not b.literal and b.name in PLACEHOLDERS]
    if split:
        raise RecipeError(f"{flag}: {{{split[0]}}} inside env's -S (--split-string) string is split "
                          "into words by env itself, so a path with a space breaks the command; pass the paths as "
                          f"words after the string: env -S 'gen --request' {{request}} --out {{out}}")
    shell, script = _shell_script(argv) or ("", "")
    arguments = (f"pass the paths as the script's arguments: {shell} -c 'gen --request \"$1\" --out \"$2\"' {shell} "
                 "{request} {out}")
    pasted = [b.name for b in _braced(script) if b.placeholder and b.name in PLACEHOLDERS]
    if pasted:
        raise RecipeError(f"{flag}: {{{pasted[0]}}} inside a {shell} -c script is pasted in unquoted, "
                          f"so a path with a space or a quote breaks the script; {arguments}")
    # bash -c 'gen --out ${out}': the shell's own variable, passed as written, which no one set: the shell read it
    # empty (one the script or env sets, out="$1", or a loop or read binds, for out in "$@", is the script's own)
    unset = [(text, name) for text, name in _expanded(script) if name in PLACEHOLDERS
             and not _bound(name, script, " ".join(argv[:_wrapped(argv)[0]]))]
    if unset:
        text, name = unset[0]
        raise RecipeError(f"{flag}: {text} inside a {shell} -c script is the shell's variable {name}, which the "
                          f"command never sets (the run fills {{{name}}}, not {text}), so the script reads it empty; "
                          f"{arguments}")
    python = os.path.basename(argv[at]) if at < len(argv) else ""
    unquoted = _outside_strings(_interpreted(argv, at, code=True) or "") if not strings else []
    if unquoted:   # python -c "open({out}, 'wb')": a SyntaxError for every sample, after the run began
        raise RecipeError(f"{flag}: {{{unquoted[0]}}} in {python} -c code is outside a string, so the path is pasted "
                          "in as code (a SyntaxError); pass the paths as the code's arguments, as a quoted one breaks "
                          f"on a path with a quote: {python} -c 'import sys; gen(sys.argv[1], sys.argv[2])' "
                          "{request} {out}")
    dollar = sorted({b.name for arg in argv if arg != script for b in _braced(arg)
                     if b.shell and b.name in PLACEHOLDERS})
    if dollar:   # no shell reads the argv's words: the command got ${out} as written
        raise RecipeError(f"{flag}: ${{{dollar[0]}}} is no variable (no shell reads the command's "
                          f"words): write {{{dollar[0]}}} for the path")
    # the command learns where to write only from {out} (the request's file holds no path, and a rollout written
    # elsewhere is refused): without it every sample failed, after the run began
    if not any(b.placeholder and b.name == "out" for b in braced):
        raise RecipeError(f"{flag}: its argv names no {{out}}, so it is never told where to write the "
                          "rollout: add {out} (a word of its own, or a shell script's argument: "
                          "sh -c 'gen --out \"$1\"' sh {out})")
    return argv


SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"})   # whose -c runs its next operand as a script
# a shell's options whose value is the next word (set -o NAME, shopt -O NAME, bash's)
SHELL_VALUED = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


@dataclass(frozen=True)
class _Wrapper:
    """A program that runs the command after its own options and operand (``timeout 1h``, ``nice -n 5``): the
    program that counts is the one it runs."""
    valued: frozenset[str] = frozenset()   # its options whose value is the next word (``-u``, ``--user``)
    # it takes one word before the command, whatever its shape (timeout's DURATION: 1e3 and inf run too)
    operand: bool = False
    assigns: bool = False                  # it takes VAR=value words before the command (env, sudo)
    # its options end at its first VAR=value or at "--", VAR=value words still following that "--" (GNU env's
    # getopt stops at its first operand: env A=1 -S runs a program named -S); sudo reads options again after one
    ordered: bool = False
    # its valued options whose value it splits into words itself (env -S 'bash -c ...'): a path there is split too
    splits: frozenset[str] = frozenset()
    # a lone "-" as its first operand ("--" before it or not) is an option that ends its options (GNU env's -i: env
    # -- - A=1 sh -c 'echo $A' says 1, env - -u X sh runs a program named -u)
    dash: bool = False

    def command(self, argv: Sequence[str], at: int) -> tuple[int, list[str]]:
        """Where the command it runs starts in ``argv``, its own words starting at ``at``, and the values of its
        ``splits`` options there."""
        split: list[str] = []
        reading = True   # options may come yet
        operand = False   # an operand came (a NAME=VALUE, or its lone "-")
        while at < len(argv):
            arg = argv[at]
            if self.dash and arg == "-" and not operand:
                at, reading, operand = at + 1, False, True
                continue
            if self.assigns and "=" in arg and arg[:1] != "-":
                at, reading, operand = at + 1, reading and not self.ordered, True
                continue
            if not reading or arg[:1] != "-":
                break
            at += 1
            if arg == "--":
                if self.ordered:
                    reading = False
                    continue
                break
            # the valued option this word names (more where a prefix is ambiguous), and its value
            options: list[str] = []
            value = ""
            if arg.startswith("--"):   # --name=value is one word; getopt_long takes --sig for --signal
                name, equals, value = arg.partition("=")
                options = [o for o in self.valued if o.startswith("--") and o.startswith(name)]
                if options and not equals:
                    value, at = argv[at] if at < len(argv) else "", at + 1
            elif arg[:1] == "-":
                # a cluster of short options (-Eu USER, -oL, -n5): its first valued one takes the rest, else the
                # next word
                valued = next((n for n, c in enumerate(arg[1:], 1) if f"-{c}" in self.valued), None)
                if valued is not None:
                    options, value = [f"-{arg[valued]}"], arg[valued + 1:]
                    if valued == len(arg) - 1:
                        value, at = argv[at] if at < len(argv) else "", at + 1
            if self.splits.intersection(options):
                split.append(value)
        return at + self.operand, split


# the wrappers a user puts before a shell, as GNU coreutils, util-linux and sudo take their options
WRAPPERS = {
    "env": _Wrapper(frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), assigns=True,
                    ordered=True, splits=frozenset({"-S", "--split-string"}), dash=True),
    "sudo": _Wrapper(frozenset({"-C", "--close-from", "-D", "--chdir", "-g", "--group", "-p", "--prompt", "-R",
                                "--chroot", "-r", "--role", "-T", "--command-timeout", "-t", "--type", "-U",
                                "--other-user", "-u", "--user"}), assigns=True),
    "nice": _Wrapper(frozenset({"-n", "--adjustment"})),
    "timeout": _Wrapper(frozenset({"-s", "--signal", "-k", "--kill-after"}), operand=True),
    "nohup": _Wrapper(),
    "stdbuf": _Wrapper(frozenset({"-i", "--input", "-o", "--output", "-e", "--error"})),
    "ionice": _Wrapper(frozenset({"-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u",
                                  "--uid"})),
    "taskset": _Wrapper(operand=True),   # a MASK, or with -c a LIST
    "chrt": _Wrapper(frozenset({"-T", "--sched-runtime", "-P", "--sched-period", "-D", "--sched-deadline"}),
                     operand=True),   # the priority
    "setsid": _Wrapper(),
}


def _wrapped(argv: Sequence[str]) -> tuple[int, list[str]]:
    """Where the program starts in ``argv``, after the ``WRAPPERS`` before it, and the strings those wrappers split
    into words themselves (``env -S``)."""
    at, split = 0, []
    while at < len(argv) and os.path.basename(argv[at]) in WRAPPERS:
        at, values = WRAPPERS[os.path.basename(argv[at])].command(argv, at + 1)
        split += values
    return at, split


def _shell_script(argv: Sequence[str]) -> tuple[str, str] | None:
    """The shell (its name) and the ``-c`` script it runs in ``argv`` (``sh -c '...'``, ``env A=1 bash -ec '...'``,
    ``timeout 1h nice -n 5 bash -c '...'``); None: the program (after the ``WRAPPERS`` before it, an unknown one
    being the program) is no shell, or runs no script. A placeholder there would be pasted into shell code, not
    passed as one argument. Only the program counts: a program's own ``--shell bash -c {request}`` passes it as one
    argument."""
    shell = _wrapped(argv)[0]
    if shell >= len(argv) or os.path.basename(argv[shell]) not in SHELLS:
        return None
    command_string, takes_value = False, False
    for arg in argv[shell + 1:]:
        if takes_value:
            takes_value = False
        elif arg in SHELL_VALUED:   # the next word is the option's value, not the script
            takes_value = True
        elif arg[:1] in "-+" and len(arg) > 1:
            command_string = command_string or (arg[:2] != "--" and "c" in arg[1:])
        else:
            return (os.path.basename(argv[shell]), arg) if command_string else None
    return None


# $name, and ${name} or ${#name}, ${name%x}, ${name:0:3}, ${name[0]} (which read it), not ${name:-x}, ${name+x}
# (which a script writes for a variable that may be unset)
_VARIABLE = re.compile(r"\$(?:\{#?(?P<braced>[A-Za-z_]\w*)(?=[}%#/^,@[]|:(?![-=?+]))|(?P<bare>[A-Za-z_]\w*))")
_HEREDOC = re.compile(r"(?<!<)<<(?!<)(?P<strip>-?)[ \t]*(?P<word>(?:[^\s;&|()<>'\"\\]|\\.|'[^']*'|\"[^\"]*\")+)")
_ARITHMETIC_NAME = re.compile(r"(?<![\w#${.@])[A-Za-z_]\w*")   # not 16#ff's ff, 0x1f's x1f, nor $x (read as $x)


def _expanded(script: str, body: bool = False) -> list[tuple[str, str]]:
    """The variables a shell script reads (text as written, name), as a shell reads them: ``$name``,
    ``${name...}`` (not ``${name:-default}``, written for one that may be unset), a name in ``$((...))``; not inside
    single quotes (``'$out'`` is those four characters), not escaped (``\\$out``), not in a comment or a quoted
    here-document (``<<'EOF'``), the whole name (``$outdir`` is ``outdir``). ``body``: an unquoted here-document's
    text, where quotes and ``#`` are characters."""
    found, at, double, pending = [], 0, False, []
    outer: list[list[Any]] = []   # each $( inside double quotes: whether the quotes were open, its ( depth
    while at < len(script):
        char = script[at]
        code = not double and not body
        if char == "\\":
            at += 2
        elif char == "'" and code:   # to the closing quote ($'...' too, whose \' does not close it)
            ansi = script[at - 1:at] == "$"
            at += 1
            while at < len(script) and script[at] != "'":
                at += 2 if ansi and script[at] == "\\" else 1
            at += 1
        elif char == '"' and not body:
            double, at = not double, at + 1
        elif char == "#" and code and script[at - 1:at] in ("", " ", "\t", "\n", ";", "&", "|", "(", ")"):
            at = script.find("\n", at) if "\n" in script[at:] else len(script)   # a comment, to its line's end
        elif code and (heredoc := _HEREDOC.match(script, at)):
            word = heredoc["word"]
            quoted = any(q in word for q in "'\"\\")
            pending.append((re.sub(r"\\(.)|['\"]", r"\1", word), quoted, bool(heredoc["strip"])))
            at = heredoc.end()
        elif char == "\n" and code and pending:   # the here-documents begin on the next line, in their order
            at += 1
            for delimiter, quoted, strip in pending:
                while at < len(script):
                    end = script.find("\n", at) if "\n" in script[at:] else len(script)
                    line = script[at:end]
                    if (line.lstrip("\t") if strip else line) == delimiter:
                        at = end + 1
                        break
                    if not quoted:
                        found += _expanded(line, body=True)
                    at = end + 1
            pending = []
        elif double and script.startswith("$(", at) and not script.startswith("$((", at):
            outer.append([double, 0])   # code of its own: "$(echo '$out')" is text
            double, at = False, at + 2
        elif outer and code and char in "()":
            outer[-1][1] += 1 if char == "(" else -1
            if outer[-1][1] < 0:
                double = outer.pop()[0]
            at += 1
        elif script.startswith("$((", at):
            depth, end = 0, at + 1
            while end < len(script):
                depth += {"(": 1, ")": -1}.get(script[end], 0)
                end += 1
                if depth == 0:
                    break
            inside = script[at + 3:end - 2]
            if not re.search(r"[;\n]", inside):   # not $( (cd x; gen) ), a subshell in a command substitution
                found += [(script[at:end], m[0]) for m in _ARITHMETIC_NAME.finditer(inside)]
            at += 3
        elif char == "$" and (match := _VARIABLE.match(script, at)):
            name = match["braced"] or match["bare"]
            text = match[0] if match["bare"] else script[at:script.find("}", at) + 1 or len(script)]
            found.append((text, name))
            at = match.end()
        else:
            at += 2 if script.startswith("$$", at) else 1
    return found


def _bound(name: str, script: str, before: str) -> bool:
    """Whether the shell variable ``name`` that ``script`` reads is one the command sets: ``env`` before the shell, or
    the script anywhere (``out="$1"``, ``out+=x``, ``local out=``, ``${out:=$1}``, a loop's, ``read``'s,
    ``mapfile``'s or ``printf -v``'s variable). Where in the script is not weighed: ``[ -n "$out" ] || out=$1`` reads
    it before setting it on purpose, and a refusal must be true."""
    binding = re.compile(rf"(?<![^\s;&|(]){name}(?:\[[^]\s]*\])?\+?=|\b(?:for|select)[ \t]+{name}\b"
                         rf"|\b(?:read|getopts|mapfile|readarray)\b[^;&|\n]*[ \t]{name}\b"
                         rf"|\bprintf\b[^;&|\n]*[ \t]-v[ \t]*{name}\b|\$\{{{name}:?=")
    return binding.search(before) is not None or binding.search(script) is not None


def check_program(argv: Sequence[str]) -> None:
    """RecipeError in one line when a command generator's program cannot run here, with the PATH it will get (the
    run's): every sample failed with ``cannot run 'gen': No such file or directory`` only after the run began. Only
    where the command runs on this machine: ``--runtime docker`` checks it in the container, as that run's own.
    The program after the ``WRAPPERS`` before it is checked too (``timeout 1h ./gen.sh``: only ``timeout`` was),
    unless one changes how it is found (``_wrapped_program``)."""
    wrapped = _wrapped_program(argv)
    for program in dict.fromkeys([argv[0], *([wrapped] if wrapped else [])]):
        found = shutil.which(program)
        if found is not None:
            _check_script(program, found, shell_runs=program != argv[0])
            continue
        if "/" not in program:
            raise RecipeError(f"--generator command: program {program!r} is not on PATH; install it, or give its "
                              "path")
        why = ("is a folder; give the path of a program" if os.path.isdir(program)
               else "is a symlink to nothing; give the path of a program" if os.path.islink(program)
               and not os.path.exists(program)
               else f"does not exist{_tilde(program)}; give the path of a program" if not os.path.exists(program)
               else f"is not executable; chmod +x it, or name its interpreter first (bash {program})")
        raise RecipeError(f"--generator command: program {program!r} {why}")
    at = _wrapped(argv)[0] if wrapped else 0   # where the program is, when it is found as the first word is
    script = _interpreted(argv, at)
    if script is not None and not _BRACED.search(script) and not os.path.exists(script):
        where = "" if os.path.isabs(script) else f" (in {os.getcwd()}, where the command runs)"
        raise RecipeError(f"--generator command: {os.path.basename(argv[at])}'s script {script!r} does not "
                          f"exist{where}{_tilde(script)}; give the path of the script")


def _tilde(path: str) -> str:
    """The words that say why a path that starts with ``~`` is not found: no shell expands it."""
    return (f" (no shell reads the command's words, so ~ is not your home: write {os.path.expanduser(path)})"
            if path.startswith("~") else "")


PYTHON = re.compile(r"python[\d.]*")   # python, python3, python3.11: an interpreter whose first operand is a script
PYTHON_VALUED = frozenset("WX")   # its options whose value is the rest of the word or the next one (-W ignore, -X dev)


def _interpreted(argv: Sequence[str], at: int, *, code: bool = False) -> str | None:
    """The script file the interpreter ``argv[at]`` (a Python or a shell, ``SHELLS``) runs: its first operand after
    its options (``python -u gen.py``, ``bash -e ./gen.sh``); None for another program, or one that runs no file
    (``-c`` code, ``-m`` a module, ``-s`` or ``-`` stdin). A misspelt one failed every sample, after the run began.
    With ``code``, the code a Python's ``-c`` runs instead (the rest of its word, else the next word), None where it
    runs none."""
    if at >= len(argv):
        return None
    name = os.path.basename(argv[at])
    python = PYTHON.fullmatch(name) is not None
    if not python and name not in SHELLS:
        return None
    ends, valued = ("cm", PYTHON_VALUED) if python else ("cs", frozenset("oO"))
    words = iter(argv[at + 1:])
    for word in words:
        if word == "--":
            return None if code else next(words, None)
        if word == "-":
            return None
        if word.startswith("--") or not python and word in SHELL_VALUED:
            if word in SHELL_VALUED or word == "--check-hash-based-pycs":
                next(words, None)
            continue
        if word[:1] == "-" or not python and word[:1] == "+" and len(word) > 1:
            for number, letter in enumerate(word[1:], 2):
                if letter in ends:
                    return (word[number:] or next(words, None)) if code and python and letter == "c" else None
                if letter in valued:   # its value: the rest of this word, else the next word
                    if number == len(word):
                        next(words, None)
                    break
            continue
        return None if code else word
    return None


def _outside_strings(code: str) -> list[str]:
    """The placeholders in Python ``code`` that are outside its string literals (and comments), where the path is
    pasted in as code; none where the code does not tokenize (Python says why, as it runs)."""
    marks = {name: f"_pinbench_{name}_placeholder" for name in PLACEHOLDERS}
    strings = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(_filled(code, marks)).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    return [name for token in tokens for name, mark in marks.items()
            if mark in token.string and (token.type not in strings or _in_fields(token, mark))]


def _in_fields(token: tokenize.TokenInfo, mark: str) -> bool:
    """Whether ``mark`` is in a replacement field of an f-string token, run as code (``f'{{{out}}}'`` filled is
    ``f'{/path}'``, a SyntaxError): Python 3.11 tokenizes an f-string as one STRING (3.12 as parts, its fields'
    code as tokens of their own), so it is read with ``ast``: more of it in the token than in the strings there."""
    text = token.string
    if token.type != tokenize.STRING or "f" not in text[:text.index(text[-1])].lower():   # its prefix, before a quote
        return False
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    return text.count(mark) > sum(node.value.count(mark) for node in ast.walk(tree)
                                  if isinstance(node, ast.Constant) and isinstance(node.value, str))


def _wrapped_program(argv: Sequence[str]) -> str | None:
    """The program the ``WRAPPERS`` first in ``argv`` run, where it is found as the first word is (the same PATH
    and folder); None when there is none, or a wrapper may find it elsewhere: ``sudo`` (its own PATH), an ``env``
    with an option (``-C DIR``, ``-i``, ``-S '...'``) or that sets ``PATH=``."""
    at = 0
    while at < len(argv) and (name := os.path.basename(argv[at])) in WRAPPERS:
        end = WRAPPERS[name].command(argv, at + 1)[0]
        if name == "sudo" or name == "env" and any(w[:1] == "-" or w.startswith("PATH=") for w in argv[at + 1:end]):
            return None
        at = end
    return argv[at] if 0 < at < len(argv) else None


def _check_script(program: str, path: str, *, shell_runs: bool = False) -> None:
    """RecipeError for an executable file the kernel will not run: a ``#!`` line whose interpreter cannot run (said
    as "No such file or directory" of a file that exists) or is ``/usr/bin/env NAME`` with NAME not on PATH (the
    ``#!/usr/bin/env python3`` of a script run outside its environment), or text with no ``#!`` line, which the
    guard's exec ran as "Exec format error" for every sample (but for ``shell_runs``: a wrapper's ``execvp`` hands
    it to ``sh``). A file it cannot read (a binary may be execute-only) or that is no regular file is left to the
    run; an env line with more than a name (``env -S ...``) too."""
    if not os.path.isfile(path):
        return
    try:
        with open(path, "rb") as file:
            head = file.read(256)
    except OSError:
        return
    if head.startswith(b"#!"):
        # split as the kernel splits it, at spaces and tabs: a CRLF script's "\r" is its interpreter's (split() let
        # "#!/bin/sh\r" pass, and every sample failed "required file not found")
        line = os.fsdecode(head[2:].split(b"\n", 1)[0]).replace("\t", " ").split(" ")
        line = [word for word in line if word]
        name = line[0] if line else ""
        if not name or not os.access(name, os.X_OK) or os.path.isdir(name):
            raise RecipeError(f"--generator command: program {program!r} names an interpreter that cannot run here "
                              f"in its #! line ({name!r}); fix that line, or name its interpreter first")
        if os.path.basename(name) == "env" and len(line) == 2 and line[1][:1] not in "-/" and "=" not in line[1] \
                and shutil.which(line[1]) is None:
            raise RecipeError(f"--generator command: program {program!r} names in its #! line a program that is not "
                              f"on PATH ({line[1]!r}); install it, or fix that line")
    elif not shell_runs and not head.startswith(b"\x7fELF") and b"\0" not in head:
        raise RecipeError(f"--generator command: program {program!r} has no #! line, so only a shell runs it; "
                          f"add one (#!/bin/sh), or name its interpreter first (bash {program})")


def command_paths(argv: Sequence[str], path: Callable[[str, bool], str]) -> list[str]:
    """``argv`` with ``path`` applied where a command names its files: each argument, or of one written
    ``--flag=VALUE`` (a ``-`` first, an ``=`` in it) the value after the ``=``. ``path`` is also told whether a
    word without a ``/`` may name a file (``python gen.py``): not the program, a word naming a program on PATH
    (``env sh``, ``uv run python``) nor the module after ``-m``; those stay words even where a file of that name is
    here."""
    def one(number: int, arg: str) -> str:
        name, equals, value = arg.partition("=")
        if arg.startswith("-") and equals and "/" not in name:
            return f"{name}={path(value, True)}"
        bare = number > 0 and argv[number - 1] != "-m" and shutil.which(arg) is None
        return path(arg, bare)
    return [one(number, arg) for number, arg in enumerate(argv)]


def same_generator(stored: str, given: str) -> bool:
    """Whether ``--generator`` texts name one generator: a ``command:``'s relative paths that name a file here count
    as absolute, as ``--runtime docker`` gives them (docker_runtime.generator_files), so a ``./gen.sh`` or
    ``gen.py`` given later is the ``/abs/gen.sh`` or ``/abs/gen.py`` a container stored."""
    def absolute(value: str, bare: bool) -> str:
        named = "/" in value and os.path.exists(value) or bare and os.path.isfile(value)   # as generator_files
        return os.path.abspath(value) if value and named else value

    def identity(spec: str) -> str | list[str]:
        argv = command_of(spec)
        return spec if argv is None else command_paths(argv, absolute)
    return stored == given or identity(stored) == identity(given)


def factory_path(spec: str, recipe: Recipe | None) -> str:
    """``module:function`` of a Python or named generator; RecipeError (one line) for one that is not known."""
    if spec.startswith("python:"):
        target = spec.removeprefix("python:")
        if target.count(":") != 1 or not all(target.split(":")):
            raise RecipeError(f"--generator {spec}: expected python:package.module:factory")
        module, _, factory = target.partition(":")
        if "/" in module or module.endswith(".py"):   # a file: importing it said "No module named '/x/mygen'"
            folder, name = os.path.split(module.removesuffix(".py"))
            raise RecipeError(f"--generator {spec}: python: takes a module's name, not a file: --generator "
                              f"python:{name}:{factory} with its folder on PYTHONPATH (PYTHONPATH={folder or '.'} "
                              "pinbench run ...)")
        return target
    declared = dict(recipe.generators) if recipe is not None else {}
    if spec in declared:
        return f"{recipe.package}.{declared[spec]}"
    if spec in SHIPPED:
        return SHIPPED[spec]
    from importlib.metadata import entry_points  # 3 MB and 10 ms of imports (email, zipfile) no other run needs

    registered = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINTS)}
    if spec in registered:
        return registered[spec]
    known = sorted({*declared, *SHIPPED, *registered})
    raise RecipeError(f"--generator {spec}: not a known generator (known: {', '.join(known)}; or "
                      "python:MODULE:FACTORY, or command:ARGV)")


def generator_name(spec: str, target: str) -> str:
    """How errors name a generator: as --generator said it, the factory it resolved to beside it when that differs
    (they said ``pinbench.ops.generators:diffusers`` of a ``--generator diffusers``)."""
    return spec if spec.removeprefix("python:") == target else f"{spec} ({target})"


class FactoryRaised(RecipeError):
    """The factory's module or call raised: its traceback is on stderr (in a worker, the generator's log)."""


def build(target: str, options: Mapping[str, str], named: str | None = None) -> Generator:
    """The generator a factory makes; RecipeError naming it (``named``, ``generator_name``; else the factory) when it
    cannot be made or is not one."""
    named = named or target
    module, _, attribute = target.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attribute)
    except Exception as exc:   # the user's code: any failure is theirs, said in one line (where: in its log)
        _traceback(f"importing generator {named} raised:")
        missing = isinstance(exc, ModuleNotFoundError) and exc.name is not None \
            and (module == exc.name or module.startswith(f"{exc.name}."))   # its own module, not one it imports
        way_on = ": put the folder that holds it on PYTHONPATH (PYTHONPATH=DIR pinbench run ...), or install its " \
                 "package" if missing else ""
        raise FactoryRaised(f"generator {named}: {type(exc).__name__}: {exc}{way_on}") from None
    _check_options(named, factory, options)
    try:
        made = factory(**options)
    except Exception as exc:
        _traceback(f"making generator {named} raised:")
        # a factory taking **options passed them on: the class they reached took no such one
        unknown = re.search(r"unexpected keyword argument '(\w+)'", str(exc)) if isinstance(exc, TypeError) else None
        option = f"-g {unknown[1]}: not its option: " if unknown and unknown[1] in options else ""
        raise FactoryRaised(f"generator {named}: {option}{type(exc).__name__}: {exc}") from None
    if not isinstance(made, Generator) or not isinstance(made.capabilities, Capabilities):
        raise RecipeError(f"generator {named}: made a {type(made).__name__}, which lacks capabilities, "
                          "signature() or generate(request, out)")
    return made


def _check_options(generator: str, factory: Any, options: Mapping[str, str]) -> None:
    """The ``-g`` options against the factory's parameters, before it runs: a missing or unknown one named as an
    option (it was a TypeError about a Python call: ``__init__() missing 2 required positional arguments``)."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):   # no signature to read (a builtin): the call says what is wrong
        return
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return
    _check_named(generator, {n: p.default is not inspect.Parameter.empty for n, p in parameters.items()
                             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}, options)


def _check_named(generator: str, takes: Mapping[str, bool], options: Mapping[str, str]) -> None:
    """RecipeError naming the ``-g`` options missing or unknown to a factory that takes ``takes`` (name: whether it
    has a default) and nothing else."""
    missing = [n for n, optional in takes.items() if not optional and n not in options]
    unknown = [k for k in options if k not in takes]
    if missing or unknown:
        shown = ", ".join(f"[{n}=]" if optional else f"{n}=" for n, optional in takes.items())
        said = [f"give -g {', -g '.join(f'{n}=' for n in missing)}"] if missing else []
        said += [f"-g {', -g '.join(unknown)}: not its option{'s' if len(unknown) > 1 else ''}"] if unknown else []
        raise RecipeError(f"generator {generator}: {'; '.join(said)} (it takes {shown or 'no -g option'})")


def check_factory_source(target: str, options: Mapping[str, str], named: str) -> None:
    """The ``-g`` options against the factory as its module's source declares it, read without importing anything
    (the worker imports it after the recipe's code and data: a misspelt option was named after 10-18 s): a plain
    ``def`` or a class with its own ``__init__``, undecorated, without ``**kwargs``. Any other factory, or a module
    not found as the worker would look for it (the run's folder, then sys.path), is left to the worker's check."""
    module, _, attribute = target.partition(":")
    source = _module_source(module)
    if source is None:
        return
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):   # the worker's import says so, with its traceback
        return
    found = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == attribute]
    if len(found) != 1 or found[0].decorator_list or _rebound(tree, attribute):
        return
    function = found[0] if isinstance(found[0], ast.FunctionDef) else next(
        (n for n in found[0].body if isinstance(n, ast.FunctionDef) and n.name == "__init__"
         and not n.decorator_list), None)
    if function is None or function.args.kwarg is not None:
        return
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    optional = {a.arg for a in positional[len(positional) - len(args.defaults):]}
    optional |= {a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults, strict=True) if default is not None}
    keyword = args.args[1:] if function is not found[0] and not args.posonlyargs else args.args   # not self
    _check_named(named, {a.arg: a.arg in optional for a in [*keyword, *args.kwonlyargs]}, options)


def check_shipped(target: str, options: Mapping[str, str], named: str) -> None:
    """A shipped generator built once with its ``-g`` options and dropped: RecipeError, one line, for a value it
    refuses, before the fixture's data is built (``-g steps=x``, a missing ``-g dir=``, were refused by the worker
    after it). Their constructors load nothing (``Diffusers`` reads ``model_index.json``); a user's factory is not
    built here, as building one may load a model."""
    module, _, attribute = target.partition(":")
    factory = getattr(importlib.import_module(module), attribute)
    _check_options(named, factory, options)
    try:
        factory(**options)
    except ValueError as exc:
        raise RecipeError(str(exc)) from None


def _rebound(tree: ast.Module, name: str) -> bool:
    """Whether the module binds ``name`` otherwise too (``make = wrap(make)``, an import of it, a loop or ``with``
    target): the object the worker gets may then take other options than the ``def`` says."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            return True
        if isinstance(node, ast.Global | ast.Nonlocal) and name in node.names:
            return True
    return False


def _module_source(module: str) -> str | None:
    """The source text of a module, found as the worker's ``import`` would find it but without running any of it
    (not its packages' ``__init__`` either); None when it is not a plain source file there."""
    path: list[str] | None = [os.getcwd(), *sys.path]
    spec = None
    parts = module.split(".")
    for number in range(len(parts)):
        try:
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:number + 1]), path)
            if spec is None and number == 0:   # an editable install's finder (pinbench's own): found, not run
                spec = importlib.util.find_spec(parts[0])
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        path = list(spec.submodule_search_locations or []) or None
        if number < len(parts) - 1 and path is None:
            return None
    if spec is None or not spec.has_location or not (spec.origin or "").endswith(".py"):
        return None
    try:
        return Path(spec.origin).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


# ------------------------------------------------------------------------------------------- the command form


def command_capabilities(options: Mapping[str, str]) -> Capabilities:
    """A command's declared capabilities (``-g kinds=`` ``conditioning=`` ``prompt_schedule=`` ``max_frames=``;
    by default every kind and role)."""
    def listed(key: str, known: Sequence[str]) -> frozenset[str]:
        values = frozenset(v.strip() for v in options.get(key, ",".join(known)).split(",") if v.strip())
        unknown = sorted(values - set(known))
        if unknown:
            raise RecipeError(f"-g {key}: {', '.join(unknown)} not one of {', '.join(known)}")
        return values
    try:
        max_frames = int(options["max_frames"]) if "max_frames" in options else None
    except ValueError:
        raise RecipeError(f"-g max_frames: {options['max_frames']!r} is not a whole number") from None
    if max_frames is not None and max_frames < 1:   # (-1, a common "no limit", refused every request)
        raise RecipeError(f"-g max_frames: {options['max_frames']!r} is not a whole number of 1 or more (leave it "
                          "out for no limit)")
    try:   # (it read any word but 0, false and no as yes: False, off)
        schedule = boolean(options.get("prompt_schedule", "1"), "-g prompt_schedule")
    except OptionError as exc:
        raise RecipeError(str(exc)) from None
    return Capabilities(kinds=listed("kinds", tuple(KINDS)), conditioning=listed("conditioning", ROLES),
                        prompt_schedule=schedule, max_frames=max_frames)


def command_signature(argv: Sequence[str], options: Mapping[str, str]) -> Signature:
    """The command's model and weights as its options name them, with its argv and the SHA-256 of every file the
    argv names (a script edited is another generator)."""
    files = {arg: sha256_file(arg) for arg in argv if "{" not in arg and os.path.isfile(arg)}
    return Signature(model=options.get("model", argv[0] if argv else ""), weights=options.get("weights", "unstated"),
                     settings={"argv": list(argv), "files": files,
                               **{k: v for k, v in sorted(options.items()) if k not in ("model", "weights")}})


OPTIONS_KEY = "-g"   # the settings key of a generator's -g options in its signature


def with_options(signature: Signature, options: Mapping[str, str]) -> Signature:
    """A factory's signature with the ``-g`` options it was made with (settings ``"-g"``; none: unchanged), so that
    a changed option is another generator even where ``signature()`` leaves it out (a factory's ``-g mode=`` changed
    between runs had its rollouts of the old mode reused), as a command's options are part of its signature."""
    return _with_setting(signature, OPTIONS_KEY, options)


SOURCE_KEY = "source_sha256"   # the settings key of the SHA-256 of a Python generator's module files


def with_source(signature: Signature, digests: Mapping[str, str]) -> Signature:
    """A factory's signature with its module files' SHA-256 (``source_sha256``; settings ``SOURCE_KEY``)."""
    return _with_setting(signature, SOURCE_KEY, digests)


FACTORY_KEY = "factory"   # the settings key of a Python generator's factory, as module:factory


def with_factory(signature: Signature, target: str) -> Signature:
    """A factory's signature with the factory it came from (``module:factory``; settings ``FACTORY_KEY``): two
    factories of one module may build different generators that say the same ``signature()``, and the second had
    the first's rollouts reused (from the run directory or the sample cache)."""
    return dataclasses.replace(signature, settings={**signature.settings, FACTORY_KEY: target})


def _with_setting(signature: Signature, key: str, values: Mapping[str, str]) -> Signature:
    """``signature`` with ``values`` under settings ``key``, sorted (none: unchanged)."""
    if not values:
        return signature
    return dataclasses.replace(signature, settings={**signature.settings, key: dict(sorted(values.items()))})


def source_sha256(target: str, generator: object) -> dict[str, str]:
    """The SHA-256 of the bytes of each module file that defines a Python generator, its factory's and its class's,
    by module name (the same code elsewhere is the same generator): an edited adapter is another generator though
    its ``signature()`` is unchanged. Hashed once, where the generator is built; a module without a file, none."""
    names = sorted({target.partition(":")[0], type(generator).__module__})
    files = {name: getattr(sys.modules.get(name), "__file__", None) for name in names}
    return {name: sha256_file(file) for name, file in files.items() if file and os.path.isfile(file)}


PLACEHOLDERS = ("request", "out")   # what a command's argv names in braces: the request's file, the rollout's path
# a name in a run of braces in a command's argv (``_Braced``); other braces (JSON, ``{{.Id}}``) are not looked at
_BRACED = re.compile(r"(?P<opening>\{+)(?P<name>[A-Za-z_][\w-]*)(?P<closing>\}+)")


@dataclass(frozen=True)
class _Braced:
    """A name in a run of braces (``_BRACED``), read as Python's format reads it: each ``{{`` and ``}}`` a literal
    brace, an odd one left on each side the placeholder (``{out}`` the path, ``{{out}}`` a literal ``{out}``,
    ``{{{out}}}`` the path in braces, ``{{{{out}}}}`` a literal ``{{out}}``: it was ``{{/path}}``); ``${NAME}`` a
    shell's variable (``bash -c '... ${HOME}'``), left as written."""

    text: str
    name: str
    opening: int
    closing: int
    shell: bool

    @classmethod
    def of(cls, match: re.Match[str]) -> _Braced:
        opening = len(match["opening"])
        return cls(match[0], match["name"], opening, len(match["closing"]),
                   opening == 1 and match.string[:match.start()].endswith("$"))

    @property
    def placeholder(self) -> bool:
        return not self.shell and self.opening % 2 == 1

    @property
    def literal(self) -> bool:
        return not self.shell and self.opening % 2 == 0

    @property
    def paired(self) -> bool:
        """Whether format reads it: a brace left on both sides or on neither (``{{out}``: "Single '}'")."""
        return self.shell or self.opening % 2 == self.closing % 2

    def filled(self, values: Mapping[str, str]) -> str:
        if self.shell:
            return self.text
        inner = values[self.name] if self.placeholder else self.name
        return "{" * (self.opening // 2) + inner + "}" * (self.closing // 2)


def _braced(text: str) -> list[_Braced]:
    """Every name in a run of braces in ``text``."""
    return [_Braced.of(match) for match in _BRACED.finditer(text)]


def _filled(arg: str, values: Mapping[str, str]) -> str:
    """One argument of a command with its placeholders replaced (``_Braced``); ``values`` has every placeholder."""
    return _BRACED.sub(lambda match: _Braced.of(match).filled(values), arg)


def _generating(request_id: str) -> str:
    """The generator log's line before what a request's generation prints: a failed sample names the log, where a
    run's requests ran one after another with nothing to tell whose lines were whose."""
    return f"--- generating {request_id!r} ---"


def generator_log(store: Path, shard: Shard | None, device: str | None = None) -> Path:
    """``generator.log`` in the generation folder ``store`` of an unsharded run, ``generator.shard-I-of-N.log`` of
    shard I of N (``generator-gpuD`` for GPU D's generator with ``--gpus``): a Slurm array's shards run at once, and
    their requests' lines interleaved in one shared log that each failed sample named (``device_file_name``)."""
    stem = "generator" if device is None else f"generator-gpu{device_file_name(device)}"
    return store / (f"{stem}.log" if shard is None else f"{stem}.{lock_name(shard)}.log")


REQUEST_FILES = ".requests"   # in the run's GENERATION folder: a command's request files while it runs


def _run_command(argv: Sequence[str], request: Request, out: Path, timeout_s: float, log: Path, files: Path,
                 env: Mapping[str, str] | None = None) -> None:
    """One request through the command (``env`` added to the run's environment), its request's file in a folder of
    its own under ``files`` (``REQUEST_FILES``: one in the system's temporary folder stayed there forever when the
    run was killed; the next generation alone in the run clears these, ``_remove_leftovers``); RuntimeError naming
    what went wrong."""
    files.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="request-", dir=files) as folder:
        request_file = Path(folder).absolute() / "request.json"   # a command that changes folder finds it too
        request_file.write_text(json.dumps(request.message(), ensure_ascii=False), encoding="utf-8")
        filled = [_filled(arg, {"request": str(request_file), "out": str(out)}) for arg in argv]
        with open(log, "a", encoding="utf-8") as said:   # never through the sink: its last line is the failure's
            said.write(_generating(request.id) + "\n")
        sink = _RedactedLog(log)
        try:
            proc = subprocess.Popen(_guarded(filled),
                                    stdin=subprocess.DEVNULL, stdout=sink.fd, stderr=sink.fd, start_new_session=True,
                                    env={**os.environ, **env} if env else None)
        finally:
            sink.handed()
        code: int | None = None
        try:
            if exited(proc, timeout_s):
                code = reap(proc)
        finally:   # its group too: what it left running held the log's pipe (the join's 5 s) and outlived the run
            try:   # (a guard still running: past the time limit, or the run stopped by Ctrl-C or SIGTERM)
                _stop(proc)
            finally:
                sink.join()
    if code is None:
        raise _timed_out("", timeout_s, log)
    if code != 0:
        said = f": {sink.last[:200]}" if sink.last else ""
        raise GeneratorError(f"the generator {_ended(code)}{said} (log: {log})")


def _timed_out(what: str, timeout_s: float, log: Path) -> GeneratorError:
    """The failure of a request stopped past ``--generation-timeout``, said last in the log too: the reason named
    neither the option that sets the limit nor the log, whose last lines, the generator's own, never said that it
    was stopped. Called once its output is in the log."""
    said = f"the generator did not finish{what} within {timeout_s:g} s (--generation-timeout); it was stopped"
    with open(log, "a", encoding="utf-8") as log_file:
        log_file.write(f"--- {said} ---\n")
    return GeneratorError(f"{said} (log: {log})")


def _ended(code: int) -> str:
    """How a generator's process ended, from its exit status (negative: the signal that killed it, by name; a kill
    -9 is most often the kernel's out-of-memory killer, so a bare number would hide the likeliest cause)."""
    if code >= 0:
        return f"exited {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed by {name}" + (" (out of memory?)" if -code == signal.SIGKILL else "")


class _RedactedLog:
    """The write end (``fd``) of a pipe whose lines a thread appends to ``log``, secrets redacted (``redact``): what
    a generator prints (a library logging its login, a token in a traceback) reaches the run's log only this way.
    A line longer than ``_LINE_LIMIT`` is redacted in pieces. ``last``: the last line that was not blank, redacted
    and without colour codes (what a failed command said last, most often its error: its failure names it)."""

    def __init__(self, log: Path) -> None:
        read, self.fd = os.pipe()
        self.last = ""
        self._thread = threading.Thread(target=self._copy, args=(read, log), daemon=True)
        self._thread.start()

    def _copy(self, read: int, log: Path) -> None:
        with os.fdopen(read, "rb") as source, open(log, "ab") as sink:
            for line in iter(lambda: source.readline(_LINE_LIMIT), b""):
                text = redact(line.decode("utf-8", errors="replace"))
                sink.write(text.encode("utf-8"))
                sink.flush()
                self.last = one_line(text) or self.last

    def handed(self) -> None:
        """Close this process's write end once the child holds its own: the copy ends when the child's group does."""
        os.close(self.fd)

    def join(self) -> None:
        """Wait for the last lines; bounded, as a process that left the generator's group may hold the pipe open."""
        self._thread.join(timeout=5.0)


_LINE_LIMIT = 1 << 20


_GUARD_STOP_S = 5.0   # how long a guard told to stop may take to kill what the command started


def _guarded(argv: Sequence[str]) -> list[str]:
    """``argv`` run by a guard (``_guard``): a command generator's, and a Python generator's worker, whose kill of
    its group missed what the generator started in a session of its own (``setsid``)."""
    return [sys.executable, "-m", "pinbench.ops.generation", "--guard", *argv]


def _stop(proc: subprocess.Popen) -> None:
    """End a guard and all it started. While the guard runs: SIGTERM to it alone, then a bounded wait, in which it
    kills the command and the daemons it adopted (``_guard``); then SIGKILL to its process group. Why: the group's
    SIGKILL alone killed the guard first, and a daemon in a session of its own (``setsid``), out of the group,
    outlived the run (its time limit, Ctrl-C or SIGTERM to the run). SIGCONT after the SIGTERM, as ``scancel`` does:
    a guard the command stopped (``kill -STOP 0``) held its SIGTERM, and its daemons ran on. Signals go only to a
    guard not yet reaped (``exited``), whose pid no other process can have."""
    try:
        if not exited(proc, 0):
            os.kill(proc.pid, signal.SIGTERM)
            os.kill(proc.pid, signal.SIGCONT)
            exited(proc, _GUARD_STOP_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        reap(proc)


# ------------------------------------------------------------------------------------------- the worker


class Worker:
    """A Python generator in a child process run by a guard (``_guarded``: what the generator started is stopped with
    it), one request at a time, stopped and replaced past the time limit."""

    def __init__(self, target: str, options: Mapping[str, str], log: Path, env: Mapping[str, str] | None = None,
                 named: str | None = None):
        self.target, self.options, self.log, self.env = target, dict(options), log, dict(env or {})
        self.named = named or target   # how its errors name it (``generator_name``)
        self._proc: subprocess.Popen | None = None
        self._reply: Any = None
        self._ask_to: Any = None   # the write end of the child's requests pipe
        self._sink: _RedactedLog | None = None

    def start(self) -> dict[str, Any]:
        """Start the child; what it says of its generator (signature and capabilities), or RecipeError."""
        read, write = os.pipe()
        asked, ask = os.pipe()   # the requests: not its stdin, which a generator's prompt (input()) would read
        self._sink = _RedactedLog(self.log)
        try:
            self._proc = subprocess.Popen(
                _guarded([sys.executable, "-m", "pinbench.ops.generation", self.target, str(write), str(asked),
                          self.named]),
                stdin=subprocess.DEVNULL, stdout=self._sink.fd, stderr=self._sink.fd, pass_fds=(write, asked),
                start_new_session=True,
                env={**os.environ, **self.env, "PINBENCH_GENERATOR_OPTIONS": json.dumps(self.options)})
        finally:
            self._sink.handed()
            os.close(write)
            os.close(asked)
        self._ask_to = os.fdopen(ask, "wb")
        self._reply = os.fdopen(read, "r", encoding="utf-8")
        # its imports and its model's load: seconds to minutes, silent in a log before
        with notice(f"generate: starting generator {self.named} (its process imports it and makes it; log: "
                    f"{self.log})"):
            try:
                described = self._answer(timeout_s=600.0, what="starting")
            except TimeoutError:
                raise GeneratorError("the generator did not finish starting within 600 s; it was stopped "
                                     f"(log: {self.log})") from None
        if "error" in described:
            self.stop()
            raise RecipeError(described["error"] + (f" (traceback: {self.log})" if described.get("logged") else ""))
        return described

    def generate(self, request: Request, out: Path, timeout_s: float) -> None:
        self._ask({"request": request.message(), "out": str(out)}, timeout_s, "generating")

    def generate_batch(self, pairs: Sequence[tuple[Request, Path]], timeout_s: float) -> None:
        """Every request of ``pairs`` in one call of the generator's ``generate_batch``."""
        batch = [{"request": request.message(), "out": str(out)} for request, out in pairs]
        self._ask({"batch": batch}, timeout_s, "generating a batch")

    def _ask(self, message: Mapping[str, Any], timeout_s: float, what: str) -> None:
        """One message to the child (started again if it is not running); GeneratorError for its error."""
        if self._proc is None or self._proc.poll() is not None:
            self.start()
        assert self._ask_to is not None
        self._ask_to.write((json.dumps(message) + "\n").encode())
        self._ask_to.flush()
        try:
            answer = self._answer(timeout_s=timeout_s, what=what)
        except TimeoutError:
            raise _timed_out(f" {what}", timeout_s, self.log) from None
        if "error" in answer:   # its traceback is in the log (a command's failure names its log too), but a Reason's
            raise GeneratorError(answer["error"] + ("" if answer.get("reason") else f" (traceback: {self.log})"))

    def _answer(self, *, timeout_s: float, what: str) -> dict[str, Any]:
        assert self._reply is not None
        ready, _, _ = select.select([self._reply], [], [], timeout_s)
        line = self._reply.readline() if ready else None
        if line is None:   # TimeoutError: the caller says which limit it was
            self.stop()
            raise TimeoutError
        if not line:
            assert self._proc is not None
            try:   # its reply pipe closed: the process has ended, or is ending
                ended = _ended(self._proc.wait(timeout=5.0))
            except subprocess.TimeoutExpired:
                ended = "ended"
            self.stop()
            raise GeneratorError(f"the generator's process {ended} while {what} (log: {self.log})")
        return json.loads(line)

    def stop(self) -> None:
        if self._proc is not None:
            _stop(self._proc)
            self._proc = None
        if self._ask_to is not None:
            with contextlib.suppress(OSError):
                self._ask_to.close()
            self._ask_to = None
        if self._reply is not None:
            self._reply.close()
            self._reply = None
        if self._sink is not None:
            self._sink.join()
            self._sink = None


def serve(target: str, reply_fd: int, request_fd: int, named: str) -> None:
    """The child's side: build the generator, say what it is, then generate each request read from ``request_fd``
    (its stdin is empty: a generator that asks a question, input(), reads an end of file at once, as a command's
    does, where reading the requests' pipe it waited out the time limit)."""
    reply = os.fdopen(reply_fd, "w", encoding="utf-8")

    def tell(line: str) -> None:
        reply.write(line + "\n")
        reply.flush()

    def say(message: Mapping[str, Any]) -> None:
        tell(json.dumps(message))
    try:
        generator = build(target, json.loads(os.environ.get("PINBENCH_GENERATOR_OPTIONS", "{}")), named)
        tell(_described(generator, target, named))
    except Exception as exc:   # the user's code: said in one line, then this child ends
        if not isinstance(exc, RecipeError):   # its signature() raised: where, in the log
            _traceback(f"describing generator {named} raised:")
        said = str(exc) if isinstance(exc, RecipeError) else f"generator {named}: {type(exc).__name__}: {exc}"
        say({"error": one_line(said),
             "logged": not isinstance(exc, RecipeError) or isinstance(exc, FactoryRaised)})
        return
    for line in os.fdopen(request_fd, "r", encoding="utf-8"):
        message = json.loads(line)
        try:
            if "batch" in message:
                generator.generate_batch([(Request.from_json(m["request"]), Path(m["out"])) for m in message["batch"]])
            else:
                request = Request.from_json(message["request"])
                print(_generating(request.id), file=sys.stderr, flush=True)
                generator.generate(request, Path(message["out"]))
        except Reason as exc:   # its message is the whole reason (the folder generator's missing file): no traceback
            say({"error": one_line(str(exc)), "reason": True})
        except Exception as exc:   # one request's failure, said; the next request is served
            _traceback(f"generating {message.get('request', {}).get('id', 'a batch')!r} raised:")
            say({"error": f"{type(exc).__name__}: {one_line(str(exc))}"})
        else:
            say({"ok": True})


def _described(generator: Generator, target: str, named: str) -> str:
    """What the worker tells the run of its generator, as JSON (encoded once: that encoding is the check of it);
    RecipeError naming it when its ``signature()`` or ``capabilities`` is not what the protocol says (a set or NaN
    in the settings, a kind that is no string): the run ended in a bare TypeError, a traceback or 'Out of range
    float values are not JSON compliant', naming nothing."""
    signature, caps = generator.signature(), generator.capabilities
    if not (isinstance(signature, Signature) and isinstance(signature.model, str)
            and isinstance(signature.weights, str) and isinstance(signature.settings, Mapping)):
        raise RecipeError(f"generator {named}: signature() gave {clipped(repr(signature), 80)}, not a "
                          "Signature(model: str, weights: str, settings: a mapping)")
    if taken := [key for key in (OPTIONS_KEY, SOURCE_KEY, FACTORY_KEY) if key in signature.settings]:
        # the run sets these keys (with_options, with_source, with_factory): its value replaced the generator's, and
        # two generators that differed there alone (settings {"factory": "euler"} or "heun") shared their rollouts
        raise RecipeError(f"generator {named}: its signature() settings hold {', '.join(map(repr, taken))}, which the "
                          "run sets itself (its -g options, module digests and factory): name that setting otherwise")
    if not (all(isinstance(k, str) for k in (*caps.kinds, *caps.conditioning))
            and isinstance(caps.prompt_schedule, bool) and (caps.max_frames is None or type(caps.max_frames) is int)):
        raise RecipeError(f"generator {named}: capabilities {clipped(repr(caps), 120)}: kinds and conditioning must "
                          "be strings, prompt_schedule a bool, max_frames a whole number or None")
    described = {"signature": signature.to_json(), "source": source_sha256(target, generator),
                 "capabilities": {**caps.to_json(), "batch": hasattr(generator, "generate_batch")}}
    try:
        return json.dumps(described, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise RecipeError(f"generator {named}: its signature() settings are not JSON data ({exc}; it keys its "
                          "rollouts and is recorded in the scorecard)") from None


def _traceback(lead: str) -> None:
    """The exception being handled, whole, to stderr: in the child that is the generator's log (redacted), where
    the user finds the line of their code that raised; the sample's record holds its one line only."""
    print(lead, file=sys.stderr)
    traceback.print_exc(file=sys.stderr)
    sys.stderr.flush()


# ------------------------------------------------------------------------------------------- the check


def check_rollout(request: Request, path: Path, *, follow_symlinks: bool = False, kept: bool = False,
                  near: NearNames | None = None) -> list[str]:
    """What is wrong with a rollout for its request, one line each, each starting ``"<path>: "`` ([] when it is
    what was asked for). A generator's symlink is refused (it would point out of the run); ``follow_symlinks``
    checks a symlink's target, as ``-o videos`` and ``--generator folder`` read a folder of rollouts made elsewhere
    (``pinbench rollouts check``). ``kept``: the file is still the bytes a run checked and kept (its record's
    SHA-256), which decoded to their last frame then; that decode is not repeated, the rest of the check is (a
    rerun reuses every rollout). ``near``: the hint for a missing one, shared by the check of many (``NearNames``)."""
    from pinbench.media.video import VideoError, is_valid_video, unnamed_container, video_info

    if path.is_symlink():
        if not follow_symlinks:
            return [f"{path}: a symlink (to {os.readlink(path)!r}), not a file the generator wrote"]
        if not path.exists():
            return [f"{path}: a dangling symlink (to {os.readlink(path)!r})"]
    if not path.exists():
        hint = (near or NearNames())(path)
        return [f"{path}: no rollout{hint}" if hint else f"{path}: no rollout (the generator wrote nothing there)"]
    if path.is_dir():   # a tool that takes its --output for a folder: where its video went
        try:
            held = f"holding {', '.join(sorted(p.name for p in path.iterdir())[:3]) or 'nothing'}"
        except OSError as exc:   # one it may not list
            held = f"unlisted: {exc.strerror}"
        return [f"{path}: a folder ({held}), not a video file: write the rollout to that path itself, "
                "not into a folder there"]
    if not path.is_file():
        return [f"{path}: not a regular file"]
    try:
        info = video_info(path)
    except VideoError as exc:
        return [str(exc)]
    problems = []
    suffix = PurePosixPath(request.output).suffix
    if (wanted := unnamed_container(info, suffix)) is not None:
        if _any_container(request.recipe):
            if not kept:   # said when it is made or checked, not on every rerun that reuses it
                named = path if path.name == PurePosixPath(request.output).name else request.output
                print(f"warning: {named}: a {info.container} container under an {suffix} name; accepted, as "
                      f"{request.recipe}'s evaluator reads rollouts with OpenCV and imageio, which open it",
                      file=sys.stderr, flush=True)
        else:   # decodes here, yet a reader of the container's own count (MIND's process.py: stream.frames) reads 0
            problems.append(f"{path}: a {info.container} container under an {suffix} name; the request asks "
                            f"{wanted.upper()} "
                            f"({request.recipe} declares no other: a reader of the container's own frame count, as "
                            "MIND's process.py, reads none from another)")
    if (info.width, info.height) != (request.width, request.height):
        problems.append(f"{path}: {info.width}x{info.height}, the request asks {request.width}x{request.height}")
    if abs(info.fps - request.fps) > FPS_TOLERANCE * request.fps:
        problems.append(f"{path}: {info.fps:g} fps, the request asks {request.fps:g}")
    if info.n_frames != request.frames:
        problems.append(f"{path}: {counted(info.n_frames, 'frame')}, the request asks {request.frames}")
    elif not kept and not is_valid_video(path, request.frames):
        problems.append(f"{path}: does not decode to its last frame (truncated or damaged)")
    return problems


def _any_container(recipe: str) -> bool:
    """Whether the recipe declares that its evaluator reads a rollout of any container OpenCV opens
    (``rollout_container: any``: PAI-Bench-C's reads rollouts with cv2.VideoCapture and imageio, both through
    FFmpeg, which reads the container from the bytes, not the name); a request of no installed recipe keeps the MP4
    demand."""
    from pinbench.core.recipe import get_recipe

    try:
        return get_recipe(recipe).rollout_container == "any"
    except RecipeError:
        return False


_SEPARATORS = str.maketrans("_.", "--")


def _loose(name: str) -> str:
    """A name without what a near miss of it changes: case, spaces, which of ``_ - .`` separates its words, and its
    Unicode normalization (a name macOS wrote in NFD, ``e`` and a combining accent, where the request has ``é``)."""
    return unicodedata.normalize("NFC", "".join(name.split()).casefold()).translate(_SEPARATORS)


class NearNames:
    """``; 'Video.mp4' beside it differs only in case, spaces, separators or Unicode normalization (names are
    exact)`` for the names in a missing ``path``'s folder that differ from its name only so (never taken for it),
    else "": a rollout made elsewhere under a near name reads as none. Nothing either when another of the ``asked``
    rollout paths there is as near: the hint would be a guess (``s01-a.mp4`` and ``s01_a.mp4`` both asked). Each
    folder is listed once, when a path in it is first missing, and ``asked`` grouped once: a check of 500 missing
    rollouts among 5,000 listed the folder and compared every asked path for each, 20 s."""

    def __init__(self, asked: Iterable[Path] = ()) -> None:
        self._asked: dict[tuple[Path, str], set[str]] = {}
        for other in asked:
            self._asked.setdefault((other.parent, _loose(other.name)), set()).add(other.name)
        self._folders: dict[Path, dict[str, list[str]]] = {}

    def __call__(self, path: Path) -> str:
        loose = _loose(path.name)
        if self._asked.get((path.parent, loose), set()) - {path.name}:
            return ""
        if path.parent not in self._folders:
            names: dict[str, list[str]] = {}
            with contextlib.suppress(OSError):
                for name in sorted(p.name for p in path.parent.iterdir()):
                    names.setdefault(_loose(name), []).append(name)
            self._folders[path.parent] = names
        near = [repr(n) for n in self._folders[path.parent].get(loose, []) if n != path.name]
        if not near:
            return ""
        verb = "differs" if len(near) == 1 else "differ"
        return (f"; {', '.join(near)} beside it {verb} only in case, spaces, separators or Unicode normalization "
                "(names are exact)")


# ------------------------------------------------------------------------------------------- the step


def rollouts_dir(dir: str) -> Path:  # noqa: A002 (the -g option's name)
    """The ``folder`` generator's ``-g dir=``; ValueError saying what it is when it is not given (it read ``-g dir=:
    not a folder``) or is no folder. The run asks this before it builds anything (``Generating``)."""
    if not dir:
        raise ValueError("--generator folder: give -g dir=DIR, the folder of your rollouts (each at its request's "
                         "output path under it)")
    if not os.path.isdir(dir):
        # printable: a line break in it was printed as a space, a name that is not the one given
        raise ValueError(f"-g dir={printable(dir)}: not a folder (--generator folder copies the rollouts under it)")
    return Path(dir)


class Generating:
    """The run's generation step (``pinbench.core.run.Generation``): with ``--generator`` (``spec``), else
    with the recipe's own generator when it has one (PAI-Bench-C's cosmos3, a fixture's test double), in process."""

    def __init__(self, spec: GeneratorSpec | None, recipe: Recipe, *, skip_generation: bool = False,
                 out_dir: Path | None = None) -> None:
        """Refuses, before the run claims its folder or imports the recipe's code, a generator that is not known,
        ``-g`` options its factory's source does not take (``check_factory_source``), a command's ``-g`` values
        that do not read (``command_capabilities``), a command whose program this machine cannot run
        (``check_program``) and a shipped generator's ``-g`` values (``check_shipped``: a ``folder`` without ``-g
        dir=``, ``diffusers -g steps=x``; not under ``skip_generation``: nothing runs them). The program is asked
        for later (``unrunnable``) where the run folder ``out_dir`` holds rollouts this very generator made: a rerun
        that keeps them all runs nothing."""
        self.spec, self.recipe = spec, recipe
        self.unrunnable: RecipeError | None = None   # why the command cannot run, once a rollout is to be made
        # a Python generator's module:factory, found once (an entry point's lookup reads every installed package)
        self.target = factory_path(spec.spec, recipe) if spec is not None and spec.command is None else None
        if spec is not None and self.target is not None:
            check_factory_source(self.target, spec.options, generator_name(spec.spec, self.target))
        if spec is not None and spec.command is not None:
            command_capabilities(spec.options)   # a bad -g value (prompt_schedule=maybe) came after the fixture's data
        if spec is not None and spec.command and not skip_generation:
            try:
                check_program(spec.command)
            except RecipeError as exc:
                stored = None
                with contextlib.suppress(RecipeError):   # a damaged file: refused now, as with none
                    stored = _stored_origin(out_dir / GENERATION / GENERATOR_FILE) if out_dir is not None else None
                if stored is None or not same_generator(stored.generator, scrub(spec.spec)):
                    raise
                self.unrunnable = exc
        if spec is not None and self.target in SHIPPED.values() and not skip_generation:
            check_shipped(self.target, spec.options, generator_name(spec.spec, self.target))

    def generate(self, run: Run, requests: Sequence[Request], folder: str,
                 default: Callable[[], Generator] | None = None) -> Path:
        rollouts, store = run.out_dir / folder, run.out_dir / GENERATION
        stored = _stored_origin(store / GENERATOR_FILE) if run.skips("generation") else None
        if run.skips("generation") and stored is None and self.spec is None and default is None:
            # no generator of its own to name: refused before anything is written
            raise Refused(f"--skip-generation: {store / GENERATOR_FILE} is missing: it scores the rollouts "
                          f"that a run with --generator stored in {rollouts}; run one first")
        if stored is not None and self.spec is not None and not same_generator(stored.generator,
                                                                                 scrub(self.spec.spec)):
            # (the file holds the name scrubbed): scoring them would put another generator's rollouts under this one
            raise RecipeError(f"--generator {redact(self.spec.spec)}: the rollouts --skip-generation scores were made "
                              f"by {stored.generator} ({store / GENERATOR_FILE}); drop --generator to score those, "
                              "or --skip-generation to generate with it")
        _refuse_links(run.out_dir, folder, requests,
                      "--skip-generation scores" if run.skips("generation") else "the generate step writes")
        rollouts.mkdir(parents=True, exist_ok=True)
        store.mkdir(parents=True, exist_ok=True)
        write_if_changed(store / REQUESTS_FILE, requests_text(requests))
        named = self.spec.spec if self.spec is not None else self.recipe.own_generator
        if run.skips("generation"):   # a scoring run after a generation one: what that stored, and who made it
            made, records = stored or _Origin(named), load_records(store)
            run.generation = _provenance(made, requests, records)
            checked = _Checked(store / CHECKED_FILE, requests)
            run.generation_failures = _not_as_asked(requests, rollouts, records, checked)
            checked.save()
            run.never_generated = _never_generated(requests, rollouts, records)
            return rollouts
        removed = _remove_leftovers(run.out_dir, rollouts, store / REQUEST_FILES)
        if removed:
            print(f"generate: removed {counted(removed, 'hidden partial rollout')} that a killed run left in "
                  f"{rollouts}", file=sys.stderr, flush=True)
        folder_dir, sources = self._folder_dir(), dict[str, str]()
        with run.digests() as digests:   # shards hash -g dir under its lock: the first reads, the others take that
            if folder_dir is not None:
                for line in unasked_lines(folder_dir, requests, run.cfg.limit):
                    print(f"generate: {line}", file=sys.stderr, flush=True)
                sources = folder_sources(folder_dir, requests, digests)
        # the files they name were staged there; absolute, as out is (``_keep``)
        requests = [replace(r, root=store.absolute()) for r in requests]
        by_id = {r.id: r for r in requests}
        env = offline_env() if run.cfg.offline else {}
        with self._maker(default, store, env, run.shard) as maker:
            refuse(maker.capabilities, requests, named)
            signature = maker.signature
            tasks = [RolloutTask(r.id, r.digest, sources.get(r.id)) for r in requests]
            if folder_dir is not None:
                _say_changed_sources(folder_dir, requests, sources, load_records(store), signature)
            kept = _Kept(rollouts, signature, {r.output: r for r in requests},
                         _Checked(store / CHECKED_FILE, requests), digests,
                         {r.output: sources.get(r.id) for r in requests} if sources else None)
            base = run.sample_cache(GENERATION, "generation")
            cached = None if base is None else RolloutCache(base, signature, rollouts, by_id)
            if self.unrunnable is not None and any(
                    cached is None or not _cached(cached, t, kept)
                    for t in run.pending(tasks, folder=GENERATION, part="generation", validate=kept,
                                         cache=False).mine):
                raise self.unrunnable
            batch_error: list[Exception] = []
            if maker.many is not None:   # one launch for every rollout still to make (cosmos-framework's way)
                pending = run.pending(tasks, folder=GENERATION, part="generation", validate=kept, cache=False).mine
                if cached is not None:   # what the cache holds is taken from it below, not made again
                    pending = [t for t in pending if not _cached(cached, t, kept)]
                pairs = [(by_id[t.sample_id], _partial(rollouts, by_id[t.sample_id]).absolute()) for t in pending]
                before = {request.id: _Before.of(request, rollouts) for request, _ in pairs}
                for _, partial in pairs:   # what a killed run left there is not what this batch makes
                    if blocking_parent(partial) is None:
                        _clear(partial)
                try:
                    maker.many(pairs)
                except Exception as exc:   # what the batch made is kept; a rollout it did not make fails with this
                    batch_error.append(exc)

            def one(task: RolloutTask) -> dict[str, Any]:
                request = by_id[task.sample_id]
                if batch_error and not _partial(rollouts, request).exists():
                    failed = batch_error[0]
                    if isinstance(failed, GeneratorError) and request.id in before:   # its changed input named first
                        _untouched(request, before[request.id].inputs, failed)
                    raise failed
                if maker.many is None:
                    return _keep(request, rollouts, signature, maker.one, store, folder=folder_dir)
                return _keep(request, rollouts, signature, None, store, before.get(request.id))

            made = _Origin(named, signature)
            # scrubbed as the scorecard is: a token in the argv or a -g option keys the signature, never a file
            write_if_changed(store / GENERATOR_FILE,
                             json.dumps(scrub(made.to_json()), indent=1, sort_keys=True) + "\n")
            devices = _generation_devices(run.cfg.gpus) if self.spec is not None and maker.many is None else []
            if devices:   # the describing worker gives way to one generator per GPU, each in a process of the run
                maker.release()
                argv = self.spec.command
                on_device = _OnDevice(self.target, self.spec.spec, tuple(argv or ()), dict(self.spec.options),
                                      self.spec.timeout_s, store, rollouts, signature, by_id, env, run.shard,
                                      folder_dir)
                summary = run.compute(tasks, on_device,
                                      folder=GENERATION, part="generation", label="generate", cache=cached or False,
                                      validate=kept, devices=devices)
            else:
                summary = run.compute(tasks, one, folder=GENERATION, part="generation", label="generate",
                                      cache=cached or False, validate=kept)
        kept.checked.save()
        summary = _overwritten(summary, rollouts, digests)
        digests.save_locked()
        # a generator that wrote its video elsewhere in the rollouts folder than its out: its sample says "wrote
        # nothing", and this names the file it wrote, which no request names and the run passes over
        for line in unasked_lines(rollouts, requests, run.cfg.limit):
            print(f"generate: {line}", file=sys.stderr, flush=True)
        run.generation = _provenance(made, requests, summary.records)
        run.generation_failures = {sid: not_made(rec.error or "its generation failed")
                                   for sid, rec in summary.records.items() if not rec.ok}
        run.stop_after_generation(summary)
        return rollouts

    def _folder_dir(self) -> Path | None:
        """``-g dir=`` of the shipped ``folder`` generator (by any name that reaches its factory), else None."""
        if self.spec is None or self.target != SHIPPED["folder"] or not self.spec.options.get("dir"):
            return None
        return Path(self.spec.options["dir"])

    @contextlib.contextmanager
    def _maker(self, default: Callable[[], Generator] | None, store: Path, env: Mapping[str, str],
               shard: Shard | None) -> Iterator[_Maker]:
        """How this run makes rollouts (a generator process with ``env`` added to the run's environment, its log,
        ``shard``'s own, and a command's request files in the generation folder ``store``), its worker (if any)
        stopped at the end."""
        log, files = generator_log(store, shard), store / REQUEST_FILES
        if self.spec is None:
            if default is None:
                raise RecipeError(f"{self.recipe.name}: nothing to generate with: give --generator")
            own = default()   # the recipe's code: its module file keys its rollouts, as a --generator's does
            signature = with_source(own.signature(), source_sha256(type(own).__module__, own))
            yield _Maker(signature, own.capabilities, own.generate, getattr(own, "generate_batch", None))
            return
        argv, timeout = self.spec.command, self.spec.timeout_s
        if argv is not None:
            yield _Maker(command_signature(argv, self.spec.options), command_capabilities(self.spec.options),
                         lambda request, out: _run_command(argv, request, out, timeout, log, files, env))
            return
        target = self.target
        assert target is not None   # no command: a Python generator
        worker = Worker(target, self.spec.options, log, env, generator_name(self.spec.spec, target))
        described = worker.start()
        try:
            caps = described["capabilities"]
            signature = with_factory(with_source(Signature(**described["signature"]), described["source"]), target)
            # folder's only option, -g dir, is in its signature resolved: its spelling (a symlink, a ..) is no other
            # generator, and was, every rollout copied again and the scorecard moved aside as of other rollouts
            options = {} if target == SHIPPED["folder"] else self.spec.options
            yield _Maker(with_options(signature, options),
                         Capabilities(kinds=frozenset(caps["kinds"]), prompt_schedule=caps["prompt_schedule"],
                                      max_frames=caps["max_frames"], conditioning=frozenset(caps["conditioning"])),
                         lambda request, out: worker.generate(request, out, timeout),
                         (lambda pairs: worker.generate_batch(pairs, timeout * len(pairs))) if caps["batch"] else None,
                         worker.stop)
        finally:
            worker.stop()


@dataclass(frozen=True)
class _Maker:
    """A generator as the step uses it: what it is, what it can do, and how it makes one rollout (or many at once)."""

    signature: Signature
    capabilities: Capabilities
    one: Any
    many: Any = None
    release: Callable[[], None] = lambda: None   # frees what it holds (a worker's model) before devices take over


def offline_env() -> dict[str, str]:
    """What a generator process of an ``--offline`` run gets beside the run's environment: the variables with which
    pinbench, huggingface_hub, transformers and datasets download nothing, so the run's ``--offline`` holds for the
    user's code too (a ``--runtime docker`` stage has no network besides)."""
    return dict.fromkeys((*OFFLINE_VARS, "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"), "1")


def _generation_devices(gpus: int) -> list[str]:
    """The GPUs generation spreads over with ``--gpus N`` (``gpu_devices``: the first N of CUDA_VISIBLE_DEVICES when
    it is set, else 0..N-1); none for one GPU (the step then runs in the run's own process)."""
    chosen = gpu_devices(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    ids = [str(i) for i in range(chosen)] if isinstance(chosen, int) else chosen
    return ids if len(ids) > 1 else []


@dataclass(frozen=True)
class _OnDevice:
    """Builds, in the run's process for one GPU, the step's per-rollout function: its own generator process (python
    form: started at its first request, its model loaded there) or each command, seeing only that GPU."""

    target: str | None   # the python form's factory; None: the command form
    spec: str   # what --generator said
    argv: tuple[str, ...]
    options: Mapping[str, str]
    timeout_s: float
    store: Path
    rollouts: Path
    signature: Signature
    by_id: Mapping[str, Request]
    env: Mapping[str, str]   # what every generator process gets beside the run's environment (``offline_env``)
    shard: Shard | None   # the run's shard: its generators' logs are its own (``generator_log``)
    folder: Path | None = None   # a ``folder`` generator's -g dir: its invalid rollouts are named there

    def __call__(self, device: str) -> Callable[[RolloutTask], dict[str, Any]]:
        env, log = {**self.env, "CUDA_VISIBLE_DEVICES": device}, generator_log(self.store, self.shard, device)
        if self.target is None:
            def make(request: Request, out: Path) -> None:
                _run_command(self.argv, request, out, self.timeout_s, log, self.store / REQUEST_FILES, env)
        else:
            worker = Worker(self.target, self.options, log, env, generator_name(self.spec, self.target))

            def make(request: Request, out: Path) -> None:
                worker.generate(request, out, self.timeout_s)
        return lambda task: _keep(self.by_id[task.sample_id], self.rollouts, self.signature, make, self.store,
                                  folder=self.folder)


def _refuse_links(run_dir: Path, folder: str, requests: Sequence[Request], doing: str) -> None:
    """RecipeError (one line naming it, and what the step ``doing`` no rollout through it) for a symlink among the
    folders the rollouts go to: the step wrote (and reused) rollouts through it, and ``--skip-generation`` scored
    them, outside the run, where ``pinbench check`` names it."""
    for parent in dict.fromkeys(PurePosixPath(folder, r.output).parent for r in requests):
        link = symlink_on_the_way(run_dir, parent)
        if link is not None:
            raise RecipeError(f"{link}: a symlink (to {os.readlink(link)!r}); {doing} no rollout "
                              f"through it (a kept rollout is a regular file reached without symlinks inside "
                              f"{run_dir}); put a folder of the run in its place")


def _partial(rollouts: Path, request: Request) -> Path:
    """Where a rollout is made before it is checked: beside its place, hidden, never taken for a rollout."""
    target = rollouts / request.output
    affixes = len(f"..partial{target.suffix}".encode("utf-8", "surrogateescape"))
    return target.with_name(f".{fitting_name(target.stem, affixes)}.partial{target.suffix}")   # PARTIAL_ROLLOUT


def _remove_leftovers(run_dir: Path, rollouts: Path, request_files: Path) -> int:
    """Remove the hidden partial rollouts (``PARTIAL_ROLLOUT``) under ``rollouts``, and the command's request files
    (``request_files``), when no other process may be writing in the run: what a killed run left (a partial for a
    sample this run no longer asks, a smaller --limit) stayed forever. No run reads a partial it did not just make,
    whatever generator made it, so none is work lost; while another shard runs, each may be its rollout in the
    making, and all stay. How many partials were removed."""
    with alone_in(run_dir) as alone:
        if not alone:
            return 0
        _clear(request_files)
        found = [Path(folder, name) for folder, folders, files in os.walk(rollouts)
                 for name in (*folders, *files) if PARTIAL_ROLLOUT.fullmatch(name)]
        for path in found:
            _clear(path)
    return len(found)


def _keep(request: Request, rollouts: Path, signature: Signature, make: Any, store: Path,
          before: _Before | None = None, folder: Path | None = None) -> dict[str, Any]:
    """One rollout: made (by ``make``, else already by a batch, before which its files were as ``before`` says)
    beside its place, checked, then renamed into place; its record's result. ``folder``: a ``folder`` generator's
    -g dir, whose file (the one to fix, not the copy) an invalid rollout's failure names. One that fails the check
    is moved to ``REJECTED`` under the generation folder ``store`` (``_reject``), there to be looked at."""
    target, partial = rollouts / request.output, _partial(rollouts, request)
    blocked = blocking_parent(target)
    if blocked is not None:   # (so no partial beside it either)
        raise RolloutBlocked(f"{blocked[0]}: {blocked[1]} where the folder of {request.output} goes")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        if target.is_dir() and not target.is_symlink():   # the rename onto it was an IsADirectoryError, made in vain
            raise RolloutBlocked(f"{target}: a folder where the rollout goes; move it away to generate it")
        if make is not None:
            _clear(partial)
            before = _Before.of(request, rollouts)
            try:   # absolute: under a relative --out, a generator that changed folder wrote where no one looked
                make(request, partial.absolute())
            except GeneratorError as exc:   # a changed input is the likelier cause, and names its file
                _untouched(request, before.inputs, exc)
                raise
        if before is not None:
            if not os.path.lexists(partial) and before.rewritten(target):
                raise InvalidRollout(f"{INVALID}{request.output}: the generator wrote nothing to the path it was "
                                 f"given ({partial.name}) but wrote {request.output} itself: write the rollout to "
                                 "that path (generate's out, a command's {out}); the run moves it into place once "
                                 "checked")
            _untouched(request, before.inputs)
        if not os.path.lexists(partial):
            raise GeneratorError(f"{NO_ROLLOUT}{request.output}: the generator wrote nothing to the path it was "
                                 f"given{_suffixed(partial) or f' ({partial.absolute()})'}")
        _unshared(partial)
        problems = check_rollout(request, partial)
        if problems:
            source = None if folder is None else folder / request.output   # the file to look at, when copied
            raise InvalidRollout(_invalid(request, partial, problems, source)
                                 + ("" if source is not None else _reject(partial, store, request.output)))
        _read_only(partial)
        os.replace(partial, target)
        _clear_rejected(store, request.output)
    finally:
        _clear(partial)
    # hashed once per process (``regular_sha256``): the validator's check of this record reuses it
    return {"output": request.output, "sha256": regular_sha256(target), "request": request.digest,
            "generator": signature.digest, "seed": request.seed}


@dataclass(frozen=True)
class _Before:
    """A rollout's files before its generator ran, each checked after it: its conditioning files
    (``_inputs_state``, ``_untouched``) and its place (``_state`` and the SHA-256 of a regular file there: a
    generator that wrote there, not to its out)."""

    inputs: Mapping[str, FileState | None]
    target: FileState | None
    target_sha256: str | None

    @classmethod
    def of(cls, request: Request, rollouts: Path) -> _Before:
        target = rollouts / request.output
        return cls(_inputs_state(request), _state(target), regular_sha256(target))

    def rewritten(self, target: Path) -> bool:
        """Whether the generator wrote ``target`` itself: its state moved and it does not hold the bytes it held (a
        chmod of the rollout there moves its ctime alone, and it was said to be written)."""
        return (_state(target) not in (self.target, None)
                and (self.target_sha256 is None or regular_sha256(target) != self.target_sha256))


def _state(path: Path, *, follow: bool = False) -> FileState | None:
    """What tells a file written anew from the one that was there (``FileState``: a write moves its ctime, which a
    generator putting the mtime back does not undo); None: nothing there."""
    try:
        return FileState.of(path.stat() if follow else path.lstat())
    except OSError:
        return None


def _inputs_state(request: Request) -> dict[str, FileState | None]:
    """Each conditioning file's ``FileState`` (None: not there), by its path in the request."""
    return {c.path: _state((request.root or Path()) / c.path, follow=True) for c in request.conditioning}


def _untouched(request: Request, before: Mapping[str, FileState | None],
               failed: GeneratorError | None = None) -> None:
    """GeneratorError naming the first conditioning file the generator changed (wrote into, replaced or removed): a
    rollout made from other inputs than its request pins. It is the run's own copy (``staged``), so the dataset's
    file is as it was, and the next run, finding the copy changed, stages it again. A file whose ``FileState``
    moved is read again and fails only when its bytes are not the SHA-256 the request pins: a chmod or a hard link
    moves the ctime alone. ``failed``: how the generator failed besides (its exit code), said after the file, which
    a bare exit code left unnamed."""
    after = _inputs_state(request)
    pinned = {c.path: c.sha256 for c in request.conditioning}
    for path, was in before.items():
        if after.get(path) != was and not _holds_pinned((request.root or Path()) / path, pinned[path]):
            raise GeneratorError(f"{(request.root or Path()) / path}: changed while the generator ran, a file it is "
                                 "given to read (the run's copy: the dataset's file it came from is as it was, and "
                                 "the next run stages it again)" + (f"; {failed}" if failed else ""))


def _holds_pinned(path: Path, sha256: str) -> bool:
    """Whether the regular file ``path`` names (through a symlink, as the generator opens it) holds the bytes of
    that SHA-256; False where none can be read there."""
    try:
        return sha256_regular(path) == sha256
    except (FileError, OSError):
        return False


def _unshared(path: Path) -> None:
    """A rollout the generator left as a hard link to a file of its own (``ln mine.mp4 {out}``) made a copy of its
    own, before it is checked: kept, it is made read-only and shared with the cache and every run directory, so
    that inode would have been the user's file made read-only, and the kept rollout changed whenever it was."""
    with contextlib.suppress(FileNotFoundError):
        held = path.lstat()
        if S_ISREG(held.st_mode) and held.st_nlink > 1:
            with atomic_path(path, suffix=path.suffix) as tmp:
                shutil.copyfile(path, tmp)


READ_ONLY = 0o444   # a kept rollout's mode


def _read_only(path: Path) -> None:
    """Make a kept rollout read-only (``READ_ONLY``), for everyone who holds it: it is one inode with the sample
    cache's entry and with every run directory that took it by hard link, so a writer into it (a generator writing
    past the file it is given, a script editing a rollout in place) changed all of them; now one not root fails
    loudly (EACCES), and a rollout is changed only by putting a new file in its place, as the run does. Root, or the
    owner who makes it writable again, can still write into it: each reader (a run reusing it, ``--skip-generation``,
    the sample cache, ``pinbench check``) compares it with its record's SHA-256 and names it when it changed. A
    file this user does not own (a shared cache's) keeps its mode."""
    with contextlib.suppress(PermissionError):
        os.chmod(path, READ_ONLY)


def _changed(path: Path, kept: Any, what: str) -> str:
    """The line that says the rollout at ``path`` is not the file its record kept (SHA-256 ``kept``)."""
    sha256 = regular_sha256(path)
    now = f"SHA-256 {sha256[:12]}..." if sha256 is not None else "not a regular file"
    return f"{path}: {what} ({now}, kept {str(kept)[:12]}...)"


def _invalid(request: Request, path: Path, problems: Sequence[str], source: Path | None = None) -> str:
    """``check_rollout``'s problems said of the rollout's name, or of ``source``, the file it was copied from (in
    the lead only: the hidden name it was made under, or the folder's, means nothing to the reader, and a link
    target keeps its own)."""
    return f"{INVALID}{source or request.output}: {'; '.join(p.removeprefix(f'{path}: ') for p in problems)}"


def _not_as_asked(requests: Sequence[Request], rollouts: Path, records: Mapping[str, SampleRecord],
                  checked: _Checked) -> dict[str, str]:
    """A ``--skip-generation`` run's check before scoring: why each stored rollout that is not what its request asks
    (``check_rollout``: a file swapped in after it was kept, at another size, rate or length) fails its sample.

    A rollout still the file its record kept for this request (same SHA-256) is checked again without its decode
    (``kept``): a check made stricter since it was kept let this run score it. One of the right shape that is
    another file than the one kept fails too (two rollouts of one size, rate and length swapped were scored as each
    other's); a missing one is left to the recipe, which counts it as it counts any missing rollout. A sample whose
    generation failed fails with the generating run's reason, and one whose rollout was made for another request
    fails too: a rollout an earlier generator left in its place was scored, with its stored score, as the recorded
    generator's."""
    failures = {}
    for request in requests:
        path, kept = rollouts / request.output, records.get(request.id)
        if kept is not None and not kept.ok:   # what the generating run said, whatever lies at its place
            failures[request.id] = not_made(kept.error or "its generation failed")
            continue
        if not os.path.lexists(path):
            continue
        if kept is not None and kept.result.get("request") != request.digest:
            failures[request.id] = (f"{request.output} was made for another request (its inputs or options changed "
                                    "since); generate it again without --skip-generation")
            continue
        ours = kept is not None
        sha256 = regular_sha256(path)
        same = ours and sha256 == kept.result.get("sha256")
        problems = checked(request, path, str(sha256)) if same else check_rollout(request, path)
        if not problems and ours and not same:
            problems = [f"{path}: another file than the one generation kept (SHA-256 {str(sha256)[:12]}..., kept "
                        f"{str(kept.result.get('sha256'))[:12]}...); generate it again without --skip-generation"]
        if problems:
            failures[request.id] = _invalid(request, path, problems) + (
                " (kept before that was checked); generate it again without --skip-generation" if same else "")
    if failures:
        sid, why = next(iter(failures.items()))
        print(f"generate: {counted(len(failures), 'sample')} without the rollout their requests ask for, failed "
              f"(e.g. {sid}: {why})", file=sys.stderr, flush=True)
    return failures


def _never_generated(requests: Sequence[Request], rollouts: Path, records: Mapping[str, SampleRecord]
                     ) -> dict[str, str]:
    """A ``--skip-generation`` run's requests that no generating run ever made (no record of it, no rollout: the
    shard that owned it never ran, or a --limit that stopped short of it), with why.

    Why: their samples were never computed, so they count missing (``Run.gather``), as a merge counts a never-run
    shard's samples; they had counted failed ('the model produced none'), charged to the model."""
    return {r.id: f"generation: no run stored {r.output} or a record of it" for r in requests
            if r.id not in records and not os.path.lexists(rollouts / r.output)}


def _overwritten(summary: RunSummary, rollouts: Path, digests: InputDigests) -> RunSummary:
    """The step's summary with every kept rollout whose file is no longer the one checked and recorded failed by name
    (a generator that wrote over another sample's rollout: scoring it would score another rollout, or a damaged one);
    its stored record stays, and the next run sees the file changed and generates it again. A rollout in the state
    ``digests`` hashed it at is not read again."""
    changed = {}
    for sid, record in summary.records.items():
        if record.ok:
            path = rollouts / str(record.result.get("output", ""))
            if digests.regular(path) != record.result.get("sha256"):
                changed[sid] = dataclasses.replace(
                    record, status="failed", result=None, traceback=None,
                    error=f"{INVALID}{record.result.get('output')}: changed after it was checked and kept "
                          "(another request's generation wrote over it or removed it)")
    if not changed:
        return summary
    for sid in changed:
        print(f"generate: {sid}: {changed[sid].error}; failed, generated again by the next run",
              file=sys.stderr, flush=True)
    from_done = min(len(changed), summary.n_done)   # the summary does not say which were reused: done ones first
    return dataclasses.replace(summary, records={**summary.records, **changed},
                               n_failed=summary.n_failed + len(changed), n_done=summary.n_done - from_done,
                               n_reused=summary.n_reused - len(changed) + from_done)


REJECTED = "rejected"   # in the run's GENERATION folder: the last rollout of each output that failed the check


def _reject(partial: Path, store: Path, output: str) -> str:
    """Move a rollout that failed ``check_rollout`` to its ``output`` under ``store``'s ``REJECTED`` (an earlier one
    there replaced), where it is never scored nor reused: it was deleted, and with it what a user would open to see what
    went wrong. The words that name the folder (one for every sample: the run's "by reason" counts them as one
    reason), "" when it could not be moved (it is then removed, as before)."""
    rejects = store / REJECTED
    rejected = rejects / output
    try:
        if not _rejects_inside(store, output):
            return ""
        rejected.parent.mkdir(parents=True, exist_ok=True)
        _clear(rejected)
        os.replace(partial, rejected)
    except OSError:
        return ""
    return f" (kept to look at under {printable(str(rejects.absolute()))})"   # as the sample's other paths


def _clear_rejected(store: Path, output: str) -> None:
    """Remove the rejected rollout an earlier run left for ``output`` (``_reject``), once a rollout for it passed
    the check: it is no longer that request's answer. One that cannot be removed (a ``REJECTED`` the run may not
    write) is said by its path and left: it failed a sample whose rollout was in place. Without a ``REJECTED``
    folder (most runs) that one look is all: the walk for symlinks on the way was paid for every kept rollout."""
    rejected = store / REJECTED / output
    if not os.path.lexists(store / REJECTED) or not _rejects_inside(store, output):
        return
    try:
        _clear(rejected)
    except OSError as exc:
        print(f"generate: {printable(str(rejected.absolute()))}: an earlier run's rejected rollout of "
              f"{printable(output)}, not removed ({exc.strerror or exc}); the rollout kept in its place passed the "
              "check", file=sys.stderr, flush=True)


def _rejects_inside(store: Path, output: str) -> bool:
    """Whether ``output``'s place under ``store``'s ``REJECTED`` folder lies inside it: no folder on the way is a
    symlink (one planted at rejected/ or rejected/edge/ had the rejected rollout replace, and its clearing delete, a
    file outside the run directory) nor a file."""
    return (symlink_on_the_way(store, PurePosixPath(REJECTED, output).parent) is None
            and blocking_parent(store / REJECTED / output) is None)


def _suffixed(partial: Path) -> str:
    """What a generator wrote at its out with a suffix added (``out + '.mp4'``, a tool's own extension), removed
    (no partial's name: no rerun removed it, one more hidden file each run); the words that name it, else ""."""
    wrote = sorted(path for path in partial.parent.glob(f"{glob.escape(partial.name)}?*")
                   if not PARTIAL_ROLLOUT.fullmatch(path.name))   # another request's partial, not this one's
    for path in wrote:
        _clear(path)
    return (f" ({partial.name}) but wrote {wrote[0].name} beside it: write the rollout to that very path (a "
            "command's {out}), adding nothing to its name") if wrote else ""


def _clear(path: Path) -> None:
    """Remove what a generator left where a rollout is made: a file, a link (not what it points to) or a folder,
    which would otherwise fail that sample on every rerun (unlink of a folder raises)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class _Origin(JsonBlock, where=GENERATOR_FILE):
    """Who made a run's stored rollouts (``GENERATOR_FILE``): a later ``--skip-generation`` run says so too."""

    generator: str
    signature: Signature | None = None


def _stored_origin(path: Path) -> _Origin | None:
    """Who made the rollouts an earlier run stored; None when it says none; RecipeError (one line naming the file) when
    what is there is not one."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return _Origin.from_json(loads_finite_json(read_data_file(path)), f"{path}: $")
    except ValueError as exc:   # FileError, bad JSON, or not an origin
        raise RecipeError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None


def _provenance(made: _Origin, requests: Sequence[Request], records: Mapping[str, SampleRecord]) -> Generated:
    """What the scorecard records of the generation: the generator and its signature, the requests' digest, the
    seed of every request and how long each stored rollout took."""
    return Generated(generator=made.generator, signature=made.signature, requests=requests_digest(requests),
                     n_requests=len(requests), seeds={r.id: r.seed for r in requests if r.seed is not None},
                     seconds={r.id: round(records[r.id].seconds, 3) for r in requests
                              if r.id in records and records[r.id].ok})


FOLDER = "is a directory"   # ``planted``'s word for a folder: the one thing no link is renamed over


class RolloutCache(SampleCache):
    """The generation step's sample cache: each rollout's record and, beside it (``SampleCache.file``), the rollout,
    so that another run directory (a second ``--out``, a run moved aside after its inputs changed) takes it instead
    of generating it again. Its scope names the generator's signature: two generators never share an entry. A hit is
    placed only when its record is this task's, by this generator, and its file the one that record names (SHA-256):
    a bad entry costs its rollout, generated again, and never leaves a file among the run's rollouts. Its rollout is
    checked against its request again (``check_rollout``: one ``video_info``), as a check added since it was kept
    would have refused it, and the key names no check; its frames are not decoded again (``kept``: ``get`` has
    verified its bytes are its record's SHA-256, those the run that kept it decoded). It is linked (else copied) to
    its place, where the step's validator (``_Kept``) checks it as it checks a rollout of the run's own."""

    min_seconds = 0.0   # every rollout is worth keeping

    def __init__(self, base: SampleCache, signature: Signature, rollouts: Path, requests: Mapping[str, Request]
                 ) -> None:
        super().__init__(base.root, f"{base.scope}/{signature.digest}", base.implementation)
        self.rollouts, self.requests = rollouts, requests   # by sample id
        self.outputs = {sid: request.output for sid, request in requests.items()}
        self.generator = signature.digest
        self._said: set[str] = set()

    def get(self, task_hash: str) -> Stored | None:
        stored = super().get(task_hash)
        if stored is None:
            return None
        result, output = stored.data.get("result"), self.outputs.get(stored.data.get("sample_id"))
        if (stored.data.get("input_hash") != task_hash or output is None or not isinstance(result, dict)
                or result.get("output") != output or result.get("generator") != self.generator):
            return None   # not this task's record by this generator (another's, planted or moved): never placed
        kept = self.file(task_hash)
        if not _holds(kept, result.get("sha256")):   # left in place, it stayed the rollout when generating it failed
            if (kind := planted(kept)) is not None:   # never opened nor followed
                print(f"generate: sample cache: {kept}: {kind} where the rollout of {output} is kept; skipped, "
                      f"generated again ({PRUNE} removes it)", file=sys.stderr, flush=True)
            elif os.path.lexists(kept):
                said = _changed(kept, result.get("sha256"), f"not the rollout it kept for {output}")
                print(f"generate: sample cache: {said}; not used, generated again", file=sys.stderr, flush=True)
            return None
        request = self.requests[stored.data["sample_id"]]
        if problems := check_rollout(request, kept, kept=True):   # _holds above: the bytes its record checked
            if not os.path.lexists(kept):   # a prune removed it since: a miss, as before its lookup (no "no rollout")
                return None
            print(f"generate: sample cache: {_invalid(request, kept, problems)} (kept before that was checked); not "
                  "used, generated again", file=sys.stderr, flush=True)
            return None
        return stored if _linked(kept, self.rollouts / output) else None

    def put(self, task_hash: str, body: bytes) -> None:
        try:
            output = json.loads(body)["result"]["output"]
        except (ValueError, KeyError, TypeError):
            return
        kept = self.file(task_hash)
        if (why := misplaced(kept.parent)) is not None:   # followed, the rollout was linked where the record is refused
            self._not_kept(kept, why)
            return
        if planted(kept) == FOLDER:   # no link is renamed over it (a FIFO or a symlink is replaced)
            print(f"generate: sample cache: {kept}: a folder where the rollout of {output} is kept; not kept "
                  f"({PRUNE} removes it)", file=sys.stderr, flush=True)
            return
        # the rollout first (an entry never names a file the cache lacks), by a hard link only: a copy would put a
        # run's every rollout on the cache's file system (a home folder's quota) before a prune brought it back;
        # but for another mount of the run's own file system (``_linked``)
        if output not in self.outputs.values():
            return
        source = self.rollouts / output
        if _linked(source, kept, copy=False):
            if kept.lstat().st_nlink == 1:
                self._once(f"rollouts copied there, not linked ({self.rollouts} is another mount of its file system, "
                           f"as a container's); each copy counts against ${SIZE_ENV}")
            super().put(task_hash, body)
        elif _same_device(source, self.root) is False:
            self._once(f"no rollout kept there, it is on another file system than {self.rollouts} (a copy of each "
                       "would fill it); another run directory generates them again")

    def _once(self, why: str) -> None:
        """How this step keeps its rollouts in the cache, when not as the cache's own hard links: said once (it
        kept none, or copies, unsaid)."""
        if why not in self._said:
            self._said.add(why)
            print(f"generate: sample cache: {self.root}: {why}", file=sys.stderr, flush=True)


def _cached(cache: RolloutCache, task: RolloutTask, kept: _Kept) -> bool:
    """Whether the cache holds a rollout of ``task`` by this generator, now placed in the run's rollouts. What it
    finds is held (``record_of``) for the step's own lookup: a prune between the two removed the entry of a rollout a
    batch had left out, placed, and its sample failed ("the generator wrote nothing")."""
    stored = cache.record_of(task.sample_id, input_hash(task), hold=True)
    try:
        return stored is not None and kept(stored.data["result"])
    except Stale:
        return False


def folder_sources(root: Path, requests: Sequence[Request], digests: InputDigests) -> dict[str, str]:
    """The SHA-256 of the file the ``folder`` generator copies for each request (through a symlink, as it reads
    it), by request id: what keys each rollout, so that a file changed there is copied again and no other. A request
    whose file is not a readable regular file is left out: copying it fails its sample by name. A file in the state
    ``digests`` hashed it at (the run directory's input digests) is not read again."""
    sources = {}
    for request in requests:
        with contextlib.suppress(InputFileError, OSError):
            sources[request.id] = digests.sha256(root / request.output)
    return sources


def _say_changed_sources(root: Path, requests: Sequence[Request], sources: Mapping[str, str],
                         records: Mapping[str, SampleRecord], signature: Signature) -> None:
    """A line naming each file in the ``folder`` generator's ``-g dir`` that changed since this run directory copied
    it for the same request and generator: its rollout is made again, the others reused (the summary says only
    "inputs or options changed"); one gone (or a FIFO) is named too, its copy failing its sample."""
    for request in requests:
        record = records.get(request.id)
        if (record is None or not record.ok or record.result.get("request") != request.digest
                or record.result.get("generator") != signature.digest):
            continue
        copied, now = record.result.get("sha256"), sources.get(request.id)
        if now is None:   # gone, or a FIFO: nothing is copied, its sample fails by name
            print(f"generate: {root / request.output}: not a readable file now, where its rollout was copied from "
                  f"(SHA-256 {str(copied)[:12]}...); not reused", file=sys.stderr, flush=True)
        elif copied != now:
            print(f"generate: {root / request.output}: changed since its rollout was copied (SHA-256 {now[:12]}..., "
                  f"copied {str(copied)[:12]}...); copied again", file=sys.stderr, flush=True)


def _holds(path: Path, sha256: Any, digest: Callable[[Path], str | None] = regular_sha256) -> bool:
    """Whether ``path`` is a regular file of that SHA-256 (a FIFO or folder there is never opened), by ``digest``'s
    hash of it (``regular_sha256``'s kind: None where it is no regular file)."""
    return sha256 is not None and digest(path) == sha256


def _linked(source: Path, target: Path, *, copy: bool = True) -> bool:
    """``target`` made the same file as ``source`` (a regular file): a hard link, else (``copy``) a copy, put in place
    at once. False when it cannot be (a cache that cannot be written, or read, only costs the work). Without ``copy``
    still a copy where the link fails across two mounts of one file system (EXDEV on one device: ``--runtime
    docker``'s run directory and cache), which would otherwise never link: the bytes go where the run's are."""
    try:
        if not S_ISREG(source.lstat().st_mode) or blocking_parent(target) is not None or planted(target) == FOLDER:
            return False
        with atomic_path(target, suffix=target.suffix) as tmp:
            tmp.unlink()
            try:
                os.link(source, tmp)
            except OSError as exc:   # another file system, or links not allowed there
                if not (copy or exc.errno == errno.EXDEV and _same_device(source, tmp.parent)):
                    raise
                shutil.copyfile(source, tmp)
            _read_only(tmp)   # a link: the inode every holder shares (kept before read-only rollouts, too)
        # a rename of a link over the same file does nothing (POSIX): target was that file already, tmp is left
        tmp.unlink(missing_ok=True)
    except OSError:
        return False
    return True


def _same_device(one: Path, other: Path) -> bool | None:
    """Whether two paths are on one file system (its device), None when either cannot be looked at."""
    try:
        return os.stat(one).st_dev == os.stat(other).st_dev
    except OSError:
        return None


CHECKED_FILE = "checked.txt"   # in the generation folder: the kept rollouts this version's check passed


@functools.cache
def _check_version() -> str:
    """What a verdict of ``check_rollout`` holds for: the source of this module and of the video reader it calls
    (a check made stricter since is a change to one of them), and the PyAV that reader opens containers with and
    the FFmpeg libraries under it (an upgrade of either can read one otherwise; a PyAV built on the system's FFmpeg
    keeps its version across an FFmpeg upgrade)."""
    import av  # loaded by the video reader already

    from pinbench.media import video

    sources = b"".join(Path(f).read_bytes() for f in (__file__, video.__file__))
    libraries = sorted(av.library_versions.items())
    return hashlib.sha256(sources + f"\nav {av.__version__} {libraries}".encode()).hexdigest()[:16]


class _Checked:
    """The kept rollouts that passed this version's ``check_rollout`` (``kept``), one line each in the run's
    ``CHECKED_FILE`` (check version, request digest, the recipe's container rule, SHA-256): a rerun that changed
    none of these reads no container again (a check is ~0.7 ms a small rollout, ~15 times the rest of reusing it).
    Written with the keys this run looked up and those of ``requests`` (the run's) it did not look up, another
    shard's share, so it holds no more lines than the run has rollouts."""

    def __init__(self, path: Path, requests: Sequence[Request]) -> None:
        self.path, self.requests = path, requests
        self.stored = frozenset(self._read())
        self.passed: set[str] = set()
        self.looked: set[str] = set()   # request digests
        self._any: dict[str, bool] = {}

    def _read(self) -> list[str]:
        # none yet, unreadable, or no regular file (a FIFO would block): every rollout is checked
        return (read_regular_text(self.path) or "").splitlines()

    def __call__(self, request: Request, path: Path, sha256: str) -> list[str]:
        """``check_rollout(request, path, kept=True)`` of the file of that SHA-256, unless it passed it before."""
        if request.recipe not in self._any:
            self._any[request.recipe] = _any_container(request.recipe)
        self.looked.add(request.digest)
        key = f"{_check_version()} {request.digest} {self._any[request.recipe]} {sha256}"
        if key in self.stored or key in self.passed:
            self.passed.add(key)
            return []
        problems = check_rollout(request, path, kept=True)
        if not problems:
            self.passed.add(key)
        return problems

    def save(self) -> None:
        """Keep the verdicts, and the file's lines (read again: a shard may have written since) of this version and
        of a request of the run that this one did not look up: shards share the generation folder and each looks
        up its own share only, so keeping its own lines alone dropped the others'. One that cannot be written costs
        a check on the next run, never this run. The lock beside the file is held from that read to the write: two
        shards saving at once each wrote the file it read before the other's write, dropping the other's lines."""
        version = _check_version()
        with contextlib.suppress(OSError, FileError), exclusive(self.path.with_name(f".{self.path.name}.lock")):
            others = [line.split(" ") for line in self._read()]
            others = [key for key in others if len(key) == 4 and key[0] == version and key[1] not in self.looked]
            if others:
                of_run = {request.digest for request in self.requests}
                self.passed.update(" ".join(key) for key in others if key[1] in of_run)
            write_if_changed(self.path, "".join(f"{key}\n" for key in sorted(self.passed)))


class _Kept:
    """A stored rollout is reused when it was made by this generator (its record's signature), its file is still
    the one generated (same SHA-256) and it passes this version's rollout check (``check_rollout``, its decode not
    repeated: a check made stricter since it was kept had let a rerun score it); the task's key says it was made
    for this request (``requests``: by output). With ``sources`` (the ``folder`` generator's: each output's file
    there, its SHA-256; None: not readable) it must also be that file's copy: the task's key was hashed before the
    copy, which a file changed meanwhile would have made of other bytes. A rollout in the state ``digests`` hashed it
    at is not read again."""

    def __init__(self, rollouts: Path, signature: Signature, requests: Mapping[str, Request], checked: _Checked,
                 digests: InputDigests, sources: Mapping[str, str | None] | None = None) -> None:
        self.rollouts, self.signature, self.requests, self.sources = rollouts, signature, requests, sources
        self.checked, self.digests = checked, digests
        self._said: set[Path] = set()

    def __call__(self, result: Mapping[str, Any]) -> bool:
        if result.get("generator") != self.signature.digest:
            raise Stale("generator changed")
        if self.sources is not None and self.sources.get(str(result.get("output"))) != result.get("sha256"):
            raise Stale(f"{result.get('output')}: not a copy of its file in -g dir as that file is now (it changed "
                        "while it was copied)")
        path = self.rollouts / str(result.get("output", ""))
        if not _holds(path, result.get("sha256"), self.digests.regular):
            if os.path.lexists(path) and path not in self._said:   # (said once: records are judged newest first)
                self._said.add(path)
                said = _changed(path, result.get("sha256"), "changed since it was kept")
                print(f"generate: {said}; generated again", file=sys.stderr, flush=True)
            raise Stale("the rollout file changed or is gone")
        request = self.requests.get(str(result.get("output")))
        if request is None:   # its key matched a request of another output: not this run's rollout
            raise Stale(f"{result.get('output')}: the output of no request of this run")
        if problems := self.checked(request, path, str(result.get("sha256"))):
            if path not in self._said:
                self._said.add(path)
                print(f"generate: {_invalid(request, path, problems)} (kept before that was checked); generated "
                      "again", file=sys.stderr, flush=True)
            raise Stale("the rollout fails this version's rollout check")
        return True


_PR_SET_CHILD_SUBREAPER = 36


def _adopt_orphans() -> None:
    """Make this guard the subreaper of all the command starts: a daemon that left its process group (``setsid``,
    a double fork) is reparented here, not to init, and ``_kill_adopted`` finds it. Why: the run's kill of the
    group missed it; it held the log's pipe (each request waited the sink's 5 s join) and outlived the run."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):   # no prctl (not Linux): the group kill alone
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _kill_adopted() -> None:
    """SIGKILL and reap every child of this process until none is left (what the command left running is
    reparented here as each of its parents dies). /proc is read only while a child is left (``_any_child``): the
    scan reads every process's stat: 30 ms or more a request at 1,100 processes (tools/bench_guard.py)."""
    while _any_child() and (children := _children(os.getpid())):
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _any_child() -> bool:
    """Whether this process has a child still running, those that ended reaped on the way (``waitpid``: one call,
    where ``_children`` reads /proc)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        return False
    return True


def _children(parent: int) -> list[int]:
    """The pids whose parent is ``parent``, from /proc (empty where there is none)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                fields = process_stat(entry.name)
                with contextlib.suppress(IndexError, ValueError):
                    if fields is not None and int(fields[1]) == parent:
                        found.append(int(entry.name))
    return found


def _reaping(proc: subprocess.Popen) -> int:
    """``proc``'s exit status, every other child of this guard that ends reaped while it runs: an orphan it adopted
    (a double fork) that ended stayed a zombie until the command's end, 2,000 of them in a Python generator's worker
    that ran ``tool &`` 2,000 times, each one a process slot of the user's and the container's. A command reaped
    by the guard's watch of its parent (``die_with_parent``, which kills the guard next) is said killed: the wait
    failed with "No child processes" and a traceback."""
    global _command
    _command = proc.pid   # once the wait below has reaped it, a SIGTERM leaves its status as it is (``_stopped``)
    pid = 0
    with contextlib.suppress(ChildProcessError):
        while pid != proc.pid:
            pid, status = os.waitpid(-1, 0)
    proc.returncode = os.waitstatus_to_exitcode(status) if pid == proc.pid else -signal.SIGKILL
    return proc.returncode


class _Stopped(Exception):
    """The guard was sent SIGTERM (the run's timeout, ``_stop``, or a ``kill 0`` in the command's group)."""


_waiting = False   # whether a SIGTERM stops the guard (``_stopped``): until it has its command's status
_command = 0   # the pid of the command the guard waits for (``_reaping``), 0 until then


def _stopped(signum: int, frame: Any) -> None:
    """SIGTERM's handler: raises once, and only until the guard has its command's status (``_waiting``, and its
    command not yet reaped: ``_reaped``). Why: one that came after the wait said SIGTERM for a command that had
    ended, also one as the wait returned, before its status was stored; a second, as the guard killed its command,
    skipped that kill, and the guard waited on the command; one as the guard said its command could not start
    raised out of the guard, which died with a traceback."""
    global _waiting
    if _waiting and not _reaped(_command):
        _waiting = False
        raise _Stopped


def _reaped(pid: int) -> bool:
    """Whether the command ``pid`` (0: none yet) was waited for: then its status is the guard's, though the wait
    that reaped it may not have returned it yet (a handler runs between any two steps, that wait's return and the
    store of its result too). Asked of the kernel, which tells a child no one waited for from one reaped."""
    if not pid:
        return False
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return False


def _guard(argv: Sequence[str]) -> int:
    """Run the command, then kill all it left (``_kill_adopted``), and its exit status. On SIGTERM the command is
    killed, what it left too, and the status is SIGTERM's: the guard ends last, after all it adopted."""
    global _waiting
    _adopt_orphans()
    try:
        try:
            _waiting = True   # before the handler, which drops a SIGTERM while it is unset
            signal.signal(signal.SIGTERM, _stopped)
            # it gets what the guard was handed (a worker's pipes, ``pass_fds``): what Python opens is not inheritable
            with subprocess.Popen(argv, close_fds=False) as proc:
                try:
                    return _reaping(proc)
                except _Stopped:
                    proc.kill()   # then waited for, as the with ends
                    raise
        finally:
            _waiting = False   # no SIGTERM raises from here on (one that could not start left it set)
    except _Stopped:
        return -signal.SIGTERM
    except OSError as exc:
        raise SystemExit(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
    finally:
        _kill_adopted()


def main(argv: Sequence[str]) -> None:
    if argv[:1] == ["--guard"] and len(argv) > 1:   # a command generator: run it, in this guarded process group
        die_with_parent(group=True, first=_kill_adopted)   # what it adopted too, out of its group (``setsid``)
        code = _guard(argv[1:])
        if code < 0:   # killed by a signal: end by the same one, so the run can name it (SystemExit(-9) exits 247)
            # and dump no core of the guard's (a command's SIGSEGV dumped one into the working folder, where dumps
            # are on): the command's own is the command's business
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            with contextlib.suppress(OSError):   # SIGKILL's and SIGSTOP's cannot be set, nor need to be
                signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        raise SystemExit(code)
    die_with_parent(group=True)   # a generator child, and all it started
    if len(argv) != 4:
        raise SystemExit("usage: python -m pinbench.ops.generation (MODULE:FACTORY REPLY_FD REQUEST_FD NAME | --guard "
                         "COMMAND...)")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())   # what the generator prints goes to the log
    serve(argv[0], int(argv[1]), int(argv[2]), argv[3])


if __name__ == "__main__":
    main(sys.argv[1:])

