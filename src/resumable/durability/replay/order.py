"""Replay releases recorded results in the order they completed before the crash.

A result's record was written when the task that awaited it resumed, so its seq says when
that task went on. A replayed foreign await first takes the turn of the loop its await took
(none if it returned without suspending), then looks again at each turn until its seq is the
lowest not yet released, and goes on in that turn: concurrent tasks go on in the order they
did before the crash, as many in one turn of the loop as did then, and whatever they do to
shared memory happens in the same order. Waiting by looking again at each turn, rather than
being woken, is what keeps them in the same turns: a task woken by another's release would go
on one turn later than it did.

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
    """The seqs of the journal replay answers, still to be released, lowest first."""

    def __init__(
        self,
        seqs: Iterable[int],
        on_stuck: Callable[[int, list[int]], BaseException],
        quiet_seconds: float = _QUIET_SECONDS,
    ) -> None:
        self._pending = sorted(seqs)
        """Every seq to release, lowest first; those before ``_start`` are released."""
        self._start = 0
        self._released: set[int] = set()
        """Seqs at or after ``_start`` released out of order (dropped, answered at once):
        releasing the lowest moves ``_start`` on, so that no release moves the list."""
        self._waiting: list[int] = []
        """Seqs whose awaits look again at each turn (0: a statement waiting to start)."""
        self._on_stuck = on_stuck
        self._quiet = quiet_seconds
        self._progress = 0
        self._watch: asyncio.TimerHandle | None = None
        self._failed: BaseException | None = None

    @property
    def done(self) -> bool:
        return self._first() is None

    def next_is(self, seq: int) -> bool:
        """Whether ``seq`` is the next to be released."""
        return self._first() == seq

    @property
    def last(self) -> int:
        """The highest seq still to be released (0 when none is)."""
        pending, released = self._pending, self._released
        while len(pending) > self._start and pending[-1] in released:
            released.discard(pending.pop())
        return pending[-1] if len(pending) > self._start else 0

    def _first(self) -> int | None:
        """The lowest seq still to be released (None when none is)."""
        pending, released = self._pending, self._released
        start = self._start
        while start < len(pending) and released and pending[start] in released:
            released.discard(pending[start])
            start += 1
        self._start = start
        return pending[start] if start < len(pending) else None

    async def turn(self, seq: int, suspended: bool = True) -> None:
        """Release the result recorded at ``seq`` when it is next, as its await went on.

        The await took a turn of the loop (unless it returned without suspending its task),
        and went on in the first turn in which the results before it had been released.
        """
        if suspended:
            await asyncio.sleep(0)
        await self._look_until(lambda: self.next_is(seq), seq)
        self._remove(seq)

    async def until(self, seq: int) -> None:
        """Wait until every result recorded up to ``seq`` was released (their tasks went on in
        the turns that released them). Nothing to wait for costs no turn of the loop."""

        def released() -> bool:
            first = self._first()
            return first is None or first > seq

        await self._look_until(released, 0)

    def drop(self, seq: int) -> None:
        """A recorded result that is not released in order (re-run, or answered at once)."""
        self._remove(seq)

    def cancel(self) -> None:
        """Replay is over: whatever still waits is cancelled."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._failed = asyncio.CancelledError()

    async def _look_until(self, ready: Callable[[], bool], seq: int) -> None:
        if ready():
            return
        self._waiting.append(seq)
        self._watch_progress()
        try:
            while not ready():
                if self._failed is not None:
                    raise self._failed
                await asyncio.sleep(0)
        finally:
            self._waiting.remove(seq)

    def _remove(self, seq: int) -> None:
        pending = self._pending
        index = bisect.bisect_left(pending, seq, self._start)
        if index == len(pending) or pending[index] != seq or seq in self._released:
            return
        if index == self._start:
            self._start += 1  # the usual case: the lowest goes, in constant time
        else:
            self._released.add(seq)
        self._progress += 1

    def _watch_progress(self) -> None:
        if self._watch is None:
            self._watch = asyncio.get_running_loop().call_later(
                self._quiet, self._check_stuck, self._progress
            )

    def _check_stuck(self, progress: int) -> None:
        self._watch = None
        first = self._first()
        if first is None or not self._waiting:
            return
        if progress != self._progress:
            self._watch = asyncio.get_running_loop().call_later(
                self._quiet, self._check_stuck, self._progress
            )
            return
        self._failed = self._on_stuck(first, sorted(s for s in self._waiting if s))
