"""Namespace capture and restore: one cloudpickle of a frame's namespace, big leaves as blobs.

Design note. :meth:`Snapshotter.capture` pickles all variables in ONE pickle, so aliasing between
them survives. The namespace dict itself is a persistent id: functions whose ``__globals__`` is the
namespace are rebuilt with the restore target as their globals, so ``global n`` still works after a
resume. Closure cells are created empty and filled afterwards, so closures that share a cell keep
sharing it. ``bytes``/``str`` over ``blob_threshold`` and registered external types become
content-addressed blobs (sha256 of a codec-tagged encoding) whose digest is cached by object
identity: an unchanged 50 MB value is hashed once, not at every statement. A variable that cannot
be pickled is found by pickling the values one by one, left out with a :class:`CheckpointWarning`,
and bound to a :class:`LostVariable` on restore. Await results (:meth:`Snapshotter.dumps_value`)
name the classes and functions the program bound in its namespace instead of copying them, so
``isinstance`` and identity hold on replay; plain values go straight to the C pickler.

Loading a pickle runs code: callers must verify a record's MAC before :meth:`Snapshotter.restore`
or :meth:`Snapshotter.loads_value`. Blobs are checked against their digest when loaded.
A Snapshotter is not thread-safe. The names of this module's ``_make_*``/``_fill_*``/``_rebuild_*``
helpers, and ``LostVariable`` (from :mod:`resumable.lost`), are written into pickles as
``resumable.snapshot.<name>``: renaming or dropping one breaks old checkpoints. The placeholder
and its warning live in :mod:`resumable.lost`, the user's reducers in :mod:`resumable.reducers`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import io
import pickle
import sys
import types
import warnings
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import Any, Final

import cloudpickle
from cloudpickle import cloudpickle as _cp

from resumable.errors import IntegrityError, RecordError, RecordVersionError
from resumable.lost import CheckpointWarning, LostVariable
from resumable.reducers import (
    ReducerRegistry,
    default_registry,
    register_external,
    register_reducer,
)

__all__ = [
    "Capture",
    "CheckpointWarning",
    "LostVariable",
    "Pickled",
    "ReducerRegistry",
    "Snapshotter",
    "default_registry",
    "register_external",
    "register_reducer",
]

_NAMESPACE_CODEC: Final = b"N"
_VALUE_CODEC: Final = b"V"
_BYTES_BLOB: Final = b"B"
_STR_BLOB: Final = b"S"
_EXTERNAL_BLOB: Final = b"X"
_PROTOCOL: Final = pickle.HIGHEST_PROTOCOL
_DEFAULT_EXCLUDE: Final = ("__builtins__", "__resumable__")
_NS_PID: Final = ("n",)
_MISSING: Final = object()
# Exact types the C pickler saves without asking reducer_override, and that are never references.
_ATOMS: Final = frozenset({type(None), bool, int, float, complex, tuple, list})
_PLAIN_ATOMS: Final = frozenset({type(None), bool, int, float, complex})
_OPEN_FILES: Final = (io.TextIOWrapper, io.BufferedReader, io.BufferedWriter, io.BufferedRandom)
_SKELETONS: Final = (_cp._make_skeleton_class, _cp._make_skeleton_enum)
_LRU_CACHE: Final = type(functools.lru_cache(maxsize=None)(lambda: None))


@dataclass(frozen=True, slots=True)
class Pickled:
    """One pickled await result: codec-tagged pickle plus the blobs it references."""

    data: bytes
    new_blobs: dict[str, bytes]
    blobs: frozenset[str]


@dataclass(frozen=True, slots=True)
class Capture:
    """A pickled namespace; ``lost`` maps the variables left out to why they were."""

    data: bytes
    new_blobs: dict[str, bytes]
    blobs: frozenset[str]
    lost: dict[str, str]


# -- helpers named in pickles ----------------------------------------------------------------
def _make_function(code: types.CodeType, globals_: dict[str, Any], closure: Any) -> Any:
    return types.FunctionType(code, globals_, None, None, closure)


def _fill_function(func: Any, state: tuple[dict[str, Any], dict[str, Any]]) -> None:
    attrs, slots = state
    func.__dict__.update(attrs)
    for name, value in slots.items():
        setattr(func, name, value)


def _make_cell() -> types.CellType:
    return types.CellType()


def _fill_cell(cell: types.CellType, state: tuple[Any]) -> None:
    cell.cell_contents = state[0]


def _make_module(name: str, submodules: tuple[str, ...]) -> types.ModuleType:
    module = importlib.import_module(name)
    for sub in submodules:
        # It was loaded in the first process; if it cannot be now, attribute access will say so.
        with contextlib.suppress(ImportError):
            importlib.import_module(sub)
    return module


def _make_lru_cache(func: Any, maxsize: int | None, typed: bool) -> Any:
    return functools.lru_cache(maxsize=maxsize, typed=typed)(func)


def _rebuild_exception(cls: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    try:
        exc = cls(*args)  # what pickle does; C exceptions (UnicodeError...) need their __init__
    except TypeError:  # an __init__ whose parameters are not ``args``: AppError(code, detail)
        exc = cls.__new__(cls, *args)
    exc.args = args
    return exc


def _fill_exception(exc: BaseException, state: tuple[Any, Any]) -> None:
    attrs, chain = state
    if attrs is not None:
        exc.__setstate__(attrs)
    if chain is not None:
        exc.__cause__, exc.__context__, exc.__suppress_context__ = chain


# -- pickling ----------------------------------------------------------------------------------
def _resolve(ns: Mapping[str, Any], path: str) -> Any:
    """What a qualified name means in the namespace (``C.method``), or ``_MISSING``."""
    head, _, rest = path.partition(".")
    obj = ns.get(head, _MISSING)
    if rest and obj is not _MISSING:
        if "<locals>" in rest:
            return _MISSING
        try:
            for part in rest.split("."):
                obj = getattr(obj, part)
        except Exception:
            return _MISSING
    return obj


def _exception_reduce(exc: BaseException) -> Any:
    """Like BaseException's reduce, plus the cause/context chain, without calling ``__init__``."""
    chain = (exc.__cause__, exc.__context__, exc.__suppress_context__)
    if chain == (None, None, False):
        chain = None  # type: ignore[assignment]
    cls = type(exc)
    if cls.__reduce__ is BaseException.__reduce__ and cls.__reduce_ex__ is object.__reduce_ex__:
        attrs = exc.__dict__ or None
        return (_rebuild_exception, (cls, exc.args), (attrs, chain), None, None, _fill_exception)
    rv = exc.__reduce_ex__(_PROTOCOL)
    if not isinstance(rv, tuple):
        return NotImplemented
    extra = (*rv[3:5], None, None)[:2]
    return (rv[0], rv[1], (rv[2] if len(rv) > 2 else None, chain), *extra, _fill_exception)


def _type_name(obj: object) -> str:
    cls = type(obj)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _reason(value: object, culprit: object, exc: BaseException) -> str:
    text = f"{_type_name(culprit)} objects cannot be checkpointed"
    if culprit is not value:
        text += f" (one is inside this {_type_name(value)})"
    detail = str(exc)
    if detail and not detail.startswith("cannot pickle"):
        text += f": {detail}"
    return text


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    """cloudpickle, plus the namespace as a persistent id, blobs, and the program's own objects."""

    def __init__(self, owner: Snapshotter, buffer: io.BytesIO) -> None:
        super().__init__(buffer, protocol=_PROTOCOL)
        self.owner = owner
        self.threshold = owner.blob_threshold
        self.reducers = owner.registry.reducers
        self.externals = owner.registry.externals
        self.ns: Mapping[str, Any] = {}
        self.pids: dict[int, tuple[str, ...]] = {}
        self.by_name = False  # await results: the program's classes/functions as names
        self.inline: dict[int, str] = {}
        self.by_reference = owner._by_reference

    def persistent_id(self, obj: Any) -> Any:
        t = type(obj)
        if t is str or t is bytes:
            if len(obj) > self.threshold and id(obj) not in self.inline:
                return self._emit(self.owner._blob_pid(obj, t))
            return None
        if t in _ATOMS:
            return None
        pid = self.pids.get(id(obj))
        if pid is not None:
            return self._emit(pid)
        if t in self.externals:
            return self._emit(self.owner._blob_pid(obj, t))
        if self.by_name:
            if t is types.FunctionType:
                mine = obj.__globals__ is self.ns
            elif t is _LRU_CACHE:
                mine = getattr(obj.__wrapped__, "__globals__", None) is self.ns
            else:
                mine = isinstance(obj, type) and not self._by_reference(obj)
            if mine and _resolve(self.ns, obj.__qualname__) is obj:
                return self._emit(("r", obj.__qualname__))
        return None

    def _emit(self, pid: tuple[str, ...]) -> tuple[str, ...]:
        """The strings of a persistent id are pickled inline, never as blobs themselves."""
        for part in pid:
            self.inline[id(part)] = part
        return pid

    def _by_reference(self, obj: Any) -> bool:
        """Whether cloudpickle saves ``obj`` (a function or class) as module + name; cached."""
        if id(obj) in self.by_reference:
            return True
        if _cp._should_pickle_by_reference(obj):
            self.by_reference[id(obj)] = obj
            return True
        return False

    def reducer_override(self, obj: Any) -> Any:
        t = type(obj)
        reduce = self.reducers.get(t)
        if reduce is not None:
            return reduce(obj)
        if t is types.FunctionType:
            if obj.__globals__ is self.ns:
                return self._program_function_reduce(obj)
            if self._by_reference(obj):
                return NotImplemented
        elif t is types.CellType:
            try:
                return (_make_cell, (), (obj.cell_contents,), None, None, _fill_cell)
            except ValueError:  # an empty cell
                return (_make_cell, ())
        elif isinstance(obj, types.ModuleType):
            if sys.modules.get(obj.__name__) is obj:
                return (_make_module, (obj.__name__, self.owner._submodules(obj.__name__)))
        elif issubclass(t, type):
            if id(obj) in self.by_reference:
                return NotImplemented
            rv = super().reducer_override(obj)
            if rv is NotImplemented:
                self.by_reference[id(obj)] = obj
            if rv is not NotImplemented and rv[0] in _SKELETONS:
                rv[2][0].pop("__slotnames__", None)  # copyreg's cache: pickles stay reproducible
                if not self.by_name and _resolve(self.ns, obj.__qualname__) is obj:
                    # The program's own class: not tracked, so a restore in this process builds
                    # a new class instead of re-binding the methods of the live one.
                    tracker = _cp._get_or_create_tracker_id(obj)
                    rv = (rv[0], tuple(None if a is tracker else a for a in rv[1]), *rv[2:])
            return rv
        elif issubclass(t, BaseException):
            return _exception_reduce(obj)
        elif t in _OPEN_FILES:
            raise pickle.PicklingError(
                "an open file does not survive a restart; keep its path and open it again"
            )
        elif t is _LRU_CACHE and getattr(obj.__wrapped__, "__globals__", None) is self.ns:
            params = obj.cache_parameters()
            return (_make_lru_cache, (obj.__wrapped__, params["maxsize"], params["typed"]))
        return super().reducer_override(obj)

    def _program_function_reduce(self, func: types.FunctionType) -> tuple[Any, ...]:
        slots = {
            "__name__": "".join(func.__name__),  # un-interned, so pickles are reproducible
            "__qualname__": "".join(func.__qualname__),
            "__module__": func.__module__,
            "__doc__": func.__doc__,
            "__defaults__": func.__defaults__,
            "__kwdefaults__": func.__kwdefaults__,
            "__annotations__": func.__annotations__,
        }
        if getattr(func, "__type_params__", ()):
            slots["__type_params__"] = func.__type_params__  # type: ignore[attr-defined]
        args = (func.__code__, self.ns, func.__closure__)
        return (_make_function, args, (dict(func.__dict__), slots), None, None, _fill_function)


class _DiagnosingPickler(_Pickler):
    """Remembers the last object it was asked to save: the culprit when saving fails."""

    last: object = None

    def persistent_id(self, obj: Any) -> Any:
        self.last = obj
        return super().persistent_id(obj)


class _Unpickler(pickle.Unpickler):
    def __init__(
        self, owner: Snapshotter, data: bytes, load_blob: Callable[[str], bytes], ns: dict[str, Any]
    ) -> None:
        file = io.BytesIO(data)  # shares the bytes, no copy
        file.seek(1)  # past the codec tag
        super().__init__(file)
        self.owner = owner
        self.load_blob = load_blob
        self.ns = ns
        self.blobs: dict[str, Any] = {}

    def persistent_load(self, pid: Any) -> Any:
        kind = pid[0]
        if kind == "b":
            value = self.blobs.get(pid[1], _MISSING)
            if value is _MISSING:
                value = self.blobs[pid[1]] = self.owner._load_blob(pid[1], self.load_blob)
            return value
        if kind == "n":
            return self.ns
        if kind == "x":
            value = self.ns.get(pid[1], _MISSING)
            if value is _MISSING:
                return LostVariable(pid[1], "it was not provided when the namespace was restored")
            return value
        if kind == "r":
            value = _resolve(self.ns, pid[1])
            if value is _MISSING:
                raise RecordError(
                    f"a journaled value refers to {pid[1]!r}, which the namespace does not define",
                    name=pid[1],
                )
            return value
        raise RecordVersionError(f"unknown persistent reference {kind!r} in a pickle", codec=kind)


def _check_codec(data: bytes, expected: bytes) -> None:
    tag = bytes(data[:1])
    if tag != expected:
        known = {_NAMESPACE_CODEC: "a namespace", _VALUE_CODEC: "a value"}
        what = known.get(tag, f"codec {tag!r}, which this version of resumable does not know")
        raise RecordVersionError(
            f"expected {known[expected]} pickle but found {what}", codec=tag.decode("latin-1")
        )


class Snapshotter:
    """Captures and restores namespaces and await results for one run (one thread)."""

    def __init__(
        self, *, blob_threshold: int = 64 * 1024, reducers: ReducerRegistry | None = None
    ) -> None:
        self.blob_threshold = blob_threshold
        self.registry = default_registry if reducers is None else reducers
        self._buffer = io.BytesIO()
        self._digests: dict[int, tuple[object, str]] = {}  # id -> (the object, kept alive; digest)
        self._seen: set[int] = set()
        self._handed_out: set[str] = set()
        self._pending: dict[str, bytes] = {}
        self._referenced: set[str] = set()
        self._lost: dict[str, tuple[object, str, bool]] = {}  # name -> (value, reason, intrinsic)
        self._submodule_cache: dict[str, tuple[int, tuple[str, ...]]] = {}
        # Functions and classes saved as module + name, so they are looked up once (kept alive).
        self._by_reference: dict[int, object] = {}
        self._pickler = _Pickler(self, self._buffer)

    # -- namespaces ------------------------------------------------------------------------
    def capture(
        self, ns: Mapping[str, Any], *, exclude: Container[str] = _DEFAULT_EXCLUDE
    ) -> Capture:
        """Pickle every variable of ``ns`` but ``exclude``; unpicklable ones are left out.

        A variable newly left out gets a :class:`CheckpointWarning` naming it and the reason.
        """
        pids: dict[int, tuple[str, ...]] = {id(ns): _NS_PID}
        values: dict[str, Any] = {}
        lost: dict[str, str] = {}
        before = self._lost
        for name, value in ns.items():
            if name in exclude:
                if type(value) not in _ATOMS and not isinstance(value, str | bytes):
                    pids[id(value)] = ("x", name)
            elif type(value) is LostVariable:
                lost[name] = value._lost_reason
            elif name in before and before[name][0] is value and before[name][2]:
                lost[name] = before[name][1]
            else:
                values[name] = value
        self._pending, self._seen = {}, set()
        found: dict[str, tuple[object, str, bool]] = {}
        try:
            data = self._dump((values, lost), ns, pids, _NAMESPACE_CODEC)
        except Exception:
            found = self._diagnose(values, ns, pids)
            for name, (_, reason, _) in found.items():
                del values[name]
                lost[name] = reason
            data = self._dump_what_remains(values, lost, found, ns, pids)
        self._lost = {n: (ns[n], r, n in before and before[n][2]) for n, r in lost.items()}
        self._lost.update(found)
        for name, (value, reason, _) in found.items():
            if name not in before or before[name][0] is not value:
                warnings.warn(
                    f"variable {name!r} cannot be checkpointed and will be lost on resume: {reason}",
                    CheckpointWarning,
                    stacklevel=2,
                )
        if len(self._digests) != len(self._seen):
            self._digests = {k: v for k, v in self._digests.items() if k in self._seen}
        blobs, new_blobs = self._settle_blobs()
        return Capture(data, new_blobs, blobs, lost)

    def restore(
        self, data: bytes, *, load_blob: Callable[[str], bytes], into: dict[str, Any]
    ) -> dict[str, str]:
        """Fill ``into`` from a capture; returns the lost variables, now bound to placeholders.

        Put the hook and ``__builtins__`` in ``into`` first: references to them resolve there.
        """
        _check_codec(data, _NAMESPACE_CODEC)
        values, lost = _Unpickler(self, data, load_blob, into).load()
        into.update(values)
        for name, reason in lost.items():
            into[name] = LostVariable(name, reason)
        return dict(lost)

    # -- await results ---------------------------------------------------------------------
    def dumps_value(self, value: Any, ns: Mapping[str, Any]) -> Pickled:
        """Pickle one await result or exception; raises ``pickle.PicklingError`` if it cannot."""
        if self._is_plain(value):
            return Pickled(_VALUE_CODEC + pickle.dumps(value, _PROTOCOL), {}, frozenset())
        pids: dict[int, tuple[str, ...]] = {id(ns): _NS_PID}
        for name in _DEFAULT_EXCLUDE:
            if name in ns and type(ns[name]) not in _ATOMS:
                pids[id(ns[name])] = ("x", name)
        self._pending = {}
        try:
            data = self._dump(value, ns, pids, _VALUE_CODEC, by_name=True)
        except Exception as exc:
            diagnosis = self._diagnose({"value": value}, ns, pids, by_name=True)
            reason = diagnosis["value"][1] if diagnosis else str(exc)
            raise pickle.PicklingError(f"the value cannot be checkpointed: {reason}") from exc
        blobs, new_blobs = self._settle_blobs()
        return Pickled(data, new_blobs, blobs)

    def loads_value(
        self, data: bytes, *, load_blob: Callable[[str], bytes], ns: dict[str, Any]
    ) -> Any:
        """Unpickle an await result; names of the program's classes/functions resolve in ``ns``."""
        _check_codec(data, _VALUE_CODEC)
        return _Unpickler(self, data, load_blob, ns).load()

    # -- internals -------------------------------------------------------------------------
    def _dump(
        self,
        obj: Any,
        ns: Mapping[str, Any],
        pids: dict[int, tuple[str, ...]],
        codec: bytes,
        *,
        by_name: bool = False,
        pickler: _Pickler | None = None,
    ) -> bytes:
        p = self._pickler if pickler is None else pickler
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        buffer.write(codec)
        self._referenced = set()
        p.ns, p.pids, p.by_name = ns, pids, by_name
        try:
            p.dump(obj)
            return buffer.getvalue()
        finally:
            p.clear_memo()  # drop the references the memo holds until the next dump
            p.globals_ref.clear()
            p.ns, p.pids = {}, {}
            p.inline.clear()

    def _diagnose(
        self,
        values: dict[str, Any],
        ns: Mapping[str, Any],
        pids: dict[int, tuple[str, ...]],
        *,
        by_name: bool = False,
    ) -> dict[str, tuple[object, str, bool]]:
        """Pickle each value alone: which cannot be pickled, why, and is the value itself the cause."""
        diagnosing = _DiagnosingPickler(self, self._buffer)
        found: dict[str, tuple[object, str, bool]] = {}
        for name, value in values.items():
            diagnosing.last = None
            try:
                self._dump(value, ns, pids, b"", by_name=by_name, pickler=diagnosing)
            except Exception as exc:
                culprit = diagnosing.last
                found[name] = (value, _reason(value, culprit, exc), culprit is value)
        return found

    def _dump_what_remains(
        self,
        values: dict[str, Any],
        lost: dict[str, str],
        found: dict[str, tuple[object, str, bool]],
        ns: Mapping[str, Any],
        pids: dict[int, tuple[str, ...]],
    ) -> bytes:
        while True:
            try:
                return self._dump((values, lost), ns, pids, _NAMESPACE_CODEC)
            except Exception as exc:
                if not values:
                    raise
                # Each value pickles alone but not all together (rare): drop the last one.
                name, value = values.popitem()
                reason = f"it cannot be checkpointed together with the other variables: {exc}"
                lost[name] = reason
                found[name] = (value, reason, False)

    def _blob_pid(self, obj: Any, cls: type) -> tuple[str, str]:
        key = id(obj)
        entry = self._digests.get(key)
        if entry is None:
            encoded = self._encode(obj, cls)
            digest = hashlib.sha256(encoded).hexdigest()
            self._digests[key] = (obj, digest)
            if digest not in self._handed_out:
                self._pending[digest] = encoded
        else:
            digest = entry[1]
            if digest not in self._handed_out and digest not in self._pending:
                self._pending[digest] = self._encode(obj, cls)
        self._seen.add(key)
        self._referenced.add(digest)
        return ("b", digest)

    def _encode(self, obj: Any, cls: type) -> bytes:
        if cls is bytes:
            return _BYTES_BLOB + obj  # type: ignore[no-any-return]
        if cls is str:
            return _STR_BLOB + obj.encode("utf-8", "surrogatepass")  # type: ignore[no-any-return]
        key, dumps = self.registry.externals[cls]
        payload = dumps(obj)
        if not isinstance(payload, bytes):
            raise TypeError(f"the external codec of {cls.__qualname__} returned {type(payload)}")
        return b"".join((_EXTERNAL_BLOB, len(key).to_bytes(2, "big"), key, payload))

    def _load_blob(self, digest: str, load_blob: Callable[[str], bytes]) -> Any:
        try:
            data = load_blob(digest)
        except LookupError as exc:
            raise RecordError(
                f"blob {digest} that a checkpoint refers to is missing", digest=digest
            ) from exc
        if hashlib.sha256(data).hexdigest() != digest:
            raise IntegrityError(f"blob {digest} does not match its digest", digest=digest)
        tag = data[:1]
        if tag == _BYTES_BLOB:
            value: Any = data[1:]
        elif tag == _STR_BLOB:
            value = str(memoryview(data)[1:], "utf-8", "surrogatepass")
        elif tag == _EXTERNAL_BLOB:
            size = int.from_bytes(data[1:3], "big")
            key = data[3 : 3 + size].decode()
            loads = self.registry.loaders.get(key)
            if loads is None:
                raise RecordVersionError(
                    f"blob {digest} holds a {key}; register its codec with register_external "
                    "before resuming",
                    digest=digest,
                    codec=key,
                )
            value = loads(data[3 + size :])
        else:
            raise RecordVersionError(
                f"blob {digest} has codec tag {tag!r}, which this version of resumable does not know",
                digest=digest,
                codec=tag.decode("latin-1"),
            )
        self._digests[id(value)] = (value, digest)  # already stored: the next capture is free
        self._handed_out.add(digest)
        return value

    def _settle_blobs(self) -> tuple[frozenset[str], dict[str, bytes]]:
        blobs = frozenset(self._referenced)
        pending = self._pending
        new_blobs = {d: pending[d] for d in blobs if d in pending}
        self._handed_out.update(new_blobs)
        self._pending = {}
        return blobs, new_blobs

    def _submodules(self, name: str) -> tuple[str, ...]:
        """Submodules loaded under ``name`` and bound on their parent (``import a.b`` binds ``a``)."""
        cached = self._submodule_cache.get(name)
        if cached is not None and cached[0] == len(sys.modules):
            return cached[1]
        prefix = name + "."
        found = []
        for full, module in list(sys.modules.items()):
            if full.startswith(prefix) and module is not None:
                parent, _, attr = full.rpartition(".")
                holder = sys.modules.get(parent)
                if holder is not None and vars(holder).get(attr) is module:
                    found.append(full)
        result = tuple(sorted(found))
        self._submodule_cache[name] = (len(sys.modules), result)
        return result

    def _is_plain(self, value: Any) -> bool:
        """None, numbers, small str/bytes and small containers of those: the C pickler's job."""
        stack, budget, limit = [value], 64, self.blob_threshold
        while stack:
            item = stack.pop()
            t = type(item)
            if t in _PLAIN_ATOMS:
                continue
            budget -= 1
            if budget < 0:
                return False
            if t is str or t is bytes:
                if len(item) > limit:
                    return False
            elif t is list or t is tuple or t is set or t is frozenset or t is dict:
                if len(item) > budget:
                    return False
                stack.extend(item)
                if t is dict:
                    stack.extend(item.values())
            else:
                return False
        return True
