"""Every Dockerfile in the repository passes the image policy and hadolint.

Recipe Dockerfiles are linted in their real build context, the recipe's export (what
``make build-<name>`` builds from), so a COPY source that the export lacks fails here. The policy
includes the runtime contract: no ENTRYPOINT (the runtime sends ``pinbench ...`` as the command), the one
non-root user 10001:10001, no account that collides with the base's, a swappable ``BASE_IMAGE``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dockerlint import dockerfile_context, lint_dockerfile, load_base_images, run_hadolint

from pinbench.export import export_recipe
from pinbench.recipe import available_recipes

REPO = Path(__file__).resolve().parents[1]
BASES = load_base_images(REPO / "images" / "base-images.yaml")
RECIPES = list(available_recipes().values())
IMAGE_DOCKERFILES = sorted(p for p in (REPO / "images").rglob("Dockerfile*") if p.suffix != ".dockerignore")


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("exports")
    return {r.name: export_recipe(r, root / r.name) for r in RECIPES}


def _recipe_dockerfiles() -> list[tuple[str, str]]:
    return [(r.name, p.name) for r in RECIPES for p in sorted(r.dir.glob("Dockerfile*"))
            if p.suffix != ".dockerignore"]


def test_every_recipe_has_a_dockerfile() -> None:
    assert {name for name, _ in _recipe_dockerfiles()} == {r.name for r in RECIPES}


def test_every_stage_image_has_a_dockerfile() -> None:
    for recipe in RECIPES:
        assert {s.dockerfile for s in recipe.stages} <= {name for r, name in _recipe_dockerfiles() if r == recipe.name}


@pytest.mark.parametrize(("recipe", "dockerfile"), _recipe_dockerfiles())
def test_recipe_dockerfile_policy(exports: dict[str, Path], recipe: str, dockerfile: str) -> None:
    path = exports[recipe] / dockerfile
    findings = lint_dockerfile(path, exports[recipe], bases=BASES)
    findings += run_hadolint(path)
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.parametrize("path", IMAGE_DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_image_dockerfile_policy(path: Path) -> None:
    findings = lint_dockerfile(path, dockerfile_context(path), bases=BASES)
    findings += run_hadolint(path)
    assert not findings, "\n".join(map(str, findings))
