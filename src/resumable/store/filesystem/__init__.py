"""The folder store: one folder per run, its log in append-only segment files.
Owns the store, run folders, the owner's lock, log framing and the fsync helper."""

from __future__ import annotations

from resumable.store.filesystem.segments import HEADER_BYTES, encode_frames, scan_frames
from resumable.store.filesystem.store import FileStore

__all__ = ["HEADER_BYTES", "FileStore", "encode_frames", "scan_frames"]
