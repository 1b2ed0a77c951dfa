"""A large namespace written as content-addressed pieces, so an unchanged value is stored once.

Design note. A namespace is one pickle, so that values shared between variables stay shared
after a resume. A large one is dumped by the same pickler as a sequence, one variable after the
other and then their order (:class:`Layout`): the pickler's memo lives across the dumps and the
unpickler's across the loads, so sharing survives exactly as in one pickle, and the stream is
the very bytes a resume reads. What changes is where the stream is cut: each variable's own
bytes start at a known offset, and a variable whose bytes are large is stored as blobs of at
most :data:`PIECE` bytes (``P`` + the bytes, named by their sha256 like every blob). A value
that did not change pickles to the same bytes, so its pieces are blobs the store already has
and the record carries 32 bytes per piece instead of the value. The variables that were large
at the last capture are dumped first, in the order they became large: a variable's bytes
depend on what the memo holds before it, so the stable ones go where nothing moves before them.

The record's data is then :data:`PIECES_CODEC`, the number of dumps, and the pieces in stream
order, each a digest or bytes kept inline (small variables, and the order). A capture under
:data:`SPLIT_AT` stays one pickle (the per-statement path is untouched); one over it is cut from
the next capture on, and the first is dumped again in pieces. Rejected: per-variable pickles
with their own memos (sharing between variables would be lost, or need a check of every object
against every other variable's), and cutting one stream at fixed offsets (a variable that grows
shifts every later byte, so nothing after it would be found again).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable, Mapping
from typing import Any, Final

from resumable.errors import RecordError

PIECES_CODEC: Final = b"C"
PIECE_BLOB: Final = b"P"
SPLIT_AT: Final = 64 * 1024
"""A namespace pickle at least this large is written in pieces from then on."""
LARGE: Final = 16 * 1024
"""A variable whose bytes are at least this large is stored as blobs."""
PIECE: Final = 256 * 1024
"""The largest blob a variable's bytes are cut into."""
_INLINE: Final = 0
_BLOB: Final = 1


class Layout:
    """Which variables a namespace's pickle is cut at, learned from the captures before."""

    def __init__(self) -> None:
        self.split = False
        self.large: dict[str, None] = {}  # names, in the order they became large

    def order(self, values: Mapping[str, Any]) -> list[str]:
        """The variables to dump alone: the large ones first, then every other one."""
        first = [name for name in self.large if name in values]
        taken = set(first)
        return first + [name for name in values if name not in taken]

    def learn(self, names: list[str], sizes: list[int], total: int) -> None:
        """Remember what this capture found large; go back to one pickle when none is."""
        self.large = {n: None for n in self.large if n in names}
        for name, size in zip(names, sizes, strict=True):
            if size >= LARGE:
                self.large.setdefault(name, None)
        self.split = total >= SPLIT_AT // 2


def tail_payload(
    names: list[str], values: Mapping[str, Any], lost: dict[str, str], process: dict[str, Any]
) -> tuple[Any, ...]:
    """What the last dump holds: the order the variables were dumped in and their own order."""
    return (names, list(values), lost, process)


def cut(stream: bytes, ends: list[int], sizes: list[int], encode: Callable[[bytes], str]) -> bytes:
    """The record data for a stream of ``len(ends)`` dumps; ``encode`` stores one piece.

    ``sizes`` are the variables' (every dump's but the last); the stream's codec tag goes with
    the first variable's bytes.
    """
    parts = [PIECES_CODEC, len(ends).to_bytes(4, "big")]
    pieces: list[bytes] = []
    start = 0
    inline = bytearray()
    for end, size in zip(ends, [*sizes, 0], strict=True):
        if size < LARGE:
            inline += stream[start:end]
        else:
            if inline:
                pieces.append(_inline(bytes(inline)))
                inline.clear()
            for at in range(start, end, PIECE):
                chunk = stream[at : min(at + PIECE, end)]
                pieces.append(_BLOB.to_bytes(1, "big") + bytes.fromhex(encode(chunk)))
        start = end
    if inline:
        pieces.append(_inline(bytes(inline)))
    parts.append(len(pieces).to_bytes(4, "big"))
    parts.extend(pieces)
    return b"".join(parts)


def _inline(data: bytes) -> bytes:
    return _INLINE.to_bytes(1, "big") + len(data).to_bytes(4, "big") + data


def piece_blob(chunk: bytes) -> tuple[str, bytes]:
    """A piece's blob encoding and its digest."""
    encoded = PIECE_BLOB + chunk
    return hashlib.sha256(encoded).hexdigest(), encoded


def assemble(data: bytes, read_piece: Callable[[str], bytes]) -> tuple[int, bytes]:
    """The number of dumps and the stream a :func:`cut` record stands for."""
    view = memoryview(data)
    try:
        dumps = int.from_bytes(view[1:5], "big")
        count = int.from_bytes(view[5:9], "big")
        at = 9
        parts: list[bytes | memoryview] = []
        for _ in range(count):
            kind = view[at]
            if kind == _INLINE:
                size = int.from_bytes(view[at + 1 : at + 5], "big")
                parts.append(view[at + 5 : at + 5 + size])
                at += 5 + size
            elif kind == _BLOB:
                parts.append(read_piece(view[at + 1 : at + 33].hex()))
                at += 33
            else:
                raise ValueError(f"piece kind {kind}")
        if at != len(view):
            raise ValueError("bytes after the last piece")
    except (IndexError, ValueError) as exc:
        raise RecordError(f"a namespace stored in pieces is malformed: {exc}") from exc
    return dumps, b"".join(parts)


def load_stream(unpickler: pickle.Unpickler, dumps: int) -> tuple[dict[str, Any], Any, Any]:
    """Load a cut stream's dumps: the variables in their order, then lost and process state."""
    alone = [pickle.Unpickler.load(unpickler) for _ in range(dumps - 1)]
    names, order, lost, process = pickle.Unpickler.load(unpickler)
    by_name = dict(zip(names, alone, strict=True))
    return {n: by_name[n] for n in order}, lost, process
