"""``pinbench annotate remembench``: mark the departure and revisit frame of each T2V rollout in a local page.

RememBench T2V scores a (departure, revisit) frame pair per scene, annotated by hand for each generated
rollout; the dataset's published pairs describe only the paper's own rollouts. This command serves a page
on 127.0.0.1 behind a per-session token (``annotate_server``) that shows each rollout with its four prompts,
and writes what ``-o annotations=`` reads (``annotation_store``). ``--agreement A B`` compares two
annotators' files: per scene the frame differences and what they change in CLIP and LPIPS.

The page suggests no frame from the metrics: a revisit chosen by CLIP similarity (or LPIPS, TempSSIM,
Drift) would select the pair the metric scores best, and the score would measure the selection, not the
model's memory. The only prefill is the dataset's own departure frame, and only when the rollouts come
from the paper's backbone (``--paper-backbone``): the departure is shared across methods within a scene.
"""

from __future__ import annotations

import argparse
import getpass
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinbench.core.config import RecipeError
from pinbench.core.files import counted
from pinbench.core.options import OptionError, OptionValues, is_offline, parse_pairs
from pinbench.core.recipe import get_recipe
from pinbench.media.video import VideoError
from pinbench_recipes.remembench.annotate_session import (
    PAPER_BACKBONE,
    Scene,
    open_session,
    prefill_departures,
)
from pinbench_recipes.remembench.annotation_store import AnnotationError, AnnotationStore
from pinbench_recipes.remembench.dataset import PAPER, DatasetError
from pinbench_recipes.remembench.fixture import FixtureData, build_fixture
from pinbench_recipes.remembench.prepare import read_annotation_file
from pinbench_recipes.remembench.release import Release, dataset_option, open_release
from pinbench_recipes.remembench.weights import torch_device

PROG = "pinbench annotate remembench"
FIXTURE_REFUSED = ("videos", "dataset", "dataset_dir", "clip_dir", "lpips_trunk", "weights_dir")
LISTED = 20  # scenes named in a terminal list before "... N more"


# ------------------------------------------------------------------------------------------ agreement


@dataclass(frozen=True)
class PairScores:
    clip: float
    lpips_alex: float


@dataclass(frozen=True)
class SceneAgreement:
    scene_id: str
    a: tuple[int, int]
    b: tuple[int, int]
    scores_a: PairScores | None
    scores_b: PairScores | None
    problem: str | None  # why no scores


def _differences(values: Sequence[int]) -> str:
    absolute = [abs(v) for v in values]
    same = sum(1 for v in absolute if v == 0)
    return (f"same frame in {same} of {counted(len(values), 'scene')}, |B - A| median {statistics.median(absolute):g}, "
            f"max {max(absolute)}")


def score_pairs(scene_pairs: Mapping[str, Sequence[tuple[int, int]]], session_scenes: Mapping[str, Scene],
                models: tuple[Any, Any], decoder: str) -> dict[str, tuple[list[PairScores] | None, str | None]]:
    """CLIP and LPIPS of each (departure, revisit) pair of each scene's rollout, as the scorer computes them."""
    from pinbench.media.video import read_video
    from pinbench_recipes.remembench.metrics import pair_metrics

    clip, lpips_model = models
    out: dict[str, tuple[list[PairScores] | None, str | None]] = {}
    for scene_id, pairs in scene_pairs.items():
        scene = session_scenes.get(scene_id)
        if scene is None or scene.video is None:
            out[scene_id] = (None, scene.problem if scene else "not a T2V scene of the dataset")
            continue
        if scene.warning:
            out[scene_id] = (None, scene.warning)
            continue
        wanted = sorted({f for pair in pairs for f in pair})
        try:
            frames = read_video(scene.video, wanted, backend=decoder).frames
        except VideoError as exc:
            out[scene_id] = (None, str(exc))
            continue
        where = {f: i for i, f in enumerate(wanted)}
        scores = []
        for departure, revisit in pairs:
            values = pair_metrics(clip, lpips_model, frames, where[departure], where[revisit])
            scores.append(PairScores(values["clip"], values["lpips_alex"]))
        out[scene_id] = (scores, None)
    return out


def agreement(a: Mapping[str, tuple[int, int]], b: Mapping[str, tuple[int, int]],
              scored: Mapping[str, tuple[list[PairScores] | None, str | None]] | None) -> list[SceneAgreement]:
    rows = []
    for scene_id in (s for s in a if s in b):
        scores, problem = scored.get(scene_id, (None, "not scored")) if scored is not None else (None, None)
        rows.append(SceneAgreement(scene_id, a[scene_id], b[scene_id], scores[0] if scores else None,
                                   scores[1] if scores else None, problem))
    return rows


def _num(value: float | None, sign: bool = False) -> str:
    return "-" if value is None else format(value, "+.4f" if sign else ".4f")


def render_agreement(paths: Sequence[Path], a: Mapping[str, tuple[int, int]], b: Mapping[str, tuple[int, int]],
                     rows: Sequence[SceneAgreement], scored: bool) -> list[str]:
    lines = [f"A: {paths[0]} ({len(a)} scenes)", f"B: {paths[1]} ({len(b)} scenes)",
             f"{counted(len(rows), 'scene')} annotated in both", ""]
    header = ["scene", "departure A", "B", "B-A", "revisit A", "B", "B-A"]
    if scored:
        header += ["CLIP A", "B", "B-A", "LPIPS A", "B", "B-A"]
    table = [header]
    for r in rows:
        cells = [r.scene_id, str(r.a[0]), str(r.b[0]), f"{r.b[0] - r.a[0]:+d}", str(r.a[1]), str(r.b[1]),
                 f"{r.b[1] - r.a[1]:+d}"]
        if scored:
            sa, sb = r.scores_a, r.scores_b
            cells += [_num(sa and sa.clip), _num(sb and sb.clip),
                      _num(sb.clip - sa.clip if sa and sb else None, sign=True),
                      _num(sa and sa.lpips_alex), _num(sb and sb.lpips_alex),
                      _num(sb.lpips_alex - sa.lpips_alex if sa and sb else None, sign=True)]
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table]
    lines.append("")
    if rows:
        lines.append(f"departure: {_differences([r.b[0] - r.a[0] for r in rows])}")
        lines.append(f"revisit:   {_differences([r.b[1] - r.a[1] for r in rows])}")
    if scored:
        both = [r for r in rows if r.scores_a and r.scores_b]
        for metric in ("clip", "lpips_alex"):
            if not both:
                break
            ma = statistics.median(getattr(r.scores_a, metric) for r in both)
            mb = statistics.median(getattr(r.scores_b, metric) for r in both)
            lines.append(f"median {metric} over the {counted(len(both), 'scene')} scored with both: A {ma:.4f}, "
                         f"B {mb:.4f}, B - A {mb - ma:+.4f}")
        for r in rows:
            if r.problem:
                lines.append(f"not scored: {r.scene_id}: {r.problem}")
    else:
        lines.append("metric change: give --videos DIR (and the evaluator weights, as for pinbench run) to compute "
                     "what the disagreement changes in CLIP and LPIPS")
    for label, only in (("A", [s for s in a if s not in b]), ("B", [s for s in b if s not in a])):
        if only:
            lines.append(f"only in {label} ({len(only)}): {', '.join(only[:LISTED])}"
                         + (f", ... {len(only) - LISTED} more" if len(only) > LISTED else ""))
    return lines


# ------------------------------------------------------------------------------------------ command line


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535; 0 picks a free one)")
    return int(text)


def _annotator(given: str | None) -> str:
    if given is not None:
        return given
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name known to this process (a container's uid without a passwd entry)
        raise RecipeError("--annotator NAME is required here (the user name of this process is unknown)") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Mark the departure and revisit frame of each RememBench T2V rollout in a local "
        "page (127.0.0.1, behind a token printed here), or compare two annotators' files (--agreement).")
    parser.add_argument("--videos", type=Path, help="your T2V rollouts: <scene_id>.mp4 or <scene_id>/rollout.mp4 "
                        "(the folder -o videos= scores)")
    parser.add_argument("--out", type=Path, help="the annotations file to write (what -o annotations= reads), "
                        "e.g. pairs.json; the sidecar pairs.provenance.json beside it records who marked what, when")
    parser.add_argument("--annotator", default=None, help="your name as the sidecar records it (default: the user)")
    parser.add_argument("--paper-backbone", action="store_true",
                        help=f"the rollouts come from the paper's backbone, {PAPER_BACKBONE}, with the dataset's "
                             "seeds: prefill each departure from the dataset (labelled, editable)")
    parser.add_argument("--port", type=_port, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--agreement", type=Path, nargs=2, metavar=("A", "B"),
                        help="compare two annotation files: per-scene frame differences and, with --videos, "
                             "the CLIP and LPIPS change they cause; exit 0 when they agree, 1 when not")
    parser.add_argument("--fixture", type=Path, metavar="DIR",
                        help="use the synthetic fixture (release, rollouts, tiny CLIP) built under DIR: to try "
                             "the page offline")
    parser.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                        help="RememBench options as for pinbench run: dataset, dataset_dir, decoder; for "
                             "--agreement also clip_dir, lpips_trunk, weights_dir, device")
    return parser


def _options(args: argparse.Namespace) -> OptionValues:
    try:
        given = parse_pairs(args.option)
    except OptionError as exc:
        raise RecipeError(str(exc)) from None
    if args.fixture is not None:
        refused = sorted(set(given) & set(FIXTURE_REFUSED)) + (["--videos"] if args.videos else [])
        if refused:
            raise RecipeError(f"{', '.join(refused)}: not used with --fixture (it brings its own)")
    if args.videos is not None:
        if "videos" in given:
            raise RecipeError("give --videos or -o videos=, not both")
        given["videos"] = str(args.videos)
    return get_recipe("remembench").parse_options(given).values


def _release(opts: OptionValues, fixture: FixtureData | None) -> Release:
    return open_release(*dataset_option(opts), download=not is_offline(),
                        local_dir=fixture.dataset_dir if fixture else opts.dataset_dir)


def _listed(names: Sequence[str]) -> str:
    more = f", ... {len(names) - LISTED} more (all listed in the page)" if len(names) > LISTED else ""
    return ", ".join(names[:LISTED]) + more


def _serve(args: argparse.Namespace, opts: OptionValues, fixture: FixtureData | None) -> int:
    from pinbench.ops.localweb import bind_loopback, new_token
    from pinbench_recipes.remembench.annotate_server import serve

    if args.out is None:
        raise RecipeError("--out FILE.json is required (the annotations file to write)")
    videos = fixture.videos if fixture else opts.videos
    if videos is None:
        raise RecipeError("--videos DIR is required (your T2V rollouts)")
    paper = fixture.paper if fixture else PAPER
    session = open_session(Path(videos), _release(opts, fixture), paper["t2v"], decoder=opts.decoder,
                           paper_backbone=args.paper_backbone)
    with AnnotationStore(args.out, annotator=_annotator(args.annotator),
                         rollouts={s.scene_id: s.rollout for s in session.scenes},
                         session=session.provenance()) as store, bind_loopback(args.port) as sock:
        filled = prefill_departures(session, store)
        missing = [s.scene_id for s in session.scenes if s.rollout is None]
        print(f"{len(session.scenes)} T2V scenes, {len(session.scenes) - len(missing)} with a rollout in {videos}")
        if missing:
            print(f"without a usable video ({len(missing)}): {_listed(missing)}")
        if session.unmatched_videos:
            print(f"videos that are no scene of the dataset ({len(session.unmatched_videos)}): "
                  f"{_listed(session.unmatched_videos)}")
        if session.i2v_videos:
            print(f"I2V rollouts of the dataset, not annotated here (Pi3X's camera poses pick their revisit frames): "
                  f"{len(session.i2v_videos)}")
        if filled:
            print(f"prefilled {counted(filled, 'departure frame')} from the dataset (paper backbone); the page labels "
                  "them")
        token = new_token()
        port = sock.getsockname()[1]
        print(f"annotation page: http://127.0.0.1:{port}/{token}/", flush=True)
        print("(the token in this address is the key to the page: only this address opens it; every mark is "
              "saved at once; Ctrl-C stops)", flush=True)
        serve(session, store, token, sock)
        counts = store.counts()
        print(f"{store.out}: {counts.get('complete', 0)} of {len(session.scenes)} scenes complete; "
              f"{store.sidecar.name} records who marked what, and when", flush=True)
    return 0


def _agreement(args: argparse.Namespace, opts: OptionValues, fixture: FixtureData | None) -> int:
    a, b = (read_annotation_file(path) for path in args.agreement)
    videos = fixture.videos if fixture else opts.videos
    scored = None
    if videos is not None:
        from pinbench_recipes.remembench.models import load_pair_models, model_files

        paper = fixture.paper if fixture else PAPER
        session = open_session(Path(videos), _release(opts, fixture), paper["t2v"], decoder=opts.decoder,
                               paper_backbone=False)
        files, _ = model_files(opts, fixture, need_pi3x=False, download=not is_offline())
        pairs = {s: [a[s], b[s]] for s in a if s in b}
        scored = score_pairs(pairs, session.by_id, load_pair_models(files, torch_device(opts.device)), opts.decoder)
    rows = agreement(a, b, scored)
    print("\n".join(render_agreement(args.agreement, a, b, rows, scored is not None)))
    same = set(a) == set(b) and all(r.a == r.b for r in rows)
    return 0 if same else 1


def main(argv: Sequence[str] | None = None) -> int:
    """The command; errors about inputs raise RecipeError (one line; the pinbench CLI prints it, exit 2)."""
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        opts = _options(args)
        fixture = build_fixture(args.fixture) if args.fixture is not None else None
        return _agreement(args, opts, fixture) if args.agreement else _serve(args, opts, fixture)
    except (AnnotationError, DatasetError, OSError) as exc:
        raise RecipeError(str(exc)) from None

