"""A run's records as a timeline a person can read: what happened, in order, and when.

Every record is opened through the codec (its MAC verified first) and folded into a
:class:`RunState` alongside, so a statement's record can show the code it finished
and an error the line of the response it came from. Nothing is unpickled here: await
results and namespaces stay bytes (the variables at a record come from
:func:`resumable.durability.runs.stored.show_run` with ``at``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from resumable.durability.effects.call_sites import call_kind, describe_call
from resumable.durability.log.pruned import oldest_base, open_state
from resumable.durability.log.records import Record, RecordCodec
from resumable.durability.log.run_state import RunState
from resumable.store.base import CheckpointStore

TEXT_LIMIT = 2000
"""Characters of a record's text shown on the timeline (responses, prompts, code)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One record on the timeline."""

    seq: int
    kind: str
    frame: str
    time: float
    seconds: float | None
    title: str
    text: str = ""
    failed: bool = False
    label: str = ""
    """What the record is, as the page names it (an await record: await, step, clock/random)."""


@dataclass(frozen=True, slots=True)
class Failure:
    """The error that failed a run, with the line of the response it came from."""

    message: str
    frame: str
    line: int
    source_line: str


@dataclass
class Timeline:
    """The records still stored for a run, oldest first."""

    entries: list[Entry] = field(default_factory=list)
    first_seq: int = 1
    problem: str | None = None
    failure: Failure | None = None


async def read_timeline(store: CheckpointStore, codec: RecordCodec, run_id: str) -> Timeline:
    """Every stored record of the run, verified and described (older pruned ones are gone)."""
    result = await store.read(run_id, 0)
    state = RunState()
    timeline = Timeline(problem=result.problem)
    records = result.records
    if records and records[0].seq > 1:
        base = await oldest_base(store, run_id, records[0].seq, records[-1].seq)
        if base is None:  # the log lost its start: nothing to read the records in
            timeline.first_seq = records[0].seq
            timeline.problem = timeline.problem or (
                f"records 1..{records[0].seq - 1} are not in the log and no snapshot "
                "stands for them"
            )
            return timeline
        state = open_state(codec, run_id, base)
        records = [r for r in records if r.seq > base[0]]
        timeline.first_seq = base[0] + 1
    previous: float | None = None
    for stored in records:
        record = codec.open(stored.data, run_id=run_id, seq=stored.seq)
        start = state.frames[record.frame].offset if record.frame in state.frames else 0
        state.apply(record)
        seconds = None if previous is None else max(0.0, record.time - previous)
        previous = record.time
        timeline.entries.append(_describe(record, state, start, seconds))
    timeline.failure = _failure(state)
    return timeline


def _describe(record: Record, state: RunState, start: int, seconds: float | None) -> Entry:
    body = record.body
    kind = record.kind

    def entry(title: str, text: str = "", failed: bool = False, label: str = kind) -> Entry:
        return Entry(
            record.seq, kind, record.frame, record.time, seconds, title, _cut(text), failed, label
        )

    if kind == "run":
        return entry(f"run started: {body.get('program', '')}")
    if kind == "frame":
        caller = f" from {body['parent']}" if body.get("parent") else ""
        return entry(f"playbook {body.get('playbook') or '?'} called{caller}")
    if kind == "turn":
        prompt = body.get("prompt")
        asked = str(prompt[-1][1]) if isinstance(prompt, list) and prompt else ""
        return entry(f"LLM call {body['t'] + 1} sent", asked)
    if kind == "chunk":
        return entry(f"LLM call {body['t'] + 1}: response text", str(body.get("text", "")))
    if kind == "turn_end":
        usage = body.get("usage")
        tokens = f", {usage[0]}+{usage[1]} tokens" if usage else ""
        took = f", {body['ms']:.0f} ms" if body.get("ms") is not None else ""
        return entry(f"LLM call {body['t'] + 1} complete{tokens}{took}")
    if kind == "await":
        outcome = {
            "v": "returned",
            "e": "raised",
            "x": "returned (not picklable)",
            "t": "ended (ran program code: runs again on resume)",
        }
        what = outcome.get(str(body.get("o")), str(body.get("o")))
        site = str(body["s"])
        return entry(f"{describe_call(site)} (key {body['k']}) {what}", label=call_kind(site))
    if kind == "stmt":
        frame = state.frames[record.frame]
        turn = frame.current_turn()
        code = turn.text[start : body["end"]] if turn is not None else ""
        error = body.get("err")
        if error:
            return entry(f"statement {body['i']} failed: {error.get('message', '')}", code, True)
        return entry(f"statement {body['i']} done", code)
    if kind == "return":
        return entry(f"frame {record.frame} returned")
    if kind == "status":
        detail: dict[str, Any] = dict(body.get("detail") or {})
        note = detail.get("prompt") or detail.get("error") or detail.get("result") or ""
        return entry(f"status: {body['status']}", str(note), body["status"] == "failed")
    if kind == "ask":
        return entry(f"asked ({body.get('kind', 'input')})", str(body.get("prompt", "")))
    if kind == "answer":
        return entry("answered", str(body.get("value", "")))
    return entry(kind)


def _failure(state: RunState) -> Failure | None:
    """The error of a failed run: the last one a statement recorded, else the status's."""
    if state.status != "failed":
        return None
    for frame in reversed(list(state.frames.values())):
        if not frame.errors:
            continue
        error = frame.errors[-1]
        line = int(error.get("line") or 0)
        turns = {t.index: t for t in frame.turns}
        turn = turns.get(int(error.get("t", frame.turn)))
        lines = turn.text.splitlines() if turn is not None else []
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return Failure(str(error.get("message", "")), frame.frame_id, line, text)
    message = str(state.detail.get("error", ""))
    return Failure(message, str(state.detail.get("frame", "main")), 0, "") if message else None


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 3] + "..."
