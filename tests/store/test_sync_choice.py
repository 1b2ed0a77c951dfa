"""A boundary's fsync goes the way (syncer thread or inline) its statements were faster."""

from __future__ import annotations

import pytest

from resumable.store.filesystem import sync_choice
from resumable.store.filesystem.sync_choice import PERIOD, PROBE, SyncChoice


class Clock:
    """``perf_counter_ns`` of a run whose statements take ``costs[way]`` after a boundary
    fsynced that way."""

    def __init__(self, background: int, inline: int) -> None:
        self.now = 0
        self.costs = {True: background, False: inline}

    def __call__(self) -> int:
        return self.now


def _boundaries(choice: SyncChoice, clock: Clock, count: int) -> list[bool]:
    ways = []
    for _ in range(count):
        way = choice.background()
        ways.append(way)
        clock.now += clock.costs[way]
    return ways


@pytest.mark.parametrize(("background", "inline"), [(300_000, 200_000), (200_000, 300_000)])
def test_the_faster_way_is_kept_until_the_next_measuring(
    monkeypatch: pytest.MonkeyPatch, background: int, inline: int
) -> None:
    clock = Clock(background, inline)
    monkeypatch.setattr(sync_choice.time, "perf_counter_ns", clock)
    choice = SyncChoice()

    ways = _boundaries(choice, clock, 2 * PERIOD)

    faster = background < inline
    for measured in (ways[: 2 * PROBE], ways[PERIOD : PERIOD + 2 * PROBE]):  # and again
        assert measured.count(True) == measured.count(False) == PROBE
        assert measured != [True, False] * PROBE  # mixed, not in turns
    assert ways[2 * PROBE : PERIOD] == [faster] * (PERIOD - 2 * PROBE)
    assert ways[PERIOD + 2 * PROBE :] == [faster] * (PERIOD - 2 * PROBE)


def test_a_machine_that_changes_is_followed_at_the_next_measuring(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock(background=100_000, inline=400_000)
    monkeypatch.setattr(sync_choice.time, "perf_counter_ns", clock)
    choice = SyncChoice()
    assert _boundaries(choice, clock, PERIOD)[-1] is True
    clock.costs = {True: 400_000, False: 100_000}  # e.g. the other core became busy
    assert _boundaries(choice, clock, PERIOD)[-1] is False


def test_slow_statements_now_and_then_do_not_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock(background=100_000, inline=200_000)
    monkeypatch.setattr(sync_choice.time, "perf_counter_ns", clock)
    choice = SyncChoice()
    ways = []
    for n in range(PERIOD):
        way = choice.background()
        ways.append(way)
        # a tool call of a second after a few of the background boundaries
        clock.now += 10**9 if way and n % 10 == 0 else clock.costs[way]
    assert ways[-1] is True  # the medians see past them


def test_statements_that_alternate_are_measured_both_ways(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a program whose statements alternate between two shapes: probing in turns would
    # time every statement of one shape after a boundary fsynced the same way
    clock = Clock(background=100_000, inline=100_000)
    monkeypatch.setattr(sync_choice.time, "perf_counter_ns", clock)
    ways = _boundaries(SyncChoice(), clock, 2 * PROBE)
    for shape in (0, 1):
        after = ways[shape::2]
        assert 0 < after.count(True) < len(after)
