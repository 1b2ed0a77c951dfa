"""Replay releases recorded results in the order they completed before the crash.

Each replayed foreign await waits for its turn: the result recorded with the lowest
unreleased seq goes first, one result per turn of the event loop, after what was already
ready to run (as a result arriving from outside would). So concurrent tasks see their
results in the order they arrived before the crash, and whatever they do to shared
memory on the way happens in the same order.

A task that never reaches the await the log says comes next leaves the others waiting;
after a quiet spell with no progress the waiting awaits fail with
:class:`~resumable.errors.NonDeterminismError` naming both sites.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable, Iterable
from typing import Final

__all__ = ["ReplayOrder"]

_QUIET_SECONDS: Final = 10.0
"""How long replay waits for the next recorded await to be reached before it gives up."""


class ReplayOrder:
    """The seqs of a statement's journal still to be released, lowest first."""

    def __init__(
        self,
        seqs: Iterable[int],
        on_stuck: Callable[[int, list[int]], BaseException],
        quiet_seconds: float = _QUIET_SECONDS,
    ) -> None:
        self._pending = sorted(seqs)
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._drains: list[asyncio.Future[None]] = []
        self._on_stuck = on_stuck
        self._quiet = quiet_seconds
        self._progress = 0
        self._watch: asyncio.TimerHandle | None = None

    @property
    def done(self) -> bool:
        return not self._pending

    @property
    def last(self) -> int:
        """The highest seq still to be released (0 when none is)."""
        return self._pending[-1] if self._pending else 0

    async def until(self, seq: int) -> None:
        """Wait until every result recorded up to ``seq`` was released, and their tasks ran.

        Nothing to wait for costs no turn of the loop: a statement that started with no
        result arriving first must not let other tasks run before it.
        """
        if not (self._pending and self._pending[0] <= seq):
            return
        while self._pending and self._pending[0] <= seq:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drains.append(waiter)
            self._watch_progress()
            try:
                await waiter
            finally:
                if waiter in self._drains:
                    self._drains.remove(waiter)
        await asyncio.sleep(0)  # the task given the last result goes on first

    def drop(self, seq: int) -> None:
        """A recorded result that is not released in order (re-run, or answered at once)."""
        self._remove(seq)

    async def turn(self, seq: int, suspended: bool = True) -> None:
        """Wait until the result recorded at ``seq`` is the next to be released, release it.

        Like a result arriving from outside, it takes one turn of the loop: waking the task
        that waited for it, or, when it is next already, a turn of its own - unless the await
        it answers returned without suspending its task.
        """
        if self._pending and self._pending[0] != seq:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting[seq] = waiter
            self._watch_progress()
            try:
                await waiter  # woken the turn after the one before it: its arrival
            finally:
                self._waiting.pop(seq, None)
            self._remove(seq)
            return
        self._remove(seq)
        if suspended:
            await asyncio.sleep(0)

    def cancel(self) -> None:
        """The statement is over: nothing waits any more."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        for waiter in [*self._waiting.values(), *self._drains]:
            waiter.cancel()
        self._waiting.clear()
        self._drains.clear()

    def _remove(self, seq: int) -> None:
        index = bisect.bisect_left(self._pending, seq)
        if index < len(self._pending) and self._pending[index] == seq:
            del self._pending[index]
            self._progress += 1
            if index == 0 and self._pending:
                waiter = self._waiting.get(self._pending[0])
                if waiter is not None and not waiter.done():
                    waiter.set_result(None)
            if index == 0:
                for drain in self._drains:  # each looks at the new first seq again
                    if not drain.done():
                        drain.set_result(None)

    def _watch_progress(self) -> None:
        if self._watch is None:
            self._watch = asyncio.get_running_loop().call_later(
                self._quiet, self._check_stuck, self._progress
            )

    def _check_stuck(self, progress: int) -> None:
        self._watch = None
        if not self._pending or not (self._waiting or self._drains):
            return
        if progress != self._progress:
            self._watch = asyncio.get_running_loop().call_later(
                self._quiet, self._check_stuck, self._progress
            )
            return
        error = self._on_stuck(self._pending[0], sorted(self._waiting))
        for waiter in [*self._waiting.values(), *self._drains]:
            if not waiter.done():
                waiter.set_exception(error)
