"""What the kernel says a port listens on, for the tests of pages served on loopback only."""

from __future__ import annotations

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
