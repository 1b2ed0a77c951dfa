"""The folded run state as a snapshot holds it, and back.

A snapshot is :class:`~resumable.durability.log.run_state.RunState` written out by the checkpoint
manager every ``snapshot_every`` records, so a resume folds only the records after it. The
format only grows: fields are added with a default for snapshots written before them.
"""

from __future__ import annotations

from typing import Any

import msgpack

from resumable.durability.log.records import Record
from resumable.durability.log.run_state import AwaitEntry, FrameState, RunState, TurnState

__all__ = ["snapshot_record", "state_from_dict", "state_to_dict"]

_RUN_FIELDS = (
    "run_id",
    "program",
    "kind",
    "source",
    "entry",
    "status",
    "detail",
    "answers",
    "asks",
    "agent",
    "seq",
    "last_event_seq",
    "output",
    "files",
    "counted_output",
    "last_await",
    "time",
)
"""Fields of :class:`RunState` a snapshot holds as they are, under their own names."""

_FRAME_FIELDS = (
    "playbook",
    "parent",
    "args",
    "args_blobs",
    "turn",
    "next_index",
    "offset",
    "ns",
    "ns_blobs",
    "lost",
    "journal_stmt",
    "errors",
    "returned",
    "result",
    "result_blobs",
    "last_seq",
    "task_names",
    "output",
    "files",
    "agent",
)
"""Fields of :class:`FrameState` a snapshot holds as they are, under their own names."""


def _copied(source: RunState | FrameState, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(source, name) for name in names}


def state_to_dict(state: RunState) -> dict[str, Any]:
    """The folded state as a snapshot record holds it (msgpack-ready)."""
    frames = [_frame_to_dict(f) for f in state.frames.values()]
    return {**_copied(state, _RUN_FIELDS), "frames": frames}


def snapshot_record(run_id: str, state: RunState, epoch: int, at: float) -> Record:
    """The snapshot of ``state`` (the run folded up to its seq), taken at time ``at``."""
    packed = msgpack.packb(state_to_dict(state), use_bin_type=True)
    return Record(run_id, state.seq, "snapshot", "", at, epoch, {"state": packed})


def state_from_dict(data: dict[str, Any]) -> RunState:
    """The folded state of a snapshot record (older snapshots lack some fields)."""
    state = RunState(
        run_id=data["run_id"],
        program=data["program"],
        kind=data["kind"],
        source=data["source"],
        entry=data.get("entry"),
        status=data["status"],
        detail=dict(data.get("detail") or {}),
        answers=dict(data.get("answers") or {}),
        asks=dict(data.get("asks") or {}),
        agent=data.get("agent"),
        seq=data["seq"],
        last_event_seq=data.get("last_event_seq", data["seq"]),
        output=data.get("output", 0),
        files=dict(data.get("files") or {}),
        counted_output=data.get("counted_output", data["kind"] == "script"),
        last_await=data.get("last_await", 0),
        time=data["time"],
    )
    for item in data["frames"]:
        frame = _frame_from_dict(item)
        state.frames[frame.frame_id] = frame
        if frame.window is not None:
            state.windows.add(frame.frame_id)
    return state


def _entries(journal: dict[int | str, AwaitEntry]) -> list[list[Any]]:
    return [
        [k, e.site, e.outcome, e.value, e.next_key, e.seq, list(e.blobs), e.output, e.yielded]
        for k, e in journal.items()
    ]


def _journal_of(items: list[list[Any]]) -> dict[int | str, AwaitEntry]:
    journal: dict[int | str, AwaitEntry] = {}
    for key, site, outcome, value, next_key, seq, blobs, *rest in items:
        output, yielded = (*rest, None, True)[:2]  # older snapshots lack them
        journal[key] = AwaitEntry(
            site, outcome, value, next_key, seq, tuple(blobs), output, yielded
        )
    return journal


def _frame_to_dict(frame: FrameState) -> dict[str, Any]:
    return {
        "id": frame.frame_id,
        **_copied(frame, _FRAME_FIELDS),
        "turns": [
            [t.index, t.text, t.complete, t.prompt, t.usage, t.ms, t.reply_filter, t.fix, t.retries]
            for t in frame.turns
        ],
        "journal": _entries(frame.journal),
        "window": None
        if frame.window is None
        else [[t, i, _entries(journal)] for (t, i), journal in frame.window.items()],
        "window_start": None if frame.window_start is None else list(frame.window_start),
        "marks": [[t, i, seq] for (t, i), seq in frame.marks.items()],
    }


def _frame_from_dict(data: dict[str, Any]) -> FrameState:
    frame = FrameState(
        data["id"],
        playbook=data["playbook"],
        parent=data["parent"],
        args=data["args"],
        args_blobs=list(data.get("args_blobs") or ()),  # older snapshots lack them
        turn=data["turn"],
        next_index=data["next_index"],
        offset=data["offset"],
        ns=data["ns"],
        ns_blobs=list(data["ns_blobs"]),
        lost=dict(data["lost"]),
        journal_stmt=data["journal_stmt"],
        errors=list(data["errors"]),
        returned=data["returned"],
        result=data["result"],
        result_blobs=list(data.get("result_blobs") or ()),
        last_seq=data["last_seq"],
        task_names=data.get("task_names", 0),
        output=data.get("output", 0),
        files=dict(data.get("files") or {}),
        agent=data.get("agent"),
    )
    for index, text, complete, prompt, usage, ms, *rest in data["turns"]:
        chunks = [text] if text else []
        filtered, fix, retries = (*rest, 0, 0, 0)[:3]  # older snapshots lack them
        frame.turns.append(
            TurnState(index, chunks, complete, prompt, usage, ms, filtered, fix, retries)
        )
    frame.journal = _journal_of(data["journal"])
    if data.get("window") is not None:
        # Older snapshots key the window by statement index alone (scripts: turn 0), and
        # kept the frame's position at the window's start while it was open.
        frame.window = {
            (item[0], item[1]) if len(item) == 3 else (0, item[0]): _journal_of(item[-1])
            for item in data["window"]
        }
        start = data.get("window_start")
        frame.window_start = (
            (start[0], start[1], start[2])
            if start is not None
            else (max(frame.turn, 0), frame.next_index, frame.offset)
        )
    frame.marks = {(t, i): seq for t, i, seq in data.get("marks") or ()}
    return frame
