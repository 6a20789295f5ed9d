"""What the kernel says a port listens on, for the tests of pages served on loopback only; a port nothing listens
on, for the tests of a network that fails."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def listening_addresses(port: int) -> list[str]:
    """Local addresses with a socket listening on ``port``, as /proc/net/tcp{,6} write them (127.0.0.1: 0100007F)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, _remote, state = line.split()[1:4]
            address, hex_port = local.split(":")
            if int(hex_port, 16) == port and state == "0A":  # LISTEN
                found.append(address)
    return found


@contextmanager
def closed_port() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` that refuses connections while the block runs: PORT stays bound, not listening. A
    port let go once chosen could be bound meanwhile by another test's server (pytest -n), which then answered."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
