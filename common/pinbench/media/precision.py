"""TF32 switches for cuDNN and matmul, set one way on every PyTorch version.

Why one module: PyTorch 2.9 added per-backend ``fp32_precision`` flags and made the legacy ``allow_tf32``
getters raise once the two APIs have been mixed in one process (seen on the GPU check: RAFT set cuDNN conv
through the new API, then RememBench's LPIPS read ``cudnn.allow_tf32`` and failed). Recipes set precision
only through here: the new API where it exists (cuDNN conv and RNN together, so no flag disagrees), the
legacy one otherwise, and never a mix.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def _flags(torch: Any) -> list[Any] | None:
    """The new-API flag holders (cuDNN conv, cuDNN RNN, CUDA matmul), or None on PyTorch < 2.9."""
    cudnn = torch.backends.cudnn
    conv, rnn = getattr(cudnn, "conv", None), getattr(cudnn, "rnn", None)
    if conv is None or rnn is None or not hasattr(conv, "fp32_precision"):
        return None
    return [conv, rnn, torch.backends.cuda.matmul]


def set_tf32(*, cudnn: bool, matmul: bool) -> tuple[Any, ...]:
    """Allow TF32 (or force IEEE fp32) in cuDNN and in matmul; returns what to pass to ``restore``."""
    import torch

    holders = _flags(torch)
    if holders is not None:
        saved = tuple(h.fp32_precision for h in holders)
        for holder, allow in zip(holders, (cudnn, cudnn, matmul), strict=True):
            holder.fp32_precision = "tf32" if allow else "ieee"
        return ("new", saved)
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = cudnn, matmul
    return ("legacy", saved)


def restore(state: tuple[Any, ...]) -> None:
    """Put back the flags ``set_tf32`` replaced."""
    import torch

    api, saved = state
    if api == "new":
        for holder, value in zip(_flags(torch), saved, strict=True):
            holder.fp32_precision = value
    else:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@contextlib.contextmanager
def tf32(*, cudnn: bool, matmul: bool) -> Iterator[None]:
    """``set_tf32`` for the block, then the previous flags."""
    state = set_tf32(cudnn=cudnn, matmul=matmul)
    try:
        yield
    finally:
        restore(state)
