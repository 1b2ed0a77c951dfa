"""The blob folder of a FileStore run: listing what it holds and deleting blobs no one needs.

Blobs are written once (temp + rename) under ``runs/<run_id>/blobs/<digest>``; a temp file
left by a writer that died before its rename starts with ``.`` and is never listed. A
delete unlinks each file and fsyncs the folder once, so a power loss keeps either the
blob or nothing. Which blobs are no longer needed is decided above the store
(:mod:`resumable.durability.runs.blob_sweep`), under the run's lock.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from resumable.store.filesystem.segments import fsync_dir


def list_blob_files(folder: Path) -> dict[str, int]:
    """Every blob in ``folder``: digest -> size in bytes."""
    found: dict[str, int] = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                found[entry.name] = entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:  # deleted while listed
                continue
    return found


def delete_blob_files(folder: Path, digests: Collection[str], fsync: bool) -> int:
    """Unlink the named blobs of ``folder``; returns how many were there."""
    deleted = 0
    for digest in digests:
        try:
            (folder / digest).unlink()
        except FileNotFoundError:
            continue
        deleted += 1
    if deleted and fsync:
        fsync_dir(folder)
    return deleted
