"""The rules of every local page (pinbench.ops.localweb), each proven once here: the token, Host, Origin, loopback
only, and a file is served only from inside its folder. The servers built on them (pinbench view, the annotation
page) test their own routes (tests/test_view.py, recipes/remembench/tests/test_rb_annotate.py)."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest
from sockets import listening_addresses

from pinbench.ops.localweb import MAX_DRAIN, MAX_PATH, Guard, PathRefused, bind_loopback, new_token, resolve_inside

PORT = 8123


async def _ok(scope, receive, send) -> None:  # a test double of the page behind the guard
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"the page"})


def _request(guard: Guard, path: str, **headers: str) -> tuple[int, bytes, dict[bytes, bytes]]:
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    scope = {"type": "http", "path": path, "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(guard(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], body, dict(start["headers"])


@pytest.fixture(scope="module")
def guard() -> tuple[Guard, str]:
    token = new_token()
    return Guard(_ok, token, PORT, "default-src 'none'"), token


def test_only_the_token_path_opens_the_page(guard) -> None:
    app, token = guard
    host = {"host": f"127.0.0.1:{PORT}"}
    assert len(token) >= 43  # 32 random bytes, URL-safe
    assert _request(app, f"/{token}/api/x", **host)[:2] == (200, b"the page")
    wrong = ("A" if token[0] != "A" else "B") + token[1:]
    for path in ("/", "/api/x", f"/{wrong}/", f"/{token[:-1]}/", f"/{token}x/", f"/x/{token}/", "/favicon.ico"):
        status, body, headers = _request(app, path, **host)
        assert status == 403 and body.startswith(b"forbidden") and token.encode() not in body, path
        assert headers[b"content-security-policy"] == b"default-src 'none'"  # on refusals too


def test_a_foreign_host_or_origin_is_refused(guard) -> None:
    app, token = guard
    path = f"/{token}/api/x"
    assert _request(app, path, host=f"localhost:{PORT}")[0] == 200
    assert _request(app, path, host=f"attacker.example:{PORT}")[0] == 403  # DNS rebinding: its name, our address
    assert _request(app, path, host=f"127.0.0.1:{PORT + 1}")[0] == 403
    assert _request(app, path)[0] == 403  # no Host at all
    own = {"host": f"127.0.0.1:{PORT}"}
    assert _request(app, path, **own, origin=f"http://127.0.0.1:{PORT}")[0] == 200
    for origin in ("http://attacker.example", "null", f"https://127.0.0.1:{PORT}", f"http://127.0.0.1:{PORT + 1}"):
        assert _request(app, path, **own, origin=origin)[0] == 403, origin  # a cross-site request carrying the token


def test_a_path_too_long_for_any_page_is_refused_before_the_routes(guard) -> None:
    app, token = guard
    host = {"host": f"127.0.0.1:{PORT}"}
    assert _request(app, f"/{token}/api/x/" + "9" * (MAX_PATH - len(token) - 8), **host)[0] == 200
    status, body, headers = _request(app, f"/{token}/api/scenes/s/thumb/" + "9" * 5000, **host)
    assert (status, body) == (414, f"a path of at most {MAX_PATH} characters is served here\n".encode())
    assert headers[b"x-frame-options"] == b"DENY"
    assert _request(app, "/" + "9" * 5000, **host)[0] == 403  # the token first: a stranger learns nothing more


def _events(guard: Guard, path: str, body: list[bytes], **headers: str) -> list[str]:
    """What the guard did, in order: 'read' for each part of the body taken, then the answer's 'start'."""
    events: list[str] = []
    parts = list(body)

    async def receive() -> dict:
        events.append("read")
        return {"type": "http.request", "body": parts.pop(0), "more_body": bool(parts)}

    async def send(message: dict) -> None:
        events.append(message["type"].rpartition(".")[2])

    scope = {"type": "http", "path": path, "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(guard(scope, receive, send))
    return events


def test_an_answer_before_the_body_was_read_waits_for_it_and_drops_it(guard) -> None:
    """A refusal (or a page's 400) sent while the body was still arriving, and the connection closed with it
    unread, made the server reset the connection: the client saw "connection reset by peer" instead of the 403
    (a POST with a foreign Origin, 7 of 2,000 on a real server here; 0 of 2,000 with the body read first)."""
    app, token = guard
    host = {"host": f"127.0.0.1:{PORT}"}
    body = [b"x" * 10, b"y" * 10, b"z" * 10]
    refused = _events(app, f"/{token}/api/x", body, **host, origin="null", **{"content-length": "30"})
    assert refused == ["read", "read", "read", "start", "body"]
    assert _events(app, "/nope", body, **host, **{"content-length": "30"})[:4] == ["read", "read", "read", "start"]
    assert _events(app, f"/{token}/api/x", [b""], **host) == ["start", "body"]  # no body: nothing to wait for
    too_big = str(MAX_DRAIN + 1)  # a body declared beyond the bound is not waited for: the answer comes first
    assert _events(app, "/nope", body, **host, **{"content-length": too_big}) == ["start", "body"]


def test_the_server_listens_on_loopback_only() -> None:
    with bind_loopback() as sock:
        port = sock.getsockname()[1]
        assert listening_addresses(port) == ["0100007F"]  # 127.0.0.1, no other interface, no IPv6
        others = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
        for address in others - {"127.0.0.1"}:
            with pytest.raises(OSError):
                socket.create_connection((address, port), timeout=5).close()
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            bind_loopback(port)
    for port in (-1, 65536, 99999):   # OverflowError from bind(), a traceback under `pinbench view --port`
        with pytest.raises(OSError, match=rf"^cannot listen on 127\.0\.0\.1:{port}: a port is 0 to 65535 "
                                          r"\(0: a free one\)$"):
            bind_loopback(port)


def test_a_path_resolves_only_to_a_regular_file_inside_its_folder(tmp_path: Path) -> None:
    root, outside = tmp_path / "videos", tmp_path / "secret"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "a.mp4").write_bytes(b"video")
    (outside / "key.mp4").write_bytes(b"TOP-SECRET")
    (root / "inside.mp4").symlink_to(root / "sub" / "a.mp4")
    (root / "out.mp4").symlink_to(outside / "key.mp4")
    (root / "linked").symlink_to(outside)
    os.mkfifo(root / "fifo.mp4")
    assert resolve_inside(root, "sub/a.mp4") == (root / "sub" / "a.mp4").resolve()
    assert resolve_inside(root, "inside.mp4") == (root / "sub" / "a.mp4").resolve()  # a link that stays inside
    refused = {"../secret/key.mp4": "not a plain relative path", "sub/../../secret/key.mp4": "not a plain relative",
               str(outside / "key.mp4"): "not a plain relative", "out.mp4": "leads out of",
               "linked/key.mp4": "leads out of", "fifo.mp4": "not a regular file", "sub": "not a regular file",
               "nothing.mp4": "No such file", "sub\\..\\..\\secret\\key.mp4": "not a plain relative",
               "": "not a plain relative", "a\x00.mp4": "not a plain relative"}
    for relative, why in refused.items():
        with pytest.raises(PathRefused, match=why.replace("\\", "\\\\")):
            resolve_inside(root, relative)
