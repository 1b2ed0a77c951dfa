"""Sealed records and blobs: round trips, and every way a forged or foreign record is refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import zlib
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.durability.log.crypto import Cipher, generate_key
from resumable.durability.log.records import SCHEMA_VERSION, Record, RecordCodec
from resumable.errors import (
    CorruptRecordError,
    DecryptionError,
    IntegrityError,
    RecordTooLargeError,
    RecordVersionError,
)

KEY = b"k" * 32


def record(body: dict[str, Any] | None = None, *, run_id: str = "run-1", seq: int = 7) -> Record:
    return Record(
        run_id, seq, "await", "main/3", 1700000000.25, 2, body or {"result": b"\x80pickle"}
    )


def forge(payload: object, *, version: int = 1, codec: int = 0, key: bytes = KEY) -> bytes:
    """A sealed record as a writer holding the key (e.g. a future resumable) would make it.

    ``bytes`` are sealed as they are: a payload that is not msgpack at all.
    """
    header = bytes((version, codec))
    packed = payload if isinstance(payload, bytes) else msgpack.packb(payload, use_bin_type=True)
    return header + hmac.new(key, header + packed, hashlib.sha256).digest() + packed


def envelope(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "v": SCHEMA_VERSION,
        "run": "run-1",
        "seq": 7,
        "kind": "await",
        "frame": "main",
        "time": 1.0,
        "epoch": 1,
        "body": {"x": 1},
    }
    return {**base, **changes}


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
bodies = st.dictionaries(st.text(max_size=8), msgpack_values, max_size=6)


# -- round trips --------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(body=bodies, seq=st.integers(min_value=1, max_value=2**62))
def test_seal_then_open_returns_the_same_record(body: dict[str, object], seq: int) -> None:
    codec = RecordCodec(KEY)
    original = record(body, seq=seq)
    assert codec.open(codec.seal(original), run_id="run-1", seq=seq) == original


@settings(max_examples=50, deadline=None)
@given(body=bodies)
def test_round_trip_with_compression_and_encryption(body: dict[str, object]) -> None:
    codec = RecordCodec(
        KEY, compress="zlib", compress_min_bytes=0, cipher=Cipher.from_key(os.urandom(32))
    )
    original = record(body)
    sealed = codec.seal(original)
    assert codec.open(sealed, run_id="run-1", seq=7) == original


def test_open_without_expected_position_still_verifies_and_decodes() -> None:
    codec = RecordCodec(KEY)
    assert codec.open(codec.seal(record())) == record()


# -- forged, damaged, foreign -------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [{}, {"compress": "zlib", "compress_min_bytes": 0}, {"cipher": Cipher(b"c" * 32)}],
)
def test_changing_any_byte_is_refused_as_an_integrity_error(options: dict[str, object]) -> None:
    codec = RecordCodec(KEY, **options)  # type: ignore[arg-type]
    sealed = codec.seal(record({"result": b"\x80\x04pickled" * 8, "n": 12}))
    for index in range(len(sealed)):
        for flip in (0x01, 0x80):
            damaged = bytearray(sealed)
            damaged[index] ^= flip
            with pytest.raises(IntegrityError):
                codec.open(bytes(damaged))


def test_truncated_or_extended_records_are_integrity_errors() -> None:
    codec = RecordCodec(KEY)
    sealed = codec.seal(record())
    for cut in (0, 1, 2, 33, 34, len(sealed) - 1):
        with pytest.raises(IntegrityError):
            codec.open(sealed[:cut])
    with pytest.raises(IntegrityError):
        codec.open(sealed + b"\x00")


def test_a_record_sealed_with_another_key_is_refused() -> None:
    sealed = RecordCodec(b"other key").seal(record())
    with pytest.raises(IntegrityError, match="MAC key"):
        RecordCodec(KEY).open(sealed, run_id="run-1", seq=7)


def test_a_record_moved_to_another_run_or_position_is_refused() -> None:
    codec = RecordCodec(KEY)
    sealed = codec.seal(record(run_id="run-1", seq=7))
    with pytest.raises(IntegrityError, match="run-1") as moved:
        codec.open(sealed, run_id="run-2", seq=7)
    assert moved.value.fields["run_id"] == "run-2"
    with pytest.raises(IntegrityError, match="record 7"):
        codec.open(sealed, run_id="run-1", seq=8)


def test_unknown_format_version_is_refused_after_the_mac() -> None:
    forged = forge(envelope(), version=2)
    with pytest.raises(RecordVersionError, match="format version 2"):
        RecordCodec(KEY).open(forged)
    with pytest.raises(IntegrityError):
        RecordCodec(KEY).open(forge(envelope(), version=2, key=b"wrong"))


def test_unknown_codec_tag_is_refused_not_guessed() -> None:
    with pytest.raises(RecordVersionError, match="codec tag 9"):
        RecordCodec(KEY).open(forge(envelope(), codec=9))


def test_unknown_schema_version_is_refused() -> None:
    with pytest.raises(RecordVersionError, match="schema version 2"):
        RecordCodec(KEY).open(forge(envelope(v=2)))


NOT_MSGPACK = b"\xc1"
"""A byte msgpack never uses."""


@pytest.mark.parametrize(
    ("forged", "message"),
    [
        (forge(NOT_MSGPACK), "its envelope cannot be decoded"),
        (forge([1, 2]), "its envelope is not a map"),
        (forge(envelope(body=[1, 2])), "its body is not a map"),
        (forge(envelope(body=zlib.compress(NOT_MSGPACK)), codec=1), "its body cannot be decoded"),
        (forge(envelope(body=zlib.compress(msgpack.packb(3))), codec=1), "its body is not a map"),
    ],
)
def test_an_authentic_record_that_does_not_decode_is_corrupt_not_forged(
    forged: bytes, message: str
) -> None:
    with pytest.raises(
        CorruptRecordError, match=f"record 7 of run run-1 is authentic but {message}"
    ):
        RecordCodec(KEY).open(forged, run_id="run-1", seq=7)


# -- size limit and compression -------------------------------------------------------


def test_a_record_over_the_limit_names_run_seq_kind_size_and_limit() -> None:
    codec = RecordCodec(KEY, max_record_bytes=1000)
    codec.seal(record({"data": b"x" * 800}))
    with pytest.raises(RecordTooLargeError, match="max_record_bytes") as too_large:
        codec.seal(record({"data": b"x" * 2000}))
    fields = too_large.value.fields
    assert (fields["run_id"], fields["seq"], fields["kind"], fields["limit"]) == (
        "run-1",
        7,
        "await",
        1000,
    )
    assert fields["size"] > 2000
    assert "record 7 (await) of run run-1" in str(too_large.value)


def test_compression_shrinks_large_bodies_and_leaves_small_ones_alone() -> None:
    plain = RecordCodec(KEY)
    packed = RecordCodec(KEY, compress="zlib", compress_min_bytes=1024)
    big = record({"text": "the same line again\n" * 500})
    small = record({"text": "short"})
    assert len(packed.seal(big)) < len(plain.seal(big)) // 10
    assert len(packed.seal(small)) == len(plain.seal(small))
    assert packed.open(packed.seal(small)) == small
    assert plain.open(packed.seal(big)) == big  # any codec reads what the other wrote


def test_compression_lets_a_large_but_repetitive_record_under_the_limit() -> None:
    body = {"text": "a" * 100_000}
    with pytest.raises(RecordTooLargeError):
        RecordCodec(KEY, max_record_bytes=50_000).seal(record(body))
    codec = RecordCodec(KEY, compress="zlib", max_record_bytes=50_000)
    assert codec.open(codec.seal(record(body))) == record(body)


# -- encryption -----------------------------------------------------------------------


def test_encrypted_bodies_are_not_readable_in_the_sealed_bytes() -> None:
    codec = RecordCodec(KEY, cipher=Cipher.from_key(generate_key()))
    sealed = codec.seal(record({"secret": "correct horse battery staple"}))
    assert b"correct horse" not in sealed


def test_a_wrong_encryption_key_is_a_decryption_error() -> None:
    sealed = RecordCodec(KEY, cipher=Cipher.from_key(generate_key())).seal(record())
    other = RecordCodec(KEY, cipher=Cipher.from_key(generate_key()))
    with pytest.raises(DecryptionError, match="wrong or missing encryption key"):
        other.open(sealed)
    with pytest.raises(DecryptionError, match="no encryption key"):
        RecordCodec(KEY).open(sealed)


def test_an_encrypted_body_does_not_decrypt_at_another_position() -> None:
    cipher = Cipher.from_key(generate_key())
    first = RecordCodec(KEY, cipher=cipher).seal(record(seq=1))
    second_body = msgpack.unpackb(first[34:], raw=False)["body"]
    moved = forge(envelope(seq=2, body=second_body), codec=2)  # attacker holds the MAC key
    with pytest.raises(DecryptionError):
        RecordCodec(KEY, cipher=cipher).open(moved)


def test_cipher_keys_from_the_environment() -> None:
    raw = os.urandom(32)
    urlsafe = base64.urlsafe_b64encode(raw).decode()
    for text in (urlsafe, urlsafe.rstrip("="), raw.hex(), f"  {raw.hex().upper()}\n"):
        cipher = Cipher.from_key(text, source="RESUMABLE_ENCRYPTION_KEY")
        assert Cipher(raw).decrypt(cipher.encrypt(b"plain", b"aad"), b"aad") == b"plain"
    assert len(base64.urlsafe_b64decode(generate_key())) == 32
    assert generate_key() != generate_key()


@pytest.mark.parametrize(
    "text", ["", "short", "x" * 44, "ab" * 31, base64.b64encode(b"k" * 16).decode()]
)
def test_a_malformed_key_names_the_variable_not_the_value(text: str) -> None:
    with pytest.raises(DecryptionError, match="MY_KEY_VAR") as malformed:
        Cipher.from_key(text, source="MY_KEY_VAR")
    assert malformed.value.fields["source"] == "MY_KEY_VAR"
    if text:
        assert text not in str(malformed.value)


def test_decrypt_refuses_other_associated_data_and_short_input() -> None:
    cipher = Cipher.from_key(generate_key())
    data = cipher.encrypt(b"plain", b"run-1\x00seq-1")
    with pytest.raises(DecryptionError):
        cipher.decrypt(data, b"run-1\x00seq-2")
    with pytest.raises(DecryptionError):
        cipher.decrypt(data[:20], b"run-1\x00seq-1")


# -- blobs -----------------------------------------------------------------------------


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    "options",
    [{}, {"compress": "zlib", "compress_min_bytes": 0}, {"cipher": Cipher(b"c" * 32)}],
)
def test_blobs_round_trip_and_are_bound_to_run_and_digest(options: dict[str, object]) -> None:
    codec = RecordCodec(KEY, **options)  # type: ignore[arg-type]
    data = b"large immutable value " * 300
    digest = digest_of(data)
    sealed = codec.seal_blob("run-1", digest, data)
    assert codec.open_blob("run-1", digest, sealed) == data
    with pytest.raises(IntegrityError, match="run-2"):
        codec.open_blob("run-2", digest, sealed)
    other = digest_of(b"something else")
    with pytest.raises(IntegrityError, match=other):
        codec.open_blob("run-1", other, sealed)
    damaged = bytearray(sealed)
    damaged[-1] ^= 1
    with pytest.raises(IntegrityError):
        codec.open_blob("run-1", digest, bytes(damaged))


def test_a_blob_whose_content_does_not_match_its_digest_is_refused() -> None:
    codec = RecordCodec(KEY)
    wrong = digest_of(b"what the writer claimed")
    sealed = codec.seal_blob("run-1", wrong, b"what it stored")
    with pytest.raises(IntegrityError, match="does not match its digest"):
        codec.open_blob("run-1", wrong, sealed)
