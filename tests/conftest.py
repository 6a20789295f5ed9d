"""Shared fixtures for library tests: small synthetic videos written on the fly, a real Docker engine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from pinbench.media.video import write_video


def moving_pattern(n_frames: int, height: int = 48, width: int = 64, seed: int = 0) -> np.ndarray:
    """Deterministic (T, H, W, 3) uint8 RGB frames: smooth seeded colour field plus a square moving right.

    Smooth content keeps lossy-codec error small; the square gives real motion (2 px per frame).
    """
    rng = np.random.default_rng(seed)
    phase = rng.uniform(0, 2 * np.pi, size=3)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    base = np.stack([127 + 100 * np.sin(xx / 9 + yy / 13 + p) for p in phase], axis=-1)
    frames = np.repeat(base[None], n_frames, axis=0)
    side = max(4, min(height, width) // 4)
    top = (height - side) // 2
    for t in range(n_frames):
        left = (2 * t) % max(1, width - side)
        frames[t, top : top + side, left : left + side] = (250, 250, 30)
    return np.clip(np.rint(frames), 0, 255).astype(np.uint8)


@pytest.fixture
def make_video(tmp_path: Path) -> Callable[..., Path]:
    """Factory: ``make_video(name="clip.mp4", n_frames=10, fps=8.0, height=48, width=64, seed=0)``.

    Writes ``moving_pattern`` frames with pinbench.media.video.write_video (libx264, crf 18) under tmp_path.
    """

    def _make(
        name: str = "clip.mp4",
        n_frames: int = 10,
        fps: float | Fraction = 8.0,
        height: int = 48,
        width: int = 64,
        seed: int = 0,
    ) -> Path:
        return write_video(tmp_path / name, moving_pattern(n_frames, height, width, seed), fps)

    return _make


@pytest.fixture
def synthetic_frames() -> Callable[..., np.ndarray]:
    """The frame generator behind ``make_video``, for tests that compare decoded pixels to the source."""
    return moving_pattern


@pytest.fixture(scope="session")
def engine():
    """A docker SDK client of a real engine; the test is skipped without one."""
    from pinbench.ops.docker_engine import ContainerError, docker_client

    try:
        return docker_client()
    except ContainerError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def base_image(engine) -> str:
    """The pinned python-3.11-slim base, or PINBENCH_TEST_BASE_IMAGE (a local stand-in where no registry is
    reachable, e.g. a debootstrap'd Debian with python3.11 made with `docker import`); skipped if neither is
    here nor pullable."""
    import os

    import docker
    from dockerlint import load_base_images

    image = os.environ.get("PINBENCH_TEST_BASE_IMAGE") or \
        load_base_images(Path(__file__).resolve().parents[1] / "images" / "base-images.yaml")["python-3.11-slim"].image
    try:
        engine.images.get(image)
    except docker.errors.ImageNotFound:
        try:
            engine.images.pull(image)
        except docker.errors.APIError as exc:
            pytest.skip(f"{image}: not here and not pullable ({' '.join(str(exc).split())[:200]})")
    return image


@pytest.fixture(scope="session")
def slurm_cluster():
    """A real single-node Slurm for the session (tools/slurm_local.py), stopped by PID at the end.

    Skipped only when slurm-wlm or munge is not installed; CI (.ci/run) installs both.
    """
    import shutil
    import tempfile

    from slurm_local import missing_binaries, start_cluster

    missing = missing_binaries()
    if missing:
        pytest.skip(f"no Slurm here ({', '.join(missing)} missing): apt-get install slurm-wlm munge "
                    "(.ci/run installs them)")
    # Not under pytest's tmp_path: munged wants every directory above its socket searchable by all.
    root = Path(tempfile.mkdtemp(prefix="pinbench-slurm-"))
    cluster = start_cluster(root)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


_INTERRUPTING_LOCK = """
import os as _os, signal as _signal, subprocess as _subprocess, threading as _threading

class _Interrupting:   # Popen's wait lock: the signal as its first non-blocking take returns, before the try
    def __init__(self):
        self.lock, self.armed = _threading.Lock(), True
    def acquire(self, blocking=True, timeout=-1):
        got = self.lock.acquire(blocking, timeout)
        if got and not blocking and self.armed:
            self.armed = False
            _os.kill(_os.getpid(), _signal.{signal})
        return got
    def release(self):
        self.lock.release()
    def __enter__(self):
        return self.lock.__enter__()
    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)

class _Popen(_subprocess.Popen):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._waitpid_lock = _Interrupting()

_subprocess.Popen = _Popen
"""


@pytest.fixture
def signalled_in_the_wait_lock() -> Callable[..., tuple[int, str, str]]:
    """Run Python ``code`` (with ``args`` as its argv) in a process of its own whose every Popen wait lock sends it
    ``signum`` as its first non-blocking take returns, before the ``try`` that gives the lock back: the window where
    Python 3.11 left the lock taken on Ctrl-C or SIGTERM, and a later wait hung. Returns (returncode, stdout,
    stderr); the test fails where the process did not end within 30 s."""
    def run(code: str, signum: int, *args: str, **popen: object) -> tuple[int, str, str]:
        name = signal.Signals(signum).name
        proc = subprocess.Popen([sys.executable, "-c", _INTERRUPTING_LOCK.format(signal=name) + code, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                **popen)  # type: ignore[call-overload]
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"the process did not end within 30 s of {name} in its Popen wait lock")
        return proc.returncode, stdout, stderr
    return run
