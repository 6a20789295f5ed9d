"""The recipe image and lock agree with pins.yaml; the env-var table covers every option."""

from __future__ import annotations

import re
from pathlib import Path

from pinbench.core.recipe import get_recipe
from pinbench_recipes.remembench.weights import BAKED_DIR, load_recipe_pins

RECIPE = get_recipe("remembench")

RECIPE_DIR = Path(__file__).resolve().parents[1]
# Dockerfiles and locks sit beside the recipe here, at the top of an exported recipe (pinbench export).
BUILD_DIR = RECIPE_DIR if (RECIPE_DIR / "Dockerfile").is_file() else RECIPE_DIR.parents[1]


def _dockerfile_args() -> dict[str, str]:
    text = (BUILD_DIR / "Dockerfile").read_text()
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.MULTILINE))


def test_dockerfile_pins_match_pins_yaml():
    pins = load_recipe_pins()
    args = _dockerfile_args()
    assert args["BASE_IMAGE"] == pins.images["eval"]["base"]
    assert args["PI3_COMMIT"] == pins.upstream["pi3"].commit
    assert args["ALEXNET_URL"] == pins.urls["alexnet"].url and args["ALEXNET_SHA256"] == pins.urls["alexnet"].sha256
    assert args["WEIGHTS_DIR"] == str(BAKED_DIR)   # where the recipe looks for baked weights by itself
    text = (BUILD_DIR / "Dockerfile").read_text()
    for name in ("clip", "pi3x"):
        pin = pins.huggingface[name]
        assert pin.revision in text and all(digest in text for digest in pin.sha256.values() if digest)
    assert "--require-hashes" in text and re.search(r"^USER 10001:10001$", text, flags=re.MULTILINE)


def test_requirements_pin_the_paper_metric_versions_and_the_lock_is_hashed():
    wanted = (BUILD_DIR / "requirements.in").read_text()
    assert "lpips==0.1.4" in wanted and "scikit-image==0.26.0" in wanted
    lock = (BUILD_DIR / "requirements.lock").read_text()
    entries = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n((?:\s+--hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", lock,
                         flags=re.MULTILINE)
    names = {name.lower().replace("_", "-") for name, _, _ in entries}
    assert {"lpips", "scikit-image", "open-clip-torch", "torch", "setuptools"} <= names
    assert len(entries) == len(re.findall(r"^[A-Za-z0-9_.-]+==", lock, flags=re.MULTILINE))


def test_every_option_has_an_environment_twin():
    assert all(spec.env for spec in RECIPE.options.values())
    assert {spec.env for spec in RECIPE.options.values()} <= set(RECIPE.env_vars)
    assert RECIPE.version == "1.1.1" and RECIPE.name == "remembench"
