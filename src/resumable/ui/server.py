"""Serving the inspector: check the address, bind it, then hand the socket to uvicorn.

Binding before uvicorn starts lets a port in use be one clear line (exit 2) instead
of a server log, and lets ``--port 0`` pick a free port that is then announced.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Mapping

import uvicorn

from resumable.config import Config
from resumable.errors import UsageError
from resumable.ui.access import check_host
from resumable.ui.app import create_app


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or a :class:`UsageError` naming what is wrong."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise UsageError(f"--host {host} cannot be resolved ({exc.strerror})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {port} on {host} is in use: stop what listens there or pick another "
                "with --port"
            ) from None
        raise UsageError(f"cannot listen on {host}:{port} ({exc.strerror})") from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(
    config: Config,
    env: Mapping[str, str],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the inspector until interrupted (Ctrl-C or SIGTERM)."""
    check_host(host, token)
    sock = bind(host, port)
    app = create_app(config, env, token=token, hosts=(host,))
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, loop="asyncio", lifespan="on")
    )
    announce(url_of(sock, host))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
