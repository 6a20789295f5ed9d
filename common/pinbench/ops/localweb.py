"""The rules every local web page of pinbench is served by (``pinbench view``, the annotation page).

Who can use such a page: the person at the terminal that started it. So the server listens on 127.0.0.1 only; every
route lives under ``/<token>/``, a 256-bit random token made per session and printed only to that terminal (compared
in constant time, never logged: uvicorn's access log is off); a request whose Host is not this loopback address (a
DNS-rebinding page reaching 127.0.0.1 under its own name) or whose Origin is another site's (a cross-site form or
fetch that somehow carries the token) gets 403. A file is served only from inside a folder the server was given,
after every symlink is followed (``resolve_inside``), and from the descriptor its check was made on (``open_inside``,
``open_served``, ``FileBody``): a FIFO or a link put at its path after the check is never opened; requests name no
files.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import socket
import stat
import threading
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from pinbench.core.files import FileError, open_regular

HOST = "127.0.0.1"
FORBIDDEN = "forbidden: open the page with the address its session printed\n"
GRACE = 3  # seconds a stop waits for requests still open
MAX_PATH = 2048  # no page's address is near this; a 5,000-digit frame number was a 500 with a traceback (int())
MAX_DRAIN = 2**20  # bytes of an unread request body read and dropped before an answer (see Guard)
BODY_CHUNK = 2**18  # bytes of a served file per message
ONE_RANGE = re.compile(r"bytes=(\d{0,18})-(\d{0,18})")  # longer numbers: no file is that long, the header is ignored
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
T = TypeVar("T")


class PathRefused(ValueError):
    """A path that does not name a regular file inside its folder; ``str(e)`` is one line naming both."""


def new_token() -> str:
    return secrets.token_urlsafe(32)


def bind_loopback(port: int = 0) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 only (``port`` 0: a free one)."""
    if not 0 <= port <= 65535:  # bind() raised OverflowError: a traceback for `pinbench view --port 99999`
        raise OSError(f"cannot listen on {HOST}:{port}: a port is 0 to 65535 (0: a free one)")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {HOST}:{port}: {exc.strerror}") from None
    sock.listen(64)
    return sock


def security_headers(csp: str) -> list[tuple[bytes, bytes]]:
    return [(b"content-security-policy", csp.encode()), (b"referrer-policy", b"no-referrer"),
            (b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY")]


class Guard:
    """ASGI middleware: 403 unless the path starts with the session token, Host is this loopback address and an
    Origin, when the browser sends one, is this page's own; 414 for a path longer than ``MAX_PATH``; security headers
    on every response.

    An answer given before the request's body was read (a refusal, a 400 for a form's type) waits for the rest of
    that body, up to ``MAX_DRAIN`` declared bytes, and drops it: a connection closed with bytes unread sends a reset
    that can discard the answer still on its way, so the client saw "connection reset" instead of the 403 or 400."""

    def __init__(self, app: ASGIApp, token: str, port: int, csp: str):
        self.app, self.token = app, token.encode()
        self.hosts = {f"{HOST}:{port}".encode(), f"localhost:{port}".encode()}
        self.origins = {b"http://" + host for host in self.hosts}
        self.headers = security_headers(csp)

    def allowed(self, scope: Scope) -> bool:
        first = scope.get("path", "").lstrip("/").split("/", 1)[0].encode()
        headers = dict(scope.get("headers") or [])
        origin = headers.get(b"origin")
        return (secrets.compare_digest(first, self.token) and headers.get(b"host", b"") in self.hosts
                and (origin is None or origin in self.origins))

    @staticmethod
    async def refuse(send: Send, status: int, text: str) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
        await send({"type": "http.response.body", "body": text.encode()})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            await send({"type": "websocket.close", "code": 1008})
            return

        started = False
        body_read = _declared_length(scope) == 0

        async def reading() -> Any:
            nonlocal body_read
            message = await receive()
            body_read = body_read or message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def with_headers(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
                dropped, declared = 0, _declared_length(scope) or 0
                while not body_read and declared <= MAX_DRAIN and dropped <= MAX_DRAIN:
                    dropped += len((await reading()).get("body", b""))
            await send(message)

        if not self.allowed(scope):
            await self.refuse(with_headers, 403, FORBIDDEN)
            return
        if len(scope.get("path", "")) > MAX_PATH:
            await self.refuse(with_headers, 414, f"a path of at most {MAX_PATH} characters is served here\n")
            return
        try:
            await self.app(scope, reading, with_headers)
        except asyncio.CancelledError:  # still open when a stop's GRACE ran out: a short answer, not a traceback
            if not started:
                body_read = True  # nothing more is waited for: a body that never comes held the stop for ever
                await self.refuse(with_headers, 503, "the page is stopping\n")


def _declared_length(scope: Scope) -> int | None:
    """The request body's Content-Length (0 when it declares none and is not chunked; None: chunked or unreadable,
    drained up to its end as the server parses it)."""
    headers = dict(scope.get("headers") or [])
    if b"transfer-encoding" in headers:
        return None
    length = headers.get(b"content-length", b"0")
    return int(length) if length.isdigit() else None


def resolve_inside(root: Path | str, relative: str) -> Path:
    """``root/relative`` as a real path, when it is a regular file inside ``root`` once every symlink (of the folder
    too) is followed; PathRefused otherwise: an absolute path, a ``..`` part, a symlink leading out, a FIFO, a
    folder, nothing there."""
    text = str(relative)
    parts = PurePosixPath(text).parts
    if not text or "\x00" in text or PurePosixPath(text).is_absolute() or ".." in parts or "\\" in text:
        raise PathRefused(f"{text!r}: not a plain relative path under {root}")
    try:
        base = Path(root).resolve(strict=True)
        target = (base / text).resolve(strict=True)
        mode = os.stat(target).st_mode
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop on Python < 3.13
        raise PathRefused(f"{Path(root) / text}: {getattr(exc, 'strerror', None) or exc}") from None
    if not target.is_relative_to(base):
        raise PathRefused(f"{Path(root) / text}: leads out of {base} (to {target})")
    if not stat.S_ISREG(mode):
        raise PathRefused(f"{Path(root) / text}: not a regular file")
    return target


@dataclass(frozen=True)
class OpenFile:
    """A regular file opened once: what is checked of it (its state, its digest) and what is served are the bytes
    of this descriptor, whatever is put at ``path`` meanwhile. Closed by ``close`` or ``with``."""

    path: Path
    fd: int
    stat: os.stat_result

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> OpenFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_served(path: Path | str) -> OpenFile:
    """The regular file ``path`` opened without following a symlink at its end (``open_regular``: a FIFO opens at
    once and is refused, never waited on); FileError naming it otherwise. For a path that was resolved and checked
    before: a link put there since is refused, not followed out."""
    fd = open_regular(path, follow_symlinks=False)
    return OpenFile(Path(path), fd, os.fstat(fd))


def open_inside(root: Path | str, relative: str) -> OpenFile:
    """``resolve_inside``'s file, opened once (``open_served``): PathRefused when it is refused, or when what stands
    at its real path by the time it is opened is no regular file (a FIFO, a folder, a link swapped in)."""
    target = resolve_inside(root, relative)
    try:
        return open_served(target)
    except FileError as exc:
        raise PathRefused(str(exc)) from None


class FileBody:
    """An ASGI answer with the bytes of an open file (closed when the answer ends, however it ends): the whole file,
    or the one byte range a ``Range`` header asks for (206; a video element seeks with ``bytes=N-``), 416 for a
    range past its end. Several ranges, or a ``Range`` with an ``If-Range`` (no validator is sent), get the whole
    file: a server may ignore a Range."""

    def __init__(self, file: OpenFile, media_type: str, headers: Mapping[str, str]):
        self.file, self.media_type, self.headers = file, media_type, headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._answer(scope, send)
        finally:
            self.file.close()

    async def _answer(self, scope: Scope, send: Send) -> None:
        size = self.file.stat.st_size
        asked = dict(scope.get("headers") or [])
        span = None if b"if-range" in asked else _byte_range(asked.get(b"range", b"").decode("latin-1"), size)
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        headers += [(b"content-type", self.media_type.encode()), (b"accept-ranges", b"bytes")]
        if span is not None and not span:
            await send({"type": "http.response.start", "status": 416,
                        "headers": [*headers, (b"content-range", f"bytes */{size}".encode())]})
            await send({"type": "http.response.body", "body": b""})
            return
        start, stop = (span.start, span.stop) if span is not None else (0, size)
        headers.append((b"content-length", str(stop - start).encode()))
        if span is not None:
            headers.append((b"content-range", f"bytes {start}-{stop - 1}/{size}".encode()))
        await send({"type": "http.response.start", "status": 206 if span is not None else 200, "headers": headers})
        offset, stop = start, start if scope.get("method") == "HEAD" else stop
        while offset < stop:
            chunk = await asyncio.to_thread(os.pread, self.file.fd, min(BODY_CHUNK, stop - offset), offset)
            if not chunk:  # cut short since it was opened: the client sees a short body, not a hang
                break
            offset += len(chunk)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


def _byte_range(header: str, size: int) -> range | None:
    """The one byte range ``header`` asks of a file of ``size`` bytes (empty: none of it is there), or None: the
    whole file (no header, one this server does not parse, several ranges)."""
    match = ONE_RANGE.fullmatch(header.strip())
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if not first:  # the last N bytes
        return range(max(size - int(last), 0), size) if int(last) else range(0)
    if last and int(last) < int(first):
        return None
    return range(int(first), min(int(last) + 1, size) if last else size) if int(first) < size else range(0)


async def in_daemon_thread(func: Callable[..., T], *args: Any) -> T:
    """``func(*args)`` in a daemon thread of its own, awaited: for work whose only use is a request's answer (a
    preview, a video's digest). A stop does not wait for it: in the server's worker threads, a preview being made at
    Ctrl-C held the process until it was done (minutes for a long rollout) after its request was answered 503, and a
    second Ctrl-C printed a traceback. Never for work that saves something."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.cancelled():  # the request was dropped (a stop's GRACE ran out)
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def run() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (func(*args), None)
        except Exception as exc:
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for the answer
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, daemon=True, name=f"pinbench {getattr(func, '__name__', 'work')}").start()
    return await future


def serve(app: ASGIApp, sock: socket.socket) -> None:
    """Serve ``app`` on ``sock`` until Ctrl-C or SIGTERM (both end here as KeyboardInterrupt, handled: the caller
    says what it saved)."""
    import uvicorn

    # a request still open at the stop (a body that never comes, a paused video's download) is dropped after
    # GRACE seconds: uvicorn waited for it for ever, and Ctrl-C or SIGTERM did not end the page
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False,
                            proxy_headers=False, timeout_graceful_shutdown=GRACE)
    # uvicorn stops on SIGINT or SIGTERM and then raises that signal again; SIGTERM's default action would end the
    # process at once, so it is mapped to KeyboardInterrupt for the time of the serve.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
