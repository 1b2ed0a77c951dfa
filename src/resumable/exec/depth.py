"""Recursion room for statements nested deeply, as deep as ``python`` itself goes.

``python SCRIPT`` parses and compiles from the top of an almost empty stack. Here a
statement is parsed, rewritten and compiled deep in the runtime's stack, and its tree is
converted and walked recursively (the rewrite takes two frames per nesting level), so a
statement ``python`` runs (a 900-term sum) would hit the recursion limit. While a long
statement is handled the limit is raised, and restored right after: parsing gets back
the frames the runtime uses (a statement parses exactly when ``python`` would parse it,
a deeper one is refused as too deep), walking and compiling the parsed tree get two
frames per character on top. A short statement cannot nest deeply and costs one ``len``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

__all__ = ["room_to_parse", "room_to_walk"]

_SHALLOW = 200
"""A statement this long nests at most this deep: handled as it comes, at no cost."""
_DEEPEST = 10_000
"""Deeper than any tree a supported Python's parser builds (each level takes a character)."""


def room_to_parse(source: str) -> contextlib.AbstractContextManager[None]:
    """While ``source`` is parsed, the recursion room ``python`` parses a script with."""
    if len(source) <= _SHALLOW:
        return contextlib.nullcontext()
    return _room(_frames_in_use())


def room_to_walk(source: str) -> contextlib.AbstractContextManager[None]:
    """While the parsed tree of ``source`` is walked and compiled, room for its depth."""
    if len(source) <= _SHALLOW:
        return contextlib.nullcontext()
    return _room(_frames_in_use() + 2 * min(len(source), _DEEPEST))


def _frames_in_use() -> int:
    depth, frame = 0, sys._getframe(1)
    while frame is not None:
        depth, frame = depth + 1, frame.f_back  # type: ignore[assignment]
    return depth


@contextlib.contextmanager
def _room(extra: int) -> Iterator[None]:
    """The recursion limit raised by ``extra`` for this block only, then restored."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + extra)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
