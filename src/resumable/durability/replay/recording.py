"""The await record's format: its value pickled for replay, or marked as one that runs again.

Shared by the journal of a script's statements and the journals of an embedded run, so a
result is recorded the same way whichever journal made the call.

Logs written before the replay model journaled program awaits as well: a statement in
progress recorded that way is replayed from its leaf awaits (its records whose body ran no
other await, :func:`legacy_leaves`), which is what the model journals now.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from resumable.durability.log.run_state import AwaitEntry
from resumable.durability.replay.scopes import TRANSPARENT

if TYPE_CHECKING:
    from resumable.durability.capture.snapshot import Snapshotter

NEW_MODEL = -1
"""The ``n`` of an await record written by this model (older logs hold a key counter)."""


def record_value(
    body: dict[str, Any], snapshotter: Snapshotter, value: Any, ns: Mapping[str, Any]
) -> tuple[dict[str, bytes], Exception | None]:
    """Put ``value`` into the record ``body``; the blobs to store and why it is not replayable.

    A value that cannot be pickled is recorded as outcome ``"x"`` with its description, so
    replay makes that call again instead of answering it; the error is returned for the
    caller to warn about when the user should know. A transparent await records no value.
    """
    if body["o"] == TRANSPARENT:
        return {}, None
    try:
        pickled = snapshotter.dumps_value(value, ns)
    except Exception as exc:
        body["o"] = "x"
        body["v"] = f"{type(value).__name__}: {exc}"
        return {}, exc
    body["v"] = pickled.data
    if pickled.blobs:
        body["b"] = sorted(pickled.blobs)
    return dict(pickled.new_blobs), None


def discard(awaitable: Awaitable[Any] | None) -> None:
    """Drop an awaitable that replay answers from the log, without running it."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()


def legacy_leaves(journal: dict[Any, AwaitEntry]) -> dict[Any, AwaitEntry]:
    """An in-progress journal of the older model, as this model keys it (root task only)."""
    if not journal or all(entry.next_key == NEW_MODEL for entry in journal.values()):
        return journal
    leaves = [e for k, e in journal.items() if isinstance(k, int) and e.next_key == k + 1]
    leaves.sort(key=lambda entry: entry.seq)
    return dict(enumerate(leaves))
