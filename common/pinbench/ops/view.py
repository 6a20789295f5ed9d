"""``pinbench view``: the page of ``pinbench.results.view`` served on 127.0.0.1, or written as a static folder.

Both load the same page (``results/templates/view.*``) and the same data: the server answers ``api/...`` with JSON,
the folder holds it as scripts (``data/*.js``: a page opened from ``file://`` may not fetch files). Media are named
by the SHA-256 of the bytes they show (``media/<sha256>.<ext>``), so a URL never names a path and a preview is
looked up by the content it was made from (``pinbench.media.preview``); a file is found only through a sample's
media, inside the folder the recipe named it in (``localweb.open_inside``), and served or copied from the
descriptor that was checked (``localweb.open_served``): never from what its path names by then.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from pinbench.core.files import (
    FileError,
    FileState,
    atomic_path,
    cache_root,
    claim_output_folder,
    creation_mode,
    one_snapshot,
    read_regular_text,
    regular_sha256,
    sha256_fd,
    write_atomic,
    write_if_changed,
)
from pinbench.core.provenance import COMPACT_JSON, scrub
from pinbench.core.rundir import LockHeld, hold_named, release_named
from pinbench.ops import localweb
from pinbench.results.view import Image, Video, View, ViewError, not_a_folder, view_of

TEMPLATES = Path(__file__).resolve().parent.parent / "results" / "templates"
ASSETS = {"view.js": "text/javascript; charset=utf-8", "view.css": "text/css; charset=utf-8",
          "favicon.svg": "image/svg+xml"}
MEDIA_TYPES = {".mp4": "video/mp4", ".m4v": "video/mp4", ".webm": "video/webm", ".png": "image/png",
               ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
MEDIA_NAME = re.compile(r"[0-9a-f]{64}\.(mp4|m4v|webm|png|jpg|jpeg)")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; media-src 'self'; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
CHUNK = 256  # samples per data file of a bundle
PREVIEW_DIR = "view-previews"
BUNDLE_MARK = ".pinbench-view"  # written first into a bundle's folder: a later bundle may write there again
BUNDLE_LOCK = ".pinbench-view.lock"  # held by the bundle being written there (``_held``)


@dataclass(frozen=True)
class Served:
    """A file the page may load: the real path, the digest of its bytes when registered, whether the page gets a
    preview made from it instead, and the run (its index) whose sample listed it."""

    path: Path
    sha256: str
    state: FileState
    preview: bool
    run: int


class MediaStore:
    """The files of the samples listed so far, by the name the page loads them by."""

    def __init__(self, previews: Path | None = None):
        self.previews = previews or cache_root() / PREVIEW_DIR
        self.files: dict[str, Served] = {}
        self.digests: dict[tuple[Path, FileState], str] = {}
        self.lock = threading.Lock()

    def _digest(self, file: localweb.OpenFile) -> tuple[str, FileState]:
        state = FileState.of(file.stat)
        with self.lock:
            known = self.digests.get((file.path, state))
        if known is None:
            known = sha256_fd(file.fd)
            with self.lock:
                self.digests[(file.path, state)] = known
        return known, state

    def describe(self, run: int, item: Video | Image) -> dict[str, Any]:
        """What the page needs of one video or image (its URL, frame rate, where a preview stands in and why), or
        why it cannot be shown."""
        kind = "image" if isinstance(item, Image) else "video"
        entry: dict[str, Any] = {"kind": kind, "label": item.label, "run": run, "url": None, "problem": None}
        if isinstance(item, Video):
            entry.update(offset_frames=item.offset_frames, expected_sha256=item.expected_sha256)
            if item.file is None:
                return {**entry, "problem": item.problem or "no file"}
        from pinbench.media.preview import probe  # av and numpy: not for a page that names no file (CameraBench's)
        from pinbench.media.video import VideoError

        try:
            with localweb.open_inside(item.file.root, item.file.relative) as opened:
                path = opened.path
                suffix = path.suffix.lower()
                if suffix not in MEDIA_TYPES or (kind == "image") != MEDIA_TYPES[suffix].startswith("image/"):
                    return {**entry, "problem": f"{path}: not a {kind} file this page shows"}
                sha, state = self._digest(opened)
                preview = None
                if kind == "video":
                    facts = probe(path, opened.fd)
                    preview = facts.web_problem(suffix)
                    entry.update(fps=facts.fps, n_frames=facts.n_frames, width=facts.width, height=facts.height,
                                 codec=facts.codec, preview=preview)
                    if item.expected_sha256 and item.expected_sha256 != sha:
                        replaced = f": replaced since it was scored ({item.since})" if item.since else ""
                        entry["mismatch"] = (f"{path} holds other bytes (sha256 {sha[:12]}...) than "
                                             f"{item.expected_by} ({item.expected_sha256[:12]}...){replaced}")
                    elif item.failed is not None:
                        entry["mismatch"] = _failed_on(path, item.file.relative, facts.n_frames, item.failed)
                    elif item.since and not item.expected_sha256:
                        entry["mismatch"] = (f"{item.since}, and its record keeps no digest of the bytes it read: "
                                             f"{path} is shown as it is now")
        except (localweb.PathRefused, VideoError, OSError) as exc:
            root = item.file.root
            return {**entry, "problem": str(exc) if root.is_dir() else not_a_folder(root)}
        name = f"{sha}{'.mp4' if preview else suffix}"
        with self.lock:
            self.files[name] = Served(path, sha, state, preview is not None, run)
        return {**entry, "url": f"media/{name}", "sha256": sha, "source": str(path)}

    def file(self, name: str) -> localweb.OpenFile | None:
        """The bytes behind a media name, opened (the caller closes them): the registered file while it still holds
        them, or its preview. Opened once, checked on that descriptor and a preview made from it: a FIFO put there
        held its request and the stop for ever, and one put there between a check and an open by path still did."""
        from pinbench.media.preview import make_preview

        with self.lock:
            served = self.files.get(name)
        if served is None:
            return None
        try:
            opened = localweb.open_served(served.path)
        except FileError:  # gone, or no regular file now
            return None
        try:
            same = FileState.of(opened.stat) == served.state or sha256_fd(opened.fd) == served.sha256
        except OSError:
            opened.close()
            raise
        if same and not served.preview:
            return opened
        with opened:
            if not same:
                return None  # the file changed since the page was told its digest
            made = make_preview(served.path, served.sha256, self.previews, fd=opened.fd)
        return localweb.open_served(made.path)

    def gone(self, name: str) -> Served | None:
        """The listed file behind a media name when nothing stands at its path any more (deleted since its sample
        was listed), for a 404 that says so: "or the file changed" left the reader guessing."""
        with self.lock:
            served = self.files.get(name)
        return served if served is not None and not os.path.lexists(served.path) else None


def _failed_on(path: Path, relative: str, n_frames: int, error: str) -> str:
    """What the page says of a video of a failed sample, whose record keeps no digest of the bytes the run read: that
    it shows the file as it is now, and that these are not the bytes that failed when the run's reader refused this
    file (``pinbench.media.video``'s words, naming it by its ``relative`` path under its root: MIND's GT and rollout
    are both video.mp4) and the page's reader reads it now (it was replaced since)."""
    named = re.escape(PurePosixPath(relative).as_posix())
    if re.search(rf"(^|[\s/]){named}: (empty file|truncated|undecodable|unreadable)", error):
        return (f"{path} decodes now ({n_frames} frames), but the run failed on it ({error}): it holds other bytes "
                f"than the run read")
    return f"the run failed on this sample and kept no digest of the bytes it read: {path} is shown as it is now"


def _from_run(view: View, run: int, path: Path) -> str:
    """``path`` as the page names it: from the folder of run ``run`` (POSIX), never this machine's absolute path."""
    return Path(os.path.relpath(path, view.runs[run].run.path.parent.resolve())).as_posix()


def page_html(mode: str) -> str:
    return (TEMPLATES / "view.html").read_text(encoding="utf-8").replace("__MODE__", mode)


# ---------------------------------------------------------------------------------------------------- server


def build_app(current: Callable[[], View], media: MediaStore, token: str, port: int) -> localweb.Guard:
    """The page, its assets, its JSON and its media, under ``/<token>/``: the runs' summary, table and samples of
    ``current()``, the view of the runs as they are now (``view_of``), each made once per view."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
    from starlette.routing import Mount, Route

    no_store = {"cache-control": "no-store"}
    made: dict[str, tuple[View, Any]] = {}

    def once(name: str) -> Callable[[Request], Awaitable[Response]]:
        def make() -> Any:
            view = current()
            if name not in made or made[name][0] is not view:
                made[name] = view, getattr(view, name)()
            return made[name][1]

        async def endpoint(request: Request) -> Response:
            try:
                data = await localweb.in_daemon_thread(make)
            except ViewError as exc:   # a scorecard rewritten under the server that cannot be read
                return JSONResponse({"error": str(exc)}, 500, headers=no_store)
            return JSONResponse(data, headers=no_store)
        return endpoint

    async def page(request: Request) -> Response:
        if not request.url.path.endswith("/"):
            return RedirectResponse(request.url.path + "/", status_code=307)
        return Response(page_html("server"), media_type="text/html; charset=utf-8", headers=no_store)

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return PlainTextResponse("not found\n", 404)
        return Response((TEMPLATES / name).read_bytes(), media_type=ASSETS[name], headers=no_store)

    async def sample(request: Request) -> Response:
        index = request.path_params["index"]
        try:
            view = await localweb.in_daemon_thread(current)
        except ViewError as exc:
            return JSONResponse({"error": str(exc)}, 500, headers=no_store)
        # the page names the id it took from its table: a rerun under the server may have moved it, or dropped it
        if (asked := request.query_params.get("id")) is not None:
            if asked not in view.position:
                return JSONResponse({"error": f"no sample {asked!r} in these runs now (they changed since this page "
                                              "was loaded: reload it)"}, 404, headers=no_store)
            index = view.position[asked]
        if not 0 <= index < len(view.ids):
            return JSONResponse({"error": f"no sample #{index} (there are {len(view.ids)})"}, 404)
        data = await localweb.in_daemon_thread(view.sample, index, media.describe)
        return JSONResponse(data, headers=no_store)

    async def media_file(request: Request) -> Response | localweb.FileBody:
        from pinbench.media.video import VideoError

        name = request.path_params["name"]
        if not MEDIA_NAME.fullmatch(name):
            return PlainTextResponse("not found\n", 404)
        try:
            opened = await localweb.in_daemon_thread(media.file, name)
        except (VideoError, FileError, OSError) as exc:
            return PlainTextResponse(f"{exc}\n", 422)
        if opened is None:
            served = media.gone(name)
            if served is not None:
                try:   # the runs are the ones named at the start, in their order: any view of them names its folder
                    named = _from_run(await localweb.in_daemon_thread(current), served.run, served.path)
                except ViewError:
                    named = str(served.path)
                return PlainTextResponse(f"not found: {named} is gone from its run (deleted since its sample was "
                                         "opened)\n", 404)
            return PlainTextResponse("not found: open its sample first, or the file changed\n", 404)
        return localweb.FileBody(opened, MEDIA_TYPES[Path(name).suffix], {"cache-control": "private"})

    routes = [Route("/", page), Route("/{name:str}", asset),
              Route("/api/summary", once("summary")), Route("/api/table", once("table")),
              Route("/api/sample/{index:int}", sample), Route("/media/{name:str}", media_file)]
    app = Starlette(routes=[Route(f"/{token}", page), Mount(f"/{token}", routes=routes)])
    return localweb.Guard(app, token, port, CSP)


def serve(runs: Sequence[Path], sock: socket.socket, token: str) -> None:
    """The page of the runs (their folders or scorecards) as they are now (``view_of``) on ``sock``."""
    paths = tuple(runs)
    localweb.serve(build_app(lambda: view_of(paths), MediaStore(), token, sock.getsockname()[1]), sock)


# ---------------------------------------------------------------------------------------------------- bundle


def _script(name: str, data: Any) -> str:
    """``data`` as a script that hands it to the page (``</`` escaped: it cannot end the script early)."""
    return _script_of(name, json.dumps(data, **COMPACT_JSON))


def _script_of(name: str, text: str) -> str:
    """``_script`` of data already encoded as ``COMPACT_JSON`` text."""
    text = text.replace("</", "<\\/")
    return f"pinbenchData({json.dumps(name)},{text});\n"


def _earlier_bundle(folder: Path) -> bool:
    """A bundle from before ``BUNDLE_MARK``: its media.json beside this page's index.html. A media.json alone let a
    user's web folder that held one lose its index.html and every file under its media/."""
    return (folder / "media.json").is_file() and 'data-mode="bundle"' in (read_regular_text(folder / "index.html")
                                                                         or "")


@contextmanager
def _held(dest: Path) -> Iterator[None]:
    """Hold the bundle folder ``dest`` (``hold_named`` on its ``BUNDLE_LOCK``) for the block, or FileError naming the
    process that holds it, as exports into one DEST take turns: two bundles written there at once mixed their
    index.html, data/ and media/, and the cleanup of one deleted the other's media. The lock's file is removed at the
    end (``release_named``), as a bundle is copied to a web server."""
    try:
        fd = hold_named(dest / BUNDLE_LOCK, creation_mode())
    except LockHeld as held:
        raise FileError(dest, f"another pinbench is writing a bundle into it ({held.who or 'a process just starting'})"
                              "; retry once it has ended") from None
    try:
        yield
    finally:
        release_named(dest / BUNDLE_LOCK, fd)


def write_bundle(view: View, dest: Path, *, copy_media: bool = True,
                 progress: Callable[[str], None] | None = None) -> Path:
    """The page as a folder that opens from ``file://`` (no server): the data as scripts, and every video and image
    the samples show under ``media/`` (a web preview where a browser cannot play the original), listed in
    ``media.json`` with the source (the run's label, the path from its folder) and the SHA-256 of the bytes each
    was made from. ``copy_media=False`` (a report's folder) links the originals that play as they are where they lie
    instead of copying them. Returns ``dest/index.html``."""
    # never over a folder of the user's: the bundle replaces index.html and data/ and empties media/ of the rest
    claim_output_folder(dest, BUNDLE_MARK, "bundle", "index.html, data/ and media/", folders=("data", "media"),
                        earlier=_earlier_bundle)
    for folder in ("data", "media"):
        (dest / folder).mkdir(exist_ok=True)
    with _held(dest), one_snapshot():
        return _write_held(view, dest, copy_media=copy_media, progress=progress)


def _write_held(view: View, dest: Path, *, copy_media: bool, progress: Callable[[str], None] | None) -> Path:
    """``write_bundle`` once this process holds ``dest``: what it checks there holds until its end."""
    media = MediaStore()
    for entry in os.scandir(dest / "media"):   # the cleanup below deletes each file it did not write, never a folder
        if entry.is_dir(follow_symlinks=False):
            raise FileError(entry.path, "a folder in the bundle's media/, where it writes only files and deletes "
                                        "those it did not write: remove it, or name a new folder")
    # medium name -> the run that first showed it and where, from that run's folder: a bundle is copied elsewhere,
    # where this machine's absolute paths name nothing and would tell its folder layout
    sources: dict[str, dict[str, str]] = {}
    # sample id: problem of each video or image a page names that the bundle cannot hold, said when it is written:
    # "bundle: 7 of 7 samples" alone sent a bundle to a co-author with a rollout missing that only its page named
    unshown: dict[str, str] = {}

    def describe(sample: str, run: int, item: Video | Image) -> dict[str, Any]:
        entry = media.describe(run, item)
        if "source" not in entry:   # a file it could not show: its problem says why
            unshown.setdefault(f"{sample}: {entry['problem']}", sample)
            return entry
        name = entry["url"].removeprefix("media/")
        if not copy_media and not entry.get("preview"):
            entry["url"] = quote(Path(os.path.relpath(entry["source"], dest.resolve())).as_posix())
        entry["source"] = _from_run(view, run, Path(entry["source"]))
        sources.setdefault(name, {"run": view.runs[run].label, "source": entry["source"]})
        return entry

    write_if_changed(dest / "index.html", page_html("bundle"))
    for name in ASSETS:
        write_if_changed(dest / name, (TEMPLATES / name).read_bytes())
    write_if_changed(dest / "data" / "summary.js", _script("summary", {**view.summary(dest), "chunk": CHUNK}))
    write_if_changed(dest / "data" / "table.js", _script("table", view.table()))
    for start in range(0, len(view.ids), CHUNK):
        stop = min(start + CHUNK, len(view.ids))
        # the object {"<i>": page, ...} as json.dumps writes it with COMPACT_JSON, each page encoded once
        pages = []
        for i in range(start, stop):
            pages.append(f'"{i}":{view.sample_json(i, partial(describe, view.ids[i]))}')
        samples = ",".join(pages)
        write_if_changed(dest / "data" / f"samples-{start // CHUNK}.js",
                         _script_of(f"samples-{start // CHUNK}", "{" + samples + "}"))
        if progress:
            progress(f"{stop} of {len(view.ids)} samples")
    if unshown and progress:
        more = f"; and {len(unshown) - 3} more" if len(unshown) > 3 else ""
        n = len(set(unshown.values()))
        who = "1 sample names" if n == 1 else f"{n} samples name"
        progress(scrub(f"{who} a video or image that is not in it (each one's page says why): "
                       f"{'; '.join(list(unshown)[:3])}{more}"))
    listing = {}
    for name, served in sorted(media.files.items()):
        entry = {**sources[name], "source_sha256": served.sha256, "preview": served.preview}
        if not copy_media and not served.preview:
            listing[name] = {**entry, "linked": True}
            continue
        made = media.file(name)
        if made is None:
            continue
        with made:
            digest = served.sha256 if not served.preview else sha256_fd(made.fd)
            target = dest / "media" / name
            # an earlier bundle's link or FIFO there is replaced, never followed: the copy was written through a
            # link onto the file it led to outside the bundle, and a FIFO held the bundle for ever
            if regular_sha256(target) != digest:
                with os.fdopen(made.fd, "rb", closefd=False) as source, atomic_path(target) as tmp, \
                        open(tmp, "wb") as copy:
                    shutil.copyfileobj(source, copy)
        listing[name] = {**entry, "sha256": digest}
    for stale in (dest / "media").iterdir():
        if stale.name not in listing:
            stale.unlink()
    # scrubbed as the data scripts are: a video a run refused for its token-shaped name is still shown, by its path
    write_atomic(dest / "media.json", json.dumps(scrub(listing), indent=1, sort_keys=True) + "\n")
    return dest / "index.html"
