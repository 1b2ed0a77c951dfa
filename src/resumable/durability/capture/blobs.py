"""The content-addressed blobs a snapshotter writes and reads: big leaves and namespace pieces.

A blob is named by the sha256 of its codec-tagged encoding; its digest is cached by the
object's identity, so an unchanged 50 MB value is hashed once. The snapshotter hands each new
blob to the writer once (``_handed_out``) and lists, for each pickle, the blobs it refers to.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from resumable.durability.capture.pickling import BYTES_BLOB, EXTERNAL_BLOB, STR_BLOB
from resumable.durability.capture.pieces import PIECE_BLOB, piece_blob
from resumable.durability.capture.reducers import ReducerRegistry, default_registry
from resumable.errors import IntegrityError, RecordError, RecordVersionError

__all__ = ["BlobKeeper"]


class BlobKeeper:
    """The blob half of :class:`~resumable.durability.capture.snapshot.Snapshotter`."""

    def __init__(self, reducers: ReducerRegistry | None) -> None:
        self.registry = default_registry if reducers is None else reducers
        self._digests: dict[int, tuple[object, str]] = {}  # id -> (the object, kept alive; digest)
        self._seen: set[int] = set()
        self._handed_out: set[str] = set()
        self._pending: dict[str, bytes] = {}
        self._referenced: set[str] = set()

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

    def _load_verified(self, digest: str, load_blob: Callable[[str], bytes]) -> bytes:
        """A blob's bytes, checked against its digest."""
        try:
            data = load_blob(digest)
        except LookupError as exc:
            raise RecordError(
                f"blob {digest} that a checkpoint refers to is missing", digest=digest
            ) from exc
        if hashlib.sha256(data).hexdigest() != digest:
            raise IntegrityError(f"blob {digest} does not match its digest", digest=digest)
        return data

    def piece_bytes(self, digest: str, load_blob: Callable[[str], bytes]) -> bytes:
        """A piece of a namespace (:mod:`.pieces`), checked, without its tag."""
        data = self._load_verified(digest, load_blob)
        if data[:1] != PIECE_BLOB:
            raise RecordError(f"blob {digest} is not a piece of a namespace", digest=digest)
        self._handed_out.add(digest)
        return data[1:]

    def read_blob(self, digest: str, load_blob: Callable[[str], bytes]) -> Any:
        data = self._load_verified(digest, load_blob)
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

    def _piece(self, chunk: bytes) -> str:
        digest, encoded = piece_blob(chunk)
        if digest not in self._handed_out:
            self._pending[digest] = encoded
        self._referenced.add(digest)
        return digest
