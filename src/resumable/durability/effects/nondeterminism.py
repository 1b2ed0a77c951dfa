"""The clock, random, uuid, urandom and secrets, as program code calls them: journaled.

Design note. :func:`install` replaces module attributes (``time.time``, ``random.randint``,
``os.urandom``, ``uuid.uuid4``, ``secrets.token_hex``...) with wrappers, and the ``now``/``utcnow``
class methods of ``datetime.datetime`` in the C type's own dict (the type cannot be assigned to
from Python; its dict is patched and the type's method cache invalidated, so the class stays the
same object: ``isinstance``, pickles and C callers see no difference). A wrapper looks at its
caller's frame: a call from code compiled under a program file name (see
:func:`resumable.exec.hooks.is_program_code`), made on the event loop's thread, goes through
:func:`resumable.durability.effects.steps.journaled` - recorded the first time, answered from the journal
on replay. Every other caller (asyncio's loop reads ``time.monotonic`` at every turn) gets the
original at the cost of one frame look-up.

The global ``random`` functions still draw on replay and then answer the recorded value, so the
generator's state advances as it did (its state is also checkpointed at every statement: a seeded
program goes on with the same sequence after a resume). ``choice``, ``choices``, ``sample`` and
``shuffle`` journal the positions they picked, not the items, so the items keep their identity.
``datetime.date.today()`` and ``datetime.datetime.today()`` read ``time.time`` from C and are
journaled as ``time.time``.

Limits: a name bound before :func:`install` (``from time import time`` in a library imported
earlier) keeps the original; calls from other threads are not journaled; ``random.Random`` and
``SystemRandom`` instances the program makes are not journaled (a ``Random`` is checkpointed with
its state like any variable).
"""

from __future__ import annotations

import asyncio
import ctypes
import datetime
import functools
import gc
import os
import random
import secrets
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from resumable.exec.hooks import is_program_code

__all__ = ["install", "installed", "random_generation", "uninstall"]

T = TypeVar("T")
Journal = Callable[[str, Callable[[], Any]], Any]

_TIME: Final = ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns")
# Module functions of the global Random whose result is a number or bytes: drawn, then journaled.
_RANDOM_VALUES: Final = (
    *("random", "uniform", "triangular", "randint", "randrange", "getrandbits", "randbytes"),
    *("gauss", "normalvariate", "lognormvariate", "expovariate", "vonmisesvariate"),
    *("gammavariate", "betavariate", "paretovariate", "weibullvariate"),
)
_SECRETS: Final = ("randbelow", "randbits", "token_bytes", "token_hex", "token_urlsafe")

_journal: Journal | None = None
_installs = 0
_random_calls = 0  # calls of the global Random's functions, from anyone, while installed
_saved: list[tuple[Any, str, Any, Any]] = []  # (owner, name, original, wrapper)
_running_loop: Final = asyncio._get_running_loop


def _caller_is_program(depth: int = 2) -> bool:
    """Whether the function that called the wrapper is program code on the loop's thread."""
    try:
        code = sys._getframe(depth).f_code
    except ValueError:  # called from C with no Python caller (a thread's first frame)
        return False
    return is_program_code(code) and _running_loop() is not None


def _record(name: str, thunk: Callable[[], T]) -> T:
    journal = _journal
    if journal is None:  # uninstalled while a wrapper was running
        return thunk()
    result: T = journal(name, thunk)
    return result


# -- wrappers ----------------------------------------------------------------------------------
def _plain(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A call whose result is journaled: on replay the original is not called."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _caller_is_program():
            return original(*args, **kwargs)
        return _record(name, lambda: original(*args, **kwargs))

    return _named(wrapper, original)


def _drawn(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """A draw from the global Random: made on replay too (the state advances), answered."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _random_calls
        _random_calls += 1
        value = original(*args, **kwargs)
        if not _caller_is_program():
            return value
        return _record(name, lambda: value)

    return _named(wrapper, original)


def _picked(name: str, original: Callable[..., Any], *, draws: bool) -> Callable[..., Any]:
    """``choice``/``choices``/``sample``: the positions are journaled, the items looked up."""

    def wrapper(population: Any, *args: Any, **kwargs: Any) -> Any:
        global _random_calls
        _random_calls += draws
        if not _caller_is_program() or not isinstance(population, Sequence):
            return original(population, *args, **kwargs)
        positions = range(len(population))
        if draws:
            picked = original(positions, *args, **kwargs)
            picked = _record(name, lambda: picked)
        else:
            picked = _record(name, lambda: original(positions, *args, **kwargs))
        if isinstance(picked, int):
            return population[picked]
        return [population[i] for i in picked]

    return _named(wrapper, original)


def _shuffle(name: str, original: Callable[[list[int]], None]) -> Callable[[Any], None]:
    def shuffle(x: Any) -> None:
        global _random_calls
        _random_calls += 1
        if not _caller_is_program():
            original(x)
            return
        order = list(range(len(x)))
        original(order)  # the same draws as shuffling ``x``: shuffle only looks at its length
        order = _record(name, lambda: order)
        items = [x[i] for i in order]
        for i, item in enumerate(items):
            x[i] = item

    return _named(shuffle, original)


def _counted(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """``random.seed``/``setstate``: not journaled (they return nothing), but they change state."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _random_calls
        _random_calls += 1
        return original(*args, **kwargs)

    return _named(wrapper, original)


def _clock_method(name: str, original: Any) -> Any:
    """A replacement for the ``now``/``utcnow`` class method descriptor of datetime.datetime."""

    def method(cls: type[datetime.datetime], *args: Any, **kwargs: Any) -> Any:
        bound = original.__get__(None, cls)
        if not _caller_is_program():
            return bound(*args, **kwargs)
        return _record(name, lambda: bound(*args, **kwargs))

    method.__name__ = method.__qualname__ = name.rpartition(".")[2]
    return classmethod(method)


def _named(wrapper: Callable[..., Any], original: Any) -> Callable[..., Any]:
    wrapper.__name__ = getattr(original, "__name__", wrapper.__name__)
    wrapper.__qualname__ = getattr(original, "__qualname__", wrapper.__qualname__)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


# -- install -----------------------------------------------------------------------------------
def _patches() -> list[tuple[Any, str, Callable[[Any], Any]]]:
    """(owner, attribute, how to wrap the original) for every journaled function."""
    found: list[tuple[Any, str, Callable[[Any], Any]]] = []

    def add(owner: Any, names: Sequence[str], make: Callable[[str, Any], Any]) -> None:
        for attr in names:
            found.append((owner, attr, functools.partial(make, f"{owner.__name__}.{attr}")))

    add(time, _TIME, _plain)
    add(random, _RANDOM_VALUES, _drawn)
    add(random, ("choice", "choices", "sample"), functools.partial(_picked, draws=True))
    add(random, ("shuffle",), _shuffle)
    add(random, ("seed", "setstate"), _counted)
    add(uuid, ("uuid1", "uuid4"), _plain)
    add(os, ("urandom",), _plain)
    add(secrets, _SECRETS, _plain)
    add(secrets, ("choice",), functools.partial(_picked, draws=False))
    if DATETIME_UNSUPPORTED is None:
        add(datetime.datetime, ("now", "utcnow"), _clock_method)
    return found


def _datetime_unsupported() -> str | None:
    """Why ``datetime.datetime``'s own dict cannot be patched here (CPython internals), or None."""
    version = f"{sys.implementation.name} {sys.version.split()[0]}"
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return f"{version}: patching a C type's dict was checked on CPython 3.11-3.13 only"
    referents = gc.get_referents(datetime.datetime.__dict__)
    own = referents[0] if len(referents) == 1 and isinstance(referents[0], dict) else {}
    if own.get("now") is not datetime.datetime.__dict__["now"]:
        return f"{version}: datetime.datetime's dict is not reachable as CPython 3.11-3.13's"
    if getattr(ctypes.pythonapi, "PyType_Modified", None) is None:
        return f"{version}: ctypes has no PyType_Modified"
    return None


DATETIME_UNSUPPORTED: Final = _datetime_unsupported()
"""Why ``datetime.datetime.now``/``utcnow`` cannot be journaled here, or None."""
_datetime_warned = False


def _set(owner: Any, name: str, value: Any) -> None:
    if isinstance(owner, type):
        type_dict: dict[str, Any] = gc.get_referents(owner.__dict__)[0]
        type_dict[name] = value
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(owner))
    else:
        setattr(owner, name, value)


def _get(owner: Any, name: str) -> Any:
    return owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)


def install(journal: Journal | None = None) -> None:
    """Journal the clock/random/uuid/urandom/secrets calls of program code (counted: nests).

    ``journal(name, thunk)`` records ``thunk()``'s value and answers it on replay; it defaults
    to :func:`resumable.durability.effects.steps.journaled`.
    """
    global _installs, _journal
    if journal is None:
        from resumable.durability.effects.steps import journaled

        journal = journaled
    _journal = journal
    _installs += 1
    if _installs > 1:
        return
    _warn_datetime_unsupported()
    for owner, name, wrap in _patches():
        original = _get(owner, name)
        wrapper = wrap(original)
        _set(owner, name, wrapper)
        _saved.append((owner, name, original, wrapper))


def _warn_datetime_unsupported() -> None:
    global _datetime_warned
    if DATETIME_UNSUPPORTED is not None and not _datetime_warned:
        _datetime_warned = True
        warnings.warn(
            "datetime.datetime.now() and utcnow() are not journaled, so a resume may see "
            f"another time from them (time.time() and the rest still are): {DATETIME_UNSUPPORTED}",
            RuntimeWarning,
            stacklevel=3,
        )


def uninstall() -> None:
    """Undo one :func:`install`; the last one puts the original functions back."""
    global _installs, _journal
    if _installs == 0:
        return
    _installs -= 1
    if _installs:
        return
    while _saved:
        owner, name, original, wrapper = _saved.pop()
        if _get(owner, name) is wrapper:  # leave alone what someone patched over ours
            _set(owner, name, original)
    _journal = None


def installed() -> bool:
    return _installs > 0


def random_generation() -> int | None:
    """A number that changes whenever the global Random may have; None when not installed.

    Lets a checkpoint skip ``random.getstate()`` (a 625-word copy) when nothing drew.
    """
    return _random_calls if _installs else None
