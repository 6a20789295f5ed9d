"""Where the public artifacts of ``../shared/data/`` (shared/data/README.md) are, for the tests that read them."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def shared_data(name: str) -> Path | None:
    """``../shared/data/<name>`` from the repository root, or from the main checkout's root when this is a git
    worktree; None where neither has it (a user's clone, an exported recipe)."""
    roots = [REPO]
    try:
        common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=REPO,
                                capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        roots.append(Path(common).parent)
    except (OSError, subprocess.SubprocessError):
        pass
    return next((root.parent / "shared" / "data" / name for root in roots
                 if (root.parent / "shared" / "data" / name).is_dir()), None)
