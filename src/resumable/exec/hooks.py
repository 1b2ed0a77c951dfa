"""The await hook: the one object every rewritten ``await``, ``async for`` and ``async with`` calls.

:mod:`resumable.exec.rewrite` turns ``await x`` into ``await __resumable__.await_(site, x)``, and
makes ``async for``/``async with`` iterate and enter proxies built by ``aiter``/``with_``. A
durable hook only implements :meth:`HookBase.await_`: the proxies send the implicit awaits of
those statements through it under derived sites (``SITE/next``, ``SITE/enter``, ``SITE/exit``).

The proxies follow the interpreter's protocol exactly (special methods looked up on the type,
``__aiter__`` called once, ``__aexit__`` looked up before ``__aenter__`` is called) and raise
its ``TypeError`` messages, as CPython 3.11 words them, so a program sees the same errors with
or without the hook.

The rewrite also starts every function the program defines with ``__resumable__.entered()``:
:data:`program_cursor` then says whether program code ran while a foreign await was in flight
(its own task, and the tasks it spawned, mark one flag).
"""

from __future__ import annotations

import contextvars
import inspect
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import CodeType, TracebackType
from typing import Any, Final, Generic, Protocol, TypeVar

__all__ = [
    "ENTER",
    "EXIT",
    "HOOK_NAME",
    "NEXT",
    "AwaitHook",
    "DirectHook",
    "HookBase",
    "ProgramCursor",
    "ProgramRan",
    "is_program_code",
    "is_program_generator",
    "program_cursor",
    "register_program_file",
]

T = TypeVar("T")

HOOK_NAME: Final = "__resumable__"
"""The global name under which rewritten code finds its hook."""

NEXT: Final = "next"
ENTER: Final = "enter"
EXIT: Final = "exit"

_HEAPTYPE: Final = 1 << 9  # Py_TPFLAGS_HEAPTYPE

_PROGRAM_FILES: set[str] = set()


class ProgramRan(Protocol):
    """What program code marks when it starts."""

    ran: bool


class ProgramCursor(Protocol):
    """The running task's place in the program (the durability layer's task cursor)."""

    flag: ProgramRan
    """What a function the program defined marks when it starts running in this task: the
    foreign await in flight around it, if any (shared by the tasks spawned inside it)."""

    flight: str | None
    """The full key of that foreign await (its idempotency key), if any."""


program_cursor: contextvars.ContextVar[ProgramCursor | None] = contextvars.ContextVar(
    "resumable_cursor", default=None
)
"""The running task's cursor, set by the durability layer (None: no durable statement)."""


def register_program_file(filename: str) -> None:
    """Note that code compiled under ``filename`` is the program's (its awaits are hooked)."""
    _PROGRAM_FILES.add(filename)


def is_program_code(code: CodeType) -> bool:
    """True for code compiled from the program (a response or a script), not a library."""
    return code.co_filename in _PROGRAM_FILES


def is_program_generator(obj: object) -> bool:
    """True for an async generator the program defined: its own awaits go through the hook."""
    code = getattr(obj, "ag_code", None)
    return code is not None and code.co_filename in _PROGRAM_FILES


class AwaitHook(Protocol):
    """What rewritten code calls; the durability layer journals every ``await_``."""

    def await_(self, site: str, awaitable: Awaitable[T]) -> Awaitable[T]: ...

    def aiter(self, site: str, iterable: AsyncIterable[T]) -> AsyncIterator[T]: ...

    def with_(
        self, site: str, manager: AbstractAsyncContextManager[T]
    ) -> AbstractAsyncContextManager[T]: ...


class HookBase(ABC):
    """Builds ``aiter`` and ``with_`` on ``await_``, so a hook has one method to get right."""

    __slots__ = ()

    @abstractmethod
    def await_(self, site: str, awaitable: Awaitable[T]) -> Awaitable[T]:
        """What the program awaits instead of ``awaitable`` (``site`` says which await it is).

        A plain function, so an await the hook lets through costs no frame: returning
        ``awaitable`` itself keeps a program recursing through ``await f(n - 1)`` as deep as
        it goes without the hook.
        """

    def aiter(self, site: str, iterable: AsyncIterable[T]) -> AsyncIterator[T]:
        """Call ``__aiter__`` now (as ``async for`` does); each step awaits ``SITE/next``."""
        return _HookedIterator(self, site, iterable)

    def with_(
        self, site: str, manager: AbstractAsyncContextManager[T]
    ) -> AbstractAsyncContextManager[T]:
        """Look up the manager's methods now; entering and exiting await ``SITE/enter|exit``."""
        return _HookedContext(self, site, manager)  # type: ignore[return-value]

    def entered(self) -> None:
        """A function the program defined starts running (the rewrite calls this first)."""
        cursor = program_cursor.get()
        if cursor is not None:
            cursor.flag.ran = True


class DirectHook(HookBase):
    """The passthrough hook used when durability is off."""

    __slots__ = ()

    def await_(self, site: str, awaitable: Awaitable[T]) -> Awaitable[T]:
        return awaitable


class _HookedIterator(Generic[T]):
    """What ``async for`` iterates: the program's iterator, each step awaited through the hook."""

    __slots__ = ("_hook", "_iterator", "_site")

    def __init__(self, hook: HookBase, site: str, iterable: AsyncIterable[T]) -> None:
        make_iterator = _special(iterable, "__aiter__")
        if make_iterator is None:
            raise TypeError(
                f"'async for' requires an object with __aiter__ method, got {_type_name(iterable)}"
            )
        iterator = make_iterator()
        if _special(iterator, "__anext__") is None:
            raise TypeError(
                "'async for' received an object from __aiter__ that does not implement "
                f"__anext__: {_type_name(iterator)}"
            )
        self._hook = hook
        self._iterator: AsyncIterator[T] = iterator
        self._site = f"{site}/{NEXT}"

    def __aiter__(self) -> _HookedIterator[T]:
        return self

    def __anext__(self) -> Awaitable[T]:
        step = _special(self._iterator, "__anext__")
        if step is None:
            raise TypeError(
                "'async for' requires an iterator with __anext__ method, got "
                f"{_type_name(self._iterator)}"
            )
        awaitable = step()
        if not inspect.isawaitable(awaitable):
            cause = TypeError(f"object {_type_name(awaitable)} can't be used in 'await' expression")
            raise TypeError(
                f"'async for' received an invalid object from __anext__: {_type_name(awaitable)}"
            ) from cause
        return self._hook.await_(self._site, awaitable)


class _HookedContext(Generic[T]):
    """What ``async with`` enters: the program's manager, enter and exit awaited through the hook."""

    __slots__ = ("_enter", "_exit", "_hook", "_site")

    def __init__(self, hook: HookBase, site: str, manager: AbstractAsyncContextManager[T]) -> None:
        enter = _special(manager, "__aenter__")
        if enter is None:
            raise TypeError(
                f"'{_type_name(manager, 200)}' object does not support the asynchronous "
                "context manager protocol"
            )
        exit_ = _special(manager, "__aexit__")
        if exit_ is None:
            raise TypeError(
                f"'{_type_name(manager, 200)}' object does not support the asynchronous "
                "context manager protocol (missed __aexit__ method)"
            )
        self._hook = hook
        self._site = site
        self._enter: Callable[[], Any] = enter
        self._exit: Callable[..., Any] = exit_

    def __aenter__(self) -> Awaitable[T]:
        awaitable = _checked(self._enter(), "__aenter__")
        return self._hook.await_(f"{self._site}/{ENTER}", awaitable)

    def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Awaitable[bool | None]:
        awaitable = _checked(self._exit(exc_type, exc, tb), "__aexit__")
        return self._hook.await_(f"{self._site}/{EXIT}", awaitable)


def _checked(result: Any, method: str) -> Awaitable[Any]:
    if not inspect.isawaitable(result):
        raise TypeError(
            f"'async with' received an object from {method} that does not implement "
            f"__await__: {_type_name(result)}"
        )
    return result


def _special(obj: Any, name: str) -> Callable[..., Any] | None:
    """Look up a special method the way the interpreter does: on the type, bound to ``obj``."""
    cls = type(obj)
    for klass in cls.__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            bind = getattr(type(attr), "__get__", None)
            bound: Callable[..., Any] = attr if bind is None else bind(attr, obj, cls)
            return bound
    return None


def _type_name(obj: Any, limit: int = 100) -> str:
    """The type's C-level ``tp_name``, which the interpreter's messages use."""
    cls = type(obj)
    if cls.__flags__ & _HEAPTYPE or cls.__module__ == "builtins":
        name = cls.__name__
    else:
        name = f"{cls.__module__}.{cls.__qualname__}"
    return name[:limit]
