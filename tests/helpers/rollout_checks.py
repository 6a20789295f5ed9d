"""The stored rollouts a run decodes to check them against their requests (``pinbench.ops.generation
.check_rollout``): a ``--skip-generation`` run decodes only those no longer the file its generation kept; and a
rollout swapped after it was kept, for such a run to catch."""

from __future__ import annotations

from pathlib import Path

import pytest
from render_generator import frames_of

from pinbench.core.generation import REQUESTS_FILE, Request, read_requests
from pinbench.core.run import GENERATION, ROLLOUTS
from pinbench.media.video import write_video


def checked_rollouts(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """A list that gets the path of every rollout checked from now on (the check itself still runs)."""
    from pinbench.ops import generation

    checked: list[Path] = []
    check = generation.check_rollout
    monkeypatch.setattr(generation, "check_rollout",
                        lambda request, path, **options: checked.append(path) or check(request, path, **options))
    return checked


def stricter_check(monkeypatch: pytest.MonkeyPatch, refused: str) -> None:
    """From now on the rollout check is stricter than the one a run kept its rollouts under (a new version's): it
    also refuses sample ``refused``'s rollout ("too dark"), and its version changed, as its source would."""
    from pinbench.ops import generation

    real = generation.check_rollout

    def stricter(request: Request, path: Path, **options: bool) -> list[str]:
        added = [f"{path}: too dark (a new check)"] if request.id == refused else []
        return [*real(request, path, **options), *added]

    monkeypatch.setattr(generation, "check_rollout", stricter)
    monkeypatch.setattr(generation, "_check_version", lambda: "stricter")


def swap_rollout(out: Path, sample_id: str, frames: int) -> tuple[Request, Path]:
    """A stored rollout of run directory ``out`` replaced, after its generation kept it, by the first ``frames``
    frames the render double makes for its request (its size and rate): its request and the swapped file."""
    request = next(r for r in read_requests(out / GENERATION / REQUESTS_FILE) if r.id == sample_id)
    swapped = out / ROLLOUTS / request.output
    write_video(swapped, frames_of(request, frames), request.fps, crf=0)
    return request, swapped
