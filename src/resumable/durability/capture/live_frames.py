"""Objects that hold a suspended frame, as a checkpoint meets them.

A generator, an async generator or a coroutine object not yet run to its end holds a
frame that cannot be pickled; iterators built on one (``map``, ``zip``, ``enumerate``,
``filter``, ``itertools``), containers, closures and the attributes of an object holding
one hold it too. A checkpoint that reaches such a frame from the namespace stops at once
(:class:`LiveFrame`) and the boundary is written ``live``: the replay window stays open,
and a resume replays from the statement before the object was made, which makes it again
and drives it as the run did (see ``docs/durability.md``, Resume).

The pickler does the walk it already does, so finding a live frame costs nothing more
than the checkpoint the boundary takes anyway.

A generator, async generator or coroutine that has finished holds no frame: it is saved
as such and restored finished (``next`` raises ``StopIteration``, ``anext`` raises
``StopAsyncIteration``, awaiting the coroutine again raises ``RuntimeError``), under its
name. The ``_make_*`` helpers are named in pickles: renaming one breaks old checkpoints.
"""

from __future__ import annotations

import contextlib
import pickle
import types
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator
from typing import Any, Final

__all__ = ["FRAME_REDUCERS", "LiveFrame"]


class LiveFrame(pickle.PicklingError):
    """A value reachable from the namespace holds a suspended frame: the window stays open."""


def _finished_generator() -> Generator[Any, Any, None]:
    yield from ()


async def _finished_async_generator() -> AsyncGenerator[Any, None]:
    return
    yield


async def _finished_coroutine() -> None:
    return None


def _make_finished_generator(name: str, qualname: str) -> Generator[Any, Any, None]:
    made = _finished_generator()
    for _ in made:
        pass
    made.__name__, made.__qualname__ = name, qualname  # type: ignore[attr-defined]
    return made


def _make_finished_async_generator(name: str, qualname: str) -> AsyncGenerator[Any, None]:
    made = _finished_async_generator()
    with contextlib.suppress(StopAsyncIteration):
        made.asend(None).send(None)
    made.__name__, made.__qualname__ = name, qualname  # type: ignore[attr-defined]
    return made


def _make_finished_coroutine(name: str, qualname: str) -> Coroutine[Any, Any, None]:
    made = _finished_coroutine()
    with contextlib.suppress(StopIteration):
        made.send(None)
    made.__name__, made.__qualname__ = name, qualname  # type: ignore[attr-defined]
    return made


def _reducer(
    frame_of: Callable[[Any], Any], make: Callable[[str, str], Any], what: str
) -> Callable[[Any], tuple[Any, ...]]:
    def reduce(obj: Any) -> tuple[Any, ...]:
        if frame_of(obj) is not None:
            raise LiveFrame(f"{what} {obj.__qualname__} is suspended in the middle of its body")
        return (make, (obj.__name__, obj.__qualname__))

    return reduce


FRAME_REDUCERS: Final[dict[type, Callable[[Any], tuple[Any, ...]]]] = {
    types.GeneratorType: _reducer(lambda g: g.gi_frame, _make_finished_generator, "the generator"),
    types.AsyncGeneratorType: _reducer(
        lambda g: g.ag_frame, _make_finished_async_generator, "the async generator"
    ),
    types.CoroutineType: _reducer(lambda c: c.cr_frame, _make_finished_coroutine, "the coroutine"),
}
"""Reducers for exact types: a finished one as its name, a live one refused (LiveFrame)."""
