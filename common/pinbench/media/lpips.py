"""LPIPS (Zhang et al. 2018, ``lpips`` package) built entirely from local files, never downloading.

Why: ``lpips.LPIPS(net="alex")`` ships its linear heads inside the wheel but asks torchvision for the
ImageNet AlexNet trunk at construction, which downloads ``alexnet-owt-7be5be79.pth`` from the internet
(MIND and RememBench both use LPIPS-Alex v0.1; offline machines and ``--network none`` containers
cannot download). Here the module is built with a random trunk (``pnet_rand=True``, no download)
and the trunk weights are then loaded from a local torchvision checkpoint, verified by SHA-256 and read
with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import contextlib
import io
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

from pinbench.core.files import sha256_file, write_atomic

__all__ = [
    "ALEXNET_FEATURES",
    "ALEXNET_FILENAME",
    "ALEXNET_SHA256",
    "ALEXNET_URL",
    "HEADS_SHA256",
    "LPIPSLoadError",
    "load_lpips",
    "lpips_distance",
    "to_lpips_input",
    "write_alexnet_trunk",
]

ALEXNET_URL = "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth"
ALEXNET_FILENAME = "alexnet-owt-7be5be79.pth"
ALEXNET_SHA256 = "7be5be791159472b1fbf3c69796f7cb30dca7ad8466c2df70058c37116cdee02"
# The v0.1 linear heads inside the lpips 0.1.4 wheel (lpips/weights/v0.1/<net>.pth), checked at load.
HEADS_SHA256 = {("alex", "0.1"): "df73285e35b22355a2df87cdb6b70b343713b667eddbda73e1977e0c860835c0"}


# torchvision AlexNet ``features`` conv layers (the LPIPS trunk): index -> weight shape
ALEXNET_FEATURES = {0: (64, 3, 11, 11), 3: (192, 64, 5, 5), 6: (384, 192, 3, 3), 8: (256, 384, 3, 3),
                    10: (256, 256, 3, 3)}


def write_alexnet_trunk(path: Path, weights: Callable[[str, tuple[int, ...]], torch.Tensor]) -> str:
    """A trunk file in torchvision's layout (what ``load_lpips`` reads) holding ``weights(kind, shape)`` for each
    layer in order, its ``"weight"`` then its ``"bias"``; returns its SHA-256. For a recipe's fixture, whose seeded
    weights stand in for the download: each recipe draws its own (its fixture's references hold their digest)."""
    state = {}
    for index, shape in ALEXNET_FEATURES.items():
        state[f"features.{index}.weight"] = weights("weight", shape)
        state[f"features.{index}.bias"] = weights("bias", shape[:1])
    buffer = io.BytesIO()   # not the path: torch.save names its archive after an ASCII path's file, else "archive"
    torch.save(state, buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue())
    return sha256_file(path)


class LPIPSLoadError(RuntimeError):
    """The trunk file is missing, has the wrong digest, or does not fit the network (one line)."""


def _trunk_state(lpips_model: torch.nn.Module, checkpoint: dict[str, torch.Tensor],
                 path: Path) -> dict[str, torch.Tensor]:
    """Map torchvision ``features.<i>.<param>`` keys onto lpips' ``net.slice<k>.<i>.<param>``."""
    mapped = {}
    for name in lpips_model.net.state_dict():
        _slice, index, param = name.split(".", 2)
        key = f"features.{index}.{param}"
        if key not in checkpoint:
            raise LPIPSLoadError(f"{path}: trunk checkpoint has no {key!r} (not a torchvision "
                                 f"{type(lpips_model.net).__name__} state dict?)")
        mapped[name] = checkpoint[key]
    return mapped


def load_lpips(trunk_path: Path | str, *, expected_sha256: str | None, net: str = "alex",
               version: str = "0.1", device: str | torch.device = "cpu") -> torch.nn.Module:
    """``lpips.LPIPS(net=net, version=version)`` in eval mode, trunk loaded from ``trunk_path``.

    ``expected_sha256`` None skips the digest check (the caller must then report the trunk as
    unverified); the shipped linear heads of the installed ``lpips`` wheel are used as upstream does.
    """
    import lpips

    path = Path(trunk_path)
    if not path.is_file():
        raise LPIPSLoadError(f"{path}: LPIPS trunk weights not found")
    if expected_sha256 is not None:
        actual = sha256_file(path)
        if actual != expected_sha256:
            raise LPIPSLoadError(f"{path}: sha256 mismatch: expected {expected_sha256}, got {actual}")
    heads = Path(lpips.__file__).resolve().parent / "weights" / f"v{version}" / f"{net}.pth"
    expected_heads = HEADS_SHA256.get((net, version))
    if expected_heads is not None and sha256_file(heads) != expected_heads:
        raise LPIPSLoadError(f"{heads}: linear heads differ from lpips 0.1.4's ({expected_heads})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchvision's `pretrained=` deprecation notice
        model = lpips.LPIPS(net=net, version=version, pnet_rand=True, verbose=False)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise LPIPSLoadError(f"{path}: not a loadable torch state dict: {type(exc).__name__}: {exc}") from None
    if not isinstance(checkpoint, dict):
        raise LPIPSLoadError(f"{path}: expected a state dict, got {type(checkpoint).__name__}")
    try:
        model.net.load_state_dict(_trunk_state(model, checkpoint, path), strict=True)
    except RuntimeError as exc:
        raise LPIPSLoadError(f"{path}: trunk does not fit lpips {net}: {' '.join(str(exc).split())[:300]}") from None
    return model.to(device).eval()


def to_lpips_input(frames: np.ndarray, device: str | torch.device = "cpu") -> torch.Tensor:
    """uint8 RGB ``(H, W, 3)`` or ``(N, H, W, 3)`` -> float32 NCHW in [-1, 1] as ``x / 127.5 - 1``."""
    array = np.asarray(frames)
    if array.dtype != np.uint8 or array.shape[-1] != 3 or array.ndim not in (3, 4):
        raise ValueError(f"LPIPS input must be uint8 (..., H, W, 3) RGB, got {array.dtype} {array.shape}")
    batch = array[None] if array.ndim == 3 else array
    tensor = torch.from_numpy(np.ascontiguousarray(batch)).permute(0, 3, 1, 2).to(device)
    return tensor.float().div_(127.5).sub_(1.0)


# torch threads of an LPIPS forward on CPU: torch splits a conv's sums by its thread count, so the count would
# change the last bits (OMP_NUM_THREADS=1 against 2, or ``taskset``, gave other lpips_alex records). Two: what the
# fixtures' golden records of each CPU kind were computed with (tests/test_fixtures.py), on any number of cores.
CPU_THREADS = 2
_CPU_THREADS_LOCK = threading.Lock()


@contextlib.contextmanager
def _cpu_threads() -> Iterator[None]:
    """``CPU_THREADS`` torch threads for the block, then the caller's again. torch's count is the process's: held
    under a lock, so one thread's restore never lands inside another's forward (which computed with the caller's
    count, other last bits) and the process is left with the count it had."""
    with _CPU_THREADS_LOCK:
        threads = torch.get_num_threads()
        torch.set_num_threads(CPU_THREADS)
        try:
            yield
        finally:
            torch.set_num_threads(threads)


@torch.no_grad()
def lpips_distance(model: torch.nn.Module, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LPIPS of each image pair at its native resolution (spatially averaged), float64 array (N,); on CPU with
    ``CPU_THREADS`` torch threads whatever the caller set, so the value is the same on every thread count."""
    device = next(model.parameters()).device
    with _cpu_threads() if device.type == "cpu" else contextlib.nullcontext():
        out = model(to_lpips_input(a, device), to_lpips_input(b, device))
    return out.reshape(out.shape[0]).double().cpu().numpy()
