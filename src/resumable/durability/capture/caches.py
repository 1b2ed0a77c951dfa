"""``functools.lru_cache`` / ``functools.cache`` of program functions, checkpointed with their entries.

The C wrapper has no API that reads its entries, and writing one back would run the function.
So, to save, the entries are read through the garbage collector's view of the wrapper
(``gc.get_referents``: its traversal visits each entry's key and result, least recently used
first, then the cache dict; the same on CPython 3.11 to 3.13, and checked against the dict on
every read), each key taken apart into the arguments that make it again. To restore, a new
C wrapper (the same type, ``cache_info``, ``cache_clear``, ``cache_parameters``, LRU order
and speed) is built around a ``functools.partial`` whose target is switched: while the
entries are put back, the calls that put them back get the saved results (each call a miss,
as it was), extra misses (calls that raised, or entries evicted) and hits are counted by
calls that raise or hit; then the partial is pointed at the program's function. A partial
adds no Python frame, so tracebacks are those of the original.

Rejected: a pure-Python stand-in put in place of ``lru_cache`` when the program applies it
(another type, a frame of its own in every traceback, slower), and saving only the wrapped
function (entries recomputed after a resume: their steps booked twice).

A result or key that cannot be pickled leaves the entry out (computed again after a resume,
as before this existed), with a warning naming the function.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import warnings
from typing import Any, Final

from resumable.durability.capture.lost import CheckpointWarning

LRU_CACHE: Final = type(functools.lru_cache(maxsize=None)(lambda: None))

Entry = tuple[tuple[Any, ...], dict[str, Any], Any]
"""The positional and keyword arguments of a call, and the result it cached."""


_CHECKING: set[int] = set()
"""The wrappers whose entries are being tried: one met again inside them is not tried again."""


class _Skip(Exception):
    """Raised by the placeholder target: the call counts a miss and caches nothing."""


def _never(*_: Any, **__: Any) -> Any:
    raise _Skip


def _cache_dict(wrapper: Any) -> dict[Any, Any] | None:
    own = wrapper.__dict__
    dicts = [r for r in gc.get_referents(wrapper) if type(r) is dict and r is not own]
    return dicts[0] if len(dicts) == 1 else None


def _find_kwd_mark() -> object:
    probe = functools.lru_cache(maxsize=None)(lambda **_: None)
    probe(x=1)
    (key,) = _cache_dict(probe) or {}
    return key[0]


_KWD_MARK: Final = _find_kwd_mark()


def _raw_entries(wrapper: Any, maxsize: int | None) -> list[tuple[Any, Any]] | None:
    """(key, result) pairs, least recently used first; None if the wrapper cannot be read."""
    cache = _cache_dict(wrapper)
    if cache is None:
        return None
    if maxsize is None:
        return list(cache.items())
    if not cache:
        return []
    link_type = type(next(iter(cache.values())))
    referents = gc.get_referents(wrapper)
    end = next(i for i, r in enumerate(referents) if r is cache)
    pairs = [
        (referents[i - 2], referents[i - 1])
        for i in range(2, end)
        if referents[i] is link_type and type(referents[i - 2]) is not link_type
    ]
    if len(pairs) != len(cache) or any(cache.get(k, _Skip) is _Skip for k, _ in pairs):
        return None
    return pairs


def _arguments(key: Any, typed: bool) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call ``(args, kwargs)`` whose cache key is ``key`` (as the C wrapper makes keys)."""
    if type(key) is not tuple:  # one str or int argument, untyped: the key is the argument
        return (key,), {}
    items = list(key)
    mark = next((i for i, item in enumerate(items) if item is _KWD_MARK), None)
    if mark is None:
        return tuple(items[: len(items) // 2] if typed else items), {}
    rest = items[mark + 1 :]
    count = (len(rest) - mark) // 3 if typed else len(rest) // 2
    pairs = rest[: 2 * count]
    return tuple(items[:mark]), dict(zip(pairs[::2], pairs[1::2], strict=True))


def _picklable(pickler: Any, value: Any) -> bool:
    """Whether ``value`` pickles with ``pickler`` (tried on a scratch one of its namespace)."""
    scratch = type(pickler)(pickler.owner, io.BytesIO())
    scratch.ns, scratch.pids, scratch.by_name = pickler.ns, pickler.pids, pickler.by_name
    try:
        scratch.dump(value)
    except Exception:
        return False
    return True


_ATOMS: Final = frozenset({type(None), bool, int, float, complex, str, bytes})


def _plain(entry: Entry) -> bool:
    """Arguments and result are atoms or tuples of atoms: they pickle, no need to try."""
    args, kwargs, result = entry
    values = [*args, *kwargs.values(), result]
    return all(
        type(v) in _ATOMS or (type(v) is tuple and all(type(i) in _ATOMS for i in v))
        for v in values
    )


def reduce_cache(wrapper: Any, pickler: Any) -> tuple[Any, ...]:
    """The reduce of a program function's cache wrapper, for ``pickler``: entries and counters
    kept."""
    params = wrapper.cache_parameters()
    maxsize, typed = params["maxsize"], params["typed"]
    info = wrapper.cache_info()
    raw = _raw_entries(wrapper, maxsize)
    name = getattr(wrapper, "__qualname__", "?")
    entries: list[Entry] = []
    if raw is None:
        _warn(f"the entries of the cache of {name}() cannot be read")
    else:
        entries = [(*_arguments(key, typed), result) for key, result in raw]
        if entries and id(wrapper) not in _CHECKING:  # not already checked further out
            _CHECKING.add(id(wrapper))
            try:
                others = [entry for entry in entries if not _plain(entry)]
                if others and not _picklable(pickler, others):
                    kept = [
                        entry for entry in entries if _plain(entry) or _picklable(pickler, entry)
                    ]
                    left = len(entries) - len(kept)
                    _warn(f"{left} entries of the cache of {name}() cannot be pickled")
                    entries = kept
            finally:
                _CHECKING.discard(id(wrapper))
    attrs = {k: v for k, v in wrapper.__dict__.items() if k != "cache_parameters"}
    state = (entries, info.hits, info.misses, attrs)
    return (make_cache, (maxsize, typed), state, None, None, fill_cache)


def _warn(what: str) -> None:
    warnings.warn(
        f"{what}: they will be computed again after a resume", CheckpointWarning, stacklevel=2
    )


# -- helpers named in pickles (renaming one breaks old checkpoints) ---------------------------
def make_lru_cache(func: Any, maxsize: int | None, typed: bool) -> Any:
    """The wrapper as checkpoints before entries were kept name it (``pickling._make_lru_cache``)."""
    return functools.lru_cache(maxsize=maxsize, typed=typed)(func)


def make_cache(maxsize: int | None, typed: bool) -> Any:
    """An empty cache wrapper whose target is a partial, switched by :func:`fill_cache`."""
    return functools.lru_cache(maxsize=maxsize, typed=typed)(functools.partial(_never))


def fill_cache(wrapper: Any, state: tuple[list[Entry], int, int, dict[str, Any]]) -> None:
    """Put the entries back (LRU order), count the misses and hits, then wrap the function."""
    entries, hits, misses, attrs = state
    target = wrapper.__wrapped__
    results: list[Any] = []
    target.__setstate__((lambda *_, **__: results.pop(), (), None, None))
    for args, kwargs, result in entries:
        results.append(result)
        wrapper(*args, **kwargs)
    target.__setstate__((_never, (), None, None))
    probe = object()
    for _ in range(max(0, misses - len(entries))):
        with contextlib.suppress(_Skip):  # the call raises: a miss counted, nothing cached
            wrapper(probe)
    if entries:
        args, kwargs, _ = entries[-1]  # the most recently used: a hit keeps the order
        # a key that no longer equals itself once restored misses: _Skip ends the count
        with contextlib.suppress(_Skip):
            for _ in range(hits):
                wrapper(*args, **kwargs)
    wrapper.__dict__.update(attrs)
    function = attrs.get("__wrapped__")
    target.__setstate__((function if function is not None else _never, (), None, None))
