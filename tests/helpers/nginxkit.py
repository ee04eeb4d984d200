"""nginx in front of a real server, for the e2e lane: where Debian's nginx is, and loopback ports that
parallel test workers (pytest -n) cannot take from each other."""

from __future__ import annotations

import os
import shutil
import socket

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)


def reserved_port() -> socket.socket:
    """A loopback port held for nginx: bound (not listening) with SO_REUSEPORT, so that nginx, listening
    with `reuseport`, binds it beside this socket, while no port-0 bind or outgoing connection of a test
    running in parallel can take it in between."""
    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    held.bind(("127.0.0.1", 0))
    return held


def free_port() -> int:
    """A loopback port free a moment ago, for a server that must be told its port (`serve --port N`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
