"""ReplayOrder's bookkeeping against a plain model: the seqs still to release, lowest first,
whatever order they are released in (the usual one is lowest first, in constant time)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from resumable.durability.replay.order import ReplayOrder


def _never_stuck(seq: int, waiting: list[int]) -> BaseException:
    return AssertionError(f"stuck at {seq}, {waiting}")


@given(
    seqs=st.sets(st.integers(1, 60), max_size=30),
    releases=st.lists(st.integers(0, 61), max_size=60),
)
def test_releases_in_any_order_leave_exactly_the_rest(seqs: set[int], releases: list[int]) -> None:
    order = ReplayOrder(seqs, _never_stuck)
    left = set(seqs)
    for seq in releases:
        order.drop(seq)  # a seq not (or no longer) there is ignored
        left.discard(seq)
        assert order.done == (not left)
        assert order.last == (max(left) if left else 0)
        lowest = min(left) if left else None
        assert all(order.next_is(s) == (s == lowest) for s in seqs)


def test_releasing_the_lowest_each_time_goes_through_a_long_statement() -> None:
    order = ReplayOrder(range(1, 200_001), _never_stuck)
    for seq in range(1, 200_001):
        assert order.next_is(seq)
        order.drop(seq)
    assert order.done
