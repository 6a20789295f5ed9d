"""RememBench rows: load, validate every field and the paper settings, report the cohort.

Why strict: the benchmark compares methods on the *same* prompts, seeds, trajectories and settings.
A row with a float seed (63-bit seeds do not survive a float), a wrong frame count or a missing
prompt would silently change the test set, so every problem is one line naming the file and line.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinbench.core import files

SPLITS = ("t2v", "i2v")
I2V_SETTINGS = ("rotation_90", "rotation_180", "rotation_360", "translation_90", "translation_180",
                "translation_360")
T2V_PROMPT_STARTS = (0.0, 3.6, 6.2, 11.2)
_SEED = re.compile(r"[0-9]+")
_SETTING = re.compile(r"(rotation|translation)_(90|180|360)")


class DatasetError(ValueError):
    """Bad dataset content; ``str(e)`` is one line: ``<file>[:<line>]: <problem>``."""


@dataclass(frozen=True)
class PaperSettings:
    """Generation settings a split's rows must carry, and the decoded chunk layout Drift uses."""

    split: str
    num_frames: int
    fps: float
    width: int
    height: int
    num_chunks: int
    denoising_steps_per_chunk: int
    first_chunk_frames: int
    chunk_frames: int
    n_rows: int  # rows of the full test set
    latent_frames: int | None = None

    def chunk_layout(self) -> list[tuple[int, int]]:
        """Inclusive (first, last) decoded-frame ranges of the backbone's chunks; must tile the clip."""
        layout = [(0, self.first_chunk_frames - 1)]
        while layout[-1][1] + 1 < self.num_frames:
            start = layout[-1][1] + 1
            layout.append((start, start + self.chunk_frames - 1))
        if layout[-1][1] != self.num_frames - 1 or len(layout) != self.num_chunks:
            raise DatasetError(f"{self.split}: {self.num_chunks} chunks of {self.first_chunk_frames} + "
                               f"{self.chunk_frames}k frames do not tile {self.num_frames} frames")
        return layout


T2V_PAPER = PaperSettings("t2v", 379, 24, 1376, 768, 23, 4, 5, 17, n_rows=100)
I2V_PAPER = PaperSettings("i2v", 253, 16, 832, 480, 16, 4, 13, 16, n_rows=750, latent_frames=64)
PAPER = {"t2v": T2V_PAPER, "i2v": I2V_PAPER}


@dataclass(frozen=True)
class T2VRow:
    """One T2V prompt schedule (``seed`` is the exact integer; ``seed_text`` the stored string)."""

    scene_id: str
    source_index: int
    target_description: str
    prompts: tuple[str, ...]
    prompt_start_seconds: tuple[float, ...]
    seed: int
    seed_text: str
    num_frames: int
    fps: float
    width: int
    height: int
    num_chunks: int
    denoising_steps_per_chunk: int
    line: int

    @property
    def sample_id(self) -> str:
        return self.scene_id


@dataclass(frozen=True)
class I2VRow:
    """One I2V scene-trajectory pair."""

    sample_id: str
    scene_id: str
    scene_type: str
    prompt: str
    image_path: str
    trajectory_path: str
    setting: str
    rotation_degrees: int
    direction: str
    translation: bool
    seed: int
    seed_text: str
    num_frames: int
    fps: float
    width: int
    height: int
    num_chunks: int
    latent_frames: int
    denoising_steps_per_chunk: int
    pose_samples: int
    intrinsics_samples: int
    line: int


Row = T2VRow | I2VRow


def parse_seed(value: Any, where: str) -> int:
    """A decimal-string seed to int, exactly (never through float); DatasetError otherwise."""
    if not isinstance(value, str):
        raise DatasetError(f"{where}: seed must be a decimal string, got {type(value).__name__} {value!r} "
                           "(a JSON number may already have lost precision)")
    if not _SEED.fullmatch(value):
        raise DatasetError(f"{where}: seed {value!r} is not all ASCII digits")
    return int(value)


class _Fields:
    """Typed access to one JSON row, raising DatasetError that names file, line and field."""

    def __init__(self, data: Mapping[str, Any], where: str):
        self.data, self.where = data, where

    def _get(self, key: str) -> Any:
        if key not in self.data:
            raise DatasetError(f"{self.where}: missing field {key!r}")
        return self.data[key]

    def _fail(self, key: str, want: str) -> DatasetError:
        return DatasetError(f"{self.where}: field {key!r} must be {want}, got {self.data[key]!r}")

    def text(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str) or not value.strip():
            raise self._fail(key, "a non-empty string")
        return value

    def integer(self, key: str) -> int:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "an integer")
        return value

    def number(self, key: str) -> float:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(key, "a number")
        return float(value)

    def boolean(self, key: str) -> bool:
        value = self._get(key)
        if not isinstance(value, bool):
            raise self._fail(key, "true or false")
        return value

    def choice(self, key: str, allowed: Sequence[str]) -> str:
        value = self.text(key)
        if value not in allowed:
            raise self._fail(key, "one of " + ", ".join(allowed))
        return value

    def texts(self, key: str, count: int) -> tuple[str, ...]:
        value = self._get(key)
        if (not isinstance(value, list) or len(value) != count
                or not all(isinstance(v, str) and v.strip() for v in value)):
            raise self._fail(key, f"a list of {count} non-empty strings")
        return tuple(value)

    def numbers(self, key: str, count: int) -> tuple[float, ...]:
        value = self._get(key)
        if (not isinstance(value, list) or len(value) != count
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
            raise self._fail(key, f"a list of {count} numbers")
        return tuple(float(v) for v in value)

    def seed(self) -> tuple[int, str]:
        text = self._get("seed")
        return parse_seed(text, self.where), text


def _check_settings(row: Row, paper: PaperSettings, where: str) -> None:
    expected: dict[str, Any] = {
        "num_frames": paper.num_frames, "fps": float(paper.fps), "width": paper.width, "height": paper.height,
        "num_chunks": paper.num_chunks, "denoising_steps_per_chunk": paper.denoising_steps_per_chunk,
    }
    if isinstance(row, I2VRow):
        expected["latent_frames"] = paper.latent_frames
    for key, want in expected.items():
        got = getattr(row, key)
        if got != want:
            raise DatasetError(f"{where}: {key} is {got}, the {paper.split} paper setting is {want}")


def _t2v_row(fields: _Fields, line: int) -> T2VRow:
    seed, seed_text = fields.seed()
    starts = fields.numbers("prompt_start_seconds", len(T2V_PROMPT_STARTS))
    if starts != T2V_PROMPT_STARTS:
        raise DatasetError(f"{fields.where}: prompt_start_seconds is {list(starts)}, "
                           f"the paper schedule is {list(T2V_PROMPT_STARTS)}")
    return T2VRow(
        scene_id=fields.text("scene_id"), source_index=fields.integer("source_index"),
        target_description=fields.text("target_description"), prompts=fields.texts("prompts", 4),
        prompt_start_seconds=starts, seed=seed, seed_text=seed_text, num_frames=fields.integer("num_frames"),
        fps=fields.number("fps"), width=fields.integer("width"), height=fields.integer("height"),
        num_chunks=fields.integer("num_chunks"),
        denoising_steps_per_chunk=fields.integer("denoising_steps_per_chunk"), line=line,
    )


def _i2v_row(fields: _Fields, line: int) -> I2VRow:
    seed, seed_text = fields.seed()
    setting = fields.choice("setting", I2V_SETTINGS)
    translation = fields.boolean("translation")
    kind, degrees = _SETTING.fullmatch(setting).groups()  # type: ignore[union-attr]
    if translation != (kind == "translation"):
        raise DatasetError(f"{fields.where}: translation is {translation} but setting is {setting!r}")
    rotation = fields.integer("rotation_degrees")
    if rotation not in (90, 180, 360):
        raise fields._fail("rotation_degrees", "90, 180 or 360")
    if kind == "rotation" and rotation != int(degrees):
        raise DatasetError(f"{fields.where}: rotation_degrees is {rotation} but setting is {setting!r}")
    pose_samples = fields.integer("pose_samples")
    if pose_samples < 2:
        raise fields._fail("pose_samples", "at least 2")
    return I2VRow(
        sample_id=fields.text("sample_id"), scene_id=fields.text("scene_id"),
        scene_type=fields.choice("scene_type", ("indoor", "outdoor")), prompt=fields.text("prompt"),
        image_path=fields.text("image_path"), trajectory_path=fields.text("trajectory_path"), setting=setting,
        rotation_degrees=rotation, direction=fields.choice("direction", ("left", "right")),
        translation=translation, seed=seed, seed_text=seed_text, num_frames=fields.integer("num_frames"),
        fps=fields.number("fps"), width=fields.integer("width"), height=fields.integer("height"),
        num_chunks=fields.integer("num_chunks"), latent_frames=fields.integer("latent_frames"),
        denoising_steps_per_chunk=fields.integer("denoising_steps_per_chunk"), pose_samples=pose_samples,
        intrinsics_samples=fields.integer("intrinsics_samples"), line=line,
    )


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line (``files.iter_jsonl``: lines end at \\n and \\r only, so a
    raw U+2028 inside a string stays in its row; finite numbers only); DatasetError names the file and line."""
    return files.iter_jsonl(path, error=DatasetError)


def read_rows(path: Path | str, split: str, paper: PaperSettings | None = None) -> list[Row]:
    """Every row of a split's ``test.jsonl``, validated against ``paper`` (default: the paper's)."""
    if split not in SPLITS:
        raise DatasetError(f"unknown split {split!r}; expected t2v or i2v")
    path = Path(path)
    paper = paper or PAPER[split]
    build = _t2v_row if split == "t2v" else _i2v_row
    rows: list[Row] = []
    seen: dict[str, int] = {}
    for number, data in iter_jsonl(path):
        where = f"{path}:{number}"
        row = build(_Fields(data, where), number)
        _check_settings(row, paper, where)
        if row.sample_id in seen:
            raise DatasetError(f"{where}: duplicate id {row.sample_id!r} (first on line {seen[row.sample_id]})")
        seen[row.sample_id] = number
        rows.append(row)
    if not rows:
        raise DatasetError(f"{path}: no rows")
    return rows


def select_settings(rows: Sequence[Row], settings: Sequence[str]) -> list[Row]:
    """The I2V rows of the given settings, in file order (T2V rows pass through)."""
    unknown = [s for s in settings if s not in I2V_SETTINGS]
    if unknown:
        raise DatasetError(f"unknown I2V setting(s) {', '.join(unknown)}; expected {', '.join(I2V_SETTINGS)}")
    return [r for r in rows if not isinstance(r, I2VRow) or r.setting in settings]


def cohort_report(all_rows: Sequence[Row], selected: Sequence[Row], paper: PaperSettings) -> dict[str, Any]:
    """Counts of the test set and of the scored subset, and whether the test set is the paper's."""
    report: dict[str, Any] = {
        "split": paper.split,
        "n_rows": len(all_rows),
        "paper_n_rows": paper.n_rows,
        "matches_paper_cohort": len(all_rows) == paper.n_rows,
        "n_selected": len(selected),
        "selected_ids": [r.sample_id for r in selected],
        "n_scenes": len({r.scene_id for r in all_rows}),
    }
    if paper.split == "i2v":
        i2v = [r for r in all_rows if isinstance(r, I2VRow)]
        report["by_setting"] = dict(sorted(Counter(r.setting for r in i2v).items()))
        report["scenes_by_type"] = dict(sorted(Counter(
            {r.scene_id: r.scene_type for r in i2v}.values()).items()))
        report["selected_by_setting"] = dict(sorted(Counter(
            r.setting for r in selected if isinstance(r, I2VRow)).items()))
    return report
