"""Where a boundary's fsync runs: in the helper process or inline, whichever is faster here.

In the helper (:mod:`.background_fsync`) the fsync overlaps the next statement's start,
at the price of handing it over and reading the answer, of the helper's wake-up added to
the fsync, and of the work beside the fsync running slower on a machine with no core to
spare. Where the next statement's work before its first barrier is long the overlap pays;
where it is short, or both cores are busy, an inline ``fdatasync`` can be faster
(docs/benchmarks.md). So the store times the statements themselves, the time
from one boundary's append to the next, for :data:`PROBE` boundaries fsynced each way
(mixed in an order drawn for each measuring, so that a passing load, or a program whose
statements alternate, weighs on both alike), and writes the next boundaries the way whose
median was lower, until it measures again, :data:`PERIOD` boundaries later. A run whose
statements wait for tools and models far longer than an fsync may pick either way: the
difference is lost in its waits.

Either way a boundary is durable before anything the run does outside the process
(docs/durability.md): the choice moves only the wait, never what is waited for.
"""

from __future__ import annotations

import random
import time

__all__ = ["PERIOD", "PROBE", "SyncChoice"]

PROBE = 32
"""Boundaries measured each way."""
PERIOD = 1024
"""Boundaries from one measuring to the next."""


class SyncChoice:
    """Which way the next boundary's fsync goes, from how long the last ones' statements took."""

    def __init__(self) -> None:
        self._boundaries = 0
        self._probe: list[bool] = []
        self._times: dict[bool, list[int]] = {True: [], False: []}
        self._background = True
        """The choice since the last measuring (the helper until one was made)."""
        self._last: tuple[int, bool] | None = None
        """When the previous boundary (one being measured) was appended, and which way."""

    def background(self) -> bool:
        """Whether this boundary's fsync goes to the helper (each call is a boundary)."""
        now = time.perf_counter_ns()
        if self._last is not None:
            began, way = self._last
            self._times[way].append(now - began)
            self._last = None
        phase = self._boundaries % PERIOD
        self._boundaries += 1
        if phase == 0:
            self._probe = [True, False] * PROBE
            random.Random(self._boundaries).shuffle(self._probe)  # not the program's random
            self._times = {True: [], False: []}
        if phase < len(self._probe):
            way = self._probe[phase]
            self._last = (now, way)
            return way
        if phase == len(self._probe):
            self._background = self._faster()
        return self._background

    def _faster(self) -> bool:
        background, inline = self._times[True], self._times[False]
        if not background or not inline:
            return True
        import statistics  # once a measuring: a fresh run of a few statements never gets here

        return statistics.median(background) <= statistics.median(inline)
