"""Store URLs: what ``--from``/``--to`` and the embedding API accept, parsed for ``open_store``.

A store is named by a folder path or a URL: ``file:///path``, ``sqlite:///path/to.db``,
``postgresql://user@host/db`` (or ``postgres://``), ``redis://host:port/db``. A URL is
never echoed with its password.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from resumable.errors import UsageError

__all__ = ["parse_store_url", "redact"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_KINDS = {
    "file": "file",
    "sqlite": "sqlite",
    "postgresql": "postgres",
    "postgres": "postgres",
    "redis": "redis",
    "rediss": "redis",
}
_FORMS = (
    "a folder path, file:///path/to/folder, sqlite:///path/to/file.db, "
    "postgresql://user@host/db (or postgres://...), redis://host:port/db"
)


def parse_store_url(url: str) -> tuple[str, dict[str, str]]:
    """``(kind, options)`` for ``open_store(kind, **options)`` from a store URL or a folder path."""
    text = url.strip()
    scheme, colon, rest = text.partition(":")
    if not colon or not _SCHEME.fullmatch(scheme) or len(scheme) == 1:
        if not text:
            raise _bad_url(url, "is empty")
        return "file", {"path": text}  # no scheme (or a drive letter): a plain folder path
    kind = _KINDS.get(scheme.lower())
    if kind is None:
        if not rest.startswith("//"):
            return "file", {"path": text}  # "name:with-colon" is a folder, not a URL
        raise _bad_url(url, f"uses scheme {scheme!r}, which is not a store")
    if kind == "sqlite":
        if not rest.lstrip("/"):
            raise _bad_url(url, "names no database file")
        return kind, {"url": text}
    if not rest.startswith("//"):
        raise _bad_url(url, f"is not a {scheme}:// URL")
    if kind == "file":
        if not rest[2:]:
            raise _bad_url(url, "names no folder")
        return kind, {"path": rest[2:]}
    return kind, {"url": text}


def _bad_url(url: str, why: str) -> UsageError:
    shown = redact(url)
    return UsageError(f"store URL {shown!r} {why}; use {_FORMS}", url=shown)


def redact(url: str) -> str:
    """The URL without its password, fit for an error message."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return parts._replace(netloc=netloc).geturl()
    except ValueError:
        return url
