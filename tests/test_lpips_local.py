"""pinbench.media.lpips: LPIPS-Alex built from a local trunk file, never downloading."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision

from pinbench.media.lpips import (
    CPU_THREADS,
    LPIPSLoadError,
    load_lpips,
    lpips_distance,
    to_lpips_input,
    write_alexnet_trunk,
)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def trunk_file(tmp_path_factory) -> Path:
    """A torchvision-format AlexNet `features.*` checkpoint with seeded random weights (test double)."""
    torch.manual_seed(0)
    features = torchvision.models.alexnet(weights=None).features
    path = tmp_path_factory.mktemp("lpips") / "alexnet-random.pth"
    torch.save({f"features.{k}": v for k, v in features.state_dict().items()}, path)
    return path


@pytest.fixture(autouse=True)
def no_downloads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("LPIPS tried to download weights")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)
    monkeypatch.setattr(torch.hub, "download_url_to_file", refuse)


def _frames(seed: int, n: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 48, 64, 3), dtype=np.uint8)


def test_loads_local_trunk_and_matches_lpips_with_same_weights(trunk_file):
    import lpips

    model = load_lpips(trunk_file, expected_sha256=_sha(trunk_file))
    checkpoint = torch.load(trunk_file, weights_only=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = lpips.LPIPS(net="alex", version="0.1", pnet_rand=True, verbose=False).eval()
    for name, param in reference.net.named_parameters():
        index, kind = name.split(".", 2)[1:]
        param.data.copy_(checkpoint[f"features.{index}.{kind}"])
    a, b = _frames(1), _frames(2)
    got = lpips_distance(model, a, b)
    threads = torch.get_num_threads()
    torch.set_num_threads(CPU_THREADS)  # the count lpips_distance computes with on CPU
    try:
        with torch.no_grad():
            expected = reference(to_lpips_input(a), to_lpips_input(b)).flatten().double().numpy()
    finally:
        torch.set_num_threads(threads)
    assert got.shape == (2,)
    np.testing.assert_array_equal(got, expected)
    assert (got > 0).all()
    assert lpips_distance(model, a, a) == pytest.approx([0.0, 0.0], abs=1e-7)


def test_inputs_scaled_to_minus_one_one():
    frame = np.array([[[0, 127, 255]]], dtype=np.uint8)
    tensor = to_lpips_input(frame)
    assert tensor.shape == (1, 3, 1, 1)
    np.testing.assert_allclose(tensor.flatten().numpy(), [-1.0, 127 / 127.5 - 1, 1.0], rtol=0, atol=1e-7)
    with pytest.raises(ValueError, match="uint8"):
        to_lpips_input(frame.astype(np.float32))


def test_digest_mismatch_and_missing_file(trunk_file, tmp_path):
    with pytest.raises(LPIPSLoadError, match="sha256 mismatch"):
        load_lpips(trunk_file, expected_sha256="0" * 64)
    with pytest.raises(LPIPSLoadError, match="not found"):
        load_lpips(tmp_path / "absent.pth", expected_sha256=None)


def test_wrong_checkpoint_is_refused(tmp_path):
    bad = tmp_path / "not-alexnet.pth"
    torch.save({"features.0.weight": torch.zeros(3, 3)}, bad)
    with pytest.raises(LPIPSLoadError, match="no 'features.0.bias'|does not fit"):
        load_lpips(bad, expected_sha256=None)


def test_cpu_distance_does_not_depend_on_the_thread_count(trunk_file):
    """OMP_NUM_THREADS=1 and 2 (or ``taskset``) gave RememBench fixture records whose lpips_alex differed in the
    last bits: torch splits a CPU conv's sums by its thread count. lpips_distance fixes that count on CPU."""
    model = load_lpips(trunk_file, expected_sha256=None)
    a, b = _frames(3, 4), _frames(4, 4)
    threads = torch.get_num_threads()
    try:
        got = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            got.append(lpips_distance(model, a, b))
            assert torch.get_num_threads() == n  # the caller's setting is left as it was
    finally:
        torch.set_num_threads(threads)
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], got[2])


def test_a_written_trunk_is_torchvisions_layout_with_the_weights_given(trunk_file, tmp_path: Path) -> None:
    """``write_alexnet_trunk`` (the recipes' fixtures write their seeded trunks with it) writes torchvision's keys and
    shapes in torchvision's order with exactly the weights given, the same bytes under any file name."""
    checkpoint = torch.load(trunk_file, weights_only=True)
    given = iter(checkpoint.values())
    digest = write_alexnet_trunk(tmp_path / "ü" / "trunk.pth", lambda kind, shape: next(given))
    written = torch.load(tmp_path / "ü" / "trunk.pth", weights_only=True)
    assert list(written) == list(checkpoint)
    assert all(torch.equal(written[key], checkpoint[key]) for key in checkpoint)
    given = iter(checkpoint.values())
    assert write_alexnet_trunk(tmp_path / "other.pth", lambda kind, shape: next(given)) == digest
    load_lpips(tmp_path / "other.pth", expected_sha256=digest)


def test_the_recipes_fixture_trunks_keep_their_bytes(tmp_path: Path) -> None:
    """MIND's and RememBench's fixtures draw their trunks differently (their references hold the digests): moving
    the writing into the library changed no byte of either."""
    from pinbench_recipes.mind.fixture import write_random_alexnet as mind
    from pinbench_recipes.remembench.fixture import write_random_alexnet as remembench

    assert mind(tmp_path / "mind.pth") == "4bca5d78c7bfb621add801e94ef433cd3d96bc260a71352e5b55ffe05a31ad23"
    assert remembench(tmp_path / "rb.pth") == "1a4976cd0c3b5723662bd655a4b7318bd9d43bff2ff99525e8aeb016820296fc"


class _SlowPairs(torch.nn.Module):
    """TEST DOUBLE for an LPIPS model: records torch's thread count as its forward starts and ends, the first
    call's forward taking 0.2 s and the second's 0.5 s (so the first returns inside the second's)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.seen: list[tuple[int, int]] = []
        self.calls = 0

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        import time

        self.calls += 1
        start = torch.get_num_threads()
        time.sleep(0.2 if self.calls == 1 else 0.5)
        self.seen.append((start, torch.get_num_threads()))
        return torch.zeros(a.shape[0], 1, 1, 1)


def test_two_threads_each_compute_with_cpu_threads_and_leave_the_count_as_it_was(monkeypatch) -> None:
    """torch's thread count is the process's (held here by a test double of torch's two calls, as the docs define
    them: which OpenMP build shows it in which thread varies): the first call's restore landed inside the second's
    forward, which then ran with the caller's count, and the second restored the first's CPU_THREADS for good."""
    import threading
    import time

    count = [CPU_THREADS + 1]
    monkeypatch.setattr(torch, "get_num_threads", lambda: count[0])
    monkeypatch.setattr(torch, "set_num_threads", lambda n: count.__setitem__(0, n))
    model, a = _SlowPairs(), _frames(1, 1)
    first = threading.Thread(target=lpips_distance, args=(model, a, a))
    second = threading.Thread(target=lpips_distance, args=(model, a, a))
    first.start()
    time.sleep(0.05)   # inside the first's forward
    second.start()
    first.join()
    second.join()
    assert model.seen == [(CPU_THREADS, CPU_THREADS)] * 2
    assert count == [CPU_THREADS + 1]
