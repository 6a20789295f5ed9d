"""Repository-wide pytest set-up: development tools (tools/) and test helpers (tests/helpers/) are importable, the
sample cache is off, the pinbench cache is a temporary folder, and the secret values a run keeps in its environment
do not outlive their test.

The sample cache (pinbench.core.sample_cache) is shared by every run on a machine: off in the tests, so that no test
reuses another's records; the tests of the cache turn it on in a folder of their own.

The pinbench cache (``cache_root``: parsed YAML in ``yaml/``, import closures in ``imports-2.json``) was the user's
~/.cache/pinbench (or $HF_HOME): every test session wrote there. It is set here, as this file is imported, before any
test module is: one temporary folder a process, removed when it ends. A $PINBENCH_CACHE the shell set is kept, and a
test marked ``gpu`` sees the cache the shell names (it reads the weights `pinbench fetch` put there: $HF_HOME, else
~/.cache/pinbench); a test that sets its own still does.
"""

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests" / "helpers")]
os.environ["PINBENCH_SAMPLE_CACHE"] = "off"
_SESSION_CACHE = None if os.environ.get("PINBENCH_CACHE") else tempfile.mkdtemp(prefix="pinbench-test-cache-")
if _SESSION_CACHE is not None:
    os.environ["PINBENCH_CACHE"] = _SESSION_CACHE


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_CACHE is not None:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True)
def _gpu_tests_read_the_fetched_cache(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU test resolves real weights from the cache `pinbench fetch` filled (download=False): the session's
    temporary folder holds none, and the test failed where a fetch had been done."""
    if _SESSION_CACHE is not None and request.node.get_closest_marker("gpu") is not None:
        monkeypatch.delenv("PINBENCH_CACHE")


@pytest.fixture(autouse=True)
def _kept_secrets_end_with_the_test() -> Iterator[None]:
    """A run or submit with a secret-named -g option keeps its value in $PINBENCH_SECRET_VALUES (so that the
    processes it starts redact it too): left there, every later test of the worker redacted it, a test's own
    expected text included. What the shell set is put back."""
    before = os.environ.get("PINBENCH_SECRET_VALUES")
    yield
    if before is None:
        os.environ.pop("PINBENCH_SECRET_VALUES", None)
    else:
        os.environ["PINBENCH_SECRET_VALUES"] = before
