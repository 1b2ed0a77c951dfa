"""A run's background tasks stop when cancelled, even if the store's driver turns the
cancellation into an error of its own (redis-py can: it drops the connection and raises a
connection error). Before, the lease renewal and the cancel watch took that error for a
passing outage and went on, and closing the run waited for them forever. Python 3.11's
``asyncio.wait_for`` (redis-py sends every command with it) can also swallow a
cancellation that arrives as the call it waits for ends: the call returns as usual."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any

import pytest

from resumable.durability.runs import control
from resumable.durability.runs.session import RunSession
from resumable.errors import StoreError


class SwallowingStore:
    """Every call waits; a cancellation inside it comes out as a ``StoreError``."""

    def __init__(self) -> None:
        self.calls = 0

    async def _wait(self) -> Any:
        self.calls += 1
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise StoreError("connection closed while reading the reply") from None

    async def renew(self, lease: Any, ttl: float) -> Any:
        return await self._wait()

    async def get_meta(self, run_id: str) -> Any:
        return await self._wait()


class ReturningStore(SwallowingStore):
    """Every call waits; a cancellation inside it is lost and the call returns as usual."""

    async def _wait(self) -> Any:
        self.calls += 1
        if self.calls == 1:  # the first only: a test that fails does not hang its teardown
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)
        else:
            await asyncio.sleep(3600)
        return SimpleNamespace(extra={})


async def _cancelled_inside_the_store(work: Any, store: SwallowingStore) -> None:
    task = asyncio.create_task(work)
    while not store.calls:
        await asyncio.sleep(0.001)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    assert task in done, "the task went on after its cancellation became a store error"
    assert task.cancelled()


@pytest.mark.parametrize("store_kind", [SwallowingStore, ReturningStore])
async def test_the_lease_renewal_stops_when_the_store_swallows_its_cancellation(
    store_kind: type[SwallowingStore],
) -> None:
    store = store_kind()
    session = SimpleNamespace(store=store, lease=None, manager=SimpleNamespace(), closed=False)
    await _cancelled_inside_the_store(RunSession._renew(session, 0.003), store)  # type: ignore[arg-type]


@pytest.mark.parametrize("store_kind", [SwallowingStore, ReturningStore])
async def test_the_cancel_watch_stops_when_the_store_swallows_its_cancellation(
    store_kind: type[SwallowingStore],
) -> None:
    store = store_kind()
    session = SimpleNamespace(store=store, run_id="r")
    await _cancelled_inside_the_store(control.watch_for_cancel(session, every=0.001), store)  # type: ignore[arg-type]
