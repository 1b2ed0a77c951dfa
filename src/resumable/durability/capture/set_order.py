"""A set restored from a checkpoint gets back the hash table it had, so it goes on as before.

pickle saves a set as its items and loads it with ``set(items)``: the same items but another
table (another size after deletions, other collisions, no dummies), so a resumed program would
iterate, pop and grow it unlike the one that never crashed. Here an exact set or frozenset is
pickled as the persistent id ``("t", frozen, items, mask, finger, actives, dummies)`` (its table,
read by :mod:`resumable.durability.capture.set_table`) and unpickled by
:mod:`resumable.durability.capture.set_rebuild`, which makes it again with that table. The result is
read back and compared: a set that cannot be made so (items hashed by identity hash otherwise in
a new process, a CPython whose sets are laid out otherwise) comes back as ``set(items)``, and
one ``RuntimeWarning`` per restore says where it is."""

from __future__ import annotations

import types
import warnings
from collections.abc import Mapping
from typing import Any, Final

from resumable.durability.capture import set_table
from resumable.durability.capture.set_rebuild import Unrepeatable, rebuild
from resumable.durability.capture.set_table import MIN_SIZE, UNSUPPORTED, Table

__all__ = ["SetCapture", "SetRestorer", "capture_set", "restore_set"]

_PID: Final = "t"
_EMPTY: Final = Table(MIN_SIZE - 1, 0, 0, 0)
_unsupported_warned = False


def capture_set(obj: set[Any] | frozenset[Any]) -> tuple[Any, ...] | None:
    """The persistent id of an exact set or frozenset, or None: pickle it as pickle does."""
    if UNSUPPORTED is not None:
        _warn_unsupported()
        return None
    table = set_table.read(obj)
    if table is None or table == _EMPTY:
        return None  # too large to copy; or as a new set, which pickle's own rebuild is
    items = tuple(obj)
    if len(items) != table.actives.bit_count():
        return None  # changed while it was read (a finalizer): pickle it as it is now
    frozen = type(obj) is frozenset
    return (_PID, frozen, items, table.mask, table.finger, table.actives, table.dummies)


def restore_set(frozen: bool, items: tuple[Any, ...], table: Table) -> tuple[Any, str | None]:
    """The set with ``table``, or ``set(items)`` and why it is not exact."""
    if UNSUPPORTED is not None:
        reason: str | None = UNSUPPORTED  # said by the restore's own warning
    else:
        try:
            rebuilt = rebuild(frozen, items, table)
            if _same(rebuilt, items, table):
                return rebuilt, None
            reason = "the rebuilt table differs from the saved one"
        except Unrepeatable as exc:
            reason = str(exc)
        except Exception as exc:  # an item's __hash__ or __eq__ failing fails set(items) too
            reason = f"rebuilding it failed: {exc!r}"
    return (frozenset(items) if frozen else set(items)), reason


class SetCapture:
    """Sets of one pickling: an alias gets the same persistent id (pickled once, memoized)."""

    def __init__(self) -> None:
        self._saved: dict[int, tuple[Any, Any]] = {}  # id -> (the set kept alive, its id or None)

    def pid(self, obj: set[Any] | frozenset[Any]) -> tuple[Any, ...] | None:
        """The persistent id of a set or frozenset, or None: pickle it as pickle does."""
        saved = self._saved.get(id(obj))
        if saved is None:
            saved = self._saved[id(obj)] = (obj, capture_set(obj))
        return saved[1]

    def clear(self) -> None:
        """Forget the sets of the pickling that ended."""
        self._saved.clear()


class SetRestorer:
    """Sets of one unpickling: each built once (aliases get the same object), the inexact named."""

    def __init__(self) -> None:
        self._built: dict[int, tuple[Any, Any]] = {}  # id(pid) -> (pid kept alive, the set)
        self._inexact: list[tuple[Any, str]] = []

    def load(self, pid: tuple[Any, ...]) -> Any:
        """The set a ``"t"`` persistent id describes."""
        hit = self._built.get(id(pid))
        if hit is not None:
            return hit[1]
        _, frozen, items, mask, finger, actives, dummies = pid
        obj, reason = restore_set(frozen, items, Table(mask, finger, actives, dummies))
        if reason is not None:
            self._inexact.append((obj, reason))
        self._built[id(pid)] = (pid, obj)
        return obj

    def warn(self, variables: Mapping[str, Any] | None) -> None:
        """One warning saying where the sets that did not get their table back are.

        ``variables``: the restored namespace, searched for them; None: an await result.
        """
        if not self._inexact:
            return
        count, reason = len(self._inexact), self._inexact[0][1]
        place = "an await result"
        if variables is not None:
            where = _where({id(obj) for obj, _ in self._inexact}, variables)
            named = "variable" if len(where) == 1 else "variables"
            place = f"{named} {', '.join(where)}" if where else "the restored namespace"
        what = "a set" if count == 1 else f"{count} sets"
        warnings.warn(
            f"{what} in {place} may iterate in another order than before the resume (same "
            f"items, another hash table): {reason}",
            RuntimeWarning,
            stacklevel=3,
        )
        self._inexact.clear()


def _same(rebuilt: Any, items: tuple[Any, ...], table: Table) -> bool:
    return set_table.read(rebuilt) == table and list(map(id, rebuilt)) == list(map(id, items))


# -- warnings -----------------------------------------------------------------------------------
def _warn_unsupported() -> None:
    global _unsupported_warned
    if not _unsupported_warned:
        _unsupported_warned = True
        warnings.warn(
            f"sets restored from a checkpoint may iterate in another order: {UNSUPPORTED}",
            RuntimeWarning,
            stacklevel=4,
        )


def _where(ids: set[int], variables: Mapping[str, Any]) -> list[str]:
    """The variables holding one of the sets ``ids`` names, directly or inside containers."""
    found: list[str] = []
    for name, value in variables.items():
        stack, seen, budget = [value], set(), 2000
        while stack and budget:
            budget -= 1
            obj = stack.pop()
            if id(obj) in ids:
                found.append(repr(name) if obj is value else f"{name!r} (inside it)")
                break
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, list | tuple | set | frozenset):
                stack.extend(obj)
            elif isinstance(obj, dict):
                stack.extend(obj.values())
            elif not isinstance(obj, type | types.ModuleType):
                attrs = getattr(obj, "__dict__", None)
                if isinstance(attrs, dict):
                    stack.extend(attrs.values())
    return found
