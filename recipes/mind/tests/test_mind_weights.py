"""Weights: pins parse, staged copies are accepted only with the pinned digest, ViPE's caches are laid out
where an offline from_pretrained / torch.hub looks."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from pinbench.core.pins import HFPin, URLPin
from pinbench_recipes.mind.weights import (
    CACHE_PINS,
    HF_LOADED_AS,
    TORCH_HUB_FILES,
    WeightsError,
    bake,
    materialise_hf,
    recipe_pins,
    stage_file,
)


def test_pins_cover_every_weight_the_official_run_reads() -> None:
    pins = recipe_pins()
    assert pins.upstream["mind"].commit == "8f9c59c621f9c9d16f5db2fc0b7f042cf2505aa7"
    assert pins.upstream["vipe"].commit == "7e66b5a75434373be2a0da3973a10a9a33b595c2"
    assert set(CACHE_PINS) | set(TORCH_HUB_FILES) <= set(pins.urls)
    assert set(HF_LOADED_AS) | {"dinov3_vitb16"} <= set(pins.huggingface)
    # the CLIP digest is the one its URL names (what clip._download would check)
    clip = pins.urls["clip_vit_l14"]
    assert clip.sha256 is not None and clip.sha256 in clip.url


def _clip_file_and_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, URLPin]:
    """A local weights file and the URL pin naming its digest, with the cache under ``tmp_path``."""
    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    good = tmp_path / "ViT-L-14.pt"
    good.write_bytes(b"clip weights")
    pin = URLPin(url="https://example.org/ViT-L-14.pt", sha256=hashlib.sha256(b"clip weights").hexdigest(),
                 filename="ViT-L-14.pt")
    return good, pin


def test_staged_copy_needs_the_pinned_digest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good, pin = _clip_file_and_pin(tmp_path, monkeypatch)
    staged = stage_file(pin, good)
    assert staged.read_bytes() == b"clip weights" and str(tmp_path / "cache") in str(staged)
    bad = tmp_path / "other.pt"
    bad.write_bytes(b"something else")
    with pytest.raises(WeightsError, match="sha256 mismatch"):
        stage_file(pin, bad)
    with pytest.raises(WeightsError, match="no pinned sha256"):
        stage_file(URLPin(url=pin.url, sha256=None, filename=pin.filename), good)


def test_a_staged_copy_cut_short_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good, pin = _clip_file_and_pin(tmp_path, monkeypatch)

    def disk_full(source: Path, dest: Path) -> None:  # test double: the copy dies half way
        Path(dest).write_bytes(b"clip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copyfile", disk_full)
    with pytest.raises(OSError, match="No space left"):
        stage_file(pin, good)
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []


def test_hf_snapshot_is_laid_out_for_an_offline_main_lookup(tmp_path: Path) -> None:
    snapshot = tmp_path / "snap"
    (snapshot / "sub").mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot / "sub" / "vocab.txt").write_text("a\n")
    (snapshot / ".cache" / "huggingface").mkdir(parents=True)
    (snapshot / ".cache" / "huggingface" / "x").write_text("metadata")
    pin = HFPin(repo_id="google-bert/bert-base-uncased", revision="86b5e0934494bd15c9632b12f734a8a67f723594")
    dest = materialise_hf(pin, snapshot, tmp_path / "hf", "bert-base-uncased")
    folder = tmp_path / "hf" / "hub" / "models--bert-base-uncased"
    assert dest == folder / "snapshots" / pin.revision
    assert (folder / "refs" / "main").read_text() == pin.revision
    assert (dest / "sub" / "vocab.txt").read_text() == "a\n" and not (dest / ".cache").exists()


def test_bake_needs_the_gdown_file(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="--aot-file"):
        bake(tmp_path / "torch", tmp_path / "hf", recipe_pins(), {})


def test_the_digests_pins_yaml_leaves_null_are_this_machines_resolved_ones(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`pinbench fetch mind` records the digest of MUSIQ-SPAQ (null in pins.yaml) in this machine's resolved pins:
    the recipe's pins carry it from then on (runs verify the file against it; the scorecard says so)."""
    from pinbench.core.recipe import get_recipe
    from pinbench.ops.machine_pins import machine_pins_for, pins_for_provenance

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    assert recipe_pins().urls["musiq_spaq"].sha256 is None
    machine = machine_pins_for(get_recipe("mind"))
    digest = hashlib.sha256(b"musiq weights").hexdigest()
    machine.set(("urls", "musiq_spaq", "sha256"), digest, "downloaded and hashed (test)")
    machine.save()
    pins = recipe_pins()
    assert pins.urls["musiq_spaq"].sha256 == digest
    assert pins_for_provenance(pins)["resolved_at_run_time"]["urls.musiq_spaq.sha256"]["value"] == digest
    assert pins.urls["clip_vit_l14"].sha256 == recipe_pins().urls["clip_vit_l14"].sha256   # pinned ones stay


def test_fetch_takes_only_the_weights_the_metrics_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pinbench fetch mind -o metrics=lcm`` fetches the LPIPS trunk alone: no HF token for the gated DINOv3, no
    copy of CLIP (its URL is dead), neither of which an lcm run reads (was: every weight, so the doctor's "run
    `pinbench fetch mind`" stopped an lcm user at the token and the CLIP file)."""
    from pinbench_recipes.mind import weights

    fetched: list[str] = []
    monkeypatch.setattr(weights, "fetch_url", lambda pin: fetched.append(pin.filename) or Path(pin.filename))
    monkeypatch.setattr(weights, "fetch_hf", lambda pin, token: fetched.append("dinov3") or Path("dinov3"))
    pins = recipe_pins()
    assert sorted(weights.fetch_cache_weights(pins, token=None, staged={}, metrics=["lcm", "action"])) == ["alexnet"]
    assert fetched == [pins.urls["alexnet"].filename]
    fetched.clear()
    every = weights.fetch_cache_weights(pins, token=None, staged={}, metrics=["lcm", "visual", "dino"])
    assert sorted(every) == sorted([*CACHE_PINS, "dinov3_vitb16"]) and len(fetched) == 5


class GatedHubDouble:
    """Test double for huggingface_hub.HfApi over a gated repo: without a token every call is refused with the
    hub's GatedRepoError (the hub's paragraph names neither the pin nor HF_TOKEN); ``calls`` records each."""

    calls: list[str] = []

    def get_paths_info(self, repo_id, paths, *, revision=None, repo_type=None, token=None, **kwargs):
        from huggingface_hub.errors import GatedRepoError

        GatedHubDouble.calls.append(repo_id)
        raise GatedRepoError(f"401 Client Error.\n\nCannot access gated repo for url https://huggingface.co/{repo_id}."
                             "\nAccess to model is restricted. Please log in.")

    repo_info = get_paths_info


def _fetch(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], list[str]]:
    """``pinbench fetch mind ARGS`` without HF_TOKEN, the hub and the URL downloads replaced by test doubles: the
    exit code, the output lines and the pins the recipe's fetch downloaded."""
    import huggingface_hub

    from pinbench import cli
    from pinbench_recipes.mind import weights

    monkeypatch.setenv("PINBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub, "HfApi", GatedHubDouble)
    monkeypatch.setattr(GatedHubDouble, "calls", [])
    fetched: list[str] = []
    monkeypatch.setattr(weights, "fetch_url", lambda pin: fetched.append(pin.filename) or tmp_path / pin.filename)
    code = 0
    try:
        cli.main(["fetch", "mind", *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, [line for line in (captured.out + captured.err).splitlines() if line.strip()], fetched


def test_an_lcm_fetch_resolves_no_gated_pin_and_needs_no_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The fetch resolves the nulls of the pins it downloads only: an lcm fetch (the pinned LPIPS trunk) asks the
    hub nothing (was: the null digests of every pin first, DINOv3's included, refused without HF_TOKEN)."""
    code, lines, fetched = _fetch(["-o", "metrics=lcm"], tmp_path, monkeypatch, capsys)
    assert code == 0, lines
    assert fetched == ["alexnet-owt-7be5be79.pth"] and GatedHubDouble.calls == []
    assert not any("resolved at run time" in line for line in lines)


def test_a_dino_fetch_without_a_token_names_the_gated_pin_and_hf_token(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, fetched = _fetch(["-o", "metrics=lcm,dino"], tmp_path, monkeypatch, capsys)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0] == ("error: huggingface/dinov3_vitb16 (facebook/dinov3-vitb16-pretrain-lvd1689m) is gated: set "
                        "HF_TOKEN to a token of an account that has access to it (accept its licence on "
                        "https://huggingface.co/facebook/dinov3-vitb16-pretrain-lvd1689m)")
    assert fetched == [] and GatedHubDouble.calls == ["facebook/dinov3-vitb16-pretrain-lvd1689m"]


def test_a_run_records_only_the_pins_its_metrics_read() -> None:
    """An official ``-o metrics=lcm`` run reads the LPIPS trunk alone: its scorecard names no visual, DINOv3 or ViPE
    weight (was: every pin, so ``pinbench check`` noted MUSIQ and DINOv3 as unverified inputs of an lcm run); a run
    importing a Result.json without videos reads no weight at all."""
    from pinbench.core.provenance import input_states
    from pinbench.ops.machine_pins import pins_for_provenance
    from pinbench_recipes.mind.weights import run_pins

    pins = recipe_pins()
    code = ["upstream/mind", "upstream/vipe", "upstream/worldfoundry"]
    lcm = input_states(pins_for_provenance(pins, run_pins(pins, ["lcm"], official=True, native=True)))
    assert sorted(lcm) == [*code, "urls/alexnet"]
    assert sorted(run_pins(pins, ["lcm"], official=False, native=False)) == code
    assert sorted(run_pins(pins, ["gsc"], official=False, native=True)) == [*code, "urls/alexnet"]
