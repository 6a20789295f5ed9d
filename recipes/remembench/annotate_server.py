"""The annotation page's web server: Starlette on uvicorn, by the rules of every local page of pinbench
(``pinbench.ops.localweb``: 127.0.0.1 only, a session token, this server's own Host and Origin only).

The token is never written to the annotation files. Nothing in a request names a file: scenes are looked up by id
among the dataset's scenes, frames by number within the rollout's frame count, so no request can read anything
outside the videos folder; a request whose ids are not strings or numbers is a 400 with one line.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from pinbench.ops import localweb
from pinbench_recipes.remembench.annotate_frames import FrameError, FrameNotFound, FrameStore, Rendition
from pinbench_recipes.remembench.annotate_session import Scene, Session
from pinbench_recipes.remembench.annotation_store import MARKS, AnnotationError, AnnotationStore, SceneMarks

PAGE_DIR = Path(__file__).resolve().parent / "templates"
ASSETS = {"annotate.js": "text/javascript; charset=utf-8", "annotate.css": "text/css; charset=utf-8",
          "favicon.svg": "image/svg+xml"}
MAX_BODY = 4096
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


def _mark_json(marks: SceneMarks, name: str) -> dict[str, Any] | None:
    mark = marks.mark(name)
    return mark.to_json() if mark else None


def scene_json(scene: Scene, marks: SceneMarks) -> dict[str, Any]:
    """What the page shows of one scene (prompts, segment starts, rollout facts, marks and their state)."""
    info = scene.info
    return {
        "scene_id": scene.scene_id, "prompts": list(scene.row.prompts),
        "starts": [{"seconds": s.seconds, "frame": s.frame, "prompt": s.prompt} for s in scene.starts],
        "video": scene.rollout.video if scene.rollout else None, "problem": scene.problem,
        "warning": scene.warning, "n_frames": info.n_frames if info else None, "fps": info.fps if info else None,
        "width": info.width if info else None, "height": info.height if info else None,
        "expected_frames": scene.row.num_frames, "state": marks.state,
        **{name: _mark_json(marks, name) for name in MARKS},
        "prefill": scene.prefill, "prefill_note": scene.prefill_note,
    }


def _error(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={"cache-control": "no-store"})


async def _json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object. Only ``application/json``: a cross-site form (text/plain, urlencoded) can send
    no other type without the browser asking first, so this holds even where a browser sends no Origin."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise AnnotationError("a body of type application/json is expected")
    length = request.headers.get("content-length")
    if length is None or not length.isdigit() or int(length) > MAX_BODY:
        raise AnnotationError(f"a JSON body of at most {MAX_BODY} bytes, with its content-length, is expected")
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: [[[...]]] 2,000 deep, a 500 before
        raise AnnotationError("the body is not JSON") from None
    if not isinstance(body, dict):
        raise AnnotationError("the body must be a JSON object")
    return body


def build_app(session: Session, store: AnnotationStore, frames: FrameStore, token: str,
              port: int) -> localweb.Guard:
    """The page, its assets, its JSON API and the frame images, under ``/<token>/``."""
    scenes = session.by_id
    store_lock = threading.Lock()  # endpoints run in a thread pool; one change at a time reaches the files

    def session_json() -> dict[str, Any]:
        with store_lock:
            position = store.position
            return {"annotator": store.annotator, "out": str(store.out), "sidecar": store.sidecar.name,
                    "prefill_source": session.prefill_source, "counts": store.counts(),
                    "position": position.__dict__ if position else None,
                    "unmatched_videos": session.unmatched_videos,
                    "scenes": [scene_json(s, store.scene(s.scene_id)) for s in session.scenes]}

    async def page(request: Request) -> Response:
        if not request.url.path.endswith("/"):
            return RedirectResponse(request.url.path + "/", status_code=307)
        html = (PAGE_DIR / "annotate.html").read_text(encoding="utf-8")
        return Response(html, media_type="text/html; charset=utf-8", headers={"cache-control": "no-store"})

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return PlainTextResponse("not found\n", 404)
        return Response((PAGE_DIR / name).read_text(encoding="utf-8"), media_type=ASSETS[name],
                        headers={"cache-control": "no-store"})

    async def api_session(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(session_json), headers={"cache-control": "no-store"})

    def image(kind: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            scene_id, frame = request.path_params["scene_id"], request.path_params["frame"]
            if scene_id not in scenes:
                return _error(f"unknown scene {scene_id!r}", 404)
            try:
                rendition: Rendition = await run_in_threadpool(getattr(frames, kind), scene_id, frame)
            except FrameError as exc:  # 404: no such frame; 422: the rollout does not decode
                return _error(str(exc), 404 if isinstance(exc, FrameNotFound) else 422)
            return Response(rendition.body, media_type=rendition.media_type,
                            headers={"cache-control": "private, max-age=86400"})
        return endpoint

    async def mark(request: Request) -> Response:
        scene_id = request.path_params["scene_id"]
        if scene_id not in scenes:
            return _error(f"unknown scene {scene_id!r}", 404)
        try:
            body = await _json_body(request)
            name, frame = body.get("mark"), body.get("frame")

            def change() -> dict[str, Any]:
                with store_lock:
                    marks = store.set_mark(scene_id, name, frame)
                    return {"scene": scene_json(scenes[scene_id], marks), "counts": store.counts()}

            return JSONResponse(await run_in_threadpool(change), headers={"cache-control": "no-store"})
        except AnnotationError as exc:
            return _error(str(exc))

    async def position(request: Request) -> Response:
        try:
            body = await _json_body(request)
            scene_id, frame = body.get("scene_id"), body.get("frame")
            if not isinstance(scene_id, str):
                raise AnnotationError(f"scene_id must be a string, not {type(scene_id).__name__}")
            if scene_id not in scenes:
                return _error(f"unknown scene {scene_id!r}", 404)

            def move() -> None:
                with store_lock:
                    store.move(scene_id, frame)

            await run_in_threadpool(move)
        except AnnotationError as exc:
            return _error(str(exc))
        return JSONResponse({"saved": True}, headers={"cache-control": "no-store"})

    routes = [
        Route("/", page), Route("/{name:str}", asset),
        Route("/api/session", api_session),
        Route("/api/scenes/{scene_id:str}/thumb/{frame:int}", image("thumbnail")),
        Route("/api/scenes/{scene_id:str}/preview/{frame:int}", image("preview")),
        Route("/api/scenes/{scene_id:str}/native/{frame:int}", image("native")),
        Route("/api/scenes/{scene_id:str}/marks", mark, methods=["POST"]),
        Route("/api/position", position, methods=["POST"]),
    ]
    app = Starlette(routes=[Route(f"/{token}", page), Mount(f"/{token}", routes=routes)])
    return localweb.Guard(app, token, port, CSP)


def serve(session: Session, store: AnnotationStore, token: str, sock: socket.socket) -> None:
    """Serve until Ctrl-C or SIGTERM (every mark is on disk already)."""
    frames = FrameStore({s.scene_id: (s.video, s.rollout.n_frames) for s in session.scenes
                         if s.video is not None and s.rollout is not None}, session.decoder)
    localweb.serve(build_app(session, store, frames, token, sock.getsockname()[1]), sock)
