"""Repository-wide pytest set-up: development tools (tools/) and test helpers (tests/helpers/) are importable, and
the sample cache is off.

The sample cache (pinbench.core.sample_cache) is shared by every run on a machine: off in the tests, so that no test
reuses another's records; the tests of the cache turn it on in a folder of their own.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests" / "helpers")]
os.environ["PINBENCH_SAMPLE_CACHE"] = "off"
