"""Who may look: loopback only, unless a token guards every request.

The inspector shows variables and prompts, which may hold secrets, so it listens on
a loopback address by default. Listening anywhere else needs ``--token``; with a
token, every request (pages, JSON, assets) must carry it as ``?token=T`` or
``Authorization: Bearer T``, else it gets 401. Without a token, a request must be
addressed to this machine by a loopback name (its ``Host`` header): a web page
elsewhere that rebinds its own domain name to 127.0.0.1 gets 400, not the runs.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import parse_qs

from starlette.datastructures import MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from resumable.errors import UsageError


def is_loopback(host: str) -> bool:
    if _name(host) == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def check_host(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token."""
    if token is not None and not token.strip():
        raise UsageError("--token is empty: give a secret that every request must carry")
    if not is_loopback(host) and token is None:
        raise UsageError(
            f"--host {host} is not a loopback address: anyone who can reach it would see "
            "every run's variables; add --token T (then every request needs it) or use "
            "--host 127.0.0.1"
        )


def request_token(scope: Scope) -> str | None:
    """The token a request carries, from its query string or its Authorization header."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("token"):
        return str(query["token"][-1])
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return credentials.strip()
    return None


def host_name(scope: Scope) -> str | None:
    """The host a request was addressed to (its ``Host`` header without the port)."""
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for name, value in headers:
        if name == b"host":
            host = value.decode("latin-1").strip()
            if host.startswith("["):  # [::1]:8000
                return host[1:].split("]", 1)[0]
            return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return None


def _name(host: str) -> str:
    """A host name as DNS compares it: any case, with or without the root's dot."""
    return host.strip().lower().removesuffix(".")


def answered_names(hosts: tuple[str, ...]) -> frozenset[str]:
    """The ``Host`` names answered when listening on ``hosts``: those, and ``localhost``
    beside a loopback address (both loopback addresses for ``localhost`` itself)."""
    names = {_name(h).strip("[]") for h in hosts} or {"127.0.0.1", "::1"}
    if any(is_loopback(h) for h in names):
        names.add("localhost")
    if "localhost" in {_name(h) for h in hosts}:
        names |= {"127.0.0.1", "::1"}
    return frozenset(names)


class HostGuard:
    """ASGI middleware: 400 for a request addressed to a name that is not this machine's.

    Exactly the names it listens on are answered, in any case (see :func:`answered_names`).
    """

    def __init__(self, app: ASGIApp, hosts: tuple[str, ...] = ()) -> None:
        self.app = app
        self._hosts = answered_names(hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = host_name(scope)
            if host is not None and _name(host) not in self._hosts:
                response = PlainTextResponse(
                    f"400: this inspector answers requests to 127.0.0.1 or localhost only, "
                    f"not to {host!r}\n",
                    status_code=400,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class TokenGuard:
    """ASGI middleware: 401 for any HTTP request without the right token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = request_token(scope)
            if given is None or not hmac.compare_digest(given.encode(), self._token):
                response = PlainTextResponse(
                    "401: this inspector needs its token: add ?token=T to the address, or "
                    "send Authorization: Bearer T\n",
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


POLICY = {
    # only the package's own script and stylesheet run; nothing is framed or sent away
    "Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    # a ?token= in the address never leaves in a Referer
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class Hardened:
    """ASGI middleware: the headers in :data:`POLICY` on every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_hardened(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in POLICY.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_hardened)
