"""Fork: a new run made of the first N records of another, optionally edited.

The parent is only read. The fork gets copies of records 1..N (status records left
out: the fork is a run of its own) and of the blobs they refer to, then, for each
edit, records of its own written after them. Where the parent's log was pruned behind
a snapshot, the fork starts from the newest snapshot at or before N instead of record
1: it gets that snapshot, the records after it up to N, and a log that starts after
the snapshot, as a pruned run's does. So a run can be forked anywhere ``steps`` reaches.

- ``--set NAME=LITERAL`` restores the namespace of the frame as of record N, binds the
  names to the literals and writes a boundary record (``stmt``) holding the changed
  namespace at the same position, so the resume starts from it;
- ``--edit-code FILE`` replaces what the frame had not run yet: for a script the
  source in the copied ``run`` record; for a playbook frame its current LLM response,
  whose chunks are copied up to record N and followed by one chunk holding the
  executed part and the new code (and ``turn_end``, so nothing asks the LLM to go on).

Both need record N to be a statement boundary of that frame: the awaits of a
statement in progress are answered from the log by their position in the code, which
an edit would change. The fork records its parent, the record, and the edits in its
metadata; ``show`` prints them.
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgpack

from resumable.durability.capture.snapshot import Snapshotter
from resumable.durability.log import hashseed
from resumable.durability.log.pruned import before_the_oldest, oldest_base, open_state
from resumable.durability.log.records import Record, RecordCodec
from resumable.durability.log.run_state import FrameState, RunState, TurnState
from resumable.durability.log.state_codec import state_from_dict, state_to_dict
from resumable.durability.runs.owners import owner_name
from resumable.durability.runs.session import new_run_id
from resumable.errors import UsageError
from resumable.store.base import (
    CREATOR,
    UNFINISHED_FORK,
    CheckpointStore,
    RunMeta,
    StoredRecord,
)

_EXCLUDE = ("__builtins__", "__resumable__")
Body = tuple[str, str, dict[str, Any], float]
"""A record to write into the fork: kind, frame, body, time."""


@dataclass(frozen=True, slots=True)
class ForkEdits:
    """What to change in the fork: names to rebind (to literals) and the code to run."""

    values: dict[str, Any] = field(default_factory=dict)
    code: str | None = None
    code_file: str | None = None
    frame: str | None = None

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = {}
        if self.values:
            described["set"] = {name: repr(value) for name, value in self.values.items()}
        if self.code_file is not None:
            described["edit_code"] = self.code_file
        return described


def parse_assignment(text: str) -> tuple[str, Any]:
    """``NAME=PYTHON_LITERAL`` as given to ``--set``; a UsageError saying what is wrong."""
    name, sep, literal = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise UsageError(f"--set {text!r}: write NAME=PYTHON_LITERAL, e.g. --set limit=10")
    try:
        value = ast.literal_eval(literal.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise UsageError(
            f"--set {name}: {literal.strip()!r} is not a Python literal; quote text as a "
            f"string, e.g. --set {name}='\"text\"'"
        ) from None
    return name, value


def read_code(path: Path) -> str:
    """The replacement code of ``--edit-code``; refused if it is missing or does not parse."""
    try:
        code = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--edit-code {path}: cannot be read ({exc.strerror})") from None
    try:
        ast.parse(code, str(path))
    except SyntaxError as exc:
        raise UsageError(
            f"--edit-code {path}:{exc.lineno}: the code does not parse: {exc.msg}"
        ) from None
    return code


async def fork_run(
    store: CheckpointStore,
    codec: RecordCodec,
    run_id: str,
    *,
    at: int,
    edits: ForkEdits | None = None,
    new_id: str | None = None,
) -> str:
    """Copy a run up to record ``at`` (and apply ``edits``) into a new run; return its id."""
    edits = edits or ForkEdits()
    await store.get_meta(run_id)
    result = await store.read(run_id, 0)
    last = result.records[-1].seq if result.records else 0
    first = result.records[0].seq if result.records else 1
    lowest = 1 if first == 1 else await _oldest_snapshot(store, run_id, first, last)
    if lowest > 1 and at < lowest:
        raise before_the_oldest(run_id, at, "to fork from", first=first, oldest=lowest, last=last)
    if not lowest <= at <= last:
        raise UsageError(
            f"run {run_id} has no record {at}: choose --at between {lowest} and {last}",
            run_id=run_id,
            at=at,
        )
    # Read, verify and edit everything first: a wrong key, a forged record or a bad edit
    # leaves no fork behind.
    found = await store.get_snapshot(run_id, at) if first > 1 else None
    # the newest at or before `at` (the oldest kept one is)
    state = RunState() if found is None else open_state(codec, run_id, found)
    after = 0 if found is None else found[0]
    records = [r for r in result.records if after < r.seq <= at]
    for expected, stored in enumerate(records, start=after + 1):
        if stored.seq != expected:  # a hole: what follows it cannot be folded
            raise UsageError(
                f"run {run_id}: record {expected} is missing from its log, so its state at "
                f"record {at} cannot be rebuilt: fork it before the gap "
                f"(`resumable fork {run_id} --at {expected - 1}`)",
                run_id=run_id,
                at=at,
            )
    opened = [codec.open(stored.data, run_id=run_id, seq=stored.seq) for stored in records]
    start = None if found is None else _fork_start(state)
    for record in opened:
        state.apply(record)
    digests = {digest for record in opened for digest in record.body.get("b") or ()}
    if start is not None:
        digests.update(_state_blobs(start))
    blobs = {
        digest: codec.open_blob(run_id, digest, await store.get_blob(run_id, digest))
        for digest in sorted(digests)
    }
    bodies = [(r.kind, r.frame, r.body, r.time) for r in opened if r.kind != "status"]
    if edits.values or edits.code is not None:
        frame = _edited_frame(state, edits.frame, run_id, at, opened)
        if edits.code is not None:
            bodies = _replace_code(state, frame, bodies, edits.code, start)
        if edits.values:
            body, new_blobs = _rebind(frame, blobs, edits.values, run_id, at)
            blobs.update(new_blobs)
            bodies.append(("stmt", frame.frame_id, body, time.time()))
    return await _write_fork(store, codec, run_id, at, bodies, blobs, edits, new_id, start)


async def _oldest_snapshot(store: CheckpointStore, run_id: str, first: int, last: int) -> int:
    """The lowest --at of a log pruned up to ``first - 1``: its oldest snapshot from there on
    (a snapshot kept below it would leave records missing between the two)."""
    found = await oldest_base(store, run_id, first, last)
    if found is None:
        raise UsageError(
            f"run {run_id} no longer holds its records 1-{first - 1} and no snapshot stands "
            "for them (they were lost): it cannot be forked; restore them from a backup of "
            "the store",
            run_id=run_id,
        )
    return found[0]


def _fork_start(state: RunState) -> RunState:
    """A copy of a snapshot's state to start a fork from: a run of its own, not finished."""
    copy = state_from_dict(state_to_dict(state))
    copy.status, copy.detail = "running", {}
    return copy


def _state_blobs(state: RunState) -> set[str]:
    """Blobs a folded state refers to: namespaces, arguments, return values, journals."""
    found: set[str] = set()
    for frame in state.frames.values():
        found.update(frame.ns_blobs, frame.args_blobs, frame.result_blobs, frame.journal_blobs())
    return found


def _edited_frame(
    state: RunState, wanted: str | None, run_id: str, at: int, opened: list[Record]
) -> FrameState:
    """The frame the edits apply to: ``wanted``, or the innermost one still running."""
    if wanted is not None:
        frame = state.frames.get(wanted)
        if frame is None:
            raise UsageError(
                f"run {run_id} has no frame {wanted!r} at record {at}; its frames: "
                f"{', '.join(state.frames)}"
            )
    else:
        live = [f for f in state.frames.values() if not f.returned]
        if not live:
            raise UsageError(f"run {run_id} has no running frame at record {at} to edit")
        frame = max(live, key=lambda f: f.last_seq)
    if frame.journal or frame.window is not None:
        # In a replay window the namespace is the one before the window: a boundary
        # without a task still running is where a namespace can be edited.
        boundary = max(
            (
                r.seq
                for r in opened
                if r.kind == "stmt" and r.frame == frame.frame_id and not r.body.get("live")
            ),
            default=None,
        )
        hint = f"; the last one before it is record {boundary}" if boundary else ""
        where = (
            "inside a statement"
            if frame.window is None
            else "while a task or a generator outlives the statement that made it, in"
        )
        raise UsageError(
            f"record {at} of run {run_id} is {where} frame {frame.frame_id}: "
            f"--set and --edit-code need --at at a statement boundary{hint}",
            run_id=run_id,
            at=at,
        )
    return frame


def _rebind(
    frame: FrameState,
    blobs: dict[str, bytes],
    values: dict[str, Any],
    run_id: str,
    at: int,
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """A ``stmt`` body at the frame's position whose namespace has ``values`` bound."""
    snapshotter = Snapshotter()
    namespace: dict[str, Any] = {}
    if frame.ns is not None:
        snapshotter.restore(frame.ns, load_blob=blobs.__getitem__, into=namespace)
    missing = [name for name in values if name not in namespace]
    if missing:
        known = ", ".join(sorted(n for n in namespace if not n.startswith("__"))) or "none"
        raise UsageError(
            f"--set {missing[0]}: frame {frame.frame_id} of run {run_id} has no variable "
            f"{missing[0]!r} at record {at} (its variables: {known})"
        )
    namespace.update(values)
    capture = snapshotter.capture(namespace, exclude=_EXCLUDE)
    body: dict[str, Any] = {
        "t": max(frame.turn, 0),
        "i": frame.next_index - 1,
        "end": frame.offset,
        "ns": capture.data,
        "b": sorted(capture.blobs),
    }
    if capture.lost:
        body["lost"] = capture.lost
    return body, dict(capture.new_blobs)


def _replace_code(
    state: RunState,
    frame: FrameState,
    bodies: list[Body],
    code: str,
    start: RunState | None,
) -> list[Body]:
    """The records with the frame's code from its position on replaced by ``code`` (and,
    in the snapshot a fork ``start``s from, the part of the response it already holds)."""
    turn = frame.current_turn()
    executed = turn.text[: frame.offset] if turn is not None else ""
    joined = executed + ("" if not executed or executed.endswith("\n") else "\n") + code
    based = start.frames.get(frame.frame_id) if start is not None else None
    if state.kind == "script" and frame.frame_id == "main":
        if start is not None and based is not None:  # the run record was pruned
            start.source = joined
            based.turns = [TurnState(0, [joined], complete=True)]
        return [
            (kind, frame_id, {**body, "source": joined} if kind == "run" else body, when)
            for kind, frame_id, body, when in bodies
        ]
    if turn is None:
        raise UsageError(f"frame {frame.frame_id} has no LLM response yet: nothing to edit")
    if based is not None and turn.index < len(based.turns):
        based.turns[turn.index].chunks = []  # the chunk below holds all of it
    kept = [
        item
        for item in bodies
        if not (item[0] == "chunk" and item[1] == frame.frame_id and item[2]["t"] == turn.index)
    ]
    now = time.time()
    kept.append(("chunk", frame.frame_id, {"t": turn.index, "text": joined}, now))
    if not turn.complete:
        kept.append(("turn_end", frame.frame_id, {"t": turn.index, "usage": None, "ms": None}, now))
    return kept


async def _write_fork(
    store: CheckpointStore,
    codec: RecordCodec,
    parent: str,
    at: int,
    bodies: list[Body],
    blobs: dict[str, bytes],
    edits: ForkEdits,
    new_id: str | None,
    start: RunState | None,
) -> str:
    meta = await store.get_meta(parent)
    fork_id = new_id or new_run_id()
    now = time.time()
    # the fork replays the parent's history: it must hash strings as the parent did
    extra: dict[str, Any] = {"forked_at": at, **hashseed.carried(meta.extra)}
    if edits.describe():
        extra["fork_edits"] = edits.describe()
    fork_meta = RunMeta(
        fork_id,
        meta.program,
        kind=meta.kind,
        status="waiting",
        created_at=now,
        updated_at=now,
        parent=parent,
        extra={**extra, UNFINISHED_FORK: True, CREATOR: owner_name()},  # until it is whole
    )
    await store.create_run(fork_meta)
    lease = await store.acquire(fork_id, owner_name())
    try:
        base = 0 if start is None else start.seq
        copied: list[StoredRecord] = []
        for kind, frame_id, body, when in bodies:
            seq = base + len(copied) + 1
            record = Record(fork_id, seq, kind, frame_id, when, lease.epoch, body)
            copied.append(StoredRecord(record.seq, lease.epoch, codec.seal(record)))
        if start is not None and not copied:
            # A log that starts after its snapshot, as a pruned run's does: every store
            # takes a first append after seq 1 for that, so the fork begins its own log.
            begun = {"status": "running", "detail": {}}
            record = Record(fork_id, base + 1, "status", "main", now, lease.epoch, begun)
            copied.append(StoredRecord(record.seq, lease.epoch, codec.seal(record)))
        for digest, plain in blobs.items():
            await store.put_blob(fork_id, digest, codec.seal_blob(fork_id, digest, plain))
        await store.append(fork_id, copied, lease)
        if start is not None:
            start.run_id = fork_id
            state = msgpack.packb(state_to_dict(start), use_bin_type=True)
            snapshot = Record(fork_id, base, "snapshot", "", now, lease.epoch, {"state": state})
            await store.put_snapshot(fork_id, base, codec.seal(snapshot), lease)
        # "running" with no owner: crashed, so `resume` (or a worker) takes it from here
        await store.put_meta(replace(fork_meta, status="running", owner=None, extra=extra))
    finally:
        await store.release(lease)
    return fork_id
