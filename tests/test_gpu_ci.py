"""The GPU workflow's decisions (tools/gpu_ci.py) and its configuration (.github/gpu-ci.yaml), on CPU."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from pinbench.core.provenance import collect_provenance
from pinbench.core.recipe import get_recipe
from pinbench.core.reference import load_reference
from pinbench.core.runner import SampleRecord
from pinbench.core.scorecard import MetricSpec, build_scorecard, load_scorecard, write_scorecard

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_ci", REPO / "tools" / "gpu_ci.py")
gpu_ci = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_ci)


@pytest.fixture(scope="module")
def config() -> dict:
    return gpu_ci.load_config()


def _write_config(tmp_path: Path, change) -> Path:
    data = yaml.safe_load(gpu_ci.CONFIG.read_text())
    change(data)
    path = tmp_path / "gpu-ci.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_shipped_configuration_is_valid(config: dict) -> None:
    assert set(config["recipes"]) == {"paibench-c", "dynamic-degree", "remembench", "camerabench", "mind"}
    assert config["recipes"]["paibench-c"] == {"checkpoint": "Cosmos3-Nano", "limit": 4, "gpus": 4, "inputs": {}}
    assert config["recipes"]["dynamic-degree"]["inputs"]["videos"]["from"] == "synthetic"


def test_mind_ci_inputs_are_one_synthetic_layout(config: dict, tmp_path: Path) -> None:
    options = gpu_ci.write_inputs("mind", config["recipes"]["mind"], tmp_path)
    roots = dict(option.removeprefix("-o ").split("=", 1) for option in options)
    assert Path(roots["gt"]).name == "MIND-Data" and Path(roots["videos"]).name == "generated"
    assert Path(roots["gt"]).parent == Path(roots["videos"]).parent  # one layout: the videos mirror that GT
    assert any(Path(roots["videos"]).rglob("*.mp4")) and any(Path(roots["gt"]).rglob("*.mp4"))


def test_every_installed_recipe_is_configured(config: dict) -> None:
    """A new recipe that uses a GPU must say what the GPU CI runs for it (a recipe left out is never checked on a
    GPU); one that uses none (`flags.gpus: none`, as `pinbench new-recipe` writes) has nothing for it to check."""
    from pinbench.core.recipe import available_recipes

    gpu_recipes = [name for name, recipe in available_recipes().items() if recipe.flags.gpus != "none"]
    assert sorted(config["recipes"]) == sorted(gpu_recipes)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["recipes"]["paibench-c"].update(limit=0), r"schema violation at \$\.recipes\.paibench-c\.limit"),
    (lambda d: d["recipes"]["paibench-c"].update(colour="red"), "schema violation"),
    (lambda d: d["recipes"]["dynamic-degree"]["inputs"]["videos"].update(generator="download"), "schema violation"),
    (lambda d: d["recipes"].update({"no-such": {"checkpoint": "x", "limit": 1, "gpus": 1, "inputs": {}}}),
     r"recipes\.no-such: unknown recipe"),
    (lambda d: d["recipes"]["paibench-c"].update(limit=None, checkpoint="Cosmos3-Edge"),
     "a full run needs a published reference; Cosmos3-Edge is not one of Cosmos3-Nano, Cosmos3-Super"),
    (lambda d: d["recipes"]["dynamic-degree"]["inputs"].update(
        device={"from": "synthetic", "generator": "dynamic-degree-textures"}), "inputs.device: not a path option"),
    (lambda d: d["recipes"]["remembench"].update(gpus=4), "remembench uses one GPU per process"),
])
def test_a_bad_configuration_is_one_line(tmp_path: Path, change, message: str) -> None:
    with pytest.raises(gpu_ci.ConfigError, match=message) as err:
        gpu_ci.load_config(_write_config(tmp_path, change))
    assert "\n" not in str(err.value)


def test_plan(config: dict) -> None:
    everything = sorted(config["recipes"])   # every recipe that uses a GPU (the test above)
    one = everything[-1]
    folder = one.replace("-", "_")
    assert gpu_ci.plan(config, "schedule") == everything
    assert gpu_ci.plan(config, "push", changed=[f"recipes/{folder}/run.py", "README.md"]) == [one]
    assert gpu_ci.plan(config, "push", changed=["common/pinbench/core/runner.py"]) == everything
    assert gpu_ci.plan(config, "push", changed=[".github/gpu-ci.yaml"]) == everything
    assert gpu_ci.plan(config, "push", changed=["README.md"]) == []
    assert gpu_ci.plan(config, "workflow_dispatch", one) == [one]
    with pytest.raises(gpu_ci.ConfigError, match="'no-such-recipe' has no GPU CI configuration"):
        gpu_ci.plan(config, "workflow_dispatch", "no-such-recipe")


def _smoke_card(root: Path, name: str, checkpoint: str, values: tuple[float, ...] = (0.5, 1.0)) -> Path:
    recipe = get_recipe(name)
    records = [SampleRecord(sample_id=f"v{i}", status="ok", result={"dynamic_degree": v}, error=None,
                            input_hash="0" * 64, seconds=0.1) for i, v in enumerate(values)]
    card = build_scorecard(
        recipe=recipe.name, recipe_version=recipe.version, checkpoint=checkpoint, mode="smoke",
        metrics=[MetricSpec("dynamic_degree").with_info(recipe.metric_info("dynamic_degree"))], records=records,
        n_expected=len(records), provenance=collect_provenance(pins={}), config={"limit": 5}, timings={})
    return write_scorecard(card, root / recipe.default_out_dir(checkpoint, "smoke") / "scorecard.json")


def test_a_missing_smoke_reference_is_recorded_and_fails(tmp_path: Path, config: dict) -> None:
    entry = config["recipes"]["dynamic-degree"]
    _smoke_card(tmp_path, "dynamic-degree", entry["checkpoint"])
    code, line = gpu_ci.verdict("dynamic-degree", entry, run_exit=0, out_root=tmp_path)
    target = "recipes/dynamic_degree/references/ci-synthetic-textures.smoke.yaml"
    recorded = tmp_path / "runs" / "ci-recorded" / target
    assert code == 1 and "\n" not in line
    assert line == (f"dynamic-degree: no smoke reference; recorded {recorded} from this run (in the job's "
                    f"artifacts): review it and commit it as {target}")
    reference = load_reference(recorded, recipe=get_recipe("dynamic-degree"))
    data = yaml.safe_load(recorded.read_text())
    assert data["tier"] == "same_hw" and data["n_samples"] == 2 and reference is not None
    assert not (REPO / target).exists()                                   # never committed by the job itself


def test_an_existing_reference_decides(tmp_path: Path, config: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinbench.core.proposal import record_reference
    from pinbench.core.recipe import Recipe

    entry = config["recipes"]["dynamic-degree"]
    card = _smoke_card(tmp_path, "dynamic-degree", entry["checkpoint"])
    reference = tmp_path / "ref.smoke.yaml"
    record_reference(load_scorecard(card), reference, recipe=get_recipe("dynamic-degree"), tier="same_hw")
    monkeypatch.setattr(Recipe, "reference_path", lambda self, checkpoint, mode: reference)
    monkeypatch.setattr(gpu_ci, "REPO", tmp_path)
    assert gpu_ci.verdict("dynamic-degree", entry, run_exit=0, out_root=tmp_path) == \
        (0, "dynamic-degree: matches ref.smoke.yaml")
    code, line = gpu_ci.verdict("dynamic-degree", entry, run_exit=3, out_root=tmp_path)
    assert code == 3 and "the diff passes but the run exited 3" in line
    _smoke_card(tmp_path, "dynamic-degree", entry["checkpoint"], values=(0.0, 0.0))   # scores moved
    code, line = gpu_ci.verdict("dynamic-degree", entry, run_exit=1, out_root=tmp_path)
    assert code != 0 and "differs from ref.smoke.yaml" in line


def test_no_scorecard_fails(tmp_path: Path, config: dict) -> None:
    code, line = gpu_ci.verdict("paibench-c", config["recipes"]["paibench-c"], run_exit=2, out_root=tmp_path)
    assert code == 1 and "no scorecard at" in line and "(exit 2)" in line


def test_synthetic_inputs_are_large_enough_for_raft(tmp_path: Path, config: dict) -> None:
    from pinbench.media.video import video_info
    from pinbench_recipes.dynamic_degree.flow import RAFT_MIN_SIZE

    (option,) = gpu_ci.write_inputs("dynamic-degree", config["recipes"]["dynamic-degree"], tmp_path)
    folder = tmp_path / "dynamic-degree" / "videos"
    assert option == f"-o videos={folder}"
    infos = [video_info(p) for p in sorted(folder.glob("*.mp4"))]
    assert len(infos) == 5 and all(min(i.width, i.height) >= RAFT_MIN_SIZE for i in infos)


def test_the_token_is_visible_to_the_fetch_step_only() -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "gpu.yml").read_text())
    text = json.dumps(workflow)
    assert text.count("secrets.HF_TOKEN") == 1
    for name, job in workflow["jobs"].items():
        assert "HF_TOKEN" not in json.dumps(job.get("env", {})), name
        for step in job["steps"]:
            if "HF_TOKEN" in json.dumps(step):
                assert step["name"].startswith("fetch") and "pinbench fetch" in step["run"]
    steps = {s.get("name", ""): s for s in workflow["jobs"]["smoke"]["steps"]}
    assert steps["run (offline, no token)"]["env"]["PINBENCH_OFFLINE"] == "1"
    assert "tools/gpu_ci.py verdict" in steps["verdict (diff, or record a smoke reference and fail)"]["run"]


def _step_argv(run: str, recipe: str, env: dict[str, str]) -> list[str]:
    """The words a workflow step's command passes to ``pinbench``, expanded by bash as the runner would."""
    import subprocess

    command = run.replace("${{ matrix.recipe }}", recipe).replace(".venv/bin/pinbench", "printf '%s\\n'")
    out = subprocess.run(["bash", "-c", command], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True,
                         text=True, check=True).stdout
    return out.splitlines()


def test_the_fetch_step_gets_the_inputs_each_recipe_needs(config: dict, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The fetch step runs `pinbench fetch` with what the run gets (dynamic-degree's fetch refused a run
    configuration without -o videos=, so its nightly job failed before anything): inputs come first."""
    from typer.testing import CliRunner

    import pinbench.ops.machine_pins
    from pinbench import cli
    from pinbench.core.recipe import Recipe

    steps = {s.get("name", ""): s for s in yaml.safe_load((REPO / ".github" / "workflows" / "gpu.yml").read_text())
             ["jobs"]["smoke"]["steps"]}
    order = list(steps)
    fetch_step = next(name for name in order if name.startswith("fetch"))
    assert order.index("inputs") < order.index(fetch_step)
    fetched: list[str] = []
    monkeypatch.setattr(pinbench.ops.machine_pins, "resolve_recipe_pins",
                        lambda recipe, token=None, reads=None: (None, []))
    monkeypatch.setattr(Recipe, "fetch", lambda self, cfg: fetched.append(self.name))
    for name, entry in config["recipes"].items():
        env = dict(line.split("=", 1) for line in gpu_ci.env_lines(name, entry))
        env["RUN_ARGS"] = " ".join(gpu_ci.write_inputs(name, entry, tmp_path))
        argv = _step_argv(steps[fetch_step]["run"], name, env)
        assert argv[:2] == ["fetch", name]
        result = CliRunner().invoke(cli.app, argv)
        assert result.exit_code == 0, f"{name}: {' '.join(argv)}: {result.output}"
    assert sorted(fetched) == sorted(config["recipes"])
