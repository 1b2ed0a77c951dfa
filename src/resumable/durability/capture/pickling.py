"""The pickler and unpickler behind :class:`~resumable.durability.capture.snapshot.Snapshotter`.

cloudpickle, plus: the namespace as a persistent id (the program's functions get the restore
target as globals), blobs for big leaves, closure cells shared as they were, modules by name,
exceptions with their chain, sets with their hash table (:mod:`.set_order`), the program's
classes and functions by name in await results, process resources (:mod:`.resources`),
generators (:mod:`.live_frames`). The snapshotter is seen through :class:`PickleOwner`.

The ``_make_*``/``_fill_*``/``_rebuild_*`` helpers are written into pickles as
``resumable.durability.capture.pickling.<name>`` (older: ``resumable.durability.pickling``,
``resumable.durability.snapshot``, ``resumable.snapshot``; :mod:`.moved` maps those):
renaming one breaks old checkpoints.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import pickle
import sys
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NoReturn, Protocol

import cloudpickle
from cloudpickle import cloudpickle as _cp

from resumable.durability.capture.caches import LRU_CACHE as _LRU_CACHE
from resumable.durability.capture.caches import make_lru_cache, reduce_cache
from resumable.durability.capture.functions import code_reduce, program_function_reduce
from resumable.durability.capture.live_frames import FRAME_REDUCERS
from resumable.durability.capture.lost import LostVariable
from resumable.durability.capture.moved import current_module
from resumable.durability.capture.pieces import load_stream
from resumable.durability.capture.reducers import ReducerRegistry
from resumable.durability.capture.resources import RESOURCE_REDUCERS, reduce_resource_subclass
from resumable.errors import RecordError, RecordVersionError

if TYPE_CHECKING:
    from resumable.durability.capture.set_order import SetCapture, SetRestorer

NAMESPACE_CODEC: Final = b"N"
VALUE_CODEC: Final = b"V"
BYTES_BLOB: Final = b"B"
STR_BLOB: Final = b"S"
EXTERNAL_BLOB: Final = b"X"
PROTOCOL: Final = pickle.HIGHEST_PROTOCOL
DEFAULT_EXCLUDE: Final = ("__builtins__", "__resumable__")
NS_PID: Final = ("n",)
_MISSING: Final = object()
# Exact types the C pickler saves without asking reducer_override, and that are never references.
ATOMS: Final = frozenset({type(None), bool, int, float, complex, tuple, list})
_PLAIN_ATOMS: Final = frozenset({type(None), bool, int, float, complex})
_SKELETONS: Final = (_cp._make_skeleton_class, _cp._make_skeleton_enum)
_make_lru_cache: Final = make_lru_cache  # named in checkpoints from before caches kept entries
_BUILT_IN_REDUCERS: Final = {**RESOURCE_REDUCERS, **FRAME_REDUCERS}
_CLOUDPICKLE_TABLE: Final = _cp.Pickler._dispatch_table


class PickleOwner(Protocol):
    """What the pickler and unpickler use of the snapshotter that owns them."""

    blob_threshold: int
    registry: ReducerRegistry
    by_reference: dict[int, object]

    def blob_pid(self, obj: Any, cls: type) -> tuple[str, str]: ...

    def submodules(self, name: str) -> str: ...

    def read_blob(self, digest: str, load_blob: Callable[[str], bytes]) -> Any: ...


def _set_order() -> types.ModuleType:
    """Loaded at the first set pickled or unpickled: it reads hash tables with ``ctypes``,
    which a run without sets need not load at its start."""
    return importlib.import_module("resumable.durability.capture.set_order")


# -- helpers named in pickles ----------------------------------------------------------------
# The program's functions as checkpoints wrote them before capture/functions.py:
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


def _make_module(name: str, submodules: str | tuple[str, ...]) -> types.ModuleType:
    """The module ``name`` with the submodules it had loaded: one string of their names
    separated by spaces (a tuple in checkpoints written before: one object to pickle
    instead of one per name, and a package such as ``asyncio`` has some thirty)."""
    module = importlib.import_module(name)
    for sub in submodules.split() if isinstance(submodules, str) else submodules:
        # It was loaded in the first process; if it cannot be now, attribute access will say so.
        with contextlib.suppress(ImportError):
            importlib.import_module(sub)
    return module


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
    rv = exc.__reduce_ex__(PROTOCOL)
    if not isinstance(rv, tuple):
        return NotImplemented
    extra = (*rv[3:5], None, None)[:2]
    return (rv[0], rv[1], (rv[2] if len(rv) > 2 else None, chain), *extra, _fill_exception)


class CheckpointPickler(cloudpickle.Pickler):  # type: ignore[misc]
    """cloudpickle, plus the namespace as a persistent id, blobs, and the program's own objects."""

    @property
    def dispatch_table(self) -> NoReturn:
        """Absent, as a pickler's is by default: the C pickler then reads copyreg's table itself.

        cloudpickle's is a ChainMap of its own reducers over copyreg's, which the C pickler asks
        about every object of a type it does not know: three Python calls and a KeyError each
        time, as much as the rest of an instance's pickling. Its own reducers are looked up in
        :meth:`reducer_override` instead, where the ChainMap would have been asked next."""
        raise AttributeError("dispatch_table")

    def __init__(self, owner: PickleOwner, buffer: io.BytesIO) -> None:
        super().__init__(buffer, protocol=PROTOCOL)
        self.owner = owner
        self.threshold = owner.blob_threshold
        self.reducers = owner.registry.reducers
        self.externals = owner.registry.externals
        self.ns: Mapping[str, Any] = {}
        self.pids: dict[int, tuple[str, ...]] = {}
        self.by_name = False  # await results: the program's classes/functions as names
        self.inline: dict[int, str] = {}
        self.by_reference = owner.by_reference
        self.sets: SetCapture | None = None  # made at the first set (see _set_order)
        self.plain: set[type] = set()
        """Types of this pickle that no reducer of ours or cloudpickle's takes (see below)."""

    def persistent_id(self, obj: Any) -> Any:
        t = type(obj)
        if t is str or t is bytes:
            if len(obj) > self.threshold and id(obj) not in self.inline:
                return self._emit(self.owner.blob_pid(obj, t))
            return None
        if t in ATOMS:
            return None
        pid = self.pids.get(id(obj))
        if pid is not None:
            return self._emit(pid)
        if t is set or t is frozenset:
            if self.sets is None:
                self.sets = _set_order().SetCapture()
            return self.sets.pid(obj)
        if t in self.externals:
            return self._emit(self.owner.blob_pid(obj, t))
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

    def clear_memo(self) -> None:
        """After each pickle: its memo, its sets, and the types it found plain (the reducers
        registered with us are looked up again by the next)."""
        super().clear_memo()
        self.plain.clear()
        if self.sets is not None:
            self.sets.clear()

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
        if t in self.plain and obj.__class__ is t:
            return NotImplemented
        reduce = self.reducers.get(t) or _BUILT_IN_REDUCERS.get(t)
        if reduce is not None:
            return reduce(obj)
        if t is types.FunctionType:
            if obj.__globals__ is self.ns:
                return program_function_reduce(obj, self.ns)
            if self._by_reference(obj):
                return NotImplemented
        elif t is types.CellType:
            try:
                return (_make_cell, (), (obj.cell_contents,), None, None, _fill_cell)
            except ValueError:  # an empty cell
                return (_make_cell, ())
        elif isinstance(obj, types.ModuleType):
            if sys.modules.get(obj.__name__) is obj:
                return (_make_module, (obj.__name__, self.owner.submodules(obj.__name__)))
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
        elif t is types.CodeType:
            return code_reduce(obj)
        elif t is _LRU_CACHE and getattr(obj.__wrapped__, "__globals__", None) is self.ns:
            return reduce_cache(obj, self)
        else:
            rv = reduce_resource_subclass(obj)
            if rv is not None:
                return rv
            return self._by_cloudpickle(obj, t, remember=t is not _LRU_CACHE)
        return self._by_cloudpickle(obj, t, remember=False)

    def _by_cloudpickle(self, obj: Any, t: type, *, remember: bool) -> Any:
        """cloudpickle's reduction of ``obj``, else its own table's (where its ChainMap was
        asked, before copyreg's). A type neither takes is ``remember``ed as plain when the type
        alone decided (an object whose __class__ is not its type, a mock with a spec, may pass
        isinstance otherwise): the next instance, an item of the same list, goes straight to
        pickle's own reduction."""
        rv = super().reducer_override(obj)
        if rv is NotImplemented:
            reduce = _CLOUDPICKLE_TABLE.get(t)
            if reduce is not None:
                return reduce(obj)
            if remember and obj.__class__ is t:
                self.plain.add(t)
        return rv


class CheckpointUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(current_module(module, name), name)

    def __init__(
        self, owner: PickleOwner, data: bytes, load_blob: Callable[[str], bytes], ns: dict[str, Any]
    ) -> None:
        file = io.BytesIO(data)  # shares the bytes, no copy
        file.seek(1)  # past the codec tag
        super().__init__(file)
        self.owner = owner
        self.load_blob = load_blob
        self.ns = ns
        self.blobs: dict[str, Any] = {}
        self.sets: SetRestorer | None = None  # made at the first set (see _set_order)
        self.namespace = bytes(data[:1]) == NAMESPACE_CODEC

    def load(self, dumps: int = 1) -> Any:
        loaded = super().load() if dumps == 1 else load_stream(self, dumps)  # .pieces
        if self.sets is not None:
            self.sets.warn(loaded[0] if self.namespace else None)
        return loaded

    def persistent_load(self, pid: Any) -> Any:
        kind = pid[0]
        if kind == "b":
            value = self.blobs.get(pid[1], _MISSING)
            if value is _MISSING:
                value = self.blobs[pid[1]] = self.owner.read_blob(pid[1], self.load_blob)
            return value
        if kind == "n":
            return self.ns
        if kind == "t":
            if self.sets is None:
                self.sets = _set_order().SetRestorer()
            return self.sets.load(pid)
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


def check_codec(data: bytes, expected: bytes) -> None:
    tag = bytes(data[:1])
    if tag != expected:
        known = {NAMESPACE_CODEC: "a namespace", VALUE_CODEC: "a value"}
        what = known.get(tag, f"codec {tag!r}, which this version of resumable does not know")
        raise RecordVersionError(
            f"expected {known[expected]} pickle but found {what}", codec=tag.decode("latin-1")
        )


def is_plain(value: Any, limit: int) -> bool:
    """None, numbers, small str/bytes and small lists, tuples, dicts of those (not sets: their
    hash table is pickled too): the C pickler's job."""
    stack, budget = [value], 64
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
        elif t is list or t is tuple or t is dict:
            if len(item) > budget:
                return False
            stack.extend(item)
            if t is dict:
                stack.extend(item.values())
        else:
            return False
    return True


def namespace_payload(values: dict[str, Any], lost: dict[str, str], process: dict[str, Any]) -> Any:
    """What a namespace pickle holds; the process state only when there is some (older form)."""
    return (values, lost, process) if process else (values, lost)
