"""``pinbench doctor``, which ``pinbench run`` runs first: one line per problem, exit 2, in seconds.

Real recipes and declarations; GPUs are injected as (index, name, GB) lists where nvidia-smi would be asked
(this machine has none), and videos are written here with PyAV.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from sockets import closed_port
from typer.testing import CliRunner

from pinbench import cli
from pinbench.core.recipe import DeclarationError, Resources, available_recipes, get_recipe, load_declaration
from pinbench.media.video import write_video
from pinbench.ops import doctor
from pinbench.ops.machine_pins import MachinePins, machine_pins_path

runner = CliRunner()
H100, H200 = ("0", "NVIDIA H100 80GB HBM3", 85.0), ("1", "NVIDIA H200", 150.7)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    for var in ("PINBENCH_OFFLINE", "HF_HUB_OFFLINE", "HF_TOKEN", "CUDA_VISIBLE_DEVICES", "GPUS",
                "PINBENCH_DD_VIDEOS", "PINBENCH_RAFT_WEIGHTS"):
        monkeypatch.delenv(var, raising=False)


def _video(path: Path, frames: int = 6) -> Path:
    rng = np.random.default_rng(len(str(path)))
    write_video(path, (rng.random((frames, 64, 64, 3)) * 255).astype(np.uint8), 8, codec="mpeg4")
    return path


# ------------------------------------------------------------------------------------------- inputs


def test_zero_inputs_is_one_line_naming_the_folder(tmp_path: Path) -> None:
    findings = doctor.video_findings({f"scene_{i}": None for i in range(600)}, tmp_path, "rollouts", decoder="pyav")
    assert [f.render() for f in findings] == [f"PROBLEM inputs: 0 of 600 rollouts found under {tmp_path}"]


def test_missing_and_undecodable_inputs_are_counted_and_named(tmp_path: Path) -> None:
    good = _video(tmp_path / "a.mp4")
    (tmp_path / "b.mp4").write_bytes(b"\x00" * 100)
    (tmp_path / "c.mp4").mkdir()                                      # a folder posing as a video
    findings = doctor.video_findings({"a": good, "b": tmp_path / "b.mp4", "c": tmp_path / "c.mp4", "d": None},
                                     tmp_path, decoder="pyav")
    lines = [f.line for f in findings if not f.ok]
    assert lines[0] == f"1 of 4 videos is missing under {tmp_path}: d; {doctor.WAY_ON_BAD_INPUT}"
    assert lines[1].startswith(f"2 of 3 videos are unusable under {tmp_path} (1 does not decode, 1 is a folder): "
                               "b.mp4 (")   # the file, as the run's failure line names it, not the sample id
    assert "; c.mp4 (a directory, not a file); " in lines[1]
    assert doctor.video_findings({"a": good}, tmp_path, decoder="pyav")[0].ok


def test_an_unusable_name_with_a_newline_is_named_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "new\nline.mp4").write_bytes(b"\x00" * 100)
    (finding,) = doctor.video_findings({"a": _video(tmp_path / "a.mp4"), "b": tmp_path / "new\nline.mp4"}, tmp_path,
                                        decoder="pyav")
    assert "\n" not in finding.line and ": new\\nline.mp4 (" in finding.line   # as `ls -b` and the run name it


def test_a_first_frame_seen_decoding_is_not_decoded_again_until_the_file_changes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    good, other = _video(tmp_path / "a.mp4"), _video(tmp_path / "b.mp4")
    (tmp_path / "broken.mp4").write_bytes(b"\x00" * 100)
    decoded = doctor.DecodedFiles(tmp_path / "cache" / "first-frames.json", "pyav")
    infos = [decoded.first_frame(p) for p in (good, other)]
    assert [info.n_frames for info in infos] == [6, 6] and decoded.decoded == 2
    assert isinstance(decoded.first_frame(tmp_path / "broken.mp4"), str)
    decoded.save()
    again = doctor.DecodedFiles(tmp_path / "cache" / "first-frames.json", "pyav")   # a later run
    assert again.first_frame(good) == infos[0] and again.decoded == 0   # with the facts read when it decoded
    assert isinstance(again.first_frame(tmp_path / "broken.mp4"), str) and again.decoded == 1   # never kept
    (tmp_path / "broken.mp4").replace(other)   # b.mp4 is now the broken file: another inode and size
    assert isinstance(again.first_frame(other), str) and again.decoded == 2
    assert not doctor.video_findings({"b": other}, tmp_path, decoder="pyav")[0].ok   # the doctor itself reads the cache


@pytest.mark.parametrize("fact", [(0, 10**30), (0, -3), (0, True), (1, float("nan")), (1, 0), (2, 0),
                                  (5, float("inf"))], ids=["huge", "negative", "bool", "nan", "no-rate", "no-width",
                                                           "endless"])
def test_a_cached_fact_no_decode_could_read_is_decoded_again(tmp_path: Path, fact: tuple[int, object]) -> None:
    """The cache's facts are what a recipe's check and estimate take (dynamic-degree splits n_frames into clips): a
    cache changed by hand or by another tool with 10**30 frames hung that doctor, a NaN rate raised out of its
    decode threads. An entry with more frames than its file has bytes, or a rate, size or duration no decode gives,
    is decoded again."""
    good = _video(tmp_path / "a.mp4")
    cache = tmp_path / "cache" / "first-frames.json"
    decoded = doctor.DecodedFiles(cache, "pyav")
    info = decoded.first_frame(good)
    decoded.save()
    data = json.loads(cache.read_text())
    (entry,) = data["files"].values()
    entry["facts"][fact[0]] = fact[1]
    cache.write_text(json.dumps(data))
    again = doctor.DecodedFiles(cache, "pyav")
    assert again.first_frame(good) == info and again.decoded == 1


def _mdat_cut(path: Path, frames: int) -> Path:
    """An MP4 whose 'mdat' lost the second half of its bytes, its box size patched to match: every box fits the
    file and 'moov' still declares ``frames`` samples, the later ones at offsets past the media data."""
    rng = np.random.default_rng(0)
    write_video(path, rng.integers(0, 255, (frames, 48, 64, 3), dtype=np.uint8), 10)
    data, offset = path.read_bytes(), 0
    while data[offset + 4:offset + 8] != b"mdat":
        offset += int.from_bytes(data[offset:offset + 4], "big")
    size = int.from_bytes(data[offset:offset + 4], "big")
    kept = size - size // 2
    path.write_bytes(data[:offset] + kept.to_bytes(4, "big") + data[offset + 4:offset + kept]
                     + data[offset + size:])
    return path


def test_a_container_declaring_more_frames_than_it_holds_fails_the_doctor_as_the_run_fails(tmp_path: Path) -> None:
    from pinbench.media.video import VideoError, read_video

    cut = _mdat_cut(tmp_path / "cut.mp4", 30)
    (finding,) = doctor.video_findings({"a": cut}, tmp_path, decoder="pyav")
    with pytest.raises(VideoError) as run:
        read_video(cut, backend="pyav")   # the run's decode of the whole video
    assert re.fullmatch(r"truncated: container declares 30 frames, holds 1[0-9]", run.value.reason)
    assert not finding.ok and f"cut.mp4 ({run.value.reason})" in finding.line   # in the run's own words


def test_the_doctor_decodes_with_the_runs_decoder_and_keeps_its_own_cache(tmp_path: Path) -> None:
    """A 16x16 video pyav reads and decord refuses (``test_video``'s narrow frame): checked with pyav, the doctor of a
    run with decoder=decord passed and the run failed on it. Each decoder's first frames are cached apart: a file
    pyav decoded is not taken as one decord decodes."""
    from pinbench.media.video import VideoError, read_video

    narrow = write_video(tmp_path / "narrow.mp4", np.zeros((3, 16, 16, 3), np.uint8), 10)
    (pyav,) = doctor.video_findings({"a": narrow}, tmp_path, decoder="pyav")
    assert pyav.ok and pyav.line == f"1 of 1 videos found under {tmp_path}, all decode with pyav"
    (decord,) = doctor.video_findings({"a": narrow}, tmp_path, decoder="decord")
    with pytest.raises(VideoError) as run:
        read_video(narrow, backend="decord")
    assert not decord.ok and f"narrow.mp4 ({run.value.reason})" in decord.line
    assert (tmp_path / "cache" / "first-frames.json").is_file()


def test_a_decoder_missing_here_is_one_line_naming_the_option(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "decord", None)  # test double: decord import fails (as on aarch64)
    (finding,) = doctor.video_findings({"a": _video(tmp_path / "a.mp4")}, tmp_path, decoder="decord")
    assert not finding.ok and "video decoder 'decord' is not available here" in finding.line
    assert "-o decoder=<pyav, opencv>" in finding.line


# -------------------------------------------------------------------------------------------- GPUs


def _paibench(**resources: object):
    recipe = get_recipe("paibench-c")
    return dataclasses.replace(recipe, resources=dataclasses.replace(recipe.resources, **resources))


def test_gpu_memory_is_checked_per_checkpoint() -> None:
    recipe = get_recipe("paibench-c")
    nano = recipe.config("Cosmos3-Nano", gpus=1, env={})
    super_ = recipe.config("Cosmos3-Super", gpus=1, env={})
    assert doctor.gpu_findings(recipe, nano, [H100])[0].ok
    (small,) = doctor.gpu_findings(recipe, super_, [H100])
    assert not small.ok and "GPU 0 NVIDIA H100 80GB HBM3 85 GB < 141 GB needed for Cosmos3-Super" in small.line
    assert "launch=torchrun" in small.line
    assert doctor.gpu_findings(recipe, super_, [H200])[0].ok


def test_too_few_or_no_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = get_recipe("paibench-c")
    cfg = recipe.config("Cosmos3-Nano", gpus=4, env={})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    (line,) = doctor.gpu_findings(recipe, cfg, [H100])
    assert not line.ok and "1 GPU(s) visible, --gpus 4 asked (CUDA_VISIBLE_DEVICES=0)" in line.line
    assert "no GPU visible" in doctor.gpu_findings(recipe, cfg, None)[0].line


def test_visible_gpus_honours_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    smi = "0, GPU-aaa, NVIDIA H200, 143771\n1, GPU-bbb, NVIDIA H200, 143771\n"
    monkeypatch.setattr(doctor.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(doctor.processes, "run",
                        lambda *a, **k: type("P", (), {"returncode": 0, "stdout": smi})())
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbb")
    ((index, name, gb),) = doctor.visible_gpus()
    assert (index, name, round(gb, 1)) == ("1", "NVIDIA H200", 150.8)


# -------------------------------------------------------------------------------------- disk, pins


def test_disk_estimate(tmp_path: Path) -> None:
    cfg = get_recipe("paibench-c").config("Cosmos3-Nano", out_dir=tmp_path / "not" / "yet", limit=4, env={})
    assert doctor.disk_findings(_paibench(disk_gb={"smoke": 1e-6}), cfg)[0].ok
    (line,) = doctor.disk_findings(_paibench(disk_gb={"smoke": 1e9}), cfg)
    assert not line.ok and "the recipe estimates 1e+09 GB for a smoke run" in line.line


def test_null_pins_offline_are_a_problem_and_resolved_ones_are_named() -> None:
    recipe = get_recipe("paibench-c")
    _, findings = doctor.pin_findings(recipe, offline=True)
    (bad,) = [f for f in findings if not f.ok]
    assert "huggingface.dataset.revision, urls.tasks_json.sha256 null" in bad.line
    assert "next: run `pinbench fetch paibench-c` on a connected machine" in bad.line
    machine = MachinePins(machine_pins_path(recipe.name, recipe.version), recipe.name, recipe.version)
    machine.set(("huggingface", "dataset", "revision"), "a" * 40, "test")
    machine.set(("urls", "tasks_json", "sha256"), "b" * 64, "test")
    machine.set(("urls", "dover", "sha256"), "c" * 64, "test")          # pinned in pins.yaml since: stale
    machine.save()
    pins, findings = doctor.pin_findings(recipe, offline=True)
    assert all(f.ok for f in findings) and pins.huggingface["dataset"].revision == "a" * 40
    text = "\n".join(f.line for f in findings)
    assert "resolved at run time" in text and "no longer used (pinned in pins.yaml since): urls.dover.sha256" in text


def test_a_cached_file_is_checked_against_its_pin(tmp_path: Path) -> None:
    """Every pinned file in the cache with its hash: missing, verified, and a same-size tampered copy."""
    import hashlib

    from pinbench.core.pins import URLPin
    from pinbench.ops.cache import url_path

    good = b"sam2 weights stand-in" * 64
    digest = hashlib.sha256(good).hexdigest()
    pin = URLPin("https://example.invalid/sam2_hiera_large.pt", digest, "sam2_hiera_large.pt", recipe="paibench-c",
                 size=len(good))
    missing = doctor.url_finding("sam2_hiera_large", pin)
    assert not missing.ok and missing.subject == "urls/sam2_hiera_large" and "pinbench fetch" in missing.line
    path = url_path(pin)
    path.parent.mkdir(parents=True)
    path.write_bytes(good)
    verified = doctor.url_finding("sam2_hiera_large", pin)
    assert verified.ok and verified.line == f"sam2_hiera_large: sam2_hiera_large.pt sha256 {digest[:12]}... verified"
    tampered = bytes([good[0] ^ 1]) + good[1:]                          # same size: only the hash can tell
    path.write_bytes(tampered)
    bad = doctor.url_finding("sam2_hiera_large", pin)
    assert not bad.ok and digest in bad.line and hashlib.sha256(tampered).hexdigest() in bad.line
    assert bad.line.endswith("delete it and run `pinbench fetch paibench-c`") and "\n" not in bad.line


def test_token_needed_only_for_gated_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    recipe = get_recipe("paibench-c")
    (line,) = doctor.token_findings(recipe, ["huggingface/cosmos3_nano", "urls/dover"])
    assert not line.ok and "HF_TOKEN not set; the gated huggingface/cosmos3_nano still" in line.line
    assert doctor.token_findings(recipe, ["urls/dover"]) == []
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnopqrstu")
    assert doctor.token_findings(recipe, ["huggingface/cosmos3_nano"])[0].ok


def test_resources_are_declared_data(tmp_path: Path) -> None:
    recipe = get_recipe("paibench-c")
    assert recipe.resources == Resources(gpu_memory_gb_default=80, gpu_memory_gb_by_checkpoint={"Cosmos3-Super": 141},
                                         gpu_note=recipe.resources.gpu_note, disk_gb={"full": 250, "smoke": 45},
                                         gated=("huggingface/dataset", "huggingface/cosmos3_nano",
                                                "huggingface/cosmos3_super"))
    bad = tmp_path / "recipe.yaml"
    bad.write_text((recipe.dir / "recipe.yaml").read_text().replace("disk_gb: {full: 250", "disk_gb: {fulll: 250"))
    with pytest.raises(DeclarationError, match=r"schema violation at \$\.resources\.disk_gb"):
        load_declaration(bad, recipe.package)


# ---------------------------------------------------------------------------------------------- CLI


def test_doctor_cli_one_line_per_problem_exit_2(tmp_path: Path) -> None:
    _video(tmp_path / "v" / "a.mp4")
    (tmp_path / "v" / "b.mp4").write_bytes(b"junk")
    result = runner.invoke(cli.app, ["doctor", "dynamic-degree", "--checkpoint", "m", "-o", f"videos={tmp_path / 'v'}",
                                     "-o", "flow=farneback", "--gpus", "0"])
    assert result.exit_code == 2, result.output
    problems = [line for line in result.output.splitlines() if line.startswith("PROBLEM")]
    assert problems == [problems[0]] and problems[0].startswith(
        f"PROBLEM inputs: 1 of 2 videos is unusable under {tmp_path / 'v'} (1 does not decode): b.mp4 (")
    assert result.output.rstrip().endswith("doctor: 1 problem; nothing was started")


def test_a_doctor_given_no_checkpoint_names_the_one_it_checks() -> None:
    """`pinbench doctor paibench-c` checked Cosmos3-Nano (GPU memory, weights) without saying so, where `run`
    requires --checkpoint: a Cosmos3-Super user read another checkpoint's verdict."""
    result = runner.invoke(cli.app, ["doctor", "paibench-c", "--offline", "--gpus", "0"])
    assert result.output.startswith("note: no --checkpoint: the checks of Cosmos3-Nano, paibench-c's first "
                                    "checkpoint\n"), result.output


@pytest.mark.parametrize("given", [["-o", "metrics=lcm"], ["env"]])
def test_doctor_names_the_fetch_of_this_run(given: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MIND with -o metrics=lcm (or $MIND_METRICS) reads the LPIPS trunk alone: the way on is the fetch of lcm, not
    a bare `pinbench fetch mind` (DINOv3, gated, and a dead CLIP URL with it); the paths of this machine stay out."""
    if given == ["env"]:
        monkeypatch.setenv("MIND_METRICS", "lcm")
        given = []
    result = runner.invoke(cli.app, ["doctor", "mind", "--offline", "-o", f"gt={tmp_path}", "-o",
                                     f"videos={tmp_path}", *given])
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("PROBLEM cache:")]
    assert "alexnet" in line and "next: run `pinbench fetch mind -c mind-world-v2w -o metrics=lcm` on a " in line


def test_unusable_videos_are_counted_by_what_each_is(tmp_path: Path) -> None:
    """A dangling link, a folder and a name that gives no sample id are no decode failures: "4 of 5 videos do not
    decode" sent the user looking for broken files. Each is counted as what it is, and named."""
    videos = tmp_path / "v"
    _video(videos / "a.mp4")
    (videos / "b.mp4").write_bytes(b"junk")
    (videos / "c.mp4").symlink_to(tmp_path / "gone.mp4")
    (videos / "d.mp4").mkdir()
    _video(videos / "e\\f.mp4")   # a backslash: no sample id
    result = runner.invoke(cli.app, ["doctor", "dynamic-degree", "--checkpoint", "m", "-o", f"videos={videos}",
                                     "-o", "flow=farneback", "--gpus", "0"])
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("PROBLEM inputs")]
    assert line.startswith(f"PROBLEM inputs: 4 of 5 videos are unusable under {videos} (1 does not decode, 1 is a "
                           "dangling link, "
                           "1 is a folder, 1 has a name that gives no sample id of its own): "), line
    assert "; e\\f.mp4 (" in line and "; c.mp4 (dangling symlink (its target" in line   # the first three, by file


def test_a_name_past_its_extension_is_counted_as_that_not_as_one_giving_no_sample_id(tmp_path: Path) -> None:
    """``x.mp4.`` fails as a name that runs past its extension: the doctor had filed it under "has a name that gives
    no sample id of its own", which sent the user looking at the name's characters, not at its end. ``d. mp4`` (a
    space inside it) was not counted at all."""
    videos = tmp_path / "v"
    _video(videos / "a.mp4")
    for name in ("b.mp4.", "c.mp4\u00a0", "d. mp4"):   # a no-break space pasted from a web page
        (videos / name).write_bytes((videos / "a.mp4").read_bytes())
    result = runner.invoke(cli.app, ["doctor", "dynamic-degree", "--checkpoint", "m", "-o", f"videos={videos}",
                                     "-o", "flow=farneback", "--gpus", "0"])
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("PROBLEM inputs")]
    assert line.startswith(f"PROBLEM inputs: 3 of 4 videos are unusable under {videos} (2 have names that run "
                           "past their extension, 1 has a space inside its extension): "), line
    assert "d. mp4 (its suffix '. mp4' holds a space, so it is not read as a .mp4 file: rename it to 'd.mp4')" in line
    assert "b.mp4. (its name ends in '.' after .mp4, so it is not read as a .mp4 file: rename it to 'b.mp4')" in line
    assert "c.mp4\\xa0 (its name ends in '\\xa0' after .mp4" in line


def test_run_stops_before_any_model_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "broken.mp4").write_bytes(b"junk")
    out = tmp_path / "out"
    monkeypatch.setenv("PINBENCH_OFFLINE", "1")
    result = runner.invoke(cli.app, ["run", "dynamic-degree", "--checkpoint", "m", "--out", str(out), "--gpus", "0",
                                     "-o", f"videos={tmp_path / 'v'}"])
    assert result.exit_code == 2, result.output
    assert f"PROBLEM inputs: 1 of 1 video is unusable under {tmp_path / 'v'} (1 does not decode): broken.mp4 (" \
        in result.output
    assert "PROBLEM cache" in result.output and "pinbench fetch dynamic-degree" in result.output   # RAFT, offline
    assert not out.exists()                                              # nothing was started


def test_paibench_scoring_only_with_no_videos_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--skip-generation on an empty run directory: "0 of N edge videos found under DIR" before any model."""
    import pinbench_recipes.paibench_c.fetch as fetch_module
    from pinbench_recipes.paibench_c.tests.test_pc_rows import task_row

    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([task_row(i) for i in range(3)]))
    monkeypatch.setattr(fetch_module, "locate", lambda pin: tasks)
    recipe = get_recipe("paibench-c")
    cfg = recipe.config("Cosmos3-Nano", out_dir=tmp_path / "run", limit=3, skip_generation=True,
                        options={"modalities": "edge"}, env={})
    findings = fetch_module.doctor(cfg, fetch_module.effective_pins(cfg))
    lines = [f.line for f in findings if not f.ok]
    assert f"0 of 3 edge videos found under {tmp_path / 'run' / 'edge' / 'videos'}" in lines


def test_fetch_on_a_fresh_clone_resolves_into_machine_pins_and_write_pins_writes_pins_yaml(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pinbench fetch` gets past a null pin (here: RAFT known by its 8-hex prefix) without touching pins.yaml;
    `--write-pins` is the maintainer's copy of the same value into pins.yaml."""
    import hashlib

    from pinbench.core.recipe import Recipe

    weights = tmp_path / "raft_large_C_T_V1.pth"
    weights.write_bytes(b"raft weights stand-in" * 100)
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    pins = tmp_path / "pins.yaml"
    pins.write_text(f"recipe: dynamic-degree\nurls:\n  raft_things:\n    url: {weights.as_uri()}\n"
                    f"    sha256: null  # the full hash is not published\n    sha256_prefix: {digest[:8]}\n")
    monkeypatch.setattr(Recipe, "pins_path", property(lambda self: pins))
    before = pins.read_text()
    result = runner.invoke(cli.app, ["fetch", "dynamic-degree", "-o", f"videos={tmp_path}"])
    assert result.exit_code == 0, result.output
    assert f"resolved at run time (this machine's resolved pins): urls.raft_things.sha256 = {digest}" in result.output
    assert pins.read_text() == before
    recipe = get_recipe("dynamic-degree")
    assert machine_pins_path(recipe.name, recipe.version).is_file()
    findings = doctor.diagnose(recipe, recipe.config("m", options={"videos": str(tmp_path)}, offline=True, env={}))
    assert any("resolved at run time" in f.line for f in findings)
    assert any(f.ok and f.line.startswith(f"raft_things: raft_large_C_T_V1.pth sha256 {digest[:12]}") for f in findings)

    result = runner.invoke(cli.app, ["fetch", "dynamic-degree", "--lock", "-o", f"videos={tmp_path}"])
    assert result.exit_code == 2 and "error: --lock is now --write-pins" in result.output   # the flag's old name
    assert pins.read_text() == before
    result = runner.invoke(cli.app, ["fetch", "dynamic-degree", "--write-pins", "-o", f"videos={tmp_path}"])
    assert result.exit_code == 0, result.output
    assert f"    sha256: {digest} # the full hash is not published" in pins.read_text()   # comment kept
    assert "review and commit it" in result.output


def test_images_are_reported_with_their_digest_or_as_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    import pinbench.ops.docker_engine as engine

    recipe = get_recipe("paibench-c")
    built = {recipe.stage_image(s) for s in recipe.stages if s.dockerfile == "Dockerfile"}

    class Images:  # test double for the docker SDK's image collection
        def get(self, tag: str):
            if tag not in built:
                raise RuntimeError("404 No such image")
            return type("Image", (), {"id": "sha256:" + "d" * 64})()

    monkeypatch.setattr(engine, "docker_client", lambda: type("Client", (), {"images": Images()})())
    findings = {f.line.split()[0]: f for f in doctor.image_findings(recipe)}
    score = findings[f"pinbench/paibench-c:{recipe.version}"]
    assert score.ok and score.line.endswith("d" * 64)
    generate = findings[f"pinbench/paibench-c-generate:{recipe.version}"]
    assert not generate.ok and "not built; run `make build-paibench-c`" in generate.line

    built.add("lab/model:1")   # --generator-image: the user's image in place of the generation one
    findings = {f.line.split()[0]: f for f in doctor.image_findings(recipe, "lab/model:1")}
    assert sorted(findings) == ["lab/model:1", f"pinbench/paibench-c:{recipe.version}"]
    built.remove("lab/model:1")
    (missing,) = [f for f in doctor.image_findings(recipe, "lab/model:1") if not f.ok]
    assert missing.line.startswith("lab/model:1 not found here (--generator-image)")

    def unreachable():
        raise ConnectionError("no socket")

    monkeypatch.setattr(engine, "docker_client", unreachable)
    (line,) = doctor.image_findings(recipe)
    assert not line.ok and line.line.startswith("no Docker engine reachable (ConnectionError)")
    assert line.line.endswith("needs one: is dockerd running and DOCKER_HOST set?")   # what to do, too
    (line,) = doctor.image_findings(recipe, building=True)   # --build: the build needs the engine too
    assert not line.ok and "no Docker engine reachable (ConnectionError)" in line.line


def test_run_build_checks_before_it_builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`make recipe-paibench-c` built both images (an hour with a Docker engine) before the run refused a
    misspelled CHECKPOINT, or found no GPU and no token; `run --build` builds after the doctor: a recipe image not
    built yet is then no problem, and anything else stops the run before the build."""
    import pinbench.ops.docker_engine as engine
    import pinbench.ops.docker_runtime as docker_runtime

    class Images:  # test double for the docker SDK's image collection: nothing built yet
        def get(self, tag: str):
            raise RuntimeError("404 No such image")

    steps: list[str] = []
    monkeypatch.setattr(engine, "docker_client", lambda: type("Client", (), {"images": Images()})())
    monkeypatch.setattr(docker_runtime, "build_recipe_images",
                        lambda recipe, build_dir, **kwargs: steps.append(f"build {kwargs['base_images']}") or [])
    monkeypatch.setattr(docker_runtime, "run_in_docker", lambda recipe, cfg, **kwargs: steps.append("run") or 0)
    monkeypatch.setattr(doctor, "visible_gpus", lambda: [H100])
    monkeypatch.setattr(doctor, "disk_findings", lambda recipe, cfg: [])
    monkeypatch.setattr(doctor, "network_findings", lambda pins, to_fetch: [])
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    run = ["run", "paibench-c", "--runtime", "docker", "--out", str(tmp_path / "run")]

    result = runner.invoke(cli.app, [*run, "--checkpoint", "cosmos3-nano", "--build"])
    assert result.exit_code == 2 and steps == [], result.output
    assert "PROBLEM inputs: unknown checkpoint 'cosmos3-nano' (did you mean 'Cosmos3-Nano'?)" in result.output
    assert "is not one of paibench-c's" not in result.output   # one message: the doctor's, not also the note's
    assert "PROBLEM images" not in result.output   # not built yet: --build builds them
    result = runner.invoke(cli.app, [*run, "--checkpoint", "", "--build"])
    assert result.exit_code == 2 and steps == [] and "--checkpoint is required" in result.output
    result = runner.invoke(cli.app, [*run, "--checkpoint", "Cosmos3-Nano", "--build", "--base-image", "x"])
    assert result.exit_code == 2 and steps == [] and "has 2 images; name one as DOCKERFILE=IMAGE" in result.output

    result = runner.invoke(cli.app, [*run, "--checkpoint", "Cosmos3-Nano", "--build", "--base-image",
                                     "Dockerfile=mirror.lab/cuda:12"])
    assert result.exit_code == 0 and steps == ["build {'Dockerfile': {'BASE_IMAGE': 'mirror.lab/cuda:12'}}", "run"]

    steps.clear()   # without --build the images must be there
    result = runner.invoke(cli.app, [*run, "--checkpoint", "Cosmos3-Nano"])
    assert result.exit_code == 2 and steps == [] and "not built; run `make build-paibench-c`" in result.output
    result = runner.invoke(cli.app, ["run", "paibench-c", "--checkpoint", "Cosmos3-Nano", "--build"])
    assert result.exit_code == 2 and steps == [] and "--build applies to --runtime docker" in result.output
    result = runner.invoke(cli.app, [*run, "--checkpoint", "Cosmos3-Nano", "--base-image", "Dockerfile=x"])
    assert result.exit_code == 2 and steps == [] and "--base-image applies to --build" in result.output


def test_checkpoint_note_once_the_doctor_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A name close to a known checkpoint is noted as a likely typo when the run takes it (here rollouts a
    --generator makes, scored as your own model) and the doctor passes (test_run_build_checks_before_it_builds: a
    name the doctor refuses is said once, by it)."""
    import pinbench.ops.launch as launch

    note = ("note: checkpoint 'cosmos3-nano' is not one of paibench-c's (Cosmos3-Nano, Cosmos3-Super) (did you "
            "mean 'Cosmos3-Nano'?); a new name is taken as your own model")
    held: list[str | None] = []
    monkeypatch.setattr(doctor, "diagnose", lambda recipe, cfg, **kwargs: [])
    monkeypatch.setattr(launch, "run_recipe", lambda cfg, note=None: held.append(note))
    run = ["run", "paibench-c", "--checkpoint", "cosmos3-nano", "--generator", "gen {out}", "--out", str(tmp_path)]
    result = runner.invoke(cli.app, run)
    assert result.exit_code == 0, result.output
    assert note in result.output and held == [None]
    # without the doctor the run holds it until the recipe's own checks of the name are done (test_run)
    result = runner.invoke(cli.app, [*run, "--skip-doctor"])
    assert result.exit_code == 0, result.output
    assert note not in result.output and held == [None, note]


def test_only_the_pins_this_run_reads_are_checked(tmp_path: Path) -> None:
    """A null pin stops an offline run only when the run reads it (its doctor names it), in every recipe."""
    mind = get_recipe("mind")

    def pin_problems(recipe, checkpoint: str, **options: str) -> list[str]:
        cfg = recipe.config(checkpoint, out_dir=tmp_path / "run", offline=True, gpus=0, options=options, env={})
        return [f.line for f in doctor.diagnose(recipe, cfg, gpus=None) if not f.ok and f.check == "pins"]

    results = tmp_path / "Result.json"
    assert pin_problems(mind, "m", gt=str(tmp_path), results=str(results)) == []    # imports: reads no weight
    (line,) = pin_problems(mind, "m", gt=str(tmp_path), videos=str(tmp_path))          # process.py: reads them
    assert line.startswith("huggingface.dinov3_vitb16.sha256[config.json]") and "urls.musiq_spaq.sha256" in line
    assert "geocalib" not in line                                 # baked into the image, not read from the cache
    # lcm reads neither the visual weights nor DINOv3 (was: all four asked for, CLIP's URL dead)
    assert pin_problems(mind, "m", gt=str(tmp_path), videos=str(tmp_path), metrics="lcm,action") == []
    (line,) = pin_problems(mind, "m", gt=str(tmp_path), videos=str(tmp_path), metrics="lcm,dino")
    assert line.startswith("huggingface.dinov3_vitb16") and "musiq" not in line
    dd = get_recipe("dynamic-degree")
    (line,) = pin_problems(dd, "m", videos=str(tmp_path))
    assert line.startswith("urls.raft_things.sha256 null")
    weights = tmp_path / "raft.pth"
    weights.write_bytes(b"local weights")
    assert pin_problems(dd, "m", videos=str(tmp_path), raft_weights=str(weights), raft_sha256="0" * 64) == []


# ------------------------------------------------------------------------------- every way forward, per recipe

# Every recipe's first checkpoint (its required path options an empty folder), and the runs that read more pins:
# RememBench's first checkpoint is the published pairs (the release alone); its T2V arms add CLIP and the LPIPS
# trunk, its I2V arms Pi3X.
RUNS = [(name, (recipe.checkpoints or ("mine",))[0], {}) for name, recipe in sorted(available_recipes().items())]
RUNS += [("remembench", "t2v-base-1chunk", {}), ("remembench", "i2v-base-1chunk", {"split": "i2v"}),
         ("mind", "mine", {"metrics": "lcm"})]
# The local copies issue 30 found missing offline, whatever recipe.yaml declares.
NAMED = {"camerabench": ["copy with -o data="], "dynamic-degree": ["copy with -o raft_weights=", "-o flow=farneback"],
         "remembench": ["copy with -o dataset_dir="], "t2v-base-1chunk": ["copy with -o clip_dir=",
                                                                          "copy with -o lpips_trunk="],
         "i2v-base-1chunk": ["copy with -o pi3x_weights="]}


def _missing_inputs_config(name: str, checkpoint: str, given: dict[str, str], tmp_path: Path, *, offline: bool):
    """A run on an empty cache, every required path option an empty folder."""
    recipe = get_recipe(name)
    folder = tmp_path / "inputs"
    folder.mkdir(exist_ok=True)
    options = {option: str(folder) for option, spec in recipe.options.items()
               if spec.required or (spec.required_unless and spec.type == "path")}
    return recipe, recipe.config(checkpoint, out_dir=tmp_path / "run", offline=offline, gpus=0,
                                 options={**options, **given}, env={})


def _ways(recipe, keys: set[str], checkpoint: str, options: dict[str, str]) -> list[str]:
    """What recipe.yaml says one can do about those pins: fetch them as this run reads them (its checkpoint where
    the recipe names it, its options: none of them a path), give each a local copy, not download."""
    fetch = [f"pinbench fetch {recipe.name}", *[f"-c {checkpoint}"] * (checkpoint in recipe.checkpoints),
             *[f"-o {key}={value}" for key, value in options.items()]]
    ways = [f"`{' '.join(fetch)}` on a connected machine"]
    ways += [f"-o {name}=" for name, spec in recipe.options.items() if keys & set(spec.instead_of)]
    return ways + ([recipe.no_download.options] if recipe.no_download else [])


def _pin_keys(line: str) -> set[str]:
    """The pins a "pins" or "network" line names (``urls.raft_things.sha256``, ``urls/raft_things``)."""
    return {f"{section}/{name}" for section, name in
            re.findall(r"\b(huggingface|urls|upstream)[./]([A-Za-z0-9_-]+)", line)}


@pytest.mark.parametrize(("name", "checkpoint", "options"), RUNS)
def test_every_input_missing_offline_names_every_way_forward(name: str, checkpoint: str, options: dict[str, str],
                                                             tmp_path: Path) -> None:
    """Offline on an empty cache, each missing input (a cache line) and each unresolved pin names pinbench fetch,
    every option recipe.yaml says takes a local copy of it (``instead_of``), and the run without download."""
    recipe, cfg = _missing_inputs_config(name, checkpoint, options, tmp_path, offline=True)
    findings = doctor.diagnose(recipe, cfg, gpus=None)
    missing = [f for f in findings if not f.ok and f.check in ("cache", "pins")]
    assert missing, [f.render() for f in findings]
    said = "\n".join(f.line for f in missing)
    assert [way for way in NAMED.get(name, []) + NAMED.get(checkpoint, []) if way not in said] == []
    for finding in missing:
        keys = {finding.subject} if finding.subject else _pin_keys(finding.line)
        for way in _ways(recipe, keys, checkpoint, options):
            assert way in finding.line, (way, finding.render())


@pytest.mark.parametrize(("name", "checkpoint", "options"), RUNS)
def test_every_input_that_cannot_be_downloaded_names_every_way_forward(name: str, checkpoint: str,
                                                                       options: dict[str, str], tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Online with the network failing (every request to a port nothing listens on): the same ways, for every pin
    each failing server serves; what the run would download itself is labelled FETCH, never ok."""
    with closed_port() as dead:
        for var in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
            monkeypatch.setenv(var, dead)
        monkeypatch.setenv("NO_PROXY", "")
        monkeypatch.setenv("no_proxy", "")
        recipe, cfg = _missing_inputs_config(name, checkpoint, options, tmp_path, offline=False)
        findings = doctor.diagnose(recipe, cfg, gpus=None)
    blocked = [f for f in findings if not f.ok and f.check in ("cache", "pins", "network")]
    assert blocked, [f.render() for f in findings]
    for finding in blocked:
        keys = {finding.subject} if finding.subject else _pin_keys(finding.line)
        for way in _ways(recipe, keys, checkpoint, options):
            assert way in finding.line, (way, finding.render())
    for finding in findings:
        if "not in cache" in finding.line:
            assert not finding.render().startswith("ok"), finding.render()
    fetched = [f for f in findings if f.to_fetch]
    assert bool(fetched) == bool(recipe.resources and recipe.resources.fetch_on_run)
    assert all(f.render().startswith("FETCH   cache: ") and f.line.endswith("; this run downloads it")
               and "next:" not in f.line for f in fetched)
