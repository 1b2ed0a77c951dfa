"""Where the inspector reads runs from: the configured store, opened once, reopened after it failed.

A store that cannot be reached must not stop the server: each request that needs it
tries to open it again, and the page says why it could not.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from contextlib import AsyncExitStack

from resumable.config import Config
from resumable.durability.log.records import RecordCodec
from resumable.durability.runs.session import codec_for, store_for
from resumable.errors import StoreError
from resumable.store import to_read
from resumable.store.base import CheckpointStore


class RunSource:
    """The configured store and the codec that verifies its records, opened on demand."""

    def __init__(self, config: Config, env: Mapping[str, str]) -> None:
        self.config = config
        self.env = env
        self._lock = asyncio.Lock()
        self._stack: AsyncExitStack | None = None
        self._store: CheckpointStore | None = None
        self._codec: RecordCodec | None = None

    @property
    def description(self) -> str:
        """The store as a user configured it (no credentials beyond what the config holds)."""
        settings = self.config.durability
        if settings.store in ("file", "sqlite"):
            return f"{settings.store} store {self.config.resolve_path(settings.path)}"
        return f"{settings.store} store"

    async def store(self) -> CheckpointStore:
        async with self._lock:
            if self._store is None:
                stack = AsyncExitStack()
                try:
                    unopened = to_read(store_for(self.config.durability, self.config))
                    self._store = await stack.enter_async_context(unopened)
                except BaseException:
                    await stack.aclose()
                    raise
                self._stack = stack
            return self._store

    async def codec(self) -> RecordCodec:
        store = await self.store()
        if self._codec is None:
            self._codec = await codec_for(store, self.config.durability, self.env)
        return self._codec

    async def failed(self, error: BaseException) -> None:
        """Forget a store that failed, so the next request connects again."""
        if isinstance(error, StoreError | OSError):
            await self.close()

    async def close(self) -> None:
        async with self._lock:
            stack, self._stack, self._store, self._codec = self._stack, None, None, None
            if stack is not None:
                # it was failing already; the next request opens a new one
                with contextlib.suppress(StoreError, OSError):
                    await stack.aclose()
