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

A frozenset is made by ``union`` with dicts and lists, which insert in their order; inserted into
a clean table in dependency order (each item after the items in the slots it probes before its
own), every item lands in its slot. The table must have its final size before that, with no
resize in between (a resize re-inserts in the order of the old table's slots): a dict of a
quarter of the size does it at once, when there are that many items (:func:`_rebuild_frozenset`).
A frozenset of fewer items was grown into its table; placeholders, which it can lose only within
``symmetric_difference``, make it again (:mod:`resumable.durability.capture.frozen_regrow`), or a
smaller table of items chosen so that the resize keeps them in order. A frozenset with dummies,
left by ``difference``, is a copy of a larger one that lost entries: placeholders stand for
them (:func:`_rebuild_copied_frozenset`). Placeholders are ints whose hash (the int) no item has: an entry
is compared only when the hashes are equal, so no item's ``__eq__`` ever sees one. The plan holds
if every item hashes as it did when its table was read (an item hashed by identity does not,
in another process): :func:`rebuild` raises :class:`Unrepeatable` when a table cannot be planned,
and the caller compares the result with the table it wanted. Rejected: writing the table with
ctypes, which would have to keep reference counts and CPython's invariants by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from resumable.durability.capture import set_table
from resumable.durability.capture.frozen_regrow import regrow
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
    if table.finger:
        raise Unrepeatable("a frozenset whose pop finger moved is not one CPython makes")
    if table.dummies:
        return _rebuild_copied_frozenset(items, hashes, table, before)
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


def _rebuild_copied_frozenset(
    items: tuple[Any, ...], hashes: list[int], table: Table, before: list[list[int]]
) -> frozenset[Any]:
    """A frozenset with dummies, as ``difference`` leaves them: a copy made at once (of the items
    and, in the dummies' slots, placeholders) that then lost entries.

    ``ops.symmetric_difference(keys)`` makes a frozenset of the dict ``keys`` (resized at once
    for all of them, inserted in order: placeholders first, then the items in dependency order)
    and discards each of ``ops``, the placeholders, which leaves their slots dummies.
    """
    size, dummies = table.mask + 1, set_table.slots(table.dummies)
    if set_table.merged_size(len(items) + len(dummies)) != size:
        raise Unrepeatable("a frozenset with deleted entries not copied from a larger one")
    make = _Placeholders(hashes).make
    placeholders = [make(slot, size) for slot in dummies]
    marked = set(dummies)  # placeholders are there before any item: no item waits for them
    order, _ = _in_turn(
        set_table.slots(table.actives), [[s for s in slots if s not in marked] for slots in before]
    )
    keys = dict.fromkeys([*placeholders, *(items[i] for i in order)])
    return frozenset(placeholders).symmetric_difference(keys)


def _rebuild_frozenset(
    items: tuple[Any, ...],
    hashes: list[int],
    size: int,
    targets: list[int],
    before: list[list[int]],
) -> frozenset[Any]:
    """A frozenset without dummies of ``size`` slots with each item in its slot.

    ``union`` resizes an empty frozenset at once for all the keys of a dict (a quarter of
    ``size`` of them gives ``size`` slots), then inserts the dict's keys and the other
    arguments' items in order: in dependency order, each lands in its slot, with no resize in
    between when the frozenset holds at least that many items. One holding fewer was grown to
    ``size``: :func:`~resumable.durability.capture.frozen_regrow.regrow` makes it so, or else a
    smaller table is resized to ``size`` (:func:`_through_smaller`).
    """
    order, needs = _in_turn(targets, before)
    in_turn = [items[i] for i in order]
    quarter = max(5, size // 4)  # set_table.merged_size(quarter) == size
    if size == MIN_SIZE:  # at most 4 items: no resize
        return frozenset().union(in_turn)
    if quarter <= len(items):
        return frozenset().union(dict.fromkeys(in_turn[:quarter]), in_turn[quarter:])
    regrown = regrow(items, hashes, targets, needs, size)
    if regrown is not None:
        return regrown
    plan = next(_through_smaller(order, needs, hashes, targets, size), None)
    if plan is None:
        raise Unrepeatable("no way to make the saved frozenset again was found")
    *dicts, last = plan
    return frozenset().union(
        *(dict.fromkeys(items[i] for i in keys) for keys in dicts), [items[i] for i in last]
    )


def _through_smaller(
    order: list[int], needs: list[set[int]], hashes: list[int], targets: list[int], size: int
) -> Iterator[tuple[list[int], ...]]:
    """Ways to make a frozenset of fewer than ``size // 4`` items with ``size`` slots: ``union``
    arguments (all dicts but the last, a list; items by index), the first making a smaller table.

    When that table is resized to ``size``, its items are re-inserted in the order of its slots,
    so it must hold only items that come there after those they need (the items in the slots
    they probe first); the others come after the resize in dependency order. Either a second
    dict resizes it (``union`` resizes for the items there and all the dict's keys) or the
    insertion that fills it to its threshold does (as when the original grew).
    """
    n = len(order)
    for smaller in (MIN_SIZE << k for k in range((size // MIN_SIZE).bit_length() - 1)):
        fits = [u for u in range(1, n + 1) if _second_dict(u, n, smaller, size)]
        for placed in _placements(order, needs, hashes, targets, smaller, fits[-1] if fits else 0):
            if len(placed) >= fits[0]:
                placed = placed[: max(u for u in fits if u <= len(placed))]
                chosen = set(placed)
                in_turn = placed + [i for i in order if i not in chosen]
                m = _second_dict(len(placed), n, smaller, size)
                yield placed, in_turn[:m], in_turn[m:]
    smaller, count = size // 4, set_table.threshold(size // 4)
    if smaller >= MIN_SIZE and set_table.grown_size(count) == size and count <= n:
        first = 0 if smaller == MIN_SIZE else max(5, smaller // 4)
        for placed in _placements(order, needs, hashes, targets, smaller, count):
            if len(placed) == count:
                chosen = set(placed)
                yield placed[:first], placed[first:] + [i for i in order if i not in chosen]


def _second_dict(used: int, n: int, smaller: int, size: int) -> int:
    """How many keys a second dict needs to resize ``smaller`` slots holding ``used`` of the
    ``n`` items to ``size`` (the first dict, of ``used`` keys, having made it), or 0: none."""
    if set_table.merged_size(used) != smaller:
        return 0
    keys = min(n, size // 2 - 1 - used)
    if keys < 1 or used + keys < size // 4 or (used + keys) * 5 < 3 * (smaller - 1):
        return 0
    return keys


def _placements(
    order: list[int],
    needs: list[set[int]],
    hashes: list[int],
    targets: list[int],
    size: int,
    most: int,
) -> Iterator[list[int]]:
    """Items to insert, in this order, into a clean table of ``size`` slots (at most ``most``):
    each lands in a slot after those of the items it needs, which are all there. One list for
    each order tried (dependency order, then by target slot, then by target slot modulo
    ``size``): a list holds the items it can, repeating passes while one adds some."""
    if not most:
        return
    for tried in (
        order,
        sorted(order, key=targets.__getitem__),
        sorted(order, key=lambda i: (targets[i] & (size - 1), targets[i])),
    ):
        table = bytearray(size)
        placed: dict[int, int] = {}  # item -> its slot here
        while len(placed) < most:
            count = len(placed)
            for i in tried:
                if i in placed or not needs[i] <= placed.keys():
                    continue
                slot = next(s for s in set_table.probes(hashes[i], size - 1) if not table[s])
                if all(placed[j] < slot for j in needs[i]):
                    table[slot], placed[i] = 1, slot
                    if len(placed) == most:
                        break
            if len(placed) == count:
                break
        yield list(placed)
