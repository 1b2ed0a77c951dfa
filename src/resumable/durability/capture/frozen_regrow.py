"""A frozenset of fewer items than a quarter of its table, made again the way it was: by growth.

Design note. A frozenset gets a table over four times as large as its items by growing into it:
the insertion that fills a smaller table to its threshold resizes it to four times its items,
re-inserting them in the order of that table's slots
(:mod:`resumable.durability.capture.set_rebuild` makes the others at once). Made from the
items alone, the smaller table's slots must be in an order that puts every item after those
whose slots it probes in the big one: a search among the items' collisions. Placeholders make it
a plan, and ``symmetric_difference`` lets a frozenset being made lose them:

1. ``ops.symmetric_difference(grown)`` makes a frozenset of the list ``grown``, then discards
   (or adds) each of ``ops`` in the order of ``ops``'s slots;
2. ``grown``: placeholders first (enough to grow the table to the wanted ``size`` slots, each
   in its own slot), then the items in dependency order, each landing in its own slot, up to one
   entry short of the resize threshold. The items probing a slot after their own are "late"
   (and so are those probing their slots): the others are in an order of slots where each comes
   after those it needs;
3. ``ops``: the placeholders, then one item ``q`` that none probes past, then the late items in
   dependency order (its table is checked to iterate so). Discarding the placeholders leaves
   dummies; adding ``q`` in its slot, kept empty, fills the table to its threshold: it is
   resized to four times the items (``size``), which are re-inserted in the order of their
   slots, each landing in its own; the late items are inserted after them, each in its own.

Placeholders are ints whose hash no item has, so no item's ``__eq__`` ever sees one. When a plan
does not fit (a size growth does not reach, too many late items, no ``ops`` iterating in the
order wanted) :func:`regrow` returns None.
"""

from __future__ import annotations

import heapq
from typing import Any

from resumable.durability.capture import set_table
from resumable.durability.capture.set_table import MIN_SIZE

__all__ = ["regrow"]

_CANDIDATES = 8  # last items tried


def regrow(
    items: tuple[Any, ...], hashes: list[int], targets: list[int], needs: list[set[int]], size: int
) -> frozenset[Any] | None:
    """The frozenset of ``items`` (in slots ``targets``) with ``size`` slots, or None: no plan."""
    late = _late(targets, needs)
    early = [i for i in _in_turn_by_slot(targets, needs) if i not in late]
    entries = set_table.threshold(size) - 1  # ``grown``'s length
    if set_table.grown_size(len(early)) != size or not _grows_to(size):
        return None
    spare = entries - (len(early) - 1)  # placeholders in ``grown``
    ops_size = _merged_twice(spare + 1 + len(late))
    if spare < set_table.threshold(size // 4) or ops_size < size:
        return None
    needed = {j for need in needs for j in need}
    ops_slot = [h & (ops_size - 1) for h in hashes]  # where each item goes in ``ops``
    first_late = min((ops_slot[i] for i in late), default=ops_size)
    lasts = [q for q in early if not needs[q] and q not in needed and ops_slot[q] < first_late]
    lasts.sort(key=ops_slot.__getitem__, reverse=True)
    avoid = {targets[i] for i in early} | {ops_slot[i] for i in late}
    for q in lasts[:_CANDIDATES]:
        below = min(size, ops_slot[q])  # placeholders go there in ``ops``, before ``q``
        free = [slot for slot in range(below) if slot not in avoid and slot != targets[q]]
        if len(free) < spare:
            break
        taken = set(hashes)
        placeholders = [_placeholder(slot, ops_size, taken) for slot in free[:spare]]
        keys = dict.fromkeys([*placeholders, *(items[i] for i in (q, *late))])
        ops = frozenset().union(keys, keys)  # resized to ``ops_size`` by the second
        if _in_order(list(ops), placeholders, items, q, late, needs):
            rest = [items[i] for i in early if i != q]
            return ops.symmetric_difference([*placeholders, *rest])
    return None


def _late(targets: list[int], needs: list[set[int]]) -> set[int]:
    """The items to insert after the resize: those probing a slot after their own before it,
    and those probing their slots. The others, in the order of their slots, each come after
    the items they need."""
    dependents: list[list[int]] = [[] for _ in targets]
    for i, need in enumerate(needs):
        for j in need:
            dependents[j].append(i)
    late = {i for i, need in enumerate(needs) if any(targets[j] > targets[i] for j in need)}
    stack = list(late)
    while stack:
        for k in dependents[stack.pop()]:
            if k not in late:
                late.add(k)
                stack.append(k)
    return late


def _in_order(
    ops: list[Any],
    placeholders: list[int],
    items: tuple[Any, ...],
    q: int,
    late: set[int],
    needs: list[set[int]],
) -> bool:
    """Whether ``ops`` iterates over the placeholders, then item ``q``, then the ``late`` items,
    each after those it needs."""
    head = len(placeholders)
    if set(map(id, ops[:head])) != set(map(id, placeholders)) or ops[head] is not items[q]:
        return False
    index = {id(items[i]): i for i in late}
    seen: set[int] = set()
    for item in ops[head + 1 :]:
        i = index[id(item)]
        if not needs[i] & late <= seen:
            return False
        seen.add(i)
    return True


def _in_turn_by_slot(targets: list[int], needs: list[set[int]]) -> list[int]:
    """The items in dependency order, each as early as its slot allows (lowest slot first)."""
    waiting = [len(need) for need in needs]
    unblocks: list[list[int]] = [[] for _ in targets]
    for i, need in enumerate(needs):
        for j in need:
            unblocks[j].append(i)
    ready = [(targets[i], i) for i, count in enumerate(waiting) if not count]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for j in unblocks[i]:
            waiting[j] -= 1
            if not waiting[j]:
                heapq.heappush(ready, (targets[j], j))
    return order


def _grows_to(size: int) -> bool:
    """Whether insertions into a new set resize it to ``size`` slots at some point."""
    grown = MIN_SIZE
    while grown < size:
        grown = set_table.grown_size(set_table.threshold(grown))
    return grown == size


def _merged_twice(count: int) -> int:
    """The size of ``frozenset().union(d, d)`` for a dict ``d`` of ``count`` keys."""
    first = set_table.merged_size(count)
    if 2 * count * 5 >= 3 * (first - 1):
        return set_table.table_size(4 * count)
    return first


def _placeholder(slot: int, size: int, taken: set[int]) -> int:
    """An int landing in ``slot`` of tables of ``size`` slots or fewer, whose hash no item has."""
    value = slot + size
    while value in taken:
        value += size
    taken.add(value)
    return value
