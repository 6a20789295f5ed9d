"""Pins, locks and Dockerfiles: commits, revisions, digests, sam2/_C, transformers, xformers, no token."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from pinbench.core.pins import load_pins
from pinbench.core.recipe import get_recipe

RECIPE = get_recipe("paibench-c")

RECIPE_DIR = Path(RECIPE.dir)
REPO_ROOT = RECIPE_DIR.parents[1]
# Dockerfiles and locks sit beside the recipe here, at the top of an exported recipe (pinbench export).
BUILD_DIR = RECIPE_DIR if (RECIPE_DIR / "Dockerfile").is_file() else RECIPE_DIR.parents[1]
DOCKERFILES = ("Dockerfile", "Dockerfile.generate")
EVALUATOR_COMMIT = "5864378a0e13e527336d916cc8e018afb0ef5fe3"
TASKS_COMMIT = "2c1404f7f95cb9afd309592bc1f6b83f24ae2495"
HEX40 = re.compile(r"[0-9a-f]{40}")


@pytest.fixture(scope="module")
def pins():
    return load_pins(RECIPE_DIR / "pins.yaml")


def test_upstream_commits(pins) -> None:
    assert pins.upstream["evaluator"].repo == "trungtpham/pai-bench-c-cosmos3"
    assert pins.upstream["evaluator"].commit == EVALUATOR_COMMIT
    assert pins.upstream["tasks"].commit == TASKS_COMMIT
    assert pins.upstream["tasks"].extra["path"].endswith("paibench_c/assets/tasks.json")
    assert TASKS_COMMIT in pins.urls["tasks_json"].url                 # the task list URL names the commit
    framework = pins.upstream["cosmos_framework"]
    assert framework.repo == "NVIDIA/cosmos-framework" and HEX40.fullmatch(framework.commit)


def test_hf_inputs_are_pinned_or_marked_to_resolve(pins) -> None:
    expected = {"dataset": "shi-labs/physical-ai-bench-conditional-generation", "cosmos3_nano": "nvidia/Cosmos3-Nano",
                "cosmos3_super": "nvidia/Cosmos3-Super", "grounding_dino_tiny": "IDEA-Research/grounding-dino-tiny"}
    for name, repo in expected.items():
        pin = pins.huggingface[name]
        assert pin.repo_id == repo
        assert (pin.revision is not None and HEX40.fullmatch(pin.revision)) or pin.resolve_required, name
    assert pins.huggingface["dataset"].repo_type == "dataset"


def test_evaluator_weights_are_urls_with_sha256_or_null_until_resolved(pins) -> None:
    assert set(pins.urls) >= {"sam2_hiera_large", "dover", "video_depth_anything_small", "tasks_json"}
    assert pins.urls["sam2_hiera_large"].url.endswith("/072824/sam2_hiera_large.pt")   # SAM 2.0, not 2.1
    for pin in pins.urls.values():
        assert pin.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", pin.sha256)


def test_the_public_content_pins_are_filled(pins) -> None:
    """Issue #9.4: the values public records give, so a first fetch verifies them and a mismatch fails."""
    sam2 = pins.urls["sam2_hiera_large"]
    assert (sam2.sha256, sam2.size) == ("7442e4e9b732a508f80e141e7c2913437a3610ee0c77381a66658c3a445df87b", 897952466)
    assert pins.urls["dover"].url.endswith("/v0.1.0/DOVER.pth")
    assert pins.urls["dover"].sha256 == "f4a42c0bbc94c94dd7409e7f40887d44c5c30314d1d09e7edf03cc35813b4838"
    dino = pins.huggingface["grounding_dino_tiny"].sha256
    assert dino["model.safetensors"] == "1a2412ef99bd74bcd3c2a246fa1e48581f8889a1300c9051974741314fc042f3"
    tasks = pins.urls["tasks_json"]
    assert tasks.git_blob == "3316d628583d8f0537f99a8b96232f5e4c70e9ac" and tasks.verifiable


def _base_images() -> dict[str, str]:
    data = yaml.safe_load((REPO_ROOT / "images" / "base-images.yaml").read_text())
    return {name: entry["image"] for name, entry in data.items()}


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_base_is_a_digest_pinned_image_of_its_pins(dockerfile: str, pins) -> None:
    text = (BUILD_DIR / dockerfile).read_text()
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.M).group(1)
    assert re.search(r"@sha256:[0-9a-f]{64}$", base)
    assert base in {pins.images["eval"]["base"], pins.images["generate"]["base"]}


@pytest.mark.skipif(not (REPO_ROOT / "images" / "base-images.yaml").is_file(),
                    reason="the repository's shared list of bases (images/base-images.yaml) is not in an export")
@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_base_is_a_shared_image(dockerfile: str) -> None:
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", (BUILD_DIR / dockerfile).read_text(), re.M).group(1)
    assert base in _base_images().values()


def test_evaluation_image_builds_the_pinned_evaluator_sam2_and_transformers(pins) -> None:
    text = (BUILD_DIR / "Dockerfile").read_text()
    assert f"ARG EVALUATOR_COMMIT={pins.upstream['evaluator'].commit}" in text
    assert 'checkout --detach "${EVALUATOR_COMMIT}"' in text and "rev-parse HEAD" in text
    assert "SAM2_BUILD_ALLOW_ERRORS=0" in text and "--no-build-isolation" in text
    assert "from sam2 import _C" in text
    assert "m.version('transformers') == '4.46.3'" in text
    assert "find_spec('xformers')" in text                              # fails the build if xformers appears
    assert "python3.10" in text
    assert "bake_weights" in text
    sam2 = (BUILD_DIR / "requirements.sam2.txt").read_text()
    assert re.search(r"^sam2==1\.1\.0 --hash=sha256:[0-9a-f]{64}$", sam2, re.M)


def test_evaluation_lock_is_hashed_and_pins_the_critical_versions() -> None:
    lock = (BUILD_DIR / "requirements.lock").read_text()
    pinned = dict(re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+) \\$", lock, re.M))
    assert pinned["transformers"] == "4.46.3"
    assert pinned["torch"] == "2.5.1"
    assert "xformers" not in pinned and "sam2" not in pinned
    assert "decord" in pinned and "opencv-python-headless" in pinned and "scikit-image" in pinned
    blocks = re.split(r"\n(?=[A-Za-z0-9])", lock.split("\n", 2)[2])
    assert all("--hash=sha256:" in block for block in blocks if "==" in block)
    assert "--python-version 3.10" in lock


def test_generation_image_installs_the_framework_from_its_own_lock(pins) -> None:
    text = (BUILD_DIR / "Dockerfile.generate").read_text()
    assert f"ARG FRAMEWORK_COMMIT={pins.upstream['cosmos_framework'].commit}" in text
    assert "uv sync --locked" in text
    assert "pinbench-commit" in text
    lock = (BUILD_DIR / "requirements.generate.lock").read_text()
    assert re.search(r"^uv==0\.12\.2 \\$", lock, re.M)


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_no_token_is_baked_and_the_image_runs_as_non_root(dockerfile: str) -> None:
    text = (BUILD_DIR / dockerfile).read_text()
    instructions = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert not re.search(r"^(ARG|ENV)\s+\S*(TOKEN|SECRET|PASSWORD)", instructions, re.M | re.I)
    assert "HF_TOKEN" not in instructions and not re.search(r"hf_[A-Za-z0-9]{10,}", text)
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0", "0:0")


def test_recipe_declares_its_container_stages() -> None:
    stages = {s.name: s for s in RECIPE.stages}
    assert stages["score"].network is False and stages["score"].needs_token is False
    assert stages["score"].dockerfile == "Dockerfile" and stages["generate"].dockerfile == "Dockerfile.generate"
    assert stages["fetch"].needs_token and stages["fetch"].network and not stages["fetch"].gpus
    assert RECIPE.version == "1.0.1" and RECIPE.checkpoints == ["Cosmos3-Nano", "Cosmos3-Super"]
