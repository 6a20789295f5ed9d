"""Recipes as data: recipe.yaml loading, the generic option parser, refused flags, metric declarations."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from toy_recipe import DECLARATION, toy_recipe
from typer.testing import CliRunner

from pinbench import cli
from pinbench.core.config import RecipeError, Shard
from pinbench.core.metricinfo import MetricInfo, Tolerance, match_metric
from pinbench.core.options import OptionValues, finite_at_least_zero
from pinbench.core.recipe import DeclarationError, available_recipes, get_recipe, load_declaration

runner = CliRunner()


# ------------------------------------------------------------------------------------- declarations


@pytest.mark.parametrize(("change", "message"), [
    ({"version": "1.0"}, "$.version"),
    ({"flags": {"limit": True}}, "$.flags: must contain"),
    ({"options": {"Bad": {"type": "str", "help": "x"}}}, "$.options"),
    ({"options": {"x": {"type": "colour", "help": "x"}}}, "$.options.x.type"),
    ({"options": {"x": {"type": "choice", "help": "x"}}}, "option x: type choice needs choices"),
    ({"options": {"x": {"type": "int", "default": "many", "help": "x"}}}, "'many' is not an integer"),
    ({"metrics": {"f1": {"direction": "up", "aggregation": "mean", "kind": "official",
                         "tolerance": {"same_hw": {"abs": 0}, "cross_hw": {"abs": 0}}}}}, "$.metrics.f1.direction"),
    ({"metrics": {"f1": {"direction": "higher", "aggregation": "mean", "kind": "official", "primary": True,
                         "tolerance": {"same_hw": {"abs": 0.1}}}}}, "$.metrics.f1.tolerance"),
    ({"metrics": {"f1": {"aggregation": "mean", "kind": "official", "primary": True,
                         "tolerance": {"same_hw": {"abs": 0}, "cross_hw": {"abs": 0}}}}},
     "$.metrics.f1: must contain ['direction']"),  # a missing direction is never guessed
    ({"metrics": {"f1": {"direction": "higher", "aggregation": "mean_then_median", "kind": "official",
                         "primary": True, "tolerance": {"same_hw": {"abs": 0}, "cross_hw": {"abs": 0}}}}},
     "group_by is required"),
    ({"metrics": {"f1": {"direction": "higher", "aggregation": "mean", "kind": "official",
                         "tolerance": {"same_hw": {"abs": 0}, "cross_hw": {"abs": 0}}}}},
     "no metric is declared primary"),
    ({"version": "1.1.0"}, "version 1.1.0 has no changelog entry"),
    ({"unknown_key": 1}, "must not contain {'unknown_key'}"),
    ({"options": {"x": {"type": "int", "help": "x", "affects_results_if": "y"}}},
     "option x: affects_results_if names no bool option ('y')"),
    ({"options": {"x": {"type": "int", "help": "x", "affects_results_if": "y"}, "y": {"type": "str", "help": "y"}}},
     "option x: affects_results_if names no bool option ('y')"),
    ({"no_download": {"options": "-o colour=red", "what": "x"}}, "no_download.options: no option 'colour'"),
    ({"no_download": {"options": "-o mode=fast slow", "what": "x"}}, "expected -o key=value pairs"),
    ({"no_download": {"options": "-o mode=fast -o mode=slow", "what": "x"}}, "-o mode given twice"),
])
def test_a_bad_declaration_is_one_line_naming_the_file(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(DeclarationError) as info:
        toy_recipe(tmp_path, **change)
    text = str(info.value)
    assert text.startswith(str(tmp_path / "toy_bench" / "recipe.yaml")) and message in text and "\n" not in text


def test_duplicate_keys_and_missing_files_are_refused(tmp_path: Path) -> None:
    folder = tmp_path / "dup"
    folder.mkdir()
    (folder / "recipe.yaml").write_text("name: a\nname: b\n")
    with pytest.raises(DeclarationError, match="duplicate key 'name'"):
        load_declaration(folder / "recipe.yaml", "dup")
    with pytest.raises(DeclarationError, match="file not found"):
        load_declaration(tmp_path / "none" / "recipe.yaml", "none")
    (tmp_path / "dir" / "recipe.yaml").mkdir(parents=True)
    with pytest.raises(DeclarationError, match="is a directory"):
        load_declaration(tmp_path / "dir" / "recipe.yaml", "dir")


def test_every_installed_recipe_declares_what_it_reports() -> None:
    recipes = available_recipes()
    assert {"paibench-c", "remembench", "dynamic-degree"} <= set(recipes)
    for recipe in recipes.values():
        assert recipe.package.startswith("pinbench_recipes."), recipe.name
        assert recipe.changelog[0].version == recipe.version
        for reference in sorted((recipe.dir / "references").glob("*.yaml")):
            for name in yaml.safe_load(reference.read_text())["metrics"]:
                assert match_metric(name, recipe.metrics), f"{reference}: {name} is not declared"


# -------------------------------------------------------------------------------------------- options


def test_options_come_from_the_command_line_then_the_environment_then_the_default(tmp_path: Path) -> None:
    toy = toy_recipe(tmp_path)
    parsed = toy.parse_options({}, env={})
    assert parsed.values == OptionValues({"mode": "fast", "videos": None, "n": None})
    assert parsed.sources == {"mode": "default", "videos": "default", "n": "default"}
    parsed = toy.parse_options({"n": "3"}, env={"TOY_MODE": "slow", "TOY_VIDEOS": "~/v"})
    assert parsed.values == OptionValues({"mode": "slow", "videos": Path("~/v").expanduser(), "n": 3})
    assert (parsed.values.mode, parsed.values.videos, parsed.values.n) == ("slow", Path("~/v").expanduser(), 3)
    assert parsed.sources == {"mode": "env", "videos": "env", "n": "cli"}
    assert toy.parse_options({"mode": "fast"}, env={"TOY_MODE": "slow"}).values.mode == "fast"


@pytest.mark.parametrize(("given", "env", "message"), [
    ({"colour": "red"}, {}, "unknown option(s) colour for toy-bench; known: mode, videos, n"),
    ({"mode": "medium"}, {}, "-o mode: 'medium' is not one of fast, slow"),
    ({}, {"TOY_MODE": "medium"}, "$TOY_MODE (option mode): 'medium' is not one of fast, slow"),
    ({"mode": "slwo"}, {}, "-o mode: 'slwo' is not one of fast, slow (did you mean 'slow'?)"),   # as an option's name
    ({"n": "0"}, {}, "-o n: 0 is below the minimum 1"),
    ({"n": "two"}, {}, "-o n: 'two' is not an integer"),
    ({"videos": " "}, {}, "-o videos: empty value"),
])
def test_a_bad_option_is_one_line_naming_it(tmp_path: Path, given: dict, env: dict, message: str) -> None:
    with pytest.raises(RecipeError) as info:
        toy_recipe(tmp_path).parse_options(given, env=env)
    assert str(info.value) == message


@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_a_non_finite_number_option_is_refused(tmp_path: Path, raw: str) -> None:
    toy = toy_recipe(tmp_path, options={"scale": {"type": "float", "env": "TOY_SCALE", "help": "a factor"}})
    with pytest.raises(RecipeError) as info:
        toy.parse_options({"scale": raw}, env={})
    assert str(info.value) == f"-o scale: {raw!r} is not finite"
    with pytest.raises(RecipeError, match=r"^\$TOY_SCALE \(option scale\): .* is not finite$"):
        toy.parse_options({}, env={"TOY_SCALE": raw})
    assert toy.parse_options({"scale": "2.5"}, env={}).values.scale == 2.5


def test_a_required_option_is_required_except_in_fixture_mode() -> None:
    recipe = get_recipe("dynamic-degree")
    with pytest.raises(RecipeError, match=r"option videos is required \(-o videos=\.\.\. or \$PINBENCH_DD_VIDEOS\)"):
        recipe.parse_options({}, env={})
    fixture = recipe.parse_options({}, env={}, fixture=True)
    assert fixture.values.flow == "farneback" and fixture.sources["flow"] == "fixture_default"
    assert recipe.parse_options({}, env={"PINBENCH_DD_VIDEOS": "/v"}).values.flow == "raft"


def test_an_option_the_fixture_does_not_use_is_refused_there_never_ignored() -> None:
    recipe = get_recipe("dynamic-degree")
    assert recipe.options["videos"].fixture is False
    with pytest.raises(RecipeError, match=r"^-o videos does not apply to dynamic-degree --fixture runs .*drop it$"):
        recipe.parse_options({"videos": "/v"}, env={}, fixture=True)
    with pytest.raises(RecipeError, match=r"^\$PINBENCH_DD_VIDEOS \(option videos\) does not apply .*unset it$"):
        recipe.parse_options({}, env={"PINBENCH_DD_VIDEOS": "/v"}, fixture=True)
    # options the fixture uses are honoured there; the same option is fine outside fixture mode
    assert recipe.parse_options({"decoder": "opencv"}, env={}, fixture=True).values.decoder == "opencv"
    assert recipe.parse_options({"videos": "/v"}, env={}).values.videos == Path("/v")
    assert "(not used by --fixture)" in recipe.options["videos"].describe_default()


def test_list_and_bool_options_are_typed() -> None:
    recipe = get_recipe("paibench-c")
    values = recipe.parse_options({"modalities": "seg, edge,seg", "native": "off"}, env={}).values
    assert values.modalities == ("seg", "edge") and values.native is False
    assert recipe.options["modalities"].format(values.modalities) == "seg,edge"
    with pytest.raises(RecipeError, match="-o native: 'maybe' is not a boolean"):
        recipe.parse_options({"native": "maybe"}, env={})


def test_option_values_are_read_only_attributes_named_by_the_declaration(tmp_path: Path) -> None:
    values = toy_recipe(tmp_path).parse_options({"n": "2"}, env={}).values
    with pytest.raises(AttributeError, match="option values are read-only"):
        values.n = 3
    with pytest.raises(AttributeError, match=r"no option 'count' is declared \(declared: mode, videos, n\)"):
        _ = values.count
    assert values.to_json() == {"mode": "fast", "videos": None, "n": 2}


@pytest.mark.parametrize(("value", "message"), [
    ("abc", "-o sha: 'abc' does not match [0-9a-f]{64} (a SHA-256)"),
    ("A" * 64, "-o sha: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' does not match"),
    ("a" * 64 + "0", "-o sha: '" + "a" * 64 + "0' does not match"),  # the whole value, not a prefix
])
def test_a_pattern_option_must_match_as_a_whole(tmp_path: Path, value: str, message: str) -> None:
    toy = toy_recipe(tmp_path, options={"sha": {"type": "str", "pattern": "[0-9a-f]{64}", "help": "a SHA-256"}})
    assert toy.parse_options({"sha": "a" * 64}, env={}).values.sha == "a" * 64
    assert toy.options["sha"].describe_type(quote="`") == "str matching `[0-9a-f]{64}`"  # the README tables
    with pytest.raises(RecipeError) as info:
        toy.parse_options({"sha": value}, env={})
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_list_with_an_all_alias_chooses_every_choice_in_their_order(tmp_path: Path) -> None:
    toy = toy_recipe(tmp_path, options={"parts": {"type": "list", "choices": ["a", "b", "c"], "all_alias": True,
                                                  "default": ["b"], "env": "TOY_PARTS", "help": "parts"}})
    assert toy.parse_options({}, env={}).values.parts == ("b",)
    assert toy.options["parts"].describe_type("|") == "list: a|b|c|all"  # run --help
    assert toy.parse_options({}, env={"TOY_PARTS": "all"}).values.parts == ("a", "b", "c")
    assert toy.parse_options({"parts": "c,a"}, env={}).values.parts == ("c", "a")
    with pytest.raises(RecipeError) as info:
        toy.parse_options({"parts": "d"}, env={})
    assert str(info.value) == "-o parts: 'd' not in a, b, c or 'all'"
    with pytest.raises(RecipeError, match="'all' not in a, b, c or 'all'"):  # all is the whole value, or nothing
        toy.parse_options({"parts": "a,all"}, env={})


def test_cpu_count_is_the_default_rule_of_an_int_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toy = toy_recipe(tmp_path, options={"workers": {"type": "int", "default": "cpu_count", "minimum": 1,
                                                    "help": "processes"}})
    monkeypatch.setattr(os, "cpu_count", lambda: 7)
    assert toy.parse_options({}, env={}).values.workers == 7
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # unknown: one
    assert toy.parse_options({}, env={}).values.workers == 1
    assert toy.parse_options({"workers": "3"}, env={}).values.workers == 3
    assert toy.options["workers"].describe_default() == "cpu_count"


@pytest.mark.parametrize(("spec", "message"), [
    ({"type": "int", "pattern": "[0-9]+"}, "option x: pattern applies to type str, not int"),
    ({"type": "str", "pattern": "(unclosed"}, "option x: pattern '(unclosed' is not a regular expression"),
    ({"type": "list", "all_alias": True}, "option x: all_alias applies to a list with choices"),
    ({"type": "list", "choices": ["a"], "not_generated": {"b": "why"}}, "option x: not_generated names choices"),
    ({"type": "str", "default": "cpu_count"}, "option x: default cpu_count applies to type int, not str"),
    ({"type": "str", "pattern": "[a-z]+", "default": "X1"}, "default of option x: 'X1' does not match [a-z]+"),
    ({"type": "list", "choices": ["a"], "all_alias": "yes"}, "$.options.x.all_alias"),  # the schema's types
    ({"type": "str", "pattern": ""}, "$.options.x.pattern"),
])
def test_a_bad_new_declaration_field_is_refused(tmp_path: Path, spec: dict, message: str) -> None:
    with pytest.raises(DeclarationError, match=re.escape(message)):
        toy_recipe(tmp_path, options={"x": {**spec, "help": "x"}})


# ---------------------------------------------------------------------------------------------- flags


def test_flags_a_recipe_cannot_honour_are_refused(tmp_path: Path) -> None:
    one_gpu = toy_recipe(tmp_path / "a", flags={**DECLARATION["flags"], "gpus": "one", "skip_generation": False})
    with pytest.raises(RecipeError, match=r"uses one GPU per process; to use 4, split the run with --shard I/4"):
        one_gpu.config("m", gpus=4, env={})
    with pytest.raises(RecipeError, match="does not support --skip-generation"):
        one_gpu.config("m", skip_generation=True, env={})
    assert one_gpu.config("m", env={}).gpus == 1
    no_limit = toy_recipe(tmp_path / "b", flags={**DECLARATION["flags"], "limit": False, "shard": False})
    with pytest.raises(RecipeError, match="does not support --limit, --shard"):
        no_limit.config("m", limit=2, shard=Shard(0, 2), env={})


def test_remembench_refuses_several_gpus_instead_of_ignoring_them() -> None:
    with pytest.raises(RecipeError, match="remembench uses one GPU per process"):
        get_recipe("remembench").config("t2v-base-1chunk", gpus=4, env={})


@pytest.mark.parametrize("name", ["", ".x", "..", "../../x", "a/b", "a\nb", "x" * 101, "-x"])
def test_checkpoint_names_that_could_escape_a_folder_are_refused(tmp_path: Path, name: str) -> None:
    recipe = toy_recipe(tmp_path)
    with pytest.raises(RecipeError):
        recipe.config(name or "..", env={})
    with pytest.raises(RecipeError):
        recipe.reference_file(name or "..", "full")


@pytest.mark.parametrize("name", ["..", "../x", ".", "", "a/b"])
def test_recipe_names_that_could_escape_are_refused(name: str) -> None:
    with pytest.raises(RecipeError):
        get_recipe(name)


# -------------------------------------------------------------------------------------------- metrics


def test_a_scorecard_metric_matches_the_longest_declared_suffix() -> None:
    recipe = get_recipe("paibench-c")
    assert recipe.metric_info("edge/native/canny_f1_score").kind == "cross_check"
    # one primary per modality, as its references mark them: edge's Canny F1, not blur's
    assert recipe.metric_info("edge/canny_f1_score").primary and not recipe.metric_info("blur/canny_f1_score").primary
    assert recipe.metric_info("blur/blur_ssim").primary and not recipe.metric_info("edge/blur_ssim").primary
    assert recipe.metric_info("edge/canny_f1_score").kind == "official"
    assert recipe.metric_info("depth/depth_si_rmse").direction == "lower"
    with pytest.raises(RecipeError, match="metric 'edge/psnr' is not declared"):
        recipe.metric_info("edge/psnr")
    info = MetricInfo("clip", "higher", "median", {"same_hw": Tolerance(abs=0), "cross_hw": Tolerance(abs=0)})
    assert match_metric("i2v/rotation_180/clip", {"clip": info}) is info
    assert match_metric("i2v/rotation_180/xclip", {"clip": info}) is None


def test_a_reference_may_only_narrow_a_declared_tolerance() -> None:
    for recipe in available_recipes().values():
        for path in sorted((recipe.dir / "references").glob("*.yaml")):
            from pinbench.core.reference import load_reference

            load_reference(path, recipe=recipe)  # raises when a file widens a tolerance, flips a direction or a primary


# ------------------------------------------------------------------------------------------------ CLI


def test_run_help_prints_the_recipes_options() -> None:
    result = runner.invoke(cli.app, ["run", "paibench-c", "--help"])
    assert result.exit_code == 0, result.output
    assert "-o modalities=<list: edge|blur|depth|seg>" in result.output and "$PAIBENCH_C_GT" in result.output
    assert "flags honoured: --limit, --shard, --skip-generation, --skip-scoring" in result.output


def test_list_verbose_prints_options_metrics_and_changelog() -> None:
    result = runner.invoke(cli.app, ["list", "-v"])
    assert result.exit_code == 0, result.output
    assert "* dynamic_degree: higher is better, mean, official" in result.output
    assert "1.1.0 (2026-11-30): decoder named and fixed" in result.output


def test_light_commands_import_no_recipe_code_and_no_torch() -> None:
    code = ("import sys\nfrom pinbench.cli import main\n"
            "for argv in (['list', '-v'], ['run', 'remembench', '--help'], ['--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'cv2', 'av', 'decord', "
            "'huggingface_hub', 'matplotlib', 'docker', 'jsonschema') or m.startswith('pinbench_recipes.'))\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out, out.splitlines()[-1]


def test_the_readmes_agree_with_the_declarations(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["docs", "--check", "--root", str(Path(__file__).resolve().parents[1])])
    assert result.exit_code == 0, f"run `pinbench docs`: {result.output}"


@pytest.mark.parametrize("root", ["elsewhere", "file", "absent"])
def test_docs_check_of_a_folder_with_no_tables_fails_naming_it(root: str, tmp_path: Path) -> None:
    # `pinbench docs --check` outside a checkout (or --root mistyped, or a file) checked nothing and exited 0
    from pinbench.ops.docs import sync_tables

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=f"^{tmp_path / root}: no docs/ folder and no recipe README under it"):
        sync_tables(tmp_path / root, write=False)


def test_a_run_with_the_no_download_options_is_told_apart(tmp_path: Path) -> None:
    """``no_download`` is read, not only shown: a literal value must be the option's, a value in capitals (DIR) any
    value given; the fetch command and the docker runtime's stages ask ``downloads_nothing``."""
    recipe = toy_recipe(tmp_path, no_download={"options": "-o mode=slow -o videos=DIR", "what": "local videos"})

    def nothing(**options: str) -> bool:
        return recipe.downloads_nothing(recipe.config("c", out_dir=tmp_path / "o", options=options, env={})) \
            is not None

    assert nothing(mode="slow", videos=str(tmp_path))
    assert not nothing(mode="fast", videos=str(tmp_path))
    assert not nothing(mode="slow")
    assert toy_recipe(tmp_path).downloads_nothing(recipe.config("c", out_dir=tmp_path / "o", env={})) is None


def test_a_fixture_run_records_only_the_options_it_applies(tmp_path: Path) -> None:
    """The options a fixture does not use (``fixture: false``) keep their default for the code, but their source
    says so and the run directory's identity leaves them out (was: a RememBench fixture, which scores both splits,
    recorded ``split: t2v`` and the dataset's revision in pinbench-run.json; CameraBench's flash_attention_2)."""
    from pinbench.core.options import NOT_APPLIED
    from pinbench.core.rundir import IDENTITY_FILE, claim_run_dir

    recipe = get_recipe("remembench")
    unused = {"split", "settings", "dataset"}
    assert all(recipe.options[name].fixture is False for name in unused)
    cfg = recipe.config(fixture=True, out_dir=tmp_path / "run", env={})
    assert {name: cfg.option_sources[name] for name in unused} == dict.fromkeys(unused, NOT_APPLIED)
    assert cfg.option_sources["decoder"] == "default" and cfg.to_json()["options"]["split"] == "t2v"
    with claim_run_dir(cfg):
        identity = json.loads((tmp_path / "run" / IDENTITY_FILE).read_text())
    assert identity["inputs"] == {"decoder": {"value": "opencv", "fingerprint": "opencv"}}
    full = recipe.config(checkpoint="m", out_dir=tmp_path / "full", env={}, options={"videos": str(tmp_path)})
    assert full.option_sources["split"] == "default" and "split" in full.inputs


@pytest.mark.parametrize(("text", "expected"), [("0", 0.0), ("2.5", 2.5), (" 1e3 ", 1000.0), ("-1", None),
                                                 ("inf", None), ("nan", None), ("", None), ("words", None),
                                                 ("-0", 0.0), ("-0.0", 0.0)])
def test_a_bound_wait_or_scale_is_a_finite_number_of_zero_or_more(text: str, expected: float | None) -> None:
    """The one reading of $PINBENCH_NOTICE_S, $PINBENCH_SAMPLE_CACHE_MB and ``-g guidance=``; ``-0`` is read as 0,
    which ``-0.0`` (equal to it) was not where printed in a message or a manifest."""
    assert repr(finite_at_least_zero(text)) == repr(expected)
