"""Every Dockerfile in the repository passes the image policy and hadolint.

Recipe Dockerfiles are linted in their real build context, the recipe's export (what
``make build-<name>`` builds from), so a COPY source that the export lacks fails here. The policy
includes the runtime contract: no ENTRYPOINT (the runtime sends ``pinbench ...`` as the command), the one
non-root user 10001:10001, no account that collides with the base's, a swappable ``BASE_IMAGE``.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions, requires
from pathlib import Path

import pytest
from dockerlint import dockerfile_context, lint_dockerfile, load_base_images, run_hadolint

from pinbench.core.recipe import Recipe, available_recipes
from pinbench.ops.export import export_recipe

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


def _final_stage_records(path: Path) -> tuple[set[str], dict[str, str | None]]:
    """(ARGs declared, ENV values as written) in the final stage of a Dockerfile."""
    from dockerlint import _assignments, parse_dockerfile

    instructions, _ = parse_dockerfile(path.read_text(encoding="utf-8"))
    last = max(i for i, ins in enumerate(instructions) if ins.keyword == "FROM")
    args, env = set(), {}
    for ins in instructions[last + 1:]:
        for name, value in _assignments(ins.keyword, ins.args) if ins.keyword in ("ARG", "ENV") else ():
            (args.add(name) if ins.keyword == "ARG" else env.__setitem__(name, value))
    return args, env


ALL_DOCKERFILES = IMAGE_DOCKERFILES + [r.dir / name for r in RECIPES for rn, name in _recipe_dockerfiles()
                                       if rn == r.name]


@pytest.mark.parametrize("path", ALL_DOCKERFILES, ids=lambda p: str(p.resolve().relative_to(REPO)))
def test_every_image_records_its_bases_in_its_env(path: Path) -> None:
    """What `docker build --build-arg BASE_IMAGE=...` was given must be readable by a run inside the image without
    the engine (no label reaches a plain `docker run`): ENV PINBENCH_IMAGE_<ARG>=${ARG} and the pinned default."""
    from pinbench.ops.docker_runtime import pinned_bases

    args, env = _final_stage_records(path)
    for arg, pinned in pinned_bases(path).items():
        assert arg in args, f"{path}: the final stage does not declare ARG {arg}"
        assert env.get(f"PINBENCH_IMAGE_{arg}") == f"${{{arg}}}", f"{path}: no ENV PINBENCH_IMAGE_{arg}=${{{arg}}}"
        assert env.get(f"PINBENCH_IMAGE_{arg}_PINNED") == pinned, f"{path}: PINBENCH_IMAGE_{arg}_PINNED is not {pinned}"


@pytest.mark.parametrize(("recipe", "dockerfile"), _recipe_dockerfiles())
def test_no_image_sets_an_option_of_its_recipe(recipe: str, dockerfile: str) -> None:
    """An option's environment twin in an image's ENV sets that option in every run in the image: a --fixture run
    there is refused for one the fixture does not use (RememBench's REMEMBENCH_WEIGHTS_DIR refused every
    `pinbench run remembench --fixture --runtime docker`), and any run records it as the user's."""
    options = available_recipes()[recipe].options
    _, env = _final_stage_records(available_recipes()[recipe].dir / dockerfile)
    twins = sorted(f"{spec.env} (option {name})" for name, spec in options.items() if spec.env in env)
    assert not twins, f"{recipe}/{dockerfile} sets {', '.join(twins)} in its ENV"


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


def _imports(files: list[Path]) -> set[str]:
    """Top-level names of every module the files import (lazy imports inside functions included)."""
    found: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"__future__", "pinbench", "pinbench_recipes"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed(dockerfile: Path, lock: Path) -> set[str]:
    """Distributions an image installs: its hashed lock, the hashed requirement files its Dockerfile copies
    (a torch or sam2 pin, say) and ``"<name> @ git+...@<commit>"`` installs in the Dockerfile."""
    text = dockerfile.read_text(encoding="utf-8")
    sources = [lock] + [p for p in dockerfile.parent.glob("requirements*.txt") if p.name in text]
    names = [n for p in sources  # `name==version` or a hashed `name @ https://...whl`
             for n in re.findall(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)(?:==| @ https?://)", p.read_text(), flags=re.M)]
    names += re.findall(r"[\"']([A-Za-z0-9][A-Za-z0-9_.-]*) @ git\+", text)
    return {_norm(name) for name in names}


def _providers(module: str) -> set[str]:
    return {_norm(d) for d in packages_distributions().get(module, [module])}


# pinbench.media.video's optional decoders: needed in an image when the recipe offers them (`-o decoder=`).
DECODER_MODULES = {"opencv": "cv2", "decord": "decord", "pyav": "av"}
# pinbench's own dependencies (pyproject.toml [project] dependencies, as installed; extras excluded).
CORE = [re.split(r"[<>=!~;\[ ]", r)[0] for r in requires("pinbench") or [] if "extra ==" not in r]


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_the_scoring_image_installs_what_the_recipe_imports(recipe: Recipe) -> None:
    """A module missing from the image breaks `pinbench run` inside it. Benchmarks and tests do not run there."""
    own = _imports([p for p in recipe.dir.rglob("*.py")
                    if not {"tests", "benchmarks"} & set(p.relative_to(recipe.dir).parts)])
    decoders = set(recipe.options["decoder"].choices or ()) if "decoder" in recipe.options else set()
    needed = own | {DECODER_MODULES[d] for d in decoders}
    installed = _installed(recipe.dir / "Dockerfile", recipe.dir / "requirements.lock")
    missing = sorted(m for m in needed if not _providers(m) & installed)
    assert not missing, f"{recipe.name}: its image installs none of {missing}"


@pytest.mark.parametrize("lock", sorted(REPO.glob("recipes/*/requirements*.lock")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_image_installs_pinbench_core(lock: Path) -> None:
    """Every image runs `pinbench`, so it carries pinbench's own dependencies (pyproject.toml). The
    dynamic-degree image once lacked fastjsonschema, which validates every recipe.yaml: nothing started."""
    dockerfile = lock.parent / ("Dockerfile.generate" if "generate" in lock.name else "Dockerfile")
    missing = sorted(name for name in CORE if _norm(name) not in _installed(dockerfile, lock))
    assert not missing, f"{lock.relative_to(REPO)} lacks pinbench's core dependencies {missing}"
