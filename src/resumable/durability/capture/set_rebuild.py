"""Making a set whose hash table is a given one, out of its items, with CPython's own operations.

Design note. A set's table (:mod:`resumable.durability.capture.set_table`) is the outcome of the
operations that made it; here a sequence of operations that CPython's algorithm
(``Objects/setobject.c``, 3.11 to 3.13) turns into a given table is planned and run, writing no
memory. For a set:

1. the finger: a table big enough to hold slot ``finger - 1`` whose one item is there, popped
   (``pop`` leaves the finger past it), then ``clear()``, which keeps it;
2. the size: ``update`` with a set of ``size // 4`` placeholders resizes an empty set to it in
   one step, each placeholder landing in the slot its hash names; when the table uses fewer
   slots than that, those placeholders are removed and more are added until an insertion
   resizes the table to the same size, keeping only placeholders in slots the table uses;
3. every slot that holds an item or a dummy gets a placeholder;
4. each item replaces its slot's placeholder: with that slot the only dummy, an insertion goes
   there (CPython reuses the last dummy it passed before an empty slot), and every slot probed
   before it is taken, so it does not stop earlier; then the dummies' placeholders are removed.

A frozenset cannot lose placeholders: it is made from its items alone, by ``union`` with dicts
(see :func:`_rebuild_frozenset`). Placeholders are ints whose hash (the int) no item has: an entry
is compared only when the hashes are equal, so no item's ``__eq__`` ever sees one. The plan holds
if every item hashes as it did when its table was read (an item hashed by identity does not,
in another process): :func:`rebuild` raises :class:`Unrepeatable` when a table cannot be planned,
and the caller compares the result with the table it wanted. Rejected: writing the table with
ctypes, which would have to keep reference counts and CPython's invariants by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from resumable.durability.capture import set_table
from resumable.durability.capture.set_table import MIN_SIZE, Table

__all__ = ["Unrepeatable", "rebuild"]


class Unrepeatable(Exception):
    """Why a set cannot be made with its table here."""


def rebuild(frozen: bool, items: tuple[Any, ...], table: Table) -> Any:
    """A set (a frozenset if ``frozen``) of ``items`` made so that it should have ``table``."""
    hashes = [hash(item) for item in items]
    size, targets = table.mask + 1, set_table.slots(table.actives)
    if len(targets) != len(items) or table.fill * 5 >= table.mask * 3:
        raise Unrepeatable("the saved table is not one CPython makes")
    taken = bytearray(size)
    for slot in (*targets, *set_table.slots(table.dummies)):
        taken[slot] = 1
    before = [  # also: every item is found where it is
        _probed_before(h, slot, table.mask, taken) for h, slot in zip(hashes, targets, strict=True)
    ]
    if not frozen:
        return _rebuild_set(items, hashes, table)
    if table.dummies or table.finger:
        raise Unrepeatable("a frozenset with deleted entries is not one CPython makes")
    return _rebuild_frozenset(items, hashes, size, targets, before)


class _Placeholders:
    """Ints to fill slots with: each lands in slot ``value % size``; no item has their hash."""

    def __init__(self, taken: Iterable[int]) -> None:
        self.taken = set(taken)
        self.count = 0

    def make(self, slot: int, size: int) -> int:
        while True:
            self.count += 1
            value = slot + size * self.count
            if value not in self.taken:
                self.taken.add(value)
                return value


def _probed_before(hash_: int, slot: int, mask: int, taken: bytearray) -> list[int]:
    """The slots a lookup of ``hash_`` visits before ``slot``; all must hold something."""
    seen: list[int] = []
    for count, i in enumerate(set_table.probes(hash_, mask)):
        if i == slot:
            return seen
        if not taken[i] or count > 10 * mask + 200:
            raise Unrepeatable("its items hash differently in this process (hashed by identity?)")
        seen.append(i)
    raise AssertionError("unreachable")  # pragma: no cover


def _rebuild_set(items: tuple[Any, ...], hashes: list[int], table: Table) -> set[Any]:
    size, dummies = table.mask + 1, set_table.slots(table.dummies)
    targets = set_table.slots(table.actives)
    used_slots = sorted((*targets, *dummies))
    make = _Placeholders(hashes).make
    rebuilt: set[Any] = set()
    if table.finger:
        _set_finger(rebuilt, table.finger, make)
    holders: dict[int, int] = {}  # slot -> the placeholder in it
    if size > MIN_SIZE:
        _resize(rebuilt, size, used_slots, holders, make)
    for slot in used_slots:
        if slot not in holders:
            holders[slot] = make(slot, size)
            rebuilt.add(holders[slot])
    for item, slot in zip(items, targets, strict=True):
        rebuilt.discard(holders.pop(slot))
        rebuilt.add(item)
    for slot in dummies:
        rebuilt.discard(holders.pop(slot))
    return rebuilt


def _set_finger(rebuilt: set[Any], finger: int, make: Any) -> None:
    """Leaves ``rebuilt`` empty and new but for where ``pop`` starts: after slot ``finger - 1``."""
    slot = finger - 1
    size = max(MIN_SIZE, 1 << slot.bit_length())
    if size > MIN_SIZE:
        others = (i for i in range(size) if i != slot)
        for placeholder in _update(
            rebuilt, size, [next(others) for _ in range(_count(size))], make
        ):
            rebuilt.discard(placeholder)
    rebuilt.add(make(slot, size))
    rebuilt.pop()
    rebuilt.clear()


def _resize(
    rebuilt: set[Any], size: int, used_slots: list[int], holders: dict[int, int], make: Any
) -> None:
    """Grows the new ``rebuilt`` to ``size`` slots holding placeholders on ``used_slots`` only."""
    count = _count(size)
    if len(used_slots) >= count:
        first = used_slots[:count]
        holders.update(zip(first, _update(rebuilt, size, first, make), strict=True))
        return
    kept = used_slots[: _kept_count(size, len(used_slots))]
    keep = set(kept)
    free = (i for i in range(size) if i not in keep)
    for placeholder in _update(rebuilt, size, [next(free) for _ in range(count)], make):
        rebuilt.discard(placeholder)
    for slot in kept[:-1]:
        holders[slot] = make(slot, size)
        rebuilt.add(holders[slot])
    for _ in range(set_table.threshold(size) - count - len(kept)):  # up to one short of resizing
        placeholder = make(next(free), size)
        rebuilt.add(placeholder)
        rebuilt.discard(placeholder)
    holders[kept[-1]] = make(kept[-1], size)
    rebuilt.add(holders[kept[-1]])  # resizes it to the same size, keeping the placeholders


def _update(rebuilt: set[Any], size: int, slots: list[int], make: Any) -> list[int]:
    """Resizes the new ``rebuilt`` to ``size`` at once, with placeholders in ``slots``."""
    placeholders = [make(slot, size) for slot in slots]
    rebuilt.update(set(placeholders))
    return placeholders


def _count(size: int) -> int:
    """How many placeholders ``update`` needs to resize an empty set to ``size`` (16 or more)."""
    return max(5, size // 4)


def _kept_count(size: int, most: int) -> int:
    """How many items an insertion resizing a table to ``size`` must leave in it."""
    for used in (max(1, size // 8), max(50001, size // 4)):
        if set_table.grown_size(used) == size and used <= most:
            return used
    raise Unrepeatable("the saved table keeps too few slots for its size")


def _in_turn(targets: list[int], before: list[list[int]]) -> tuple[list[int], list[set[int]]]:
    """The items (by index) in an order where each comes after those in the slots it probes
    before its own (inserted so into a clean table, each lands in its slot), and those items."""
    owner = {slot: i for i, slot in enumerate(targets)}
    needs = [{owner[slot] for slot in probed} for probed in before]
    waiting = [len(needed) for needed in needs]
    unblocks: list[list[int]] = [[] for _ in targets]
    for i, needed in enumerate(needs):
        for j in needed:
            unblocks[j].append(i)
    order = [i for i, count in enumerate(waiting) if not count]
    for i in order:  # grows while it is walked
        for j in unblocks[i]:
            waiting[j] -= 1
            if not waiting[j]:
                order.append(j)
    if len(order) != len(targets):
        raise Unrepeatable("its items probe each other's slots")
    return order, needs


def _rebuild_frozenset(
    items: tuple[Any, ...],
    hashes: list[int],
    size: int,
    targets: list[int],
    before: list[list[int]],
) -> frozenset[Any]:
    """A frozenset of ``size`` slots with each item in its slot, made without placeholders.

    ``union`` with a dict resizes the new frozenset once for all the dict's keys (counting those
    it holds already), then inserts them in the dict's order. When that cannot give ``size``
    slots at once, a smaller table is made first and resized to ``size`` by a second dict (which
    repeats its items) or by one item too many: it re-inserts the items in their order in the
    smaller table, so these are chosen so that each comes there after those it probes first.
    """
    order, needs = _in_turn(targets, before)
    n = len(items)
    if size == set_table.merged_size(n):
        return frozenset().union(dict.fromkeys(items[i] for i in order))
    for first in range(max(1, size // 4 - n), size // 2 - n):
        smaller = set_table.merged_size(first)
        if (first + n) * 5 >= 3 * (smaller - 1):  # the second dict resizes it to ``size``
            chosen = _first_in(order, needs, hashes, smaller, first)
            if chosen is not None:
                again = dict.fromkeys(items[i] for i in chosen + order)  # all: the chosen are in
                return frozenset().union(dict.fromkeys(items[i] for i in chosen), again)
            break
    smaller = size // 4
    count = set_table.threshold(smaller)
    if smaller >= MIN_SIZE and set_table.grown_size(count) == size:  # one item too many
        chosen = _first_in(order, needs, hashes, smaller, count)
        if chosen is not None:
            first = 0 if smaller == MIN_SIZE else max(5, smaller // 4)
            placed = set(chosen)
            rest = [items[i] for i in chosen[first:] + [i for i in order if i not in placed]]
            return frozenset().union(dict.fromkeys(items[i] for i in chosen[:first]), rest)
    raise Unrepeatable("no way to make the saved frozenset again was found")


def _first_in(
    order: list[int], needs: list[set[int]], hashes: list[int], size: int, count: int
) -> list[int] | None:
    """``count`` items to insert first, in this order, into a table of ``size`` slots: each
    lands after the items it needs there, so a resize re-inserts it after them."""
    table = bytearray(size)
    placed: dict[int, int] = {}
    chosen: list[int] = []
    for i in order:
        if not needs[i] <= placed.keys():
            continue  # needs an item left out
        slot = next(s for s in set_table.probes(hashes[i], size - 1) if not table[s])
        if any(placed[j] > slot for j in needs[i]):
            continue
        table[slot], placed[i] = 1, slot
        chosen.append(i)
        if len(chosen) == count:
            return chosen
    return None
