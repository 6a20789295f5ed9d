"""Script 1's output files in the official shapes: read from any method, written by this recipe's own run.

The method-agnostic Script 2 of t2v_metrics reads three JSON contracts from a score directory:

* ``classification_scores_*.json``: one split; ``metadata.split_name`` and rows of ``video_path``,
  ``question``, ``ground_truth_label``, ``score`` (P("Yes"): a finite score outside [0, 1] is refused), ``error``;
* ``vqa_retrieval_scores_*.json``: one skill (``--combine_tasks``) or one task; ``metadata.skill_name``
  (folder name with spaces), ``task_name`` for a per-task file; rows of ``pos_video``, ``neg_video``,
  ``pos_question``, ``neg_question``, ``yes_scores`` and ``no_scores`` (four combinations each), ``error``;
* ``caption_results_*.json``: ``captions`` rows of ``video_path``, ``reference_answer``,
  ``generated_caption``, ``error``.

``read_score_dir`` matches every row to its dataset sample by content (video names, questions), never
by position, and checks labels and references against the pinned data. It fixes the upstream defects
that lose data and says so in ``notes``: per-task VQA files are pooled by skill (upstream keys results
by model and skill only, so all but the last task file of a skill are silently dropped), and every
file is checked to come from one model (upstream pools all models found in the directory).
Rows with an ``error`` become failed samples named by id; samples with no row are left out here and
become missing samples downstream. Anything malformed is a ``ScoreFileError`` naming file and row.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from pinbench.core.files import json_error, loads_json, write_atomic
from pinbench.core.memory import cycle_collection_paused
from pinbench_recipes.camerabench.dataset import FAMILIES, CameraBenchData, VqaPair, frozen_maker
from pinbench_recipes.camerabench.vqa_metrics import COMBOS, check_scores

BINARY_GLOB = "classification_scores_*.json"
VQA_GLOB = "vqa_retrieval_scores_*.json"
CAPTION_GLOB = "caption_results_*.json"
QUESTION_TEMPLATE = "{} Please only answer Yes or No."
METHOD_TYPE = "VQAScore_LMM"
CAPTION_METHOD_TYPE = "VLM_Caption_Generation"


class ScoreFileError(ValueError):
    """A score file is unusable; one line naming the file (and row) and what is wrong."""


BAD_ROWS_SHOWN = 5   # rows named in the line that refuses a file with many bad ones; the rest counted


@dataclass
class _BadRows:
    """The bad rows of one file, refused together once every row is read: a researcher fixing a file of 1,000 rows
    reran once per bad row when the first refused it."""

    path: Path
    rows_key: str
    found: list[tuple[int, str]] = field(default_factory=list)   # row index, its message

    def add(self, index: int, error: ScoreFileError) -> None:
        self.found.append((index, str(error)))

    def refuse(self) -> None:
        """ScoreFileError: the one bad row's message, or how many, the first few and the first's message."""
        if len(self.found) == 1:
            raise ScoreFileError(self.found[0][1])
        if self.found:
            shown = ", ".join(f"{self.rows_key}[{index}]" for index, _ in self.found[:BAD_ROWS_SHOWN])
            more = len(self.found) - BAD_ROWS_SHOWN
            first = self.found[0][1].removeprefix(f"{self.path}: ")
            raise ScoreFileError(f"{self.path}: {len(self.found)} bad rows: {shown}"
                                 f"{f' and {more} more' if more > 0 else ''} (first: {first})")


@dataclass(frozen=True, slots=True)
class Failure:
    """A sample Script 1 did not score, and why (the file's error, a non-finite score, no output)."""

    error: str


@dataclass(frozen=True, slots=True)
class BinaryScore:
    """A binary sample's P("Yes")."""

    score: float


@dataclass(frozen=True, slots=True)
class Combos:
    """One answer's probability for each (question, video) combination of a VQA pair (``vqa_metrics.COMBOS``)."""

    pos_text_pos_image: float
    pos_text_neg_image: float
    neg_text_pos_image: float
    neg_text_neg_image: float

    @classmethod
    def of(cls, scores: Mapping[str, float]) -> Combos:
        """From ``check_scores``'s dict (every combination present)."""
        return cls(scores["pos_text_pos_image"], scores["pos_text_neg_image"], scores["neg_text_pos_image"],
                   scores["neg_text_neg_image"])

    def to_json(self) -> dict[str, float]:
        return {combo: getattr(self, combo) for combo in COMBOS}


@dataclass(frozen=True, slots=True)
class VqaScores:
    """A VQA pair's P("Yes") and P("No") of every combination (``no`` is not 1 - ``yes``)."""

    yes_scores: Combos
    no_scores: Combos


@dataclass(frozen=True, slots=True)
class Caption:
    """A caption sample's generated caption."""

    caption: str


# The hot paths' constructors (``dataset.frozen_maker``): at 10x, 182,650 of these per read of the score files.
_binary_score = frozen_maker(BinaryScore)
_combos = frozen_maker(Combos)
_vqa_scores = frozen_maker(VqaScores)


@dataclass
class Script1Outputs:
    """Per-sample Script 1 outputs by sample id: a value, or a ``Failure`` saying why the sample has none.

    Typed objects rather than dicts: at 10x CameraBench's size the parsed score files are 112k of them, held
    through Script 2 (as dicts, 46 MB traced; as these, 21). A task's input hash covers an output as the JSON of its
    fields, the same JSON the dicts had (``{"score": ...}``, ``{"yes_scores": {...}, "no_scores": {...}}``,
    ``{"caption": ...}``, ``{"error": ...}``). ``sources`` describes every file read (name, SHA-256, model).
    ``kept_upstream``: the rows failed here that upstream Script 2 keeps (a non-finite score has ``error`` null),
    by sample id, with the values as the file holds them, so that "what upstream would report" counts them too.
    """

    binary: dict[str, BinaryScore | Failure] = field(default_factory=dict)
    vqa: dict[str, VqaScores | Failure] = field(default_factory=dict)
    caption: dict[str, Caption | Failure] = field(default_factory=dict)
    sources: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)   # JSON files and folders of the directory that are not read
    kept_upstream: dict[str, dict[str, Any]] = field(default_factory=dict)


# -------------------------------------------------------------------------------------------- reading


def read_score_dir(score_dir: Path | str, data: CameraBenchData,
                   families: Iterable[str] = FAMILIES) -> Script1Outputs:
    """Read every official score file of the requested families from ``score_dir``."""
    score_dir = Path(score_dir)
    if not score_dir.is_dir():
        raise ScoreFileError(f"{score_dir}: score directory not found")
    families = tuple(families)
    out = Script1Outputs()
    patterns = {"binary": BINARY_GLOB, "vqa": VQA_GLOB, "caption": CAPTION_GLOB}
    files = {family: _files(score_dir, pattern) for family, pattern in patterns.items()}
    matched = {p for paths in files.values() for p in paths}
    # a misnamed file or a folder of them is never read (upstream reads only these names, and only here): named,
    # since its samples would otherwise fail as "missing" with nothing pointing at the file
    out.ignored = sorted(p.name + "/" if p.is_dir() else p.name for p in score_dir.iterdir()
                         if p not in matched and (p.is_dir() or p.suffix.lower() == ".json"))
    if out.ignored:
        out.notes.append(f"ignored files matching no official pattern: {', '.join(out.ignored)}")
    models: dict[tuple[Any, Any], str] = {}
    for family in families:
        if not files[family]:
            out.notes.append(f"no {patterns[family]} files in {score_dir}")
    for family, reader in (("binary", _read_binary), ("vqa", _read_vqa), ("caption", _read_captions)):
        if family not in families:
            if files[family]:
                out.notes.append(f"{len(files[family])} {family} files not read (family not selected)")
            continue
        with cycle_collection_paused():
            reader(files[family], data, out, models)
    return out


def _files(score_dir: Path, pattern: str) -> list[Path]:
    paths = sorted(score_dir.glob(pattern))
    for path in paths:
        if not path.is_file():
            raise ScoreFileError(f"{path}: not a regular file")
    return paths


def _read(path: Path) -> tuple[str, str]:
    """The file's text as ``read_text`` reads it (universal newlines: the same line numbers in a JSON error) and
    the SHA-256 of its bytes: read once (at 10x, hashing the files again took 0.03 s, twice their read), the bytes
    dropped before the parse."""
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, hashlib.sha256(raw).hexdigest()


def _load(path: Path, rows_key: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """The file's metadata, its rows (each an object) and the SHA-256 of the bytes parsed."""
    try:
        text, sha256 = _read(path)
        data = loads_json(text)   # nested beyond the parser's depth: a JSONDecodeError, not a RecursionError
    except OSError as exc:
        raise ScoreFileError(f"{path}: unreadable: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ScoreFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ScoreFileError(f"{path}: {json_error(exc)}") from None
    if not isinstance(data, dict):
        raise ScoreFileError(f"{path}: expected a JSON object, got {type(data).__name__}")
    metadata = data.get("metadata") or {}
    rows = data.get(rows_key)
    if not isinstance(metadata, dict):
        raise ScoreFileError(f"{path}: 'metadata' must be an object")
    if not isinstance(rows, list):
        raise ScoreFileError(f"{path}: missing list {rows_key!r}")
    if set(map(type, rows)) != {dict}:   # one pass in C; the loop names the first row that is no object
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ScoreFileError(f"{path}: {rows_key}[{index}] is a {type(row).__name__}, expected an object")
    return metadata, rows, sha256


def _source(path: Path, sha256: str, family: str, metadata: Mapping[str, Any], n_rows: int,
            models: dict[tuple[Any, Any], str], **extra: Any) -> dict[str, Any]:
    """Describe a file and check it comes from the same model as every file before it."""
    model = (metadata.get("model_name"), metadata.get("checkpoint") or None)
    for key, value in zip(("model_name", "checkpoint"), model, strict=True):
        if value is not None and not isinstance(value, str):   # a list was no key of ``models`` (TypeError)
            raise ScoreFileError(f"{path}: metadata.{key} must be a string, got {value!r:.60}")
    if models and model not in models:
        other, first = next(iter(models.items()))
        raise ScoreFileError(f"{path}: model {model[0]!r} checkpoint {model[1]!r} differs from {first} "
                             f"({other[0]!r}, {other[1]!r}); keep one model per score directory")
    models.setdefault(model, path.name)
    return {"file": path.name, "sha256": sha256, "family": family, "model_name": model[0],
            "checkpoint": model[1], "n_rows": n_rows, **extra}


def _basename(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ScoreFileError(f"{where}: expected a video path, got {value!r:.60}")
    # Script 1 writes the name as in the data; a custom method may write a full (even Windows) path.
    if "/" not in value and "\\" not in value and ":" not in value:
        return value  # a plain name (every row of the official files): what the paths below give, 10x faster
    return PureWindowsPath(PurePosixPath(value).name).name


def _named(row: Mapping[str, Any], video: str, where: str) -> bool:
    """Whether a row names ``video`` (a row whose video_path is no name, itself refused, names none)."""
    value = row.get("video_path")
    return isinstance(value, str) and bool(value) and _basename(value, where) == video


def _row_error(row: Mapping[str, Any]) -> str | None:
    error = row.get("error")
    return None if error is None else str(error)


def _claim(seen: dict[str, tuple[Path, int]], sample_id: str, path: Path, rows_key: str, index: int) -> None:
    """Refuse a second row for a sample, naming the first (kept as file and row: the message is built only here)."""
    first = seen.get(sample_id)
    if first is not None:
        raise ScoreFileError(f"{path}: {rows_key}[{index}]: sample {sample_id} already scored at "
                             f"{first[0]}: {rows_key}[{first[1]}]")
    seen[sample_id] = (path, index)


def _read_binary(paths: list[Path], data: CameraBenchData, out: Script1Outputs,
                 models: dict[tuple[Any, Any], str]) -> None:
    by_split: dict[str, Path] = {}
    # The samples claimed so far are out.binary's keys: a row's output is stored as it claims its sample (a second
    # row for a sample is refused), and every row of a sample is in its split's one file. Why not a dict of where
    # each claim was, as _read_vqa keeps: at 10x, storing it was a third of the rows' checks.
    claimed = out.binary
    for path in paths:
        metadata, rows, sha256 = _load(path, "scores")
        split = _split_of(path, metadata, data.splits)
        if split in by_split:
            raise ScoreFileError(f"{path}: second file for split {split} (first: {by_split[split].name}); "
                                 "keep one model and one run per score directory")
        by_split[split] = path
        samples = {s.video: s for s in data.by_split[split]}
        bad = _BadRows(path, "scores")
        for index, row in enumerate(rows):
            get = row.get
            video, label, score = get("video_path"), get("ground_truth_label"), get("score")
            # A row that passes every check below in one test: a plain name of the split, first claim, the label
            # as written, no error and a probability (why: the checks, built to name what is wrong, cost more).
            sample = samples.get(video) if type(video) is str and ":" not in video else None
            if (sample is not None and sample.sample_id not in claimed and get("error") is None
                    and label == ("Yes" if sample.label else "No") and type(score) is float and 0.0 <= score <= 1.0):
                claimed[sample.sample_id] = _binary_score(score)
                continue
            try:
                where = f"{path}: scores[{index}]"
                video = _basename(video, where)
                sample = samples.get(video)
                if sample is None:
                    raise ScoreFileError(f"{where}: video {video} is not in split {split}")
                if sample.sample_id in claimed:   # by an earlier row of this file: the first naming the video
                    first = next(i for i, earlier in enumerate(rows) if _named(earlier, video, where))
                    raise ScoreFileError(f"{where}: sample {sample.sample_id} already scored at {path}: "
                                         f"scores[{first}]")
                label = row.get("ground_truth_label")
                if not isinstance(label, str):   # upstream's Script 2 reads it as text: a 1 or true is no answer to it
                    raise ScoreFileError(f"{where}: ground_truth_label {label!r} is not a string (Yes or No)")
                if int(label.lower() == "yes") != sample.label:
                    raise ScoreFileError(f"{where}: ground_truth_label {label!r} contradicts the pinned data "
                                         f"({'Yes' if sample.label else 'No'}) for {video}")
                out.binary[sample.sample_id] = value = _binary_value(row, where, path)
                if type(value) is Failure and _row_error(row) is None:   # non-finite: upstream ranks it at -1e10
                    out.kept_upstream[sample.sample_id] = {"label": sample.label, "score": float(row["score"])}
            except ScoreFileError as exc:
                bad.add(index, exc)
        bad.refuse()
        out.sources.append(_source(path, sha256, "binary", metadata, len(rows), models, split=split))
        del rows   # as in _read_vqa


def _split_of(path: Path, metadata: Mapping[str, Any], splits: list[str]) -> str:
    """metadata.split_name, else the split the file name ends with (upstream falls back to the stem)."""
    name = metadata.get("split_name")
    if name is not None:
        if name not in splits:
            raise ScoreFileError(f"{path}: split_name {name!r} is not one of the benchmark's splits")
        return name
    matches = [s for s in splits if path.stem.endswith("_" + s)]
    if not matches:
        raise ScoreFileError(f"{path}: no metadata.split_name and the file name ends with no split name")
    return max(matches, key=len)


def _binary_value(row: Mapping[str, Any], where: str, path: Path) -> BinaryScore | Failure:
    error = _row_error(row)
    if error is not None:
        return Failure(f"Script 1 error in {path.name}: {error}")
    score = row.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ScoreFileError(f"{where}: score must be a number when error is null, got {score!r:.40}")
    if not math.isfinite(score):
        return Failure(f"non-finite score {score} in {path.name} (upstream would rank it as -1e10)")
    if not 0.0 <= score <= 1.0:  # Script 1's contract: P(answer_template), a probability
        raise ScoreFileError(f"{where}: score {score} is outside [0, 1]; Script 1 writes P(\"Yes\"), a probability")
    return BinaryScore(float(score))


def _read_vqa(paths: list[Path], data: CameraBenchData, out: Script1Outputs,
              models: dict[tuple[Any, Any], str]) -> None:
    seen: dict[str, tuple[Path, int]] = {}
    per_task = []
    by_skill: dict[str, list[VqaPair]] = {}   # data.skill_pairs of every skill, in one pass for all files
    for pair in data.vqa:
        by_skill.setdefault(pair.skill, []).append(pair)
    for path in paths:
        metadata, rows, sha256 = _load(path, "scores")
        skill_name = metadata.get("skill_name")
        if not isinstance(skill_name, str):
            raise ScoreFileError(f"{path}: metadata.skill_name is missing" if skill_name is None else
                                 f"{path}: metadata.skill_name must be a string, got {skill_name!r:.60}")
        skill = skill_name.replace(" ", "_")
        pairs = by_skill.get(skill)
        if not pairs:
            raise ScoreFileError(f"{path}: skill_name {skill_name!r} is not one of the benchmark's skills")
        task = metadata.get("task_name")
        if task is not None:
            task = str(task).replace(" ", "_")
            pairs = [p for p in pairs if p.task == task]
            if not pairs:
                raise ScoreFileError(f"{path}: task_name {metadata['task_name']!r} is not a task of {skill}")
            per_task.append(path.name)
        by_key = {(p.pos_video, p.neg_video, p.pos_question, p.neg_question): p for p in pairs}   # VqaPair.key
        bad = _BadRows(path, "scores")
        for index, row in enumerate(rows):
            get = row.get
            pos_video, neg_video = get("pos_video"), get("neg_video")
            pos_question, neg_question = get("pos_question"), get("neg_question")
            # A row that passes every check below in one test (as a binary row: plain names of a pair, first
            # claim, no error, eight probabilities). Strings only: a list is no key, and an empty video is named
            # as such below before the lookup would fail on the list.
            pair = (by_key.get((pos_video, neg_video, pos_question, neg_question))
                    if type(pos_video) is str and type(neg_video) is str and type(pos_question) is str
                    and type(neg_question) is str and ":" not in pos_video and ":" not in neg_video else None)
            if pair is not None and pair.sample_id not in seen and get("error") is None:
                value = _sound_scores(get("yes_scores"), get("no_scores"))
                if value is not None:
                    seen[pair.sample_id] = (path, index)
                    out.vqa[pair.sample_id] = value
                    continue
            try:
                where = f"{path}: scores[{index}]"
                key = (_basename(pos_video, where), _basename(neg_video, where), pos_question, neg_question)
                for name, question in (("pos_question", pos_question), ("neg_question", neg_question)):
                    if not isinstance(question, str):   # a list would be no key at all (TypeError)
                        raise ScoreFileError(f"{where}: {name} must be a string, got {question!r:.60}")
                pair = by_key.get(key)
                if pair is None:
                    scope = f"task {task}" if task else f"skill {skill}"
                    raise ScoreFileError(f"{where}: no pair of {scope} has these videos and questions")
                _claim(seen, pair.sample_id, path, "scores", index)
                out.vqa[pair.sample_id] = value = _vqa_value(row, where, path)
                if type(value) is Failure and _row_error(row) is None:   # non-finite: upstream compares it as it is
                    out.kept_upstream[pair.sample_id] = {"yes_scores": check_scores(row["yes_scores"], "yes_scores",
                                                                                    finite=False),
                                                         "no_scores": check_scores(row["no_scores"], "no_scores",
                                                                                   finite=False)}
            except ScoreFileError as exc:
                bad.add(index, exc)
        bad.refuse()
        out.sources.append(_source(path, sha256, "vqa", metadata, len(rows), models, skill=skill, task=task))
        del rows   # now, not when the next file's rows replace them: two files' rows at once were the read's peak
    if per_task:
        out.notes.append(
            f"{len(per_task)} per-task VQA files (Script 1 run without --combine_tasks) were pooled by skill; "
            "upstream Script 2 keys its results by model and skill only and would keep just the last task "
            "file of each skill, dropping the other tasks' pairs")


_COMBO_VALUES = operator.itemgetter(*COMBOS)


def _sound_scores(yes: Any, no: Any) -> VqaScores | None:
    """The pair's scores when each of the eight is a float in [0, 1] (what ``check_scores`` passes as it is), else
    None: one test for both answers (per answer, a call and a test were a tenth of reading a VQA row)."""
    if type(yes) is not dict or type(no) is not dict:
        return None
    try:
        a, b, c, d = _COMBO_VALUES(yes)
        e, f, g, h = _COMBO_VALUES(no)
    except KeyError:
        return None
    if (type(a) is float and type(b) is float and type(c) is float and type(d) is float
            and type(e) is float and type(f) is float and type(g) is float and type(h) is float
            and 0.0 <= a <= 1.0 and 0.0 <= b <= 1.0 and 0.0 <= c <= 1.0 and 0.0 <= d <= 1.0
            and 0.0 <= e <= 1.0 and 0.0 <= f <= 1.0 and 0.0 <= g <= 1.0 and 0.0 <= h <= 1.0):
        return _vqa_scores(_combos(a, b, c, d), _combos(e, f, g, h))
    return None


def _vqa_value(row: Mapping[str, Any], where: str, path: Path) -> VqaScores | Failure:
    error = _row_error(row)
    if error is not None:
        return Failure(f"Script 1 error in {path.name}: {error}")
    try:   # shape and range of both first: a bad file is refused whole
        value = {what: check_scores(row.get(what), what, finite=False) for what in ("yes_scores", "no_scores")}
    except ValueError as exc:
        raise ScoreFileError(f"{where}: {exc}") from None
    for what, scores in value.items():   # then the first non-finite probability fails the sample
        for combo, score in scores.items():
            if not math.isfinite(score):
                return Failure(f"{what}.{combo} is not finite ({score}) in {path.name}")   # NonFiniteScore's
    return VqaScores(Combos.of(value["yes_scores"]), Combos.of(value["no_scores"]))


def _read_captions(paths: list[Path], data: CameraBenchData, out: Script1Outputs,
                   models: dict[tuple[Any, Any], str]) -> None:
    if len(paths) > 1:
        raise ScoreFileError(f"{paths[0].parent}: {len(paths)} caption files ({', '.join(p.name for p in paths)}); "
                             "keep exactly one (one model, one run) per score directory")
    samples = {s.video: s for s in data.captions}
    seen: dict[str, tuple[Path, int]] = {}
    for path in paths:
        metadata, rows, sha256 = _load(path, "captions")
        bad = _BadRows(path, "captions")
        for index, row in enumerate(rows):
            try:
                where = f"{path}: captions[{index}]"
                video = _basename(row.get("video_path"), where)
                sample = samples.get(video)
                if sample is None:
                    raise ScoreFileError(f"{where}: video {video} is not in the caption set")
                _claim(seen, sample.sample_id, path, "captions", index)
                if row.get("reference_answer") != sample.reference:
                    raise ScoreFileError(f"{where}: reference_answer differs from the pinned caption of {video}")
                out.caption[sample.sample_id] = _caption_value(row, where, path)
            except ScoreFileError as exc:
                bad.add(index, exc)
        bad.refuse()
        out.sources.append(_source(path, sha256, "caption", metadata, len(rows), models))


def _caption_value(row: Mapping[str, Any], where: str, path: Path) -> Caption | Failure:
    error = row.get("error")
    if error:  # upstream skips any truthy error
        return Failure(f"Script 1 error in {path.name}: {error}")
    caption = row.get("generated_caption")
    if not isinstance(caption, str):
        raise ScoreFileError(f"{where}: generated_caption must be a string, got {caption!r:.40}")
    if not caption:
        return Failure(f"empty generated_caption in {path.name} (upstream leaves it out of every mean)")
    return Caption(caption)


# -------------------------------------------------------------------------------------------- writing

_NOT_SCORED = Failure("missing: not scored in this run")
_NOT_GENERATED = Failure("missing: not generated in this run")


def _clean(name: str) -> str:
    return name.replace("/", "_").replace("\\", "_").replace(":", "_")


def write_score_dir(dest: Path | str, data: CameraBenchData, outputs: Script1Outputs, *, model_name: str,
                    checkpoint: str | None, timestamp: datetime, video_dir: str,
                    extra_metadata: Mapping[str, Any] | None = None) -> list[Path]:
    """Write ``outputs`` as upstream Script 1 would (file names, metadata, rows; failed rows score 0.0).

    A sample with no output gets a row with an error, so every file lists every sample of its split,
    skill or caption set. ``extra_metadata`` is added under ``metadata["pinbench"]``. The caption file's
    name carries the time (as upstream's); an earlier one of the same model in ``dest`` is replaced.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    stem = _clean(model_name) + (f"_{_clean(checkpoint)}" if checkpoint else "")
    method = model_name + (f"_{checkpoint}" if checkpoint else "")
    common = {"model_name": model_name, "checkpoint": checkpoint, "video_dir": video_dir,
              "generation_timestamp": timestamp.isoformat()}
    extra = {"pinbench": dict(extra_metadata)} if extra_metadata else {}
    written = []
    for split in data.splits if data.binary else []:
        rows = []
        for s in data.split_samples(split):
            value = outputs.binary.get(s.sample_id, _NOT_SCORED)
            scored = isinstance(value, BinaryScore)
            rows.append({"video_path": s.video, "question": s.question,
                         "ground_truth_label": "Yes" if s.label else "No", "method": method,
                         "score": value.score if scored else 0.0, "error": None if scored else value.error})
        metadata = {**common, "split_name": split, "data_file": f"binary_classification/{split}.jsonl",
                    "question_template": QUESTION_TEMPLATE, "answer_template": "Yes",
                    "method_type": METHOD_TYPE, **extra}
        written.append(_write(dest / f"classification_scores_{stem}_{split}.json", metadata, "scores", rows))
    zeros = dict.fromkeys(COMBOS, 0.0)
    for skill in data.skills if data.vqa else []:
        rows = []
        pairs = data.skill_pairs(skill)
        for p in pairs:
            pair = outputs.vqa.get(p.sample_id, _NOT_SCORED)
            scored = isinstance(pair, VqaScores)
            rows.append({"pos_video": p.pos_video, "neg_video": p.neg_video, "pos_question": p.pos_question,
                         "neg_question": p.neg_question, "method": method,
                         "yes_scores": pair.yes_scores.to_json() if scored else zeros,
                         "no_scores": pair.no_scores.to_json() if scored else zeros,
                         "error": None if scored else pair.error})
        metadata = {**common, "skill_name": skill.replace("_", " "),
                    "task_names": sorted({p.task.replace("_", " ") for p in pairs}), "combined_tasks": True,
                    "question_template": QUESTION_TEMPLATE, "method_type": METHOD_TYPE, **extra}
        written.append(_write(dest / f"vqa_retrieval_scores_{stem}_{skill}.json", metadata, "scores", rows))
    if data.captions:
        rows = []
        for s in data.captions:
            caption = outputs.caption.get(s.sample_id, _NOT_GENERATED)
            made = isinstance(caption, Caption)
            rows.append({"sample_id": str(s.index), "video_path": s.video, "full_video_path": f"{video_dir}/{s.video}",
                         "question": s.question, "reference_answer": s.reference, "method": model_name,
                         "generated_caption": caption.caption if made else "",
                         "error": None if made else caption.error})
        caption_stem = _clean(model_name) + (f"_{_clean(PurePosixPath(checkpoint).name)}" if checkpoint else "")
        name = f"caption_results_{caption_stem}_{timestamp.strftime('%Y%m%d_%H%M%S')}.json"
        for earlier in dest.glob(f"caption_results_{caption_stem}_*.json"):  # one caption file per folder
            earlier.unlink()
        metadata = {"method_type": CAPTION_METHOD_TYPE, **common, **extra}
        written.append(_write(dest / name, metadata, "captions", rows))
    return written


def _write(path: Path, metadata: Mapping[str, Any], rows_key: str, rows: list[dict[str, Any]]) -> Path:
    return write_atomic(path, json.dumps({"metadata": metadata, rows_key: rows}, indent=2, allow_nan=False) + "\n")
