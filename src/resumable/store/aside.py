"""Appends a synchronous call makes: a connection of its own, on a thread of its own.

A network store's connections belong to the run's event loop, and a synchronous step
(which cannot await) blocks that loop: the records buffered before it are written through
this connection instead (PostgreSQL, Redis), on a thread that runs a loop of its own, while
the caller waits. It is opened at its first use. PostgreSQL's statements on it give up on
a lock after :data:`LOCK_TIMEOUT_MS` (an explicit transaction of the run's loop, which the
caller blocks, could hold one): the records then go with the run's next append.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["LOCK_TIMEOUT_MS", "AsideConnection"]

LOCK_TIMEOUT_MS = 2000
_T = TypeVar("_T")


class AsideConnection:
    """One connection, made by ``connect`` on the first :meth:`run`, used from any thread."""

    def __init__(
        self,
        connect: Callable[[], Coroutine[Any, Any, Any]],
        close: Callable[[Any], Coroutine[Any, Any, Any]],
    ) -> None:
        """``connect()`` makes the connection, ``close(connection)`` ends it."""
        self._connect = connect
        self._close = close
        self._conn: Any = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="resumable-store-aside", daemon=True
        )
        self._thread.start()

    def run(self, work: Callable[[Any], Awaitable[_T]]) -> _T:
        """``await work(connection)`` on the connection's thread; block until it is done."""
        return asyncio.run_coroutine_threadsafe(self._on_connection(work), self._loop).result()

    async def _on_connection(self, work: Callable[[Any], Awaitable[_T]]) -> _T:
        if self._conn is None:
            self._conn = await self._connect()
        try:
            return await work(self._conn)
        except BaseException:  # the connection may be broken: the next call makes another
            conn, self._conn = self._conn, None
            with contextlib.suppress(Exception):
                await self._close(conn)
            raise

    def close(self) -> None:
        """Close the connection (if it was opened) and end the thread."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            closing = asyncio.run_coroutine_threadsafe(self._close(conn), self._loop)
            with contextlib.suppress(Exception):  # the server is gone: nothing to close cleanly
                closing.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
