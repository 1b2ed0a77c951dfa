"""A run's history, one entry per record: what ran, when, for how long, with what result.

The log is read in order and folded as it is read, so each entry can name the line of
the statement it finished and the text of that statement. Record kinds this version
does not describe are listed too (kind, key and the names of their fields): the log
may hold kinds added later. Chunks of streamed LLM text are folded into the entry of
the response they belong to (``--kind chunk`` lists them). Await values are shown
after the record's MAC was verified; a value that cannot be shown is given by size.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from resumable.durability.capture.snapshot import Snapshotter
from resumable.durability.log.pruned import oldest_base, open_state
from resumable.durability.log.records import Record, RecordCodec
from resumable.durability.log.run_state import RunState
from resumable.errors import IntegrityError, UsageError
from resumable.store.base import CheckpointStore

VALUE_CHARS = 60
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True, slots=True)
class StepEntry:
    """One record as the user reads it."""

    seq: int
    time: float
    duration: float | None
    frame: str
    kind: str
    key: str
    site: str
    value: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_since(text: str, *, now: float | None = None) -> float:
    """``--since``: a duration back from now (``90s``, ``10m``, ``2h``, ``1d``) or an ISO time."""
    match = _DURATION.match(text.strip())
    if match:
        return (now if now is not None else time.time()) - float(match[1]) * _UNITS[match[2]]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise UsageError(
            f"--since {text!r} is neither a duration (30s, 10m, 2h, 1d) nor an ISO time "
            "(2026-05-01T12:00)"
        ) from None


async def run_steps(
    store: CheckpointStore,
    codec: RecordCodec,
    run_id: str,
    *,
    frames: list[str] | None = None,
    kinds: list[str] | None = None,
    since: float | None = None,
) -> tuple[list[StepEntry], list[str], int]:
    """The run's entries that pass the filters, what could not be read (one line each), and
    how many chunk records passed the filters but are not listed (folded into their turn)."""
    await store.get_meta(run_id)  # RunNotFoundError for an unknown id
    result = await store.read(run_id, 0)
    problems = [result.problem] if result.problem else []
    lister = _Lister(run_id)
    records = result.records
    if records and records[0].seq != 1:
        # Folded from the snapshot the kept log starts at: records before it have no
        # state left to be read in (a turn they continue was pruned).
        base = await oldest_base(store, run_id, records[0].seq, records[-1].seq)
        if base is None:
            raise IntegrityError(
                f"run {run_id}: records 1..{records[0].seq - 1} are not in its log and no "
                "snapshot stands for them: its history cannot be read; restore them from a "
                "backup of the store",
                run_id=run_id,
            )
        lister.state = open_state(codec, run_id, base)
        records = [r for r in records if r.seq > base[0]]
        problems.append(
            f"records 1..{base[0]} were pruned (kept: the newest snapshots and what follows "
            f"them); the history starts at record {base[0] + 1}"
        )
    entries = []
    folded = 0
    for stored in records:
        record = codec.open(stored.data, run_id=run_id, seq=stored.seq)
        entry = lister.entry(record)
        if entry is None and not (kinds and record.kind in kinds):
            shown = not frames or record.frame in frames
            folded += not kinds and shown and (since is None or record.time >= since)
            continue
        if entry is None:
            entry = lister.generic(record)
        if frames and entry.frame not in frames:
            continue
        if kinds and entry.kind not in kinds:
            continue
        if since is not None and entry.time < since:
            continue
        entries.append(entry)
    return entries, problems, folded


class _Lister:
    """Folds the log while it turns records into entries."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.state = RunState()
        self.last_time: dict[str, float] = {}
        self.snapshotter = Snapshotter()

    def entry(self, record: Record) -> StepEntry | None:
        """The record's entry, or None for records folded into another (chunks)."""
        state = self.state
        frame = state.frame(record.frame) if record.kind != "status" else None
        start = frame.offset if frame is not None else 0
        state.apply(record)
        previous = self.last_time.get(record.frame)
        self.last_time[record.frame] = record.time
        if record.kind == "chunk":
            return None
        duration = None if previous is None else max(0.0, record.time - previous)
        key, site, value = self._describe(record, start)
        return StepEntry(
            record.seq, record.time, duration, record.frame, record.kind, key, site, value
        )

    def generic(self, record: Record) -> StepEntry:
        key, site, value = _unknown(record)
        return StepEntry(record.seq, record.time, None, record.frame, record.kind, key, site, value)

    def _describe(self, record: Record, start: int) -> tuple[str, str, str]:
        body = record.body
        kind = record.kind
        frame_id = record.frame
        if kind == "run":
            return "", "", f"{body.get('kind', 'script')} {body.get('program', '')}"
        if kind == "frame":
            return str(body.get("key") or ""), "", f"playbook {body.get('playbook')}"
        if kind == "turn":
            prompt = body.get("prompt")
            asked = f", {len(prompt)} messages" if isinstance(prompt, list) else ""
            return f"{frame_id}/{body['t']}", "", f"LLM call {body['t'] + 1}{asked}"
        if kind == "turn_end":
            turn = self.state.frame(frame_id).turns[body["t"]]
            usage = body.get("usage")
            tokens = f", {usage[0]}+{usage[1]} tokens" if usage else ""
            return f"{frame_id}/{body['t']}", "", f"{len(turn.text)} chars{tokens}"
        if kind == "await":
            key = f"{frame_id}/{body['t']}.{body['i']}.{body['k']}"
            return key, str(body.get("s", "")), self._outcome(body)
        if kind == "stmt":
            frame = self.state.frame(frame_id)
            turn = frame.current_turn()
            text = turn.text if turn is not None else ""
            code = text[start : body["end"]]
            line = text.count("\n", 0, start + len(code) - len(code.lstrip())) + 1
            code = _first_line(code)
            err = body.get("err")
            value = f"{code}  ! {_short(err.get('message', ''))}" if err else code
            return f"{frame_id}/{body['t']}.{body['i']}", f"line {line}", value
        if kind == "return":
            return "", "", "returned"
        if kind == "status":
            detail = body.get("detail") or {}
            words = [str(body.get("status"))]
            for name in ("reason", "error", "prompt"):
                if detail.get(name):
                    words.append(_short(str(detail[name])))
            return "", "", ": ".join(words)
        if kind == "ask":
            return str(body.get("key", "")), "", _short(f"{body.get('kind')}: {body.get('prompt')}")
        if kind == "answer":
            return str(body.get("key", "")), "", _short(repr(body.get("value")))
        return _unknown(record)

    def _outcome(self, body: dict[str, Any]) -> str:
        outcome = body.get("o")
        raw = body.get("v")
        if outcome == "x":
            return _short(f"not replayable: {raw}")
        if outcome == "t":
            return "transparent: ran program code, runs again on resume"
        shown = f"{len(raw)} bytes" if isinstance(raw, bytes) else "?"
        if isinstance(raw, bytes) and not body.get("b"):
            try:
                value = self.snapshotter.loads_value(raw, load_blob=_no_blob, ns={})
            except Exception:  # a value made of the program's own classes: shown by size
                pass
            else:
                shown = _repr(value)
        return f"raised {shown}" if outcome == "e" else f"-> {shown}"


def _no_blob(digest: str) -> bytes:
    raise KeyError(digest)


def _unknown(record: Record) -> tuple[str, str, str]:
    body = record.body
    key = body.get("key") or body.get("k") or ""
    site = body.get("site") or body.get("s") or ""
    return str(key), str(site), _short(", ".join(sorted(str(name) for name in body)))


def _repr(value: Any) -> str:
    try:
        return _short(repr(value))
    except Exception as exc:  # a user's __repr__ may raise
        return f"<unrepresentable: {type(exc).__name__}>"


def _first_line(code: str) -> str:
    lines = [line for line in code.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    return _short(lines[0].strip() + (" ..." if len(lines) > 1 else ""))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 3] + "..."


def format_entries(entries: list[StepEntry]) -> list[str]:
    """The text listing: one aligned line per entry."""
    rows = [
        (
            str(e.seq),
            time.strftime("%H:%M:%S", time.localtime(e.time)) + f".{int(e.time * 1000) % 1000:03d}",
            "-" if e.duration is None else f"{e.duration * 1000:.1f}ms",
            e.frame,
            e.kind,
            e.key or "-",
            e.site or "-",
            e.value,
        )
        for e in entries
    ]
    header = ("SEQ", "TIME", "TOOK", "FRAME", "KIND", "KEY", "SITE", "VALUE")
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header) - 1)]
    return [
        "  ".join(
            [*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]
        ).rstrip()
        for row in [header, *rows]
    ]
