"""Namespace capture and restore: one cloudpickle of a frame's namespace, big leaves as blobs.

Design note. :meth:`Snapshotter.capture` pickles all variables in ONE pickle, so aliasing between
them survives. The namespace dict is a persistent id: functions whose ``__globals__`` is it are
rebuilt with the restore target as their globals (``global n`` works after a resume). Closure
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

import hashlib
import io
import pickle
import sys
import warnings
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import Any

from resumable.durability.capture.live_frames import LiveFrame
from resumable.durability.capture.lost import CheckpointWarning, LostVariable
from resumable.durability.capture.pickling import (
    ATOMS,
    BYTES_BLOB,
    DEFAULT_EXCLUDE,
    EXTERNAL_BLOB,
    NAMESPACE_CODEC,
    NS_PID,
    PROTOCOL,
    STR_BLOB,
    VALUE_CODEC,
    CheckpointPickler,
    CheckpointUnpickler,
    DiagnosingPickler,
    check_codec,
    is_plain,
    namespace_payload,
    unpicklable_reason,
)
from resumable.durability.capture.process_state import ProcessState
from resumable.durability.capture.reducers import (
    ReducerRegistry,
    default_registry,
    register_external,
    register_reducer,
)
from resumable.durability.capture.resources import reopening_files
from resumable.errors import IntegrityError, RecordError, RecordVersionError

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


class Snapshotter:
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
        self.by_reference: dict[int, object] = {}
        self._pickler = CheckpointPickler(self, self._buffer)

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
            data = self._dump(namespace_payload(values, lost, process), ns, pids, NAMESPACE_CODEC)
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
        check_codec(data, NAMESPACE_CODEC)
        with reopening_files(self._reopen_files):
            loaded = CheckpointUnpickler(self, data, load_blob, into).load()
        values, lost = loaded[0], loaded[1]
        if len(loaded) > 2 and self._process is not None:
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
        diagnosing = DiagnosingPickler(self, self._buffer)
        found: dict[str, tuple[object, str, bool]] = {}
        for name, value in values.items():
            diagnosing.last = None
            try:
                self._dump(value, ns, pids, b"", by_name=by_name, pickler=diagnosing)
            except LiveFrame:
                raise
            except Exception as exc:
                culprit = diagnosing.last
                found[name] = (value, unpicklable_reason(value, culprit, exc), culprit is value)
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

    def blob_pid(self, obj: Any, cls: type) -> tuple[str, str]:
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
            return BYTES_BLOB + obj  # type: ignore[no-any-return]
        if cls is str:
            return STR_BLOB + obj.encode("utf-8", "surrogatepass")  # type: ignore[no-any-return]
        key, dumps = self.registry.externals[cls]
        payload = dumps(obj)
        if not isinstance(payload, bytes):
            raise TypeError(f"the external codec of {cls.__qualname__} returned {type(payload)}")
        return b"".join((EXTERNAL_BLOB, len(key).to_bytes(2, "big"), key, payload))

    def read_blob(self, digest: str, load_blob: Callable[[str], bytes]) -> Any:
        try:
            data = load_blob(digest)
        except LookupError as exc:
            raise RecordError(
                f"blob {digest} that a checkpoint refers to is missing", digest=digest
            ) from exc
        if hashlib.sha256(data).hexdigest() != digest:
            raise IntegrityError(f"blob {digest} does not match its digest", digest=digest)
        tag = data[:1]
        if tag == BYTES_BLOB:
            value: Any = data[1:]
        elif tag == STR_BLOB:
            value = str(memoryview(data)[1:], "utf-8", "surrogatepass")
        elif tag == EXTERNAL_BLOB:
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

    def submodules(self, name: str) -> tuple[str, ...]:
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
