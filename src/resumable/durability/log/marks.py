"""What the last record of a batch says: how much program output and written files it covers."""

from __future__ import annotations

from resumable.durability.effects.written_files import files_mark
from resumable.durability.log.records import Record
from resumable.exec.output import output_mark

__all__ = ["mark_batch"]


def mark_batch(records: list[Record]) -> tuple[int, int] | None:
    """Mark the last of ``records`` with the program output printed before it (printed once
    it is durable: resumable.exec.output) and how far the program's files were written
    (flushed now: what it counts has reached the OS); the output's mark, if any."""
    mark = output_mark()
    if mark is not None:
        records[-1].body["op"] = mark[0]
    written = files_mark()
    if written is not None:
        records[-1].body["of"] = written
    return mark
