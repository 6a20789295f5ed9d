"""Repository-wide pytest set-up: development tools (tools/) and test helpers (tests/helpers/) are importable."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests" / "helpers")]
