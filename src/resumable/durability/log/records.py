"""Checkpoint records and their sealed form: versioned, authenticated, optionally packed.

Sealed layout (records and blobs alike)::

    [1 byte format version][1 byte codec tag][32 bytes HMAC-SHA256][payload]

The MAC covers the two header bytes and the payload (and, for a blob, the run id and
digest), and is verified before anything else is looked at: a record that does not
verify is refused whole, so nothing in it is ever unpacked, let alone unpickled. Only
then are the format version and codec tag read, and an unknown one is refused
(:class:`RecordVersionError`), never guessed at. A record's payload is the msgpack
envelope ``{v, run, seq, kind, frame, time, epoch, body}``; the codec tag says how
``body`` is stored: inline, or as bytes that are zlib-compressed and/or AES-GCM
encrypted (associated data: run and seq, so a body cannot be moved to another record).

The HMAC is computed from precomputed inner/outer SHA-256 states (RFC 2104): sealing
one small record is on the path of every await, and this halves its cost.
"""

from __future__ import annotations

import hashlib
import hmac
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import msgpack

from resumable.errors import (
    CorruptRecordError,
    DecryptionError,
    IntegrityError,
    RecordTooLargeError,
    RecordVersionError,
)

if TYPE_CHECKING:
    from resumable.durability.log.crypto import Cipher

SCHEMA_VERSION = 1
"""Version of the envelope (its keys and their meaning)."""

FORMAT_VERSION = 1
"""Version of the sealed byte layout."""

CODEC_PLAIN = 0
CODEC_ZLIB = 1
CODEC_AESGCM = 2
CODEC_AESGCM_ZLIB = 3
CODEC_NAMES = {
    CODEC_PLAIN: "plain",
    CODEC_ZLIB: "zlib",
    CODEC_AESGCM: "aesgcm",
    CODEC_AESGCM_ZLIB: "aesgcm+zlib",
}

MAC_BYTES = 32
HEADER_BYTES = 2 + MAC_BYTES
_HEADERS = {codec: bytes((FORMAT_VERSION, codec)) for codec in CODEC_NAMES}
_ENVELOPE_KEYS = frozenset(("v", "run", "seq", "kind", "frame", "time", "epoch", "body"))


@dataclass(frozen=True, slots=True)
class Record:
    """One checkpoint record. ``body`` holds msgpack-native values only.

    Pickles (namespace snapshots, await results) travel as ``bytes`` fields of the body.
    """

    run_id: str
    seq: int
    kind: str
    frame: str
    time: float
    epoch: int
    body: dict[str, Any]


class _Mac:
    """HMAC-SHA256 with the key's inner and outer pads hashed once."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        block = hashlib.sha256().block_size
        if len(key) > block:
            key = hashlib.sha256(key).digest()
        key = key.ljust(block, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))

    def digest(self, *parts: bytes | memoryview) -> bytes:
        inner = self._inner.copy()
        for part in parts:
            inner.update(part)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


def _record_aad(run_id: str, seq: int) -> bytes:
    return run_id.encode() + b"\0" + seq.to_bytes(8, "big", signed=True)


def _blob_aad(run_id: str, digest: str) -> bytes:
    return run_id.encode() + b"\0" + digest.encode()


class RecordCodec:
    """Seals records and blobs for a store, and opens them again, refusing forgeries."""

    def __init__(
        self,
        mac_key: bytes,
        *,
        compress: Literal["none", "zlib"] = "none",
        compress_min_bytes: int = 4096,
        max_record_bytes: int = 64 * 2**20,
        cipher: Cipher | None = None,
    ) -> None:
        if not mac_key:
            raise ValueError("the MAC key must not be empty")
        if compress not in ("none", "zlib"):
            raise ValueError(f"unknown compression {compress!r}; use 'none' or 'zlib'")
        self._mac = _Mac(mac_key)
        self.compress = compress
        self.compress_min_bytes = compress_min_bytes
        self.max_record_bytes = max_record_bytes
        self.cipher = cipher
        self._packer = msgpack.Packer(use_bin_type=True)
        self._packs_body = compress == "zlib" or cipher is not None

    def derive(self, label: bytes) -> bytes:
        """A secret only holders of the store's key know: the HMAC of ``label`` (which must not
        start with a record header, so that no record is authenticated by it)."""
        if label[:1] == bytes((FORMAT_VERSION,)):
            raise ValueError("a label must not start like a sealed record")
        return self._mac.digest(label)

    # -- records --------------------------------------------------------------------
    def seal(self, record: Record) -> bytes:
        """The record's sealed bytes (what a store keeps as ``StoredRecord.data``)."""
        codec = CODEC_PLAIN
        body: Any = record.body
        if self._packs_body:
            codec, packed = self._pack_value(
                self._packer.pack(body), _record_aad(record.run_id, record.seq)
            )
            if codec != CODEC_PLAIN:  # else too small to compress: stays inline
                body = packed
        payload = self._packer.pack(
            {
                "v": SCHEMA_VERSION,
                "run": record.run_id,
                "seq": record.seq,
                "kind": record.kind,
                "frame": record.frame,
                "time": record.time,
                "epoch": record.epoch,
                "body": body,
            }
        )
        size = len(payload) + HEADER_BYTES
        if size > self.max_record_bytes:
            raise RecordTooLargeError(
                f"record {record.seq} ({record.kind}) of run {record.run_id} is {size} bytes, "
                f"over the limit of {self.max_record_bytes}; raise [durability] "
                "max_record_bytes or keep large values out of the program's variables",
                run_id=record.run_id,
                seq=record.seq,
                kind=record.kind,
                size=size,
                limit=self.max_record_bytes,
            )
        header = _HEADERS[codec]
        return header + self._mac.digest(header, payload) + payload

    def open(self, data: bytes, *, run_id: str | None = None, seq: int | None = None) -> Record:
        """Verify, then decode. ``run_id``/``seq`` (if given) must be where the record was sealed."""
        where = _describe(run_id, seq)
        codec, payload = self._verify(data, where, (), run_id=run_id, seq=seq)
        envelope = _map(
            _decoded(payload, "envelope", where, run_id, seq), "envelope", where, run_id, seq
        )
        if envelope.get("v") != SCHEMA_VERSION:
            raise _schema_error(envelope.get("v"), where, run_id, seq)
        if not envelope.keys() >= _ENVELOPE_KEYS:
            raise CorruptRecordError(
                f"{where} is authentic but its envelope is incomplete", run_id=run_id, seq=seq
            )
        env_run, env_seq = envelope["run"], envelope["seq"]
        if (run_id is not None and env_run != run_id) or (seq is not None and env_seq != seq):
            raise IntegrityError(
                f"{where} holds record {env_seq} of run {env_run}: refused "
                "(records moved between runs or positions)",
                run_id=run_id,
                seq=seq,
            )
        body = envelope["body"]
        if codec != CODEC_PLAIN:
            where = f"record {env_seq} of run {env_run}"
            plain = self._unpack_value(
                codec, body, _record_aad(env_run, env_seq), where, run_id=env_run, seq=env_seq
            )
            body = _decoded(plain, "body", where, run_id, seq)
        return Record(
            env_run,
            env_seq,
            envelope["kind"],
            envelope["frame"],
            envelope["time"],
            envelope["epoch"],
            _map(body, "body", where, run_id, seq),
        )

    # -- blobs ----------------------------------------------------------------------
    def seal_blob(self, run_id: str, digest: str, data: bytes) -> bytes:
        """Sealed blob bytes, bound to the run and digest they are stored under."""
        codec, payload = self._pack_value(data, _blob_aad(run_id, digest))
        header = _HEADERS[codec]
        mac = self._mac.digest(header, _blob_aad(run_id, digest), payload)
        return header + mac + payload

    def open_blob(self, run_id: str, digest: str, data: bytes) -> bytes:
        """The blob's content, after its MAC and its digest (sha256 hex) are verified."""
        where = f"blob {digest} of run {run_id}"
        aad = _blob_aad(run_id, digest)
        codec, payload = self._verify(data, where, (aad,), run_id=run_id, digest=digest)
        plain = (
            self._unpack_value(codec, payload, aad, where, run_id=run_id, digest=digest)
            if codec != CODEC_PLAIN
            else payload
        )
        if hashlib.sha256(plain).hexdigest() != digest:
            raise IntegrityError(
                f"{where} does not match its digest: refused", run_id=run_id, digest=digest
            )
        return bytes(plain)

    # -- shared steps ---------------------------------------------------------------
    def _verify(
        self, data: bytes, where: str, bound: tuple[bytes, ...], **fields: Any
    ) -> tuple[int, memoryview]:
        """Check the MAC first, then the format version and codec tag."""
        view = memoryview(data)
        if len(data) < HEADER_BYTES or not hmac.compare_digest(
            self._mac.digest(view[:2], *bound, view[HEADER_BYTES:]), view[2:HEADER_BYTES]
        ):
            raise IntegrityError(
                f"{where} fails authentication: it was modified, or sealed with another "
                "MAC key; refused unread",
                **fields,
            )
        version, codec = data[0], data[1]
        if version != FORMAT_VERSION:
            raise RecordVersionError(
                f"{where} has format version {version}; this version of resumable reads "
                f"version {FORMAT_VERSION} only: upgrade resumable",
                version=version,
                **fields,
            )
        if codec not in CODEC_NAMES:
            raise RecordVersionError(
                f"{where} uses codec tag {codec}, which this version of resumable does not "
                "know: upgrade resumable",
                codec=codec,
                **fields,
            )
        return codec, view[HEADER_BYTES:]

    def _pack_value(self, plain: bytes, aad: bytes) -> tuple[int, bytes]:
        codec = CODEC_PLAIN
        if self.compress == "zlib" and len(plain) >= self.compress_min_bytes:
            plain, codec = zlib.compress(plain, 6), CODEC_ZLIB
        if self.cipher is not None:
            plain = self.cipher.encrypt(plain, aad)
            codec = CODEC_AESGCM_ZLIB if codec == CODEC_ZLIB else CODEC_AESGCM
        return codec, plain

    def _unpack_value(self, codec: int, value: Any, aad: bytes, where: str, **fields: Any) -> bytes:
        if not isinstance(value, bytes | memoryview):
            raise CorruptRecordError(
                f"{where} is authentic but its {CODEC_NAMES[codec]} value is not bytes", **fields
            )
        data = bytes(value)
        if codec in (CODEC_AESGCM, CODEC_AESGCM_ZLIB):
            if self.cipher is None:
                raise DecryptionError(
                    f"{where} is encrypted and no encryption key is configured: set "
                    "[durability] encrypt = true and the key in the variable named by "
                    "encryption_key_env (RESUMABLE_ENCRYPTION_KEY unless changed)",
                    **fields,
                )
            try:
                data = self.cipher.decrypt(data, aad)
            except DecryptionError:
                source = self.cipher.source
                key = f"the key in {source}" if source else "this key"
                raise DecryptionError(
                    f"cannot decrypt {where}: wrong or missing encryption key ({key} is not "
                    "the one it was written with, or the data was moved from another run or "
                    "position)",
                    source=source,
                    **fields,
                ) from None
        if codec in (CODEC_ZLIB, CODEC_AESGCM_ZLIB):
            try:
                data = zlib.decompress(data)
            except zlib.error as exc:
                raise CorruptRecordError(
                    f"{where} is authentic but does not decompress ({exc})", **fields
                ) from None
        return data


def _describe(run_id: str | None, seq: int | None) -> str:
    if run_id is not None and seq is not None:
        return f"record {seq} of run {run_id}"
    if run_id is not None:
        return f"a record of run {run_id}"
    return f"record {seq}" if seq is not None else "record"


def _decoded(
    data: bytes | memoryview, part: str, where: str, run_id: str | None, seq: int | None
) -> Any:
    """msgpack ``data`` of an authentic record: undecodable means a writer bug, not tampering."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:
        raise CorruptRecordError(
            f"{where} is authentic but its {part} cannot be decoded ({exc})",
            run_id=run_id,
            seq=seq,
        ) from None


def _map(value: Any, part: str, where: str, run_id: str | None, seq: int | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CorruptRecordError(
            f"{where} is authentic but its {part} is not a map", run_id=run_id, seq=seq
        )
    return value


def _schema_error(
    version: Any, where: str, run_id: str | None, seq: int | None
) -> RecordVersionError:
    return RecordVersionError(
        f"{where} has schema version {version!r}; this version of resumable reads "
        f"version {SCHEMA_VERSION} only: upgrade resumable",
        run_id=run_id,
        seq=seq,
        version=version,
    )
