"""Optical-flow estimators behind one small interface: RAFT-things (official) and Farneback (preview).

Why an interface: the metric is defined on RAFT flow, but tests and a quick CPU look at a folder of
videos need something that runs in milliseconds without weights. The classical estimator is labelled
"preview — not the official metric" wherever its numbers appear, and its scores are filed under a
different metric name, so they can never be compared with a RAFT reference.

Both estimators get frames that are already edge-padded to multiples of 8 (``scoring.pad_frames``)
and return the flow over that padded field, as the metric requires.

RAFT runs torchvision's ``raft_large`` architecture. It accepts either state-dict layout: the original
princeton-vl checkpoint (``raft-things.pth``, keys ``module.fnet...``), whose keys are renamed here
to torchvision's, or torchvision's port of the same weights (``raft_large_C_T_V1``). With the same
weights the two implementations compute the same operations: each module matches the original bit
for bit in isolation, and full 20-iteration flows agree up to float32 rounding of the kernels chosen
(README, "Changes vs upstream"; ``gpu_check.py`` measures it on real videos).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import cv2
import numpy as np

from pinbench.core.files import no_file_at, sha256_file
from pinbench.media.precision import set_tf32

RAFT_ITERS = 20
RAFT_MIN_SIZE = 128  # torchvision's RAFT refuses padded frames below 128 px (correlation pyramid)
PREVIEW_LABEL = "preview — not the official metric"
_TORCHVISION_HASH_PREFIX = re.compile(r"-([0-9a-f]{8,64})\.pth$")


class WeightsError(Exception):
    """A RAFT weights file that cannot be used; the message names the file and what is wrong."""


class FlowEstimator(Protocol):
    """Flow between frame pairs. ``official`` is False for anything that is not the metric's RAFT."""

    name: str
    official: bool
    batch_size: int

    def describe(self) -> dict[str, Any]:
        """What identifies this estimator's numbers (part of every sample's cache key)."""
        ...

    def flow(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """(B, H, W, 3) uint8 RGB pairs -> (B, 2, H, W) float32 flow (u, v) in pixels."""
        ...


# ----------------------------------------------------------------------------------------- preview


class FarnebackPreview:
    """OpenCV Farneback dense flow on grayscale frames: fast, CPU only, not the official metric."""

    name = "farneback"
    official = False
    params = {"pyr_scale": 0.5, "levels": 4, "winsize": 15, "iterations": 3, "poly_n": 5,
              "poly_sigma": 1.2, "flags": 0}

    def __init__(self, batch_size: int = 16) -> None:
        self.batch_size = batch_size

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "official": False, "label": PREVIEW_LABEL,
                "opencv": cv2.__version__, "params": dict(self.params)}

    def flow(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        _check_pairs(first, second)
        out = np.empty((len(first), 2, first.shape[1], first.shape[2]), np.float32)
        for i, (a, b) in enumerate(zip(first, second, strict=True)):
            gray_a = cv2.cvtColor(a, cv2.COLOR_RGB2GRAY)
            gray_b = cv2.cvtColor(b, cv2.COLOR_RGB2GRAY)
            field = cv2.calcOpticalFlowFarneback(gray_a, gray_b, None, **self.params)
            out[i] = field.transpose(2, 0, 1)
        return out


# -------------------------------------------------------------------------------------------- RAFT


def _rename_original_key(key: str) -> str | None:
    """princeton-vl RAFT (large) state-dict key -> torchvision ``raft_large`` key; None to drop.

    ``cnet.layerX.Y.norm3`` is dropped: in the original it is the same module as ``downsample.1``,
    so the state dict holds it twice.
    """
    if ".norm3." in key:
        return None
    rules = (
        (r"^fnet\.", "feature_encoder."),
        (r"^cnet\.", "context_encoder."),
        (r"_encoder\.conv1\.", "_encoder.convnormrelu.0."),
        (r"_encoder\.norm1\.", "_encoder.convnormrelu.1."),
        (r"_encoder\.conv2\.", "_encoder.conv."),
        (r"(layer\d\.\d)\.conv([12])\.", r"\1.convnormrelu\2.0."),
        (r"(layer\d\.\d)\.norm([12])\.", r"\1.convnormrelu\2.1."),
        (r"^update_block\.encoder\.convc([12])\.", r"update_block.motion_encoder.convcorr\1.0."),
        (r"^update_block\.encoder\.convf([12])\.", r"update_block.motion_encoder.convflow\1.0."),
        (r"^update_block\.encoder\.conv\.", "update_block.motion_encoder.conv.0."),
        (r"^update_block\.gru\.conv([zrq])([12])\.", r"update_block.recurrent_block.convgru\2.conv\1."),
        (r"^update_block\.mask\.0\.", "mask_predictor.convrelu.0."),
        (r"^update_block\.mask\.2\.", "mask_predictor.conv."),
    )
    for pattern, replacement in rules:
        key = re.sub(pattern, replacement, key)
    return key


def seeded_random_state(state: dict[str, Any], seed: int) -> dict[str, Any]:
    """A RAFT state dict of the same keys and shapes with seeded random values, for checks without the real
    weights: parameters N(0, 0.05), BatchNorm running variances in [0.5, 1.5), integer buffers kept."""
    import torch

    generator = torch.Generator().manual_seed(int(seed))
    out = {}
    for key, value in state.items():
        if key.endswith("running_var"):
            value = torch.rand(value.shape, generator=generator) + 0.5
        elif value.dtype.is_floating_point:
            value = torch.randn(value.shape, generator=generator) * 0.05
        out[key] = value.clone()
    return out


def original_to_torchvision(state: dict[str, Any]) -> dict[str, Any]:
    """Rename an original RAFT-large state dict (``module.`` prefixes allowed) to torchvision's layout."""
    renamed: dict[str, Any] = {}
    for key, value in state.items():
        new = _rename_original_key(key.removeprefix("module."))
        if new is not None:
            renamed[new] = value
    return renamed


def weights_file_problem(path: Path) -> str | None:
    """Why ``path`` is no RAFT weights file, in one line naming it and what is there (a folder or a FIFO was called
    "not found"), or None."""
    kind = no_file_at(path)
    if kind is None:
        return None
    return f"{path}: RAFT weights file not found" if kind == "nothing" else f"{path}: {kind}, not a RAFT weights file"


def check_weights_file(path: Path) -> None:
    """WeightsError saying ``weights_file_problem``, if there is one."""
    problem = weights_file_problem(path)
    if problem is not None:
        raise WeightsError(problem)


def load_raft_weights(path: Path, expected_sha256: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read a RAFT-large state dict safely and return it in torchvision's layout, plus facts about it.

    The file's SHA-256 must equal ``expected_sha256`` when one is given (else the file is recorded
    as unverified). A torchvision file name such as ``raft_large_C_T_V1-22a6c225.pth`` carries the
    first hex digits of its SHA-256; that prefix is checked too. Only tensors are read:
    ``torch.load(weights_only=True)`` or safetensors, never pickle.
    """
    import torch

    path = Path(path)
    check_weights_file(path)
    actual = sha256_file(path)
    if expected_sha256 and actual != expected_sha256.lower():
        raise WeightsError(f"{path}: sha256 mismatch: expected {expected_sha256}, got {actual}")
    prefix = _TORCHVISION_HASH_PREFIX.search(path.name)
    if prefix and not actual.startswith(prefix.group(1)):
        raise WeightsError(f"{path}: sha256 {actual} does not start with {prefix.group(1)} from its file name")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path), device="cpu")
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt file, pickle with non-tensor objects, wrong format
        raise WeightsError(f"{path}: cannot read RAFT weights: {type(exc).__name__}: {exc}") from exc
    if not isinstance(state, dict) or not state:
        raise WeightsError(f"{path}: expected a non-empty state dict, got {type(state).__name__}")
    keys = [k.removeprefix("module.") for k in state]
    if any(k.startswith("fnet.") for k in keys):
        layout, state = "princeton-vl", original_to_torchvision(state)
    elif any(k.startswith("feature_encoder.") for k in keys):
        layout = "torchvision"
        state = {k.removeprefix("module."): v for k, v in state.items()}
    else:
        raise WeightsError(f"{path}: not a RAFT-large state dict (first keys: {', '.join(keys[:3])})")
    verified = bool(expected_sha256)
    info = {"file": path.name, "sha256": actual, "layout": layout,
            "state": "verified" if verified else "unverified"}
    return state, info


def _set_precision(torch: Any, tf32: bool, cudnn_benchmark: bool = False) -> str:
    """Full fp32 by default, so that flow does not depend on the GPU generation; returns what was set.

    ``tf32=True`` (PyTorch's default for cuDNN convolutions, so what upstream runs got on Ampere and
    later) and ``cudnn_benchmark=True`` (cuDNN times its algorithms on the first call of each shape and
    keeps the fastest deterministic one) exist for gpu_check.py's sweep.
    """
    set_tf32(cudnn=tf32, matmul=tf32)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = cudnn_benchmark
    return (f"{'tf32' if tf32 else 'ieee fp32 (TF32 off)'}, cudnn deterministic"
            f"{', cudnn.benchmark' if cudnn_benchmark else ''}")


@dataclass(frozen=True)
class RaftSettings:
    """How RAFT runs on a GPU, what gpu_check.py sweeps; the defaults are what the recipe runs.

    Upstream (VBench ``dynamic_degree.py``) runs one pair at a time in fp32 and sets no backend flag, so it
    gets PyTorch's defaults: TF32 in cuDNN convolutions (Ampere and later), TF32 off in matmuls,
    ``cudnn.benchmark`` off, the default memory layout.
    """

    batch_size: int = 8
    tf32: bool = False
    channels_last: bool = False
    cudnn_benchmark: bool = False

    @property
    def label(self) -> str:
        return (f"batch {self.batch_size}, {'tf32' if self.tf32 else 'fp32'}, "
                f"{'channels_last' if self.channels_last else 'default layout'}, "
                f"benchmark {'on' if self.cudnn_benchmark else 'off'}")


def settings_grid(batch_sizes: tuple[int, ...] = (1, 8, 16)) -> list[RaftSettings]:
    """Every combination of batch size, TF32, channels_last and cudnn.benchmark (the sweep's settings)."""
    return [RaftSettings(b, tf32, channels_last, benchmark) for b in batch_sizes for tf32 in (False, True)
            for channels_last in (False, True) for benchmark in (False, True)]


class RaftThings:
    """RAFT with the "things" (FlyingChairs + FlyingThings3D) weights, 20 refinement iterations.

    The model is built on first use, so a rerun whose samples are all cached never loads it.
    """

    name = "raft_things"
    official = True

    def __init__(self, weights: Path, *, sha256: str | None = None, device: str = "auto",
                 batch_size: int = 8, iters: int = RAFT_ITERS, tf32: bool = False, channels_last: bool = False,
                 cudnn_benchmark: bool = False) -> None:
        import torch

        self.weights = Path(weights)
        self.expected_sha256 = sha256
        check_weights_file(self.weights)
        self.weights_sha256 = sha256_file(self.weights)
        if sha256 and self.weights_sha256 != sha256.lower():
            raise WeightsError(f"{self.weights}: sha256 mismatch: expected {sha256}, got {self.weights_sha256}")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.batch_size = batch_size
        self.iters = iters
        self.tf32 = tf32
        self.channels_last = channels_last
        self.cudnn_benchmark = cudnn_benchmark
        self._model: Any = None
        self.weights_info: dict[str, Any] = {}
        self.precision = ""

    def describe(self) -> dict[str, Any]:
        """Identity of the numbers: pinning the weights' full SHA-256 later does not change it (same file)."""
        import torchvision

        described = {"backend": self.name, "official": True,
                     "implementation": f"torchvision {torchvision.__version__} raft_large",
                     "iters": self.iters, "weights_sha256": self.weights_sha256,
                     "precision": "tf32" if self.tf32 else "fp32",
                     "device": self.device.partition(":")[0]}  # CPU and CUDA kernels differ in the last bits
        # only when set, so that the recipe's default runs keep their cache keys
        described.update({k: True for k in ("channels_last", "cudnn_benchmark") if getattr(self, k)})
        return described

    def model(self) -> Any:
        if self._model is None:
            from torchvision.models.optical_flow import raft_large

            state, self.weights_info = load_raft_weights(self.weights, self.expected_sha256)
            model = raft_large(weights=None, progress=False)
            try:
                model.load_state_dict(state, strict=True)
            except RuntimeError as exc:
                message = " ".join(str(exc).split())[:300]
                raise WeightsError(f"{self.weights}: weights do not fit torchvision raft_large: {message}") from exc
            model = model.to(self.device).eval()
            if self.channels_last:
                import torch

                model = model.to(memory_format=torch.channels_last)
            self._model = model
        return self._model

    def flow(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        import torch

        _check_pairs(first, second)
        height, width = first.shape[1:3]
        if height % 8 or width % 8:
            raise ValueError(f"RAFT needs frames padded to multiples of 8, got {width}x{height}")
        if min(height, width) < RAFT_MIN_SIZE:
            raise ValueError(f"frames of {width}x{height} (padded) are too small for torchvision's RAFT, "
                             f"which needs at least {RAFT_MIN_SIZE} px on each side")
        model = self.model()
        if self.device.startswith("cuda"):  # process-wide flags: set on every call, not once
            self.precision = _set_precision(torch, self.tf32, self.cudnn_benchmark)
        with torch.inference_mode():
            image1 = self._to_input(first)
            image2 = self._to_input(second)
            flows = model(image1, image2, num_flow_updates=self.iters)[-1]
            return flows.float().cpu().numpy()

    def _to_input(self, frames: np.ndarray) -> Any:
        """uint8 (B, H, W, 3) -> float (B, 3, H, W) in [-1, 1], exactly as the original RAFT scales."""
        import torch

        tensor = torch.from_numpy(np.ascontiguousarray(frames)).to(self.device)
        tensor = tensor.permute(0, 3, 1, 2).float()
        scaled = 2 * (tensor / 255.0) - 1.0
        return scaled.contiguous(memory_format=torch.channels_last) if self.channels_last else scaled


def _check_pairs(first: np.ndarray, second: np.ndarray) -> None:
    if first.shape != second.shape or first.ndim != 4 or first.shape[3] != 3 or first.dtype != np.uint8:
        raise ValueError(f"frame pairs must be two equal (B, H, W, 3) uint8 arrays, "
                         f"got {first.dtype}{first.shape} and {second.dtype}{second.shape}")
