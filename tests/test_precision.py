"""TF32 flags set one way on every PyTorch version (pinbench.media.precision)."""

from __future__ import annotations

import pytest

from pinbench.media.precision import restore, set_tf32, tf32

torch = pytest.importorskip("torch")
NEW_API = hasattr(torch.backends.cudnn, "conv") and hasattr(torch.backends.cudnn.conv, "fp32_precision")


def _state() -> tuple:
    if NEW_API:
        return (torch.backends.cudnn.conv.fp32_precision, torch.backends.cudnn.rnn.fp32_precision,
                torch.backends.cuda.matmul.fp32_precision)
    return torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32


def test_set_and_restore() -> None:
    before = _state()
    with tf32(cudnn=True, matmul=False):
        assert _state() == (("tf32", "tf32", "ieee") if NEW_API else (True, False))
    with tf32(cudnn=False, matmul=True):
        assert _state() == (("ieee", "ieee", "tf32") if NEW_API else (False, True))
    assert _state() == before


def test_raft_then_lpips_in_one_process_does_not_mix_the_apis() -> None:
    """The GPU check's failure: RAFT's precision, then RememBench's LPIPS block, in one process."""
    raft = set_tf32(cudnn=False, matmul=False)        # dynamic-degree's RaftThings, for the process
    try:
        with tf32(cudnn=True, matmul=False):          # RememBench's pair metrics
            conv = torch.nn.Conv2d(3, 4, 3)
            assert conv(torch.ones(1, 3, 8, 8)).shape == (1, 4, 6, 6)
        assert _state() == (("ieee", "ieee", "ieee") if NEW_API else (False, False))
    finally:
        restore(raft)


@pytest.mark.skipif(not NEW_API, reason="PyTorch < 2.9 has only the legacy flags")
def test_why_the_legacy_getter_is_never_read() -> None:
    """On PyTorch >= 2.9, reading cudnn.allow_tf32 after new-API writes raises: the code must not do it."""
    state = set_tf32(cudnn=False, matmul=False)
    try:
        with pytest.raises(RuntimeError, match="mix of the legacy and new APIs"):
            _ = torch.backends.cudnn.allow_tf32
    finally:
        restore(state)
