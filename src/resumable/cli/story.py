"""The first lines of ``resumable show``: where a run came from, what it waits for, what it
died of, how it was stopped, how often it was tried."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from resumable.durability.runs.stored import RunView


def story(view: RunView) -> list[str]:
    lines = [*_lineage(view.lineage)]
    if view.question:
        lines += _question(view.run_id, view.question)
    if view.error:
        lines += _error(view.error, script=view.kind == "script")
    cancel = view.attempts.get("cancel")
    if view.status == "cancelled":
        reason = (cancel or {}).get("reason") or view.detail.get("reason") or ""
        lines.append(f"cancelled: {reason}" if reason else "cancelled")
    elif cancel and not cancel.get("done"):
        lines.append(f"cancel requested: {cancel.get('reason') or 'no reason given'}")
    interrupted = view.attempts.get("interrupted")
    if view.status == "interrupted" and interrupted:
        lines.append(f"interrupted: {interrupted}")
    made = view.attempts.get("made") or 0
    if made > 1:
        last = view.attempts.get("last_error")
        failed = view.attempts.get("failed_in_a_row") or 0
        lines.append(
            f"attempts: {made}; failed in a row without progress: {failed} (max_attempts "
            "counts these; an attempt that writes a new record starts again from 0)"
            + (f"; last error: {last}" if last else "")
        )
    return lines


def _lineage(chain: list[dict[str, Any]]) -> list[str]:
    lines = []
    for step in chain:
        edits = step.get("edits") or {}
        changes = [f"{name}={value}" for name, value in (edits.get("set") or {}).items()]
        if edits.get("edit_code"):
            changes.append(f"code from {edits['edit_code']}")
        with_edits = f" with {', '.join(changes)}" if changes else ""
        gone = " (deleted since)" if step.get("deleted") else ""
        lines.append(f"forked from {step['run_id']}{gone} at record {step['at']}{with_edits}")
    return lines


def _question(run_id: str, question: dict[str, Any]) -> list[str]:
    lines = [f"waiting for an answer ({question['kind']}): {question['text']}"]
    if question.get("options"):
        lines.append(f"  options: {' / '.join(question['options'])}")
    if question.get("timeout") is not None:
        left = question.get("seconds_left")
        lines.append(
            f"  timeout: {question['timeout']:g}s"
            + (f", {left:.0f}s left" if left is not None else "")
        )
    lines.append(f"  answer with: resumable answer {run_id} TEXT")
    return lines


def _error(error: dict[str, Any], *, script: bool) -> list[str]:
    lines = [f"failed: {error.get('message') or 'no message was recorded'}"]
    if error.get("code") is not None:
        where = (
            "of the script"
            if script
            else f"of response {error['response']} of frame {error['frame']}"
        )
        lines.append(
            f"  last error in the code: line {error['line']} {where}: {error['code'].strip()}"
        )
    traceback = (error.get("traceback") or "").rstrip()
    if traceback:
        lines.append("  traceback:")
        lines += [f"    {line}" for line in traceback.splitlines()]
    return lines
