"""Operations on stored runs: list, show, answer (fork: ``fork.py``, gc: ``garbage.py``).

These only read (``list_runs``, ``show_run``) or write new things (``answer_run``);
none of them changes an existing checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from resumable.durability.capture.snapshot import Snapshotter
from resumable.durability.log.pruned import before_the_oldest, oldest_base
from resumable.durability.log.records import Record, RecordCodec
from resumable.durability.log.run_state import FrameState, RunState
from resumable.durability.runs import control, explain, owners
from resumable.durability.runs.owners import owner_name
from resumable.durability.runs.recovery import (
    RunLoader,
    code_of,
    executed_code,
    log_damage,
    remaining_code,
)
from resumable.errors import RunNotFoundError, UsageError
from resumable.exec.statement import line_at
from resumable.store.base import (
    LISTED_STATUSES,
    RESUMABLE_STATUSES,
    CheckpointStore,
    RunSummary,
    StoredRecord,
)
from resumable.store.holes import log_extent


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    program: str
    kind: str
    status: str
    records: int
    last_checkpoint: float | None
    created: float
    updated: float = 0.0
    problem: str | None = None
    """Why a ``damaged`` run's metadata cannot be read (``resumable repair`` fixes it)."""

    def to_json(self) -> dict[str, Any]:
        """Every field but ``updated``, which sorts the list but is not shown."""
        return {name: value for name, value in asdict(self).items() if name != "updated"}


SORTS = ("created", "updated", "status", "program", "records")


async def list_runs(
    store: CheckpointStore,
    *,
    statuses: Collection[str] = (),
    program: str | None = None,
    since: float | None = None,
    limit: int | None = None,
    sort: str = "created",
) -> list[RunRow]:
    """Runs that pass the filters, newest first (or by ``sort``), at most ``limit``.

    ``program`` matches anywhere in the program's path; ``since`` keeps runs created then
    or later.
    """
    for status in statuses:
        if status not in LISTED_STATUSES:
            raise UsageError(
                f"--status {status!r} is not a status; use one of {', '.join(LISTED_STATUSES)}"
            )
    if sort not in SORTS:
        raise UsageError(f"--sort {sort!r}: sort by one of {', '.join(SORTS)}")
    rows = []
    for summary in await owners.listed(store):
        meta = summary.meta
        if statuses and summary.status not in statuses:
            continue
        if program and program not in meta.program:
            continue
        if since is not None and meta.created_at < since:
            continue
        status, problem = summary.status, summary.damaged or control.unfinished_fork(meta)
        if problem is None and summary.never_started:
            problem = control.never_started(meta.run_id)
        if problem is None and not summary.live and summary.last_seq > 0:
            lost = await log_damage(store, meta.run_id)
            if lost is not None:
                status, problem = "damaged", lost
        rows.append(
            RunRow(
                meta.run_id,
                meta.program,
                meta.kind,
                status,
                summary.last_seq,
                summary.last_write,
                meta.created_at,
                meta.updated_at,
                problem,
            )
        )
    if sort == "created":
        rows.sort(key=lambda r: (r.created, r.run_id), reverse=True)
    elif sort == "updated":
        rows.sort(key=lambda r: (r.last_checkpoint or r.updated, r.run_id), reverse=True)
    elif sort == "records":
        rows.sort(key=lambda r: r.records, reverse=True)
    else:
        rows.sort(key=lambda r: getattr(r, sort))
    return rows[:limit] if limit is not None else rows


async def latest_resumable(store: CheckpointStore) -> str:
    """The newest run that can be resumed (crashed, interrupted or waiting) - never one
    without records."""
    summaries: list[RunSummary] = await owners.listed(store)
    for summary in summaries:
        if summary.status in RESUMABLE_STATUSES and summary.last_seq > 0:
            return summary.meta.run_id
    raise RunNotFoundError(
        "no run can be resumed (none crashed, was interrupted or is waiting); see `resumable runs`",
        run_id=None,
    )


@dataclass
class FrameView:
    frame_id: str
    playbook: str | None
    parent: str | None
    turn: int
    statement: int
    executed: str
    remaining: str
    marker_line: int
    completed_awaits: list[str]
    """Sites of the statement in progress whose awaits completed before it stopped."""
    variables: dict[str, str]
    lost: dict[str, str]
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    step: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunView:
    run_id: str
    program: str
    kind: str
    status: str
    seq: int
    problems: list[str]
    detail: dict[str, Any]
    question: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    lineage: list[dict[str, Any]] = field(default_factory=list)
    attempts: dict[str, Any] = field(default_factory=dict)
    frames: list[FrameView] = field(default_factory=list)
    """The call stack, outermost first; last, so that ``--json`` lists it after the rest."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def show_run(
    store: CheckpointStore, codec: RecordCodec, run_id: str, *, at: int | None = None
) -> RunView:
    """The run as of record ``at``: call stack, variables, executed and remaining code."""
    if at is not None:
        extent = await log_extent(store, run_id)
        if extent.first is not None and extent.last is not None and extent.first > 1:
            found = await oldest_base(store, run_id, extent.first, extent.last)
            if found is not None and at < found[0]:  # (none: load reports the lost start)
                raise before_the_oldest(
                    run_id, at, "to show", first=extent.first, oldest=found[0], last=extent.last
                )
    coordinator = RunLoader(store, codec)
    loaded = await coordinator.load(run_id, at=at, loss="report")
    state = loaded.state
    status = state.status
    for summary in await owners.listed(store):
        if summary.meta.run_id != run_id:
            continue
        if at is None:
            status = summary.status
        elif at < 1 or (state.seq < at and not loaded.problems):  # not a torn log: a wrong N
            raise _no_record(run_id, at, summary.last_seq)
    snapshotter = Snapshotter(reopen_files=False)  # a live run may be writing those files
    frames = []
    for frame in _call_stack(state):
        blobs: dict[str, bytes] = {}
        for digest in frame.ns_blobs:
            blobs[digest] = codec.open_blob(run_id, digest, await store.get_blob(run_id, digest))
        variables: dict[str, str] = {}
        step = None
        if frame.ns is not None:
            namespace: dict[str, Any] = {}
            snapshotter.restore(frame.ns, load_blob=blobs.__getitem__, into=namespace)
            step = getattr(namespace.get("__frame__"), "step", None)
            for name, value in namespace.items():
                if name.startswith("__") or name in frame.lost:
                    continue
                variables[name] = _short_repr(value)
        llm_calls = [
            {
                "turn": t.index,
                "complete": t.complete,
                "chars": len(t.text),
                "usage": t.usage,
                "ms": t.ms,
                "retries": t.retries,
                "prompt": t.prompt,
                "response": t.text,
            }
            for t in frame.turns
            if t.prompt is not None
        ]
        frames.append(
            FrameView(
                frame.frame_id,
                frame.playbook,
                frame.parent,
                frame.turn,
                frame.next_index,
                executed_code(frame),
                remaining_code(frame),
                line_at(code_of(frame), frame.offset),
                [e.site for _, e in sorted(frame.journal.items())],
                variables,
                dict(frame.lost),
                llm_calls,
                step,
            )
        )
    return RunView(
        run_id,
        state.program,
        state.kind,
        status,
        state.seq,
        [p for p in (control.unfinished_fork(loaded.meta), *loaded.problems) if p],
        state.detail,
        question=explain.question(state, status),
        error=explain.failure(state, loaded.meta, status),
        lineage=await explain.lineage(store, loaded.meta),
        attempts=explain.attempts(loaded.meta, state.seq, status),
        frames=frames,
    )


def _call_stack(state: RunState) -> list[FrameState]:
    """Frames still running, outermost first (returned frames are done, not on the stack).

    ``host:`` frames hold the journal of a program that embeds the run (its LLM calls, the
    outcomes of its code turns): they run no code, so they are not on the stack.
    """
    live = [
        f for f in state.frames.values() if not f.returned and not f.frame_id.startswith("host:")
    ]
    stack: list[FrameState] = []
    parent: str | None = None
    while True:
        children = [f for f in live if f.parent == parent and f not in stack]
        if not children:
            return stack
        stack.append(children[-1])
        parent = children[-1].frame_id


def _no_record(run_id: str, at: int, last: int) -> UsageError:
    return UsageError(
        f"run {run_id} has no record {at}: choose --at between 1 and {last}",
        run_id=run_id,
        at=at,
    )


def _short_repr(value: Any, limit: int = 120) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a user's __repr__ may raise
        text = f"<unrepresentable: {type(exc).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


AnswerCheck = Callable[[str, str], str | None]
"""(question kind, answer) -> what is wrong with the answer, or None if it will do."""


async def answer_run(
    store: CheckpointStore,
    codec: RecordCodec,
    run_id: str,
    text: str,
    *,
    check: AnswerCheck | None = None,
) -> str:
    """Record a human's answer to the question a waiting run asked; returns the question."""
    meta = await store.get_meta(run_id)
    loaded = await RunLoader(store, codec).load(run_id)
    state = loaded.state
    question = state.detail if state.status == "waiting" else {}
    key = question.get("key")
    # The log decides: a process killed right after it marked the run waiting may
    # not have updated the store's meta yet.
    if not key:
        raise UsageError(
            f"run {run_id} is not waiting for input (status {meta.status}); see `resumable runs`",
            run_id=run_id,
        )
    if key in state.answers:
        raise UsageError(
            f"run {run_id} already has an answer to {question.get('prompt', '')!r}; "
            f"continue it with `resumable resume {run_id}`",
            run_id=run_id,
        )
    problem = check(str(question.get("kind", "input")), text) if check else None
    if problem:
        raise UsageError(
            f"run {run_id} asked {question.get('prompt', '')!r}: {problem}", run_id=run_id
        )
    lease = await store.acquire(run_id, owner_name())
    try:
        record = Record(
            run_id,
            state.seq + 1,
            "answer",
            "main",
            time.time(),
            lease.epoch,
            {"key": key, "value": text},
        )
        await store.append(
            run_id, [StoredRecord(record.seq, lease.epoch, codec.seal(record))], lease
        )
        # answered: ready to go on (a worker of the fleet claims it; or `resumable resume`)
        await store.put_meta(replace(meta, status="pending", updated_at=time.time()))
    finally:
        await store.release(lease)
    return str(question.get("prompt", ""))
