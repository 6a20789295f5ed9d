"""Flow estimators: the Farneback preview on known translations, RAFT weight loading and padding."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from pinbench_recipes.dynamic_degree.fixture import FixtureVideo, render
from pinbench_recipes.dynamic_degree.flow import (
    FarnebackPreview,
    RaftThings,
    WeightsError,
    load_raft_weights,
    original_to_torchvision,
)
from pinbench_recipes.dynamic_degree.scoring import pad_frames, top_mean_magnitude
from pinbench_recipes.dynamic_degree.tests.conftest import random_raft_state


def _pair(velocity: tuple[int, int], height: int = 56, width: int = 72) -> np.ndarray:
    video = FixtureVideo("pair", 8.0, 2, velocity, 2, 0.0)
    return render(video, np.random.default_rng(1), height=height, width=width)


def test_farneback_measures_a_known_translation() -> None:
    frames = _pair((3, 0))
    flow = FarnebackPreview().flow(frames[:1], frames[1:])
    assert flow.shape == (1, 2, 56, 72) and flow.dtype == np.float32
    # the window moves right by 3 px, so content moves left: u ~ -3 in the interior
    assert np.median(flow[0, 0, 8:-8, 8:-8]) == pytest.approx(-3.0, abs=0.3)
    assert top_mean_magnitude(flow[0]) == pytest.approx(3.0, abs=0.6)


def test_farneback_sees_no_motion_in_identical_frames() -> None:
    frames = _pair((0, 0))
    flow = FarnebackPreview().flow(frames[:1], frames[1:])
    assert top_mean_magnitude(flow[0]) < 0.05


def test_farneback_is_labelled_preview() -> None:
    described = FarnebackPreview().describe()
    assert described["official"] is False and "not the official metric" in described["label"]


def test_estimators_reject_mismatched_pairs() -> None:
    with pytest.raises(ValueError, match="frame pairs"):
        FarnebackPreview().flow(np.zeros((1, 8, 8, 3), np.uint8), np.zeros((2, 8, 8, 3), np.uint8))


# -------------------------------------------------------------------------------------- RAFT weights


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _to_original_layout(state: dict) -> dict:
    """Test-side inverse of the key renaming: torchvision raft_large keys -> princeton-vl keys.

    Written independently of flow.py (explicit table of module renames, applied the other way), with
    the original's duplicated ``norm3`` entries and DataParallel ``module.`` prefixes.
    """
    modules = {
        "feature_encoder": "fnet", "context_encoder": "cnet",
        "update_block.motion_encoder.convcorr1.0": "update_block.encoder.convc1",
        "update_block.motion_encoder.convcorr2.0": "update_block.encoder.convc2",
        "update_block.motion_encoder.convflow1.0": "update_block.encoder.convf1",
        "update_block.motion_encoder.convflow2.0": "update_block.encoder.convf2",
        "update_block.motion_encoder.conv.0": "update_block.encoder.conv",
        "mask_predictor.convrelu.0": "update_block.mask.0",
        "mask_predictor.conv": "update_block.mask.2",
    }
    out = {}
    for key, value in state.items():
        new = key
        for tv, orig in modules.items():
            if new.startswith(tv + "."):
                new = orig + new[len(tv):]
        new = re.sub(r"^(fnet|cnet)\.convnormrelu\.0\.", r"\1.conv1.", new)
        new = re.sub(r"^(fnet|cnet)\.convnormrelu\.1\.", r"\1.norm1.", new)
        new = re.sub(r"^(fnet|cnet)\.conv\.", r"\1.conv2.", new)
        new = re.sub(r"\.convnormrelu([12])\.0\.", r".conv\1.", new)
        new = re.sub(r"\.convnormrelu([12])\.1\.", r".norm\1.", new)
        new = re.sub(r"^update_block\.recurrent_block\.convgru([12])\.conv([zrq])\.",
                     r"update_block.gru.conv\2\1.", new)
        out["module." + new] = value
        if new.startswith("cnet.") and ".downsample.1." in new:
            out["module." + new.replace(".downsample.1.", ".norm3.")] = value
    return out


@pytest.fixture(scope="module")
def state() -> dict:
    return random_raft_state(seed=7)


def test_torchvision_layout_file_loads_verified(tmp_path: Path, state: dict) -> None:
    path = tmp_path / "raft_tv.pth"
    torch.save(state, path)
    loaded, info = load_raft_weights(path, _sha(path))
    assert info["layout"] == "torchvision" and info["state"] == "verified"
    assert loaded.keys() == state.keys()
    assert all(torch.equal(loaded[k], state[k]) for k in state)


def test_original_layout_file_is_renamed_to_torchvision(tmp_path: Path, state: dict) -> None:
    original = _to_original_layout(state)
    assert any(k.startswith("module.fnet.conv1") for k in original)
    path = tmp_path / "raft-things.pth"
    torch.save(original, path)
    loaded, info = load_raft_weights(path, None)
    assert info["layout"] == "princeton-vl" and info["state"] == "unverified"
    assert loaded.keys() == state.keys()
    assert all(torch.equal(loaded[k], state[k]) for k in state)
    assert original_to_torchvision(original).keys() == state.keys()


def test_safetensors_file_loads(tmp_path: Path, state: dict) -> None:
    from safetensors.torch import save_file

    path = tmp_path / "raft.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    loaded, _ = load_raft_weights(path, None)
    assert all(torch.equal(loaded[k], state[k]) for k in state)


def test_sha256_mismatch_names_the_file(tmp_path: Path, state: dict) -> None:
    path = tmp_path / "raft.pth"
    torch.save(state, path)
    with pytest.raises(WeightsError, match=r"raft\.pth: sha256 mismatch"):
        load_raft_weights(path, "0" * 64)


def test_sha256_prefix_in_torchvision_file_name_is_checked(tmp_path: Path, state: dict) -> None:
    path = tmp_path / "raft_large_C_T_V1-22a6c225.pth"
    torch.save(state, path)
    with pytest.raises(WeightsError, match="does not start with 22a6c225"):
        load_raft_weights(path, None)
    good = tmp_path / f"raft_large_C_T_V1-{_sha(path)[:8]}.pth"
    path.rename(good)
    assert load_raft_weights(good, None)[1]["state"] == "unverified"


def test_pickled_objects_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "evil.pth"
    torch.save({"fnet.conv1.weight": torch.zeros(1), "payload": Path("/etc")}, path)
    with pytest.raises(WeightsError, match="cannot read RAFT weights"):
        load_raft_weights(path, None)


def test_unrelated_state_dict_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.pth"
    torch.save({"encoder.weight": torch.zeros(2)}, path)
    with pytest.raises(WeightsError, match="not a RAFT-large state dict"):
        load_raft_weights(path, None)


def test_missing_weights_file(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="not found"):
        RaftThings(tmp_path / "nope.pth")


@pytest.mark.parametrize(("make", "says"), [(os.mkdir, "a directory"), (os.mkfifo, "a FIFO (named pipe)"),
                                            (lambda p: os.symlink("gone", p), "a dangling symlink (to 'gone')"),
                                            (lambda p: os.symlink(p.name, p), "a symlink loop")])
def test_weights_that_are_no_file_are_said_as_what_is_there(tmp_path: Path, make, says: str) -> None:
    """``-o raft_weights=`` at a folder or a FIFO was "RAFT weights file not found", in the run and its doctor; a
    symlink loop was "unreadable (Too many levels of symbolic links)"."""
    from pinbench_recipes.dynamic_degree.prepare import weights_file_problem

    path = tmp_path / "raft.pth"
    make(path)
    line = f"{path}: {says}, not a RAFT weights file"
    assert weights_file_problem(path) == line
    for load in (RaftThings, lambda p: load_raft_weights(p, None)):
        with pytest.raises(WeightsError) as raised:
            load(path)
        assert str(raised.value) == line


def test_incomplete_state_dict_is_refused_by_the_model(tmp_path: Path, state: dict) -> None:
    path = tmp_path / "partial.pth"
    torch.save({k: v for k, v in state.items() if not k.startswith("mask_predictor")}, path)
    estimator = RaftThings(path, device="cpu")
    frames = np.zeros((2, 128, 128, 3), np.uint8)
    with pytest.raises(WeightsError, match="do not fit torchvision raft_large"):
        estimator.flow(frames[:1], frames[1:])


# ------------------------------------------------------------------------------------ RAFT on frames


@pytest.fixture(scope="module")
def raft(tmp_path_factory: pytest.TempPathFactory, state: dict) -> RaftThings:
    path = tmp_path_factory.mktemp("raft") / "raft.pth"
    torch.save(state, path)
    return RaftThings(path, sha256=_sha(path), device="cpu", batch_size=2, iters=2)


def test_raft_runs_on_padded_frames_and_returns_the_padded_field(raft: RaftThings) -> None:
    frames = _pair((2, 1), height=122, width=130)  # pads to 128 x 136
    padded = pad_frames(frames)
    assert padded.shape[1:3] == (128, 136)
    flow = raft.flow(padded[:1], padded[1:])
    assert flow.shape == (1, 2, 128, 136) and flow.dtype == np.float32
    assert np.isfinite(flow).all()
    assert raft.weights_info["state"] == "verified"


def test_raft_is_deterministic_and_batch_independent(raft: RaftThings) -> None:
    frames = pad_frames(np.concatenate([_pair((2, 0), 128, 128), _pair((0, 2), 128, 128)]))
    first, second = frames[[0, 2]], frames[[1, 3]]
    batched = raft.flow(first, second)
    single = np.concatenate([raft.flow(first[i:i + 1], second[i:i + 1]) for i in range(2)])
    np.testing.assert_allclose(batched, single, rtol=0, atol=1e-4)
    np.testing.assert_array_equal(raft.flow(first, second), batched)


def test_raft_refuses_unpadded_or_too_small_frames(raft: RaftThings) -> None:
    with pytest.raises(ValueError, match="multiples of 8"):
        raft.flow(np.zeros((1, 130, 130, 3), np.uint8), np.zeros((1, 130, 130, 3), np.uint8))
    with pytest.raises(ValueError, match="at least 128 px"):
        raft.flow(np.zeros((1, 64, 64, 3), np.uint8), np.zeros((1, 64, 64, 3), np.uint8))


def test_raft_input_scaling_matches_the_original(raft: RaftThings) -> None:
    frames = np.array([[[[0, 128, 255]]]], np.uint8)
    scaled = raft._to_input(frames)
    expected = 2 * (torch.tensor([0.0, 128.0, 255.0]) / 255.0) - 1.0
    assert torch.equal(scaled[0, :, 0, 0], expected)
