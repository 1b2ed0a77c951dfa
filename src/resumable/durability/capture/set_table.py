"""The hash table of a live set or frozenset, read from CPython's memory, and its probing rules.

A set iterates in the order of its table's slots, and ``pop``, ``add`` and a resize depend on
which slots hold an item, which hold the marker a deleted item leaves ("dummy"), the table's
size and where ``pop`` searches next (the "finger"). :func:`read` takes those from the
``PySetObject`` of ``Include/cpython/setobject.h`` (the same in 3.11, 3.12 and 3.13) with
ctypes, reading only. The probing rules below are those of ``Objects/setobject.c`` in the same
versions: they are what :mod:`resumable.durability.capture.set_rebuild` plans with.

:data:`UNSUPPORTED` says, once at import, why this interpreter's sets cannot be read that way
(another implementation, a free-threaded build, another layout), or is None.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import compress
from typing import Any, Final

MIN_SIZE: Final = 8
"""``PySet_MINSIZE``: a new or cleared set has this many slots."""
_LINEAR_PROBES: Final = 9
_PERTURB_SHIFT: Final = 5
_WORD: Final = (1 << 64) - 1
_STRING_AT: Final[Any] = getattr(ctypes, "_string_at", None)  # string_at without a Python frame
_LARGEST: Final = (1 << 31) // 16  # slots: _STRING_AT copies at most 2 GB
_NONZERO_TO_ONE: Final = b"0" + b"1" * 255
_FF_TO_ONE: Final = b"0" * 255 + b"1"
_FROM_DIGITS: Final = bytes.maketrans(b"01", b"\x00\x01")


class _SetObject(ctypes.Structure):
    """The head of ``PySetObject``; ``smalltable[8]`` (16-byte entries) and ``weakreflist`` follow."""

    _fields_ = (
        ("head", ctypes.c_char * object.__basicsize__),  # PyObject_HEAD
        ("fill", ctypes.c_ssize_t),
        ("used", ctypes.c_ssize_t),
        ("mask", ctypes.c_ssize_t),
        ("table", ctypes.c_void_p),
        ("hash", ctypes.c_ssize_t),
        ("finger", ctypes.c_ssize_t),
    )


@dataclass(frozen=True, slots=True)
class Table:
    """Where a set's items and dummies are: ``actives``/``dummies`` have bit ``i`` for slot ``i``."""

    mask: int
    finger: int
    actives: int
    dummies: int

    @property
    def fill(self) -> int:
        """Items and dummies: what CPython compares with the resize threshold."""
        return (self.actives | self.dummies).bit_count()


def read(obj: set[Any] | frozenset[Any]) -> Table | None:
    """The table of an exact set or frozenset, or None if it is over 2 GB (the caller checks the
    type and :data:`UNSUPPORTED`).

    No Python frame runs between reading where the table is and copying it, so no other thread
    can resize the set (and free that table) in between.
    """
    head = _SetObject.from_address(id(obj))
    fill, used, mask, finger = head.fill, head.used, head.mask, head.finger
    if mask >= _LARGEST:
        return None
    entries = _STRING_AT(head.table, (mask + 1) * 16)  # (key, hash) pairs of 8 bytes each
    taken = 0  # byte i: not 0 if slot i has a key (an item or the dummy)
    for byte in range(8):
        taken |= int.from_bytes(entries[byte::16], "little")
    dummies = 0
    if fill != used:
        marked = -1  # byte i: 0xff if slot i's hash is -1, which marks a dummy
        for byte in range(8, 16):
            marked &= int.from_bytes(entries[byte::16], "little")
        dummies = _bitmap(marked, mask + 1, _FF_TO_ONE)
    return Table(mask, finger, _bitmap(taken, mask + 1, _NONZERO_TO_ONE) ^ dummies, dummies)


def slots(bits: int) -> list[int]:
    """The slots a bitmap of :class:`Table` names, lowest first."""
    digits = format(bits, "b").encode()[::-1].translate(_FROM_DIGITS)
    return list(compress(range(len(digits)), digits))


def _bitmap(lanes: int, size: int, to_digit: bytes) -> int:
    """Bit i set where ``to_digit`` maps byte i of ``lanes`` to ``1``."""
    return int(lanes.to_bytes(size, "little")[::-1].translate(to_digit), 2)


# -- CPython's rules (Objects/setobject.c) ------------------------------------------------------
def probes(hash_: int, mask: int) -> Iterator[int]:
    """The slots a lookup or an insertion of ``hash_`` visits, in order (never ends)."""
    perturb = hash_ & _WORD
    i = perturb & mask
    while True:
        yield i
        if i + _LINEAR_PROBES <= mask:
            yield from range(i + 1, i + _LINEAR_PROBES + 1)
        perturb >>= _PERTURB_SHIFT
        i = (i * 5 + 1 + perturb) & mask


def table_size(minused: int) -> int:
    """The size ``set_table_resize`` picks: the smallest power of two above ``minused``."""
    size = MIN_SIZE
    while size <= minused:
        size <<= 1
    return size


def grown_size(used: int) -> int:
    """The size after an insertion filled the table up to :func:`threshold` with ``used`` items."""
    return table_size(used * 2 if used > 50000 else used * 4)


def threshold(size: int) -> int:
    """The fill at which an insertion into an empty slot makes a table of ``size`` resize."""
    return (3 * (size - 1) + 4) // 5


def merged_size(used: int) -> int:
    """The size of an empty set that ``update`` (or ``frozenset(a_set)``) gives ``used`` items."""
    return table_size(used * 2) if used * 5 >= (MIN_SIZE - 1) * 3 else MIN_SIZE


# -- does this interpreter lay sets out so? -----------------------------------------------------
def _unsupported() -> str | None:
    """Why sets cannot be read here, or None: they can."""
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return (
            f"{sys.implementation.name} {sys.version.split()[0]} is not CPython 3.11-3.13, "
            "whose set tables and probing rules this reads"
        )
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return "a free-threaded CPython build lays sets out differently"
    size = ctypes.sizeof(_SetObject) + MIN_SIZE * 16 + 8
    if ctypes.sizeof(ctypes.c_void_p) != 8 or {set.__basicsize__, frozenset.__basicsize__} != {
        size
    }:
        return "its set objects are not laid out as a 64-bit CPython 3.11-3.13 lays them out"
    if _STRING_AT is None:
        return "this ctypes has no _string_at"
    probe: set[int] = set()
    head = _SetObject.from_address(id(probe))
    smalltable = id(probe) + ctypes.sizeof(_SetObject)
    if (head.fill, head.used, head.mask, head.finger, head.table) != (0, 0, 7, 0, smalltable):
        return "an empty set does not read as an empty CPython set table"
    item = 1 << 40 | 3  # goes to slot 3
    probe.add(item)
    entry = struct.unpack("qq", _STRING_AT(smalltable + 3 * 16, 16))
    probe.discard(item)
    dummy, marker = struct.unpack("qq", _STRING_AT(smalltable + 3 * 16, 16))
    if entry != (id(item), hash(item)) or marker != -1 or dummy in (0, id(item)):
        return "a set's entries do not read as CPython's (key, hash) pairs"
    return None


UNSUPPORTED: Final = _unsupported()
"""Why a set's table cannot be read here, or None."""
