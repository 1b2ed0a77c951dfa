"""A private event loop on its own thread, where an embedded run talks to its store.

The embedding program is synchronous (smolagents calls its executor and model from
plain functions) and the program code it runs calls tools synchronously, yet every
store is async. So the run's store, lease and checkpoint manager live on one loop
in a daemon thread, and the caller's thread hands it coroutines and waits: a tool
call's record is durable before the tool's result is returned to the code.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """One event loop, run forever on a daemon thread until :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (from any other thread)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopThread.call() from its own thread would deadlock")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        """Stop the loop and wait for its thread; the loop is closed afterwards."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
