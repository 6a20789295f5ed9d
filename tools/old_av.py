"""The PyAV versions the given requirement locks pin, one a line, distinct and in version order (``make test-old-av``).

Each lock line is read as pip reads it (``packaging.requirements.Requirement``: any case of the name, extras, blanks,
an environment marker), so ``AV[x] == 14.2.0`` is found, not skipped. Markers are parsed, not evaluated: a lock is
compiled for its image's Python and platform, not this one. A line naming av that pins no plain ``av==X.Y.Z`` (a
range, ``===``, a pre- or post-release, a URL) exits 1 with one line naming its lock, so no pin goes untested unsaid.

    .venv/bin/python tools/old_av.py recipes/*/requirements.lock
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


def _plain(req: Requirement) -> str | None:
    """The version of a lone ``==X.Y.Z`` (digits and dots: a release, nothing else), else None."""
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator != "==" or not re.fullmatch(r"[0-9]+(\.[0-9]+)*", specs[0].version):
        return None
    return specs[0].version


def pinned(lock: Path) -> list[str]:
    """The av versions one lock pins; a line naming av with no plain pin raises ValueError naming the lock."""
    found = []
    for raw in lock.read_text(encoding="utf-8").splitlines():
        text = raw.split(" #", 1)[0].strip().removesuffix("\\").strip()
        if not text or text.startswith(("#", "-")):
            continue
        try:
            req = Requirement(text)
        except InvalidRequirement as err:
            raise ValueError(f"{lock}: '{raw}' is not a requirement ({err})") from None
        if canonicalize_name(req.name) != "av":
            continue
        version = _plain(req)
        if version is None:
            raise ValueError(f"{lock}: '{raw}' names av but pins no plain av==X.Y.Z version")
        found.append(version)
    return found


def main(locks: list[str]) -> int:
    try:
        versions = sorted({v for lock in locks for v in pinned(Path(lock))}, key=Version)
    except ValueError as err:
        print(f"make test-old-av: {err}", file=sys.stderr)
        return 1
    print("\n".join(versions))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
