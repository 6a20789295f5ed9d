"""``make docker-smoke``: build every image whose base can be reached and run each fixture inside it.

Why: the container path (the runtime contract, the non-root user, mounts, the network switched off for
scoring) breaks in ways no unit test sees; this builds the images for real and runs, for every recipe,
``pinbench run <recipe> --fixture --runtime docker`` (one stage, ``--network none``), and for the CPU
image its documented command (``make demo`` with the host's ``runs/`` mounted). An image whose base is
neither here nor pullable is skipped and named; a build or fixture that fails makes the exit non-zero.

``--base NAME=IMAGE`` swaps every base (final or builder stage) pinned to the images/base-images.yaml entry
NAME (a mirror, or a locally made stand-in where no registry is reachable); the images record the swap.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dockerlint import load_base_images, normalize_image

from pinbench.core.config import RecipeError
from pinbench.core.recipe import ContainerStage, Recipe, available_recipes
from pinbench.ops.docker_engine import ContainerError, docker_client, image_config, local_digest, run_in_container
from pinbench.ops.docker_runtime import (
    FINAL_BASE,
    build_from,
    hand_over,
    pinned_bases,
    recipe_dockerfiles,
    run_in_docker,
)
from pinbench.ops.export import export_recipe

REPO = Path(__file__).resolve().parents[1]
CPU_DOCKERFILE = "images/cpu/Dockerfile"
CPU_TAG = "pinbench/cpu:smoke"
CPU_RUNS = "/opt/pinbench/runs"


@dataclass
class Row:
    image: str
    base: str
    build_s: float | None = None
    size_gb: float | None = None
    fixture: str = "-"
    ok: bool = True

    def cells(self) -> list[str]:
        return [self.image, self.base, "-" if self.build_s is None else f"{self.build_s:.0f}",
                "-" if self.size_gb is None else f"{self.size_gb:.2f}", self.fixture]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


def reachable(base: str, client: Any) -> str | None:
    """None when ``base`` is here or its registry answers for it; else why not (one line)."""
    try:
        local_digest(base, client)
        return None
    except ContainerError:
        pass
    try:
        client.images.get_registry_data(base)
        return None
    except Exception as exc:  # any registry/API error means: cannot be reached from here
        detail = getattr(exc, "explanation", None) or str(exc)
        return f"base not here, registry not reachable ({' '.join(str(detail).split())[-160:]})"


def _bases_for(dockerfile: Path, swaps: dict[str, str], bases: dict[str, Any]) -> tuple[dict[str, str], str]:
    """({base ARG: image to build on}, short label for the table) for one Dockerfile under ``swaps``."""
    chosen, labels = {}, []
    for arg, pinned in pinned_bases(dockerfile).items():
        entry = next((b for b in bases.values() if normalize_image(b.image) == normalize_image(pinned)), None)
        name = entry.name if entry else pinned
        chosen[arg] = swaps.get(name, pinned)
        label = f"{name} -> {swaps[name]}" if name in swaps else name
        labels.append(label if arg == FINAL_BASE else f"{arg}: {label}")
    return chosen, "; ".join(labels)


def _unreachable(chosen: dict[str, str], client: Any) -> str | None:
    return next((why for why in (reachable(image, client) for image in chosen.values()) if why), None)


def _build(row: Row, context: Path, dockerfile: str, tag: str, bases: dict[str, str], client: Any,
           logs: Path) -> bool:
    """Build one image into ``row``; its full log goes to ``logs/<tag>.build.log``, its last line to the table."""
    lines: list[str] = []
    started = time.monotonic()
    try:
        build_from(context, dockerfile, tag, bases=bases, client=client, log=lines.append)
    except (ContainerError, RecipeError) as exc:
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{tag.replace('/', '_').replace(':', '_')}.build.log"
        log.write_text("\n".join([*lines, str(exc)]) + "\n")
        last = next((line.strip() for line in reversed(lines) if line.strip()
                     and not line.startswith((" ---> ", "Removing intermediate container"))), "")
        code = str(exc).rpartition("returned a non-zero code:")[2].strip()
        row.fixture = f"BUILD FAILED ({'exit ' + code + ': ' if code else ''}{last or _one_line(exc)}; log {log})"
        row.ok = False
        return False
    row.build_s = time.monotonic() - started
    row.size_gb = client.images.get(tag).attrs["Size"] / 1e9
    return True


def smoke_cpu_image(bases: dict[str, str], label: str, out: Path, client: Any) -> Row:
    """The CPU image, run as its README says: its own CMD, ``runs/`` made (and owned) first, mounted, network off."""
    row = Row(f"{CPU_TAG} ({CPU_DOCKERFILE})", label)
    if (why := _unreachable(bases, client)) is not None:
        row.fixture = f"SKIPPED: {why}"
        return row
    if not _build(row, REPO, CPU_DOCKERFILE, CPU_TAG, bases, client, out / "logs"):
        return row
    runs = out / "cpu-runs"
    runs.mkdir(parents=True, exist_ok=True)
    user = None
    if os.getuid() == 0:  # the README's root variant: hand runs/ and all in it to the image's user (chown -R)
        hand_over([runs], "10001:10001")
    else:
        user = f"{os.getuid()}:{os.getgid()}"
    lines: list[str] = []
    command = image_config(CPU_TAG, client).cmd
    code = run_in_container(CPU_TAG, command, stage="demo", mounts={runs: CPU_RUNS}, user=user, client=client,
                            log=lines.append)
    report = runs / "demo" / "report" / "index.html"
    row.ok = code == 0 and report.is_file()
    row.fixture = (f"PASS ({' '.join(command)}, runs/ mounted, --network none)" if row.ok
                   else f"FAIL (exit {code}): {lines[-1] if lines else 'no output'}")
    return row


def smoke_recipe(recipe: Recipe, swaps: dict[str, str], bases: dict[str, Any], out: Path, client: Any) -> list[Row]:
    """Build each of the recipe's images; run its fixture in the scoring image if that one built."""
    context = export_recipe(recipe, out / "export" / recipe.name, force=True)
    scoring = [s for s in recipe.stages if s.argv[0] == "run"][-1].dockerfile
    rows, built = [], set()
    for dockerfile in recipe_dockerfiles(recipe):
        tag = recipe.stage_image(ContainerStage(name="build", dockerfile=dockerfile))
        chosen, label = _bases_for(context / dockerfile, swaps, bases)
        row = Row(f"{tag} ({recipe.dir.name}/{dockerfile})", label)
        rows.append(row)
        if (why := _unreachable(chosen, client)) is not None:
            row.fixture = f"SKIPPED: {why}"
            continue
        if _build(row, context, dockerfile, tag, chosen, client, out / "logs"):
            built.add(dockerfile)
    if scoring in built:
        row = rows[recipe_dockerfiles(recipe).index(scoring)]
        cfg = recipe.config(fixture=True, out_dir=out / "runs" / recipe.name, runtime="docker")
        lines: list[str] = []
        code = run_in_docker(recipe, cfg, client=client, log=lines.append)
        card = cfg.out_dir / "scorecard.json"
        status = json.loads(card.read_text())["status"] if card.is_file() else "no scorecard"
        row.ok = code == 0 and status == "complete"   # exit 0 without a complete scorecard is no pass
        row.fixture = f"{'PASS' if row.ok else 'FAIL'} (--fixture --runtime docker, exit {code}, {status})"
    return rows


# How long a sample took: the one field of a stored record two runs of the same inputs and code may differ in.
TIMING_FIELDS = frozenset({"seconds"})


def stored_records(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every record a run directory holds, by file: each store log (``samples/*.jsonl``) and merged
    ``samples.jsonl``, at any depth (a recipe's stages keep their own stores), keyed by the path under run_dir."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(run_dir.rglob("*.jsonl")):
        rel = path.relative_to(run_dir).as_posix()
        if path.name == "samples.jsonl":
            found[rel] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        elif path.parent.name == "samples":
            found[rel] = [json.loads(line)["record"] for line in path.read_text().splitlines() if line.strip()]
    return found


def run_differences(a: Path, b: Path) -> list[str]:
    """What differs between two run directories of the same recipe: any field of any stored record but its
    timing (so ``input_hash``, the reuse key, and ``implementation`` count), and any metric of the scorecard."""
    problems: list[str] = []
    records_a, records_b = stored_records(a), stored_records(b)
    for rel in sorted(records_a.keys() | records_b.keys()):
        if rel not in records_a or rel not in records_b:
            problems.append(f"{rel}: only in {a if rel in records_a else b}")
            continue
        if len(records_a[rel]) != len(records_b[rel]):
            problems.append(f"{rel}: {len(records_a[rel])} records in {a}, {len(records_b[rel])} in {b}")
        for x, y in zip(records_a[rel], records_b[rel], strict=False):
            fields = sorted({k for k in x.keys() | y.keys() if k not in TIMING_FIELDS and x.get(k) != y.get(k)})
            if fields:
                problems.append(f"{rel}: sample {x.get('sample_id')!r}: {', '.join(fields)} differ")
    cards = [p / "scorecard.json" for p in (a, b)]
    if not all(card.is_file() for card in cards):
        problems.append(f"no scorecard in {' and '.join(str(c.parent) for c in cards if not c.is_file())}")
    else:
        metrics_a, metrics_b = (json.loads(card.read_text())["metrics"] for card in cards)
        problems += [f"scorecard metric {name}: differs" for name in sorted(metrics_a.keys() | metrics_b.keys())
                     if metrics_a.get(name) != metrics_b.get(name)]
    return problems


def render(rows: list[Row]) -> str:
    header = ["image (Dockerfile)", "base", "build s", "size GB", "fixture in the image"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row.cells()) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/docker_smoke.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", action="append", default=[], metavar="NAME=IMAGE",
                        help="build on IMAGE wherever images/base-images.yaml entry NAME is the pinned base")
    parser.add_argument("--recipe", action="append", default=[], help="only these recipes (default: all)")
    parser.add_argument("--no-cpu-image", action="store_true", help="skip images/cpu")
    parser.add_argument("--out", type=Path, default=Path("build/docker-smoke"))
    parser.add_argument("--prune", action="store_true", help="remove each recipe's images after its row "
                        "(small disks, e.g. CI runners)")
    args = parser.parse_args(argv)
    bases = load_base_images(REPO / "images" / "base-images.yaml")
    swaps = dict(item.partition("=")[::2] for item in args.base)
    unknown = sorted(set(swaps) - set(bases))
    if unknown or not all(swaps.values()):
        print(f"error: --base takes NAME=IMAGE with NAME one of {', '.join(bases)}", file=sys.stderr)
        return 2
    try:
        client = docker_client()
        recipes = available_recipes()
        selected = [recipes[name] for name in args.recipe] if args.recipe else list(recipes.values())
    except (ContainerError, KeyError) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    if not args.no_cpu_image:
        chosen, label = _bases_for(REPO / CPU_DOCKERFILE, swaps, bases)
        rows.append(smoke_cpu_image(chosen, label, args.out.resolve(), client))
        print(render(rows[-1:]).splitlines()[-1], flush=True)
    for recipe in selected:
        recipe_rows = smoke_recipe(recipe, swaps, bases, args.out.resolve(), client)
        rows += recipe_rows
        for row in recipe_rows:
            print(render([row]).splitlines()[-1], flush=True)
        if args.prune:
            for dockerfile in recipe_dockerfiles(recipe):
                try:
                    client.images.remove(recipe.stage_image(ContainerStage("build", dockerfile=dockerfile)))
                except Exception:  # not built: nothing to remove
                    pass
            client.api.prune_builds()
    table = render(rows)
    (args.out / "table.md").write_text(table + "\n")
    print("\n" + table)
    failed = [row.image for row in rows if not row.ok]
    if failed:
        print(f"docker-smoke: FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
