"""Foreign async iterators in a durable statement: steps journaled, then caught up.

A program's ``async for`` over a library's iterator journals each step as a foreign
await. Replay answers the steps taken before the crash from the log without touching the
fresh iterator, so before its first live step the iterator is advanced past them. The
count is the iterator's, not one loop's: an iterator kept across statements (a replay
window, see :mod:`resumable.durability.capture.live_frames`) is read by one ``async for`` after
another, and the first live step of any of them catches up with all of them.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Protocol, TypeVar

from resumable.durability.effects.tasks import outside_keys
from resumable.exec.hooks import DirectHook, is_program_code, is_program_generator

T = TypeVar("T")

_DIRECT = DirectHook()
_BEHIND: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()
"""Per foreign iterator: the steps replay answered that it has not made yet."""


def _behind_of(iterator: Any) -> list[int]:
    try:
        return _BEHIND.setdefault(iterator, [0])
    except TypeError:  # no weak reference to it: counted by its loop alone
        return [0]


class ReplayProbe(Protocol):
    def will_replay(self) -> bool:
        """True if the running task's next foreign await will be answered from the log."""
        ...


class JournalingHook(ReplayProbe, Protocol):
    """The durable hook an ``async for`` of program code goes through."""

    def await_(self, site: str, awaitable: Any) -> Any: ...


def journaled_iterator(
    hook: JournalingHook, site: str, iterable: AsyncIterable[T]
) -> AsyncIterator[T]:
    """What ``async for`` iterates in a durable statement: each step awaited through ``hook``."""
    proxy = _DIRECT.aiter(site, iterable)
    iterator = proxy._iterator  # type: ignore[attr-defined]
    if is_program_generator(iterator):
        # Program code: replay drives it for real, so it stands where it stood (its
        # own foreign awaits are journaled where they are).
        return proxy
    proxy._hook = hook  # type: ignore[attr-defined]
    if program_method(iterator, "__anext__"):
        return proxy  # each step's awaitable is judged as any other await
    return FastForward(hook, proxy, iterator)


def program_method(obj: Any, name: str) -> bool:
    """True if ``type(obj).name`` is a function the program itself defined."""
    method = getattr(type(obj), name, None)
    code = getattr(method, "__code__", None)
    return code is not None and is_program_code(code)


class FastForward(AsyncIterator[T]):
    """Steps of a foreign async iterator, journaled; after replay the iterator is advanced.

    The items of the steps replay answered are read again from the fresh iterator and
    dropped, so its first live step continues where the crashed run stood.
    """

    def __init__(
        self, recorder: ReplayProbe, proxy: AsyncIterator[T], iterator: AsyncIterator[T]
    ) -> None:
        self._recorder = recorder
        self._proxy = proxy
        self._iterator = iterator
        self._behind = _behind_of(iterator)

    def __aiter__(self) -> FastForward[T]:
        return self

    async def __anext__(self) -> T:
        behind = self._behind
        if self._recorder.will_replay():
            behind[0] += 1
        else:
            while behind[0]:
                behind[0] -= 1
                with outside_keys():
                    await self._iterator.__anext__()
        return await self._proxy.__anext__()
