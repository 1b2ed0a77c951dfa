"""How the user's own types are checkpointed: copyreg-style reducers or external blob codecs.

``register_reducer``/``register_external`` fill the default registry that every
:class:`~resumable.durability.capture.snapshot.Snapshotter` uses unless it is given its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

T = TypeVar("T")

# Types pickle saves itself, without asking for a reducer: a registration would never be used.
_PICKLE_OWNED: Final = frozenset(
    {type(None), bool, int, float, complex, bytes, str, tuple, list, dict, set, frozenset}
)


class ReducerRegistry:
    """How the user's own types are checkpointed: copyreg-style reducers or external blob codecs."""

    __slots__ = ("externals", "loaders", "reducers")

    def __init__(self) -> None:
        self.reducers: dict[type, Callable[[Any], Any]] = {}
        self.externals: dict[type, tuple[bytes, Callable[[Any], bytes]]] = {}
        self.loaders: dict[str, Callable[[bytes], Any]] = {}

    def register_reducer(self, cls: type[T], reduce: Callable[[T], str | tuple[Any, ...]]) -> None:
        """Pickle exact instances of ``cls`` with ``reduce`` (returns what ``__reduce__`` would)."""
        _check_registrable(cls)
        self.reducers[cls] = reduce

    def register_external(
        self, cls: type[T], dumps: Callable[[T], bytes], loads: Callable[[bytes], T]
    ) -> None:
        """Store exact instances of ``cls`` (immutable ones) as blobs: written once, shared."""
        _check_registrable(cls)
        key = f"{cls.__module__}.{cls.__qualname__}"
        self.externals[cls] = (key.encode(), dumps)
        self.loaders[key] = loads


def _check_registrable(cls: type) -> None:
    if not isinstance(cls, type) or cls in _PICKLE_OWNED:
        raise TypeError(f"cannot register a reducer for {cls!r}: pickle handles it itself")


default_registry: Final = ReducerRegistry()
"""The registry a :class:`Snapshotter` uses unless given one."""


def register_reducer(cls: type[T], reduce: Callable[[T], str | tuple[Any, ...]]) -> None:
    """Checkpoint exact instances of ``cls`` with a copyreg-style ``reduce`` function."""
    default_registry.register_reducer(cls, reduce)


def register_external(
    cls: type[T], dumps: Callable[[T], bytes], loads: Callable[[bytes], T]
) -> None:
    """Checkpoint exact (immutable) instances of ``cls`` as content-addressed blobs."""
    default_registry.register_external(cls, dumps, loads)
