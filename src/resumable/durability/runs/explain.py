"""What a user asks first about a run that stopped: what is it waiting for, what did it die
of, where did it come from, how often was it tried.

All of it is read from the folded log and the run's metadata; nothing is unpickled.
"""

from __future__ import annotations

import time
from typing import Any

from resumable.durability.log.run_state import RunState
from resumable.durability.runs import control
from resumable.errors import RunNotFoundError
from resumable.store.base import INTERRUPTED, CheckpointStore, RunMeta

APPROVE_OPTIONS = ["yes", "no"]


def question(state: RunState, status: str) -> dict[str, Any] | None:
    """The question a waiting run asked: kind, text, options, timeout and time left."""
    if status != "waiting" or not state.detail.get("key"):
        return None
    detail = state.detail
    timeout = detail.get("timeout")
    asked = detail.get("at")
    left = None
    if timeout is not None and asked is not None:
        left = max(0.0, float(asked) + float(timeout) - time.time())
    return {
        "key": detail["key"],
        "kind": detail.get("kind", "input"),
        "text": detail.get("prompt", ""),
        "options": APPROVE_OPTIONS if detail.get("kind") == "approve" else None,
        "timeout": timeout,
        "asked_at": asked,
        "seconds_left": left,
    }


def failure(state: RunState, meta: RunMeta, status: str) -> dict[str, Any] | None:
    """Why a failed run failed: the message, the traceback, and the code line it came from."""
    if status != "failed":
        return None
    found: dict[str, Any] = {"message": state.detail.get("error") or "", "traceback": ""}
    gave_up = control.gave_up(meta)
    if gave_up:
        found["message"] = gave_up
    for frame in state.frames.values():
        if not frame.errors:
            continue
        err = frame.errors[-1]
        found["frame"] = frame.frame_id
        found["traceback"] = err.get("traceback") or ""
        if not found["message"]:
            found["message"] = err.get("message", "")
        turn_index = err.get("t", frame.turn)
        line = int(err.get("line") or 0)
        if 0 <= turn_index < len(frame.turns) and line > 0:
            lines = frame.turns[turn_index].text.splitlines()
            if line <= len(lines):
                found["line"] = line
                found["response"] = turn_index + 1
                found["code"] = lines[line - 1]
    return found


async def lineage(store: CheckpointStore, meta: RunMeta) -> list[dict[str, Any]]:
    """The runs this one was forked from, nearest first, with the record and the edits."""
    chain: list[dict[str, Any]] = []
    seen = {meta.run_id}
    current = meta
    while current.parent is not None and current.parent not in seen:
        step = {
            "run_id": current.parent,
            "at": current.extra.get("forked_at"),
            "edits": current.extra.get("fork_edits") or {},
        }
        chain.append(step)
        seen.add(current.parent)
        try:
            current = await store.get_meta(current.parent)
        except RunNotFoundError:  # the parent was deleted (gc): the chain ends here
            step["deleted"] = True
            break
    return chain


def attempts(meta: RunMeta, seq: int, status: str) -> dict[str, Any]:
    """Attempts made, and those in a row that failed without progress (what max_attempts
    limits; the attempt of a run still running is not counted before it ends)."""
    extra = meta.extra
    crashes = extra.get(control.CRASHES)
    failed = control.failures(meta, seq) if status == "crashed" else crashes
    return {
        "made": control.attempts(meta),
        "failed_in_a_row": failed if isinstance(failed, int) else 0,
        "last_error": extra.get(control.LAST_ERROR) or None,
        "cancel": extra.get(control.CANCEL) or None,
        "interrupted": extra.get(INTERRUPTED) or None,
    }
