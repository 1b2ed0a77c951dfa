"""Namespace capture and restore: one cloudpickle of a frame's namespace, big leaves as blobs.

Design note. :meth:`Snapshotter.capture` pickles all variables in ONE pickle, so aliasing between
them survives; a large namespace is that pickle cut at its variables, each large one stored
as content-addressed pieces, so a value that did not change is not written again
(:mod:`.pieces`). The namespace dict is a persistent id: functions whose ``__globals__`` is it
are rebuilt with the restore target as their globals (``global n`` works after a resume). Closure
cells are created empty and filled afterwards, so closures sharing a cell still do. ``bytes``/
``str`` over ``blob_threshold`` and registered external types become content-addressed blobs
(sha256 of a codec-tagged encoding), their digest cached by object identity: an unchanged 50 MB
value is hashed once. A variable that cannot be pickled is found by pickling the values one by
one, left out with a :class:`CheckpointWarning`, and bound to a :class:`LostVariable` on restore.
Await results (:meth:`Snapshotter.dumps_value`) name the program's classes and functions instead
of copying them, so ``isinstance`` and identity hold on replay.

Loading a pickle runs code: callers verify a record's MAC before :meth:`Snapshotter.restore` or
:meth:`Snapshotter.loads_value`; blobs are checked against their digest. Not thread-safe. Older
checkpoints name ``LostVariable`` here (and, older still, the pickling helpers; see
:mod:`~resumable.durability.capture.moved`).
"""

from __future__ import annotations

import io
import pickle
import sys
import warnings
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any, NamedTuple

from resumable.durability.capture.blobs import BlobKeeper
from resumable.durability.capture.live_frames import LiveFrame
from resumable.durability.capture.lost import CheckpointWarning, LostVariable
from resumable.durability.capture.pickling import (
    ATOMS,
    DEFAULT_EXCLUDE,
    NAMESPACE_CODEC,
    NS_PID,
    PROTOCOL,
    VALUE_CODEC,
    CheckpointPickler,
    CheckpointUnpickler,
    check_codec,
    is_plain,
    namespace_payload,
)
from resumable.durability.capture.pieces import (
    PIECES_CODEC,
    SPLIT_AT,
    Layout,
    assemble,
    cut,
    tail_payload,
)
from resumable.durability.capture.process_state import ProcessState
from resumable.durability.capture.reducers import (
    ReducerRegistry,
    default_registry,
    register_external,
    register_reducer,
)
from resumable.durability.capture.resources import reopening_files

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


class _DiagnosingPickler(CheckpointPickler):
    """Remembers the last object it was asked to save: the culprit when saving fails."""

    last: object = None

    def persistent_id(self, obj: Any) -> Any:
        self.last = obj
        return super().persistent_id(obj)


def _type_name(obj: object) -> str:
    cls = type(obj)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _unpicklable_reason(value: object, culprit: object, exc: BaseException) -> str:
    text = f"{_type_name(culprit)} objects cannot be checkpointed"
    if culprit is not value:
        text += f" (one is inside this {_type_name(value)})"
    detail = str(exc)
    if detail and not detail.startswith("cannot pickle"):
        text += f": {detail}"
    return text


class Pickled(NamedTuple):
    """One pickled await result: codec-tagged pickle plus the blobs it references."""

    data: bytes
    new_blobs: dict[str, bytes]
    blobs: frozenset[str]


class Capture(NamedTuple):
    """A pickled namespace; ``lost`` maps the variables left out to why they were."""

    data: bytes
    new_blobs: dict[str, bytes]
    blobs: frozenset[str]
    lost: dict[str, str]


class Snapshotter(BlobKeeper):
    """Captures and restores namespaces and await results for one run (one thread)."""

    def __init__(
        self,
        *,
        blob_threshold: int = 64 * 1024,
        reducers: ReducerRegistry | None = None,
        process_state: bool = False,
        reopen_files: bool = True,
    ) -> None:
        """``process_state``: also the random state and logging setup (a run's snapshotter);
        ``reopen_files=False``: a restore only looked at (``show``) names open files."""
        self._reopen_files = reopen_files
        self.blob_threshold = blob_threshold
        self._process = ProcessState() if process_state else None
        self._process_lost: set[str] = set()
        self._buffer = io.BytesIO()
        super().__init__(reducers)
        self._lost: dict[str, tuple[object, str, bool]] = {}  # name -> (value, reason, intrinsic)
        self._submodule_cache: dict[str, tuple[int, str]] = {}
        # Functions and classes saved as module + name, so they are looked up once (kept alive).
        self.by_reference: dict[int, object] = {}
        self._pickler = CheckpointPickler(self, self._buffer)
        self._layout = Layout()

    # -- namespaces ------------------------------------------------------------------------
    def capture(
        self, ns: Mapping[str, Any], *, exclude: Container[str] = DEFAULT_EXCLUDE
    ) -> Capture:
        """Pickle every variable of ``ns`` but ``exclude``; unpicklable ones are left out.

        A variable newly left out gets a :class:`CheckpointWarning` naming it and the reason.
        Raises :class:`LiveFrame`, capturing nothing, when a value holds a suspended frame.
        """
        pids: dict[int, tuple[str, ...]] = {id(ns): NS_PID}
        values: dict[str, Any] = {}
        lost: dict[str, str] = {}
        before = self._lost
        for name, value in ns.items():
            if name in exclude:
                if type(value) not in ATOMS and not isinstance(value, str | bytes):
                    pids[id(value)] = ("x", name)
            elif type(value) is LostVariable:
                lost[name] = value._lost_reason
            elif name in before and before[name][0] is value and before[name][2]:
                lost[name] = before[name][1]
            else:
                values[name] = value
        process = self._process.capture() if self._process is not None else {}
        self._pending, self._seen = {}, set()
        found: dict[str, tuple[object, str, bool]] = {}
        try:
            data = self._dump_namespace(values, lost, process, ns, pids)
        except LiveFrame:
            raise
        except Exception:
            found = self._diagnose(values, ns, pids)
            for name, (_, reason, _) in found.items():
                del values[name]
                lost[name] = reason
            self._leave_out_process_state(process, ns, pids)
            data = self._dump_what_remains(values, lost, found, ns, pids, process)
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
        dumps = 1
        if data[:1] == PIECES_CODEC:
            dumps, data = assemble(data, lambda digest: self.piece_bytes(digest, load_blob))
        check_codec(data, NAMESPACE_CODEC)
        with reopening_files(self._reopen_files):
            loaded = CheckpointUnpickler(self, data, load_blob, into).load(dumps)
        values, lost = loaded[0], loaded[1]
        if len(loaded) > 2 and loaded[2] and self._process is not None:
            self._process.restore(loaded[2])
        into.update(values)
        for name, reason in lost.items():
            into[name] = LostVariable(name, reason)
        return dict(lost)

    # -- await results ---------------------------------------------------------------------
    def dumps_value(self, value: Any, ns: Mapping[str, Any]) -> Pickled:
        """Pickle one await result or exception; raises ``pickle.PicklingError`` if it cannot."""
        if is_plain(value, self.blob_threshold):
            return Pickled(VALUE_CODEC + pickle.dumps(value, PROTOCOL), {}, frozenset())
        pids: dict[int, tuple[str, ...]] = {id(ns): NS_PID}
        for name in DEFAULT_EXCLUDE:
            if name in ns and type(ns[name]) not in ATOMS:
                pids[id(ns[name])] = ("x", name)
        self._pending = {}
        try:
            data = self._dump(value, ns, pids, VALUE_CODEC, by_name=True)
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
        check_codec(data, VALUE_CODEC)
        return CheckpointUnpickler(self, data, load_blob, ns).load()

    # -- internals -------------------------------------------------------------------------
    def _dump(
        self,
        obj: Any,
        ns: Mapping[str, Any],
        pids: dict[int, tuple[str, ...]],
        codec: bytes,
        *,
        by_name: bool = False,
        pickler: CheckpointPickler | None = None,
    ) -> bytes:
        return self._dump_many((obj,), ns, pids, codec, by_name=by_name, pickler=pickler)[0]

    def _dump_many(
        self,
        objs: Sequence[Any],
        ns: Mapping[str, Any],
        pids: dict[int, tuple[str, ...]],
        codec: bytes,
        *,
        by_name: bool = False,
        pickler: CheckpointPickler | None = None,
    ) -> tuple[bytes, list[int]]:
        """One stream of ``objs`` dumped in turn by one pickler (its memo spans them all)."""
        p = self._pickler if pickler is None else pickler
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        buffer.write(codec)
        self._referenced = set()
        p.ns, p.pids, p.by_name = ns, pids, by_name
        ends = []
        try:
            for obj in objs:
                p.dump(obj)
                ends.append(buffer.tell())
            return buffer.getvalue(), ends
        finally:
            p.clear_memo()  # drop the references the memo holds until the next dump
            p.globals_ref.clear()
            p.ns, p.pids = {}, {}
            p.inline.clear()

    def _dump_namespace(
        self,
        values: dict[str, Any],
        lost: dict[str, str],
        process: dict[str, Any],
        ns: Mapping[str, Any],
        pids: dict[int, tuple[str, ...]],
    ) -> bytes:
        """One pickle, or, for a large namespace, pieces (:mod:`.pieces`)."""
        layout = self._layout
        if not layout.split:
            data = self._dump(namespace_payload(values, lost, process), ns, pids, NAMESPACE_CODEC)
            if len(data) < SPLIT_AT:
                return data
        while True:
            names = layout.order(values)
            objs = [*(values[name] for name in names), tail_payload(names, values, lost, process)]
            stream, ends = self._dump_many(objs, ns, pids, NAMESPACE_CODEC)
            sizes = [end - start for start, end in zip([0, *ends], ends[:-1], strict=False)]
            learned_first = not layout.large
            layout.learn(names, sizes, len(stream))
            if not learned_first or names[: len(layout.large)] == list(layout.large):
                return cut(stream, ends, sizes, self._piece)
            # The first cut: once more with the large variables first, where they stay.

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
            except LiveFrame:
                raise
            except Exception as exc:
                culprit = diagnosing.last
                found[name] = (value, _unpicklable_reason(value, culprit, exc), culprit is value)
        return found

    def _dump_what_remains(
        self,
        values: dict[str, Any],
        lost: dict[str, str],
        found: dict[str, tuple[object, str, bool]],
        ns: Mapping[str, Any],
        pids: dict[int, tuple[str, ...]],
        process: dict[str, Any],
    ) -> bytes:
        while True:
            try:
                return self._dump(
                    namespace_payload(values, lost, process), ns, pids, NAMESPACE_CODEC
                )
            except Exception as exc:
                if not values:
                    raise
                # Each value pickles alone but not all together (rare): drop the last one.
                name, value = values.popitem()
                reason = f"it cannot be checkpointed together with the other variables: {exc}"
                lost[name] = reason
                found[name] = (value, reason, False)

    def _leave_out_process_state(
        self, process: dict[str, Any], ns: Mapping[str, Any], pids: dict[int, tuple[str, ...]]
    ) -> None:
        """Drop the entries of ``process`` that cannot be pickled, warning once for each."""
        for key, (_, reason, _) in self._diagnose(process, ns, pids).items():
            del process[key]
            if key not in self._process_lost:
                self._process_lost.add(key)
                warnings.warn(
                    f"{key} cannot be checkpointed and will not be restored on resume: {reason}",
                    CheckpointWarning,
                    stacklevel=3,
                )

    def submodules(self, name: str) -> str:
        """Submodules loaded under ``name`` and bound on their parent (``import a.b`` binds
        ``a``), their names separated by spaces."""
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
        result = " ".join(sorted(found))
        self._submodule_cache[name] = (len(sys.modules), result)
        return result
