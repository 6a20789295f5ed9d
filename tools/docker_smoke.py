"""``make docker-smoke``: build every image whose base can be reached, run each fixture inside it, then the
real-engine tests, and say in one table what ran, what was skipped and why.

Why: the container path (the runtime contract, the non-root user, mounts, the network switched off for
scoring) breaks in ways no unit test sees; this builds the images for real and runs, for every recipe,
``pinbench run <recipe> --fixture --runtime docker`` (one stage, ``--network none``), and for the CPU
image its documented command (``make demo`` with the host's ``runs/`` mounted). Each run in an image is compared
with the same fixture run on the host: every stored record (reuse keys included) and every metric must be equal.
An image whose base is neither here nor pullable is skipped and named; a build or fixture that fails, a
difference from the host, a failed real-engine test or a test image left behind makes the exit non-zero.

``--base NAME=IMAGE`` swaps every base (final or builder stage) pinned to the images/base-images.yaml entry
NAME (a mirror, or a locally made stand-in where no registry is reachable: tools/standin_base.sh); the images
record the swap, and the real-engine tests (``pytest -m docker``) build their stand-in images on the swapped
python-3.11-slim too (PINBENCH_TEST_BASE_IMAGE). A real-engine test that is skipped is named in the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dockerlint import load_base_images, normalize_image

from pinbench.core.config import RecipeError
from pinbench.core.deploy import ContainerStage
from pinbench.core.recipe import Recipe, available_recipes
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
from pinbench.ops.launch import run_recipe

REPO = Path(__file__).resolve().parents[1]
CPU_DOCKERFILE = "images/cpu/Dockerfile"
CPU_TAG = "pinbench/cpu:smoke"
CPU_RUNS = "/opt/pinbench/runs"
TEST_BASE = "python-3.11-slim"             # the base-images.yaml entry the real-engine tests build on
TEST_BASE_ENV = "PINBENCH_TEST_BASE_IMAGE"
TEST_IMAGES = "pinbench-test/"              # what a real-engine test builds must be gone when it ends


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
    if not row.ok:
        row.fixture = f"FAIL (exit {code}): {lines[-1] if lines else 'no output'}"
        return row
    words = [f"{' '.join(command)}, runs/ mounted, --network none"]
    host = out / "host-demo"
    demo = subprocess.run([sys.executable, "-m", "pinbench", "demo", "--out", str(host)], capture_output=True,
                          text=True, check=False)
    if demo.returncode != 0:
        row.ok, words = False, [*words, f"the host's demo failed (exit {demo.returncode})"]
    for recipe in sorted(p.name for p in host.iterdir() if (p / "scorecard.json").is_file()):
        equal, said = host_comparison(host / recipe, runs / "demo" / recipe)
        row.ok &= equal
        words.append(f"{recipe} {said}")
    try:
        recorded = baked_base(CPU_TAG, client)
    except Exception as exc:  # docker.errors.ContainerError and friends: said in the row, never a traceback
        recorded, words = None, [*words, f"a plain docker run failed: {_one_line(exc)}"]
    row.ok &= recorded is not None and recorded["image"] == bases.get(FINAL_BASE)
    if recorded is not None:
        words.append(f"a plain docker run records container.base_image {recorded['image']} "
                     f"(differs_from_pinned {str(recorded['differs_from_pinned']).lower()})")
    row.fixture = f"{'PASS' if row.ok else 'FAIL'} ({'; '.join(words)})"
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
        said = f"--fixture --runtime docker, exit {code}, {status}"
        if row.ok:
            equal, compared = host_comparison(host_fixture(recipe, out), cfg.out_dir)
            row.ok, said = equal, f"{said}; {compared}"
        row.fixture = f"{'PASS' if row.ok else 'FAIL'} ({said})"
    return rows


# How long a sample took: the one field of a stored record two runs of the same inputs and code may differ in,
# beside what it ran on (the implementation's ``image``: the image's digest, None on the host; its ``packages``: the
# installed versions of the recipe's numerics, the host's venv and the image's lock files each their own).
TIMING_FIELDS = frozenset({"seconds"})
RAN_ON = frozenset({"image", "packages"})
# The run directories a smoke writes under --out: in the images, and the same fixtures on the host.
RUN_FOLDERS = ("cpu-runs", "host-demo", "runs", "host-runs")


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in record.items() if k not in TIMING_FIELDS}
    if isinstance(kept.get("implementation"), dict):
        kept["implementation"] = {k: v for k, v in kept["implementation"].items() if k not in RAN_ON}
    return kept


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
    timing and what it ran on (so ``input_hash``, the reuse key, and the recipe version and code digest count),
    and any metric of the scorecard."""
    problems: list[str] = []
    records_a, records_b = stored_records(a), stored_records(b)
    for rel in sorted(records_a.keys() | records_b.keys()):
        if rel not in records_a or rel not in records_b:
            problems.append(f"{rel}: only in {a if rel in records_a else b}")
            continue
        if len(records_a[rel]) != len(records_b[rel]):
            problems.append(f"{rel}: {len(records_a[rel])} records in {a}, {len(records_b[rel])} in {b}")
        for x, y in zip(records_a[rel], records_b[rel], strict=False):
            x, y = _comparable(x), _comparable(y)
            fields = sorted({k for k in x.keys() | y.keys() if x.get(k) != y.get(k)})
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


def host_comparison(host: Path, image: Path) -> tuple[bool, str]:
    """(equal, words for the table) of a fixture run on the host and the same fixture run in an image."""
    problems = run_differences(host, image)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return False, f"DIFFERS from the host: {problems[0]}{more}"
    n_records = sum(len(records) for records in stored_records(image).values())
    n_metrics = len(json.loads((image / "scorecard.json").read_text())["metrics"])
    return True, f"= host: {n_records} records (input_hash included), {n_metrics} metrics"


def host_fixture(recipe: Recipe, out: Path) -> Path:
    """The recipe's fixture run here, on the host (its output in out/logs/<recipe>.host.log)."""
    import contextlib

    cfg = recipe.config(fixture=True, out_dir=out / "host-runs" / recipe.name, offline=True)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    with open(out / "logs" / f"{recipe.name}.host.log", "w") as log, contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        run_recipe(cfg)
    return cfg.out_dir


BAKED_BASE = ("import json; from pinbench.core.provenance import container_state; "
              "print(json.dumps(container_state().get('base_image')))")


def baked_base(tag: str, client: Any) -> dict[str, Any] | None:
    """container.base_image as a plain `docker run` of the image records it: no runtime, no label, its ENV only."""
    output = client.containers.run(tag, ["python", "-c", BAKED_BASE], network_disabled=True, remove=True,
                                   entrypoint=[], environment={})
    return json.loads(output.decode().strip().splitlines()[-1])


def images_of_tests(client: Any) -> set[str]:
    return {tag for image in client.images.list() for tag in image.tags if tag.startswith(TEST_IMAGES)}


def engine_tests(swaps: dict[str, str], out: Path, client: Any) -> Row:
    """``pytest -m docker``: the runtime against this engine, its stand-ins built on the base swapped in for
    python-3.11-slim. Every skipped test is named with its reason; a failed one, or an image one leaves behind
    (``pinbench-test/...``), fails the row."""
    base = swaps.get(TEST_BASE)
    row = Row("real-engine tests (`pytest -m docker`)", f"{TEST_BASE} -> {base}" if base else TEST_BASE)
    env = {**os.environ, **({TEST_BASE_ENV: base} if base else {})}
    report = out / "engine-tests.xml"
    before = images_of_tests(client)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "docker", str(REPO / "tests"),
                           f"--junitxml={report}"], env=env, cwd=REPO, capture_output=True, text=True, check=False)
    row.build_s = time.monotonic() - started
    (out / "logs").mkdir(parents=True, exist_ok=True)
    (out / "logs" / "engine-tests.log").write_text(proc.stdout + proc.stderr)
    outcomes = junit_outcomes(report) if report.is_file() else {}
    passed = [name for name, (kind, _) in outcomes.items() if kind == "passed"]
    skipped = {name: why for name, (kind, why) in outcomes.items() if kind == "skipped"}
    failed = [name for name, (kind, _) in outcomes.items() if kind == "failed"]
    left = sorted(images_of_tests(client) - before)
    words = [f"{len(passed)} passed"]
    if skipped:
        words.append(f"{len(skipped)} SKIPPED: " + "; ".join(f"{name} ({why})" for name, why in skipped.items()))
    if failed:
        words.append(f"{len(failed)} FAILED: {', '.join(failed)}")
    if left:
        words.append(f"LEFT BEHIND: {', '.join(left)}")
    row.ok = not failed and not left and bool(outcomes) and proc.returncode in (0, 5)
    verdict = "PASS" if row.ok and not skipped else ("FAIL" if not row.ok else "PASS, but")
    row.fixture = f"{verdict} ({', '.join(words) if outcomes else 'no result: log ' + str(out / 'logs')})"
    return row


def junit_outcomes(report: Path) -> dict[str, tuple[str, str]]:
    """{test name: (passed | skipped | failed, the skip's reason)} from pytest's JUnit XML."""
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rpartition('.')[2]}::{case.get('name')}"
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[name] = ("failed", "")
        elif skipped is not None:
            reason = (skipped.get("message") or "").removeprefix("Skipped: ")
            outcomes[name] = ("skipped", " ".join(reason.split())[:160])
        else:
            outcomes[name] = ("passed", "")
    return outcomes


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
    parser.add_argument("--no-engine-tests", action="store_true", help="skip the real-engine tests (pytest -m docker)")
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
    for folder in RUN_FOLDERS:   # a smoke compares the runs it makes: an earlier smoke's stores would be reused
        shutil.rmtree(args.out / folder, ignore_errors=True)
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
    if not args.no_engine_tests:   # last: the Slurm test runs the dynamic-degree image built above
        rows.append(engine_tests(swaps, args.out.resolve(), client))
        print(render(rows[-1:]).splitlines()[-1], flush=True)
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
