"""Encryption at rest: AES-256-GCM for record bodies and blobs.

The key is separate from the MAC key: the MAC proves a record was written by this
installation, the cipher keeps its content private. Every message gets a fresh random
96-bit nonce, and the associated data binds a ciphertext to its place (run and seq for
a record, run and digest for a blob), so a ciphertext moved elsewhere does not decrypt.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from typing import Any

from resumable.errors import DecryptionError
from resumable.extras import import_extra

KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16

_HEX_KEY = re.compile(r"[0-9a-fA-F]{64}")


def generate_key() -> str:
    """A new random key as urlsafe base64, ready for an environment variable."""
    return base64.urlsafe_b64encode(os.urandom(KEY_BYTES)).decode("ascii")


class Cipher:
    """AES-256-GCM with a random nonce per message; the nonce travels in front."""

    __slots__ = ("_aead", "source")

    def __init__(self, key: bytes, *, source: str | None = None) -> None:
        if len(key) != KEY_BYTES:
            raise DecryptionError(
                f"encryption key must be {KEY_BYTES} bytes, not {len(key)}; "
                "`resumable init` prints a new one",
                source=source,
            )
        aead = import_extra(
            "cryptography.hazmat.primitives.ciphers.aead",
            "encryption",
            "[durability] encrypt = true",
            key="durability.encrypt",
        )
        self._aead: Any = aead.AESGCM(key)
        self.source = source
        """Where the key came from (an environment variable), to name it when it is wrong."""

    @classmethod
    def from_key(cls, key: bytes | str, *, source: str | None = None) -> Cipher:
        """Accept raw 32 bytes, or the text of an environment variable (base64 or hex).

        ``source`` names where the key came from (an environment variable) so a
        malformed key is reported by name, never by value.
        """
        if isinstance(key, bytes) and len(key) == KEY_BYTES:
            return cls(key, source=source)
        try:
            text = key.decode("ascii") if isinstance(key, bytes) else key
        except UnicodeDecodeError:
            text = ""
        raw = _parse_key_text(text.strip())
        if raw is None:
            where = f"in {source} " if source else ""
            raise DecryptionError(
                f"encryption key {where}is malformed: expected {KEY_BYTES} bytes as urlsafe "
                "base64 (44 characters) or hex (64 characters); `resumable init` prints a new one",
                source=source,
            )
        return cls(raw, source=source)

    def encrypt(self, plain: bytes, aad: bytes) -> bytes:
        """``nonce + ciphertext + tag``; ``aad`` must be given again to decrypt."""
        nonce = os.urandom(NONCE_BYTES)
        sealed: bytes = self._aead.encrypt(nonce, plain, aad)
        return nonce + sealed

    def decrypt(self, data: bytes, aad: bytes) -> bytes:
        """The plaintext, or DecryptionError if the key or the associated data differ."""
        if len(data) < NONCE_BYTES + TAG_BYTES:
            raise DecryptionError(
                "cannot decrypt: data is too short; wrong or missing encryption key"
            )
        from cryptography.exceptions import InvalidTag

        try:
            plain: bytes = self._aead.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], aad)
            return plain
        except InvalidTag:
            raise DecryptionError(
                "cannot decrypt: wrong or missing encryption key (or the data was moved)"
            ) from None


def _parse_key_text(text: str) -> bytes | None:
    if _HEX_KEY.fullmatch(text):
        return bytes.fromhex(text)
    padded = text.replace("-", "+").replace("_", "/")
    padded += "=" * (-len(padded) % 4)
    try:
        raw = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == KEY_BYTES else None
