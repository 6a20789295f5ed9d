"""The annotation page's web server: Starlette on uvicorn, bound to 127.0.0.1 only, behind a session token.

Who can use it: every route lives under ``/<token>/``, a 256-bit random token made per session and printed
only to the terminal that started it; any other path, and any request whose Host is not this loopback
address (a DNS-rebinding page), gets 403. The token is compared in constant time, never logged (uvicorn's
access log is off) and never written to the annotation files. Nothing in a request names a file: scenes
are looked up by id among the dataset's scenes, frames by number within the rollout's frame count, so no
request can read anything outside the videos folder.
"""

from __future__ import annotations

import json
import secrets
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

from pinbench_recipes.remembench.annotate_frames import FrameError, FrameNotFound, FrameStore, Rendition
from pinbench_recipes.remembench.annotate_session import Scene, Session
from pinbench_recipes.remembench.annotation_store import MARKS, AnnotationError, AnnotationStore, SceneMarks

HOST = "127.0.0.1"
PAGE_DIR = Path(__file__).resolve().parent / "templates"
ASSETS = {"annotate.js": "text/javascript; charset=utf-8", "annotate.css": "text/css; charset=utf-8",
          "favicon.svg": "image/svg+xml"}
MAX_BODY = 4096
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                 b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
]
Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def new_token() -> str:
    return secrets.token_urlsafe(32)


def bind_loopback(port: int = 0) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 only (``port`` 0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {HOST}:{port}: {exc.strerror}") from None
    sock.listen(64)
    return sock


class Guard:
    """ASGI middleware: 403 unless the path starts with the session token and Host is this loopback address;
    security headers on every response."""

    def __init__(self, app: ASGIApp, token: str, port: int):
        self.app, self.token = app, token.encode()
        self.hosts = {f"{HOST}:{port}".encode(), f"localhost:{port}".encode()}

    def _allowed(self, scope: Scope) -> bool:
        first = scope.get("path", "").lstrip("/").split("/", 1)[0].encode()
        host = dict(scope.get("headers") or []).get(b"host", b"")
        return secrets.compare_digest(first, self.token) and host in self.hosts

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            await send({"type": "websocket.close", "code": 1008})
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        if not self._allowed(scope):
            response = PlainTextResponse("forbidden: open the page with the address its session printed\n", 403)
            await response(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)


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
    length = request.headers.get("content-length")
    if length is None or not length.isdigit() or int(length) > MAX_BODY:
        raise AnnotationError(f"a JSON body of at most {MAX_BODY} bytes, with its content-length, is expected")
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise AnnotationError("the body is not JSON") from None
    if not isinstance(body, dict):
        raise AnnotationError("the body must be a JSON object")
    return body


def build_app(session: Session, store: AnnotationStore, frames: FrameStore, token: str, port: int) -> Guard:
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
    return Guard(app, token, port)


def serve(session: Session, store: AnnotationStore, token: str, sock: socket.socket) -> None:
    """Serve until Ctrl-C or SIGTERM (every mark is on disk already)."""
    import uvicorn

    frames = FrameStore({s.scene_id: (s.video, s.rollout.n_frames) for s in session.scenes
                         if s.video is not None and s.rollout is not None}, session.decoder)
    app = build_app(session, store, frames, token, sock.getsockname()[1])
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False,
                            proxy_headers=False)
    # uvicorn stops on SIGINT or SIGTERM and then raises that signal again; both end here as KeyboardInterrupt,
    # so the caller can say what was saved (SIGTERM's default action would end the process at once).
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
