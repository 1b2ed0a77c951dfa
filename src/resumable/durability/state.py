"""The folded state of a run: what its log says, record by record.

One fold serves both sides: the :class:`CheckpointManager` applies every record it
writes (so a snapshot is just this state, serialised), and recovery applies the
records read back after the latest snapshot. Folding is cheap - dictionary updates,
nothing unpickled - so it can sit on the per-await path.

Record kinds and their bodies (short keys: they are written at every await):

=========  ================================================================
run        program, kind, source (the exact text that runs), entry
frame      playbook, parent, key (the parent's await key), args (pickle), agent
           (agent-wide state, when the caller's statement changed it)
turn       t (turn index), prompt (messages), rf (version of the reply filter the
           response goes through; absent: none, the response is run as received),
           fix (replies in a row before this one that failed: errors, no code)
chunk      t, text (a batch of streamed response text)
turn_end   t, usage, ms
await      t, i (statement), k (key: n in the statement's task, "TASK:n" in a task
           it spawned), s (site), n (-1; older logs: the next key), o (outcome
           tag: v value, e exception, x not picklable), v (pickle), b (blobs)
stmt       t, i, end (offset after the statement in the text the executor ran:
           the response as the reply filter passed it on), ns (pickle or None when
           unchanged), b (blob digests), err, lost, agent (agent-wide state, when
           the statement changed it), tn (tasks the program has spawned unnamed so
           far, when it changed: the next one is Task-(tn+2))
return     v (pickle of the frame's return value), agent (as in stmt)
status     status, detail (waiting question, failure message, ...)
ask        key (the await's idempotency key), kind, prompt, timeout, at
answer     key, value (the human's text)
retry      t, n (attempt), delay, reason, status: a failed LLM request made again
           (the fold counts them per turn)
=========  ================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from resumable.durability.records import Record


@dataclass(slots=True)
class AwaitEntry:
    """One completed await of the statement in progress."""

    site: str
    outcome: str
    value: bytes | str | None
    next_key: int
    seq: int
    blobs: tuple[str, ...] = ()


@dataclass(slots=True)
class TurnState:
    """One response (LLM turn, or the whole script) of a frame."""

    index: int
    chunks: list[str] = field(default_factory=list)
    complete: bool = False
    prompt: Any = None
    usage: Any = None
    ms: float | None = None
    reply_filter: int = 0
    fix: int = 0
    retries: int = 0

    @property
    def text(self) -> str:
        if len(self.chunks) > 1:
            self.chunks[:] = ["".join(self.chunks)]
        return self.chunks[0] if self.chunks else ""


@dataclass(slots=True)
class FrameState:
    """A frame of the call stack: its namespace, its responses, where it stands."""

    frame_id: str
    playbook: str | None = None
    parent: str | None = None
    args: bytes | None = None
    turns: list[TurnState] = field(default_factory=list)
    turn: int = -1
    next_index: int = 0
    offset: int = 0
    ns: bytes | None = None
    ns_blobs: list[str] = field(default_factory=list)
    lost: dict[str, str] = field(default_factory=dict)
    journal: dict[int | str, AwaitEntry] = field(default_factory=dict)
    journal_stmt: int | None = None
    window: dict[int, dict[int | str, AwaitEntry]] | None = None
    """While a task outlives the statement that spawned it: the journals of every
    statement since the boundary the namespace is from (the replay window), by index."""
    task_names: int = 0
    output: int = 0
    """Program output produced (in characters) when the frame's last boundary was written."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    returned: bool = False
    result: bytes | None = None
    last_seq: int = 0
    agent: bytes | None = None
    """Agent-wide state as of the frame's newest boundary (or its call, or its return):
    what a resume restores on entering the frame, so its statement in progress starts
    from the agent state it started from. ``b""``: none yet; None: not known (a
    snapshot older than this field)."""

    def journal_blobs(self) -> list[str]:
        """Blob digests the results of the statement in progress refer to."""
        return [digest for entry in self.journal.values() for digest in entry.blobs]

    def current_turn(self) -> TurnState | None:
        return self.turns[self.turn] if 0 <= self.turn < len(self.turns) else None


@dataclass(slots=True)
class RunState:
    """Everything a resume needs, folded from the log."""

    run_id: str = ""
    program: str = ""
    kind: str = "script"
    source: str = ""
    entry: str | None = None
    frames: dict[str, FrameState] = field(default_factory=dict)
    status: str = "running"
    detail: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    asks: dict[str, dict[str, Any]] = field(default_factory=dict)
    agent: bytes | None = None
    seq: int = 0
    last_event_seq: int = 0
    output: int = 0
    """Program output (in characters) the last durable record covers: printed already."""
    time: float = 0.0

    def frame(self, frame_id: str) -> FrameState:
        frame = self.frames.get(frame_id)
        if frame is None:
            frame = self.frames[frame_id] = FrameState(frame_id)
        return frame

    # -- the fold -------------------------------------------------------------------
    def apply(self, record: Record) -> None:
        self.seq = record.seq
        self.time = record.time
        body = record.body
        kind = record.kind
        if kind == "await":
            frame = self.frame(record.frame)
            index = body["i"]
            entry = AwaitEntry(
                body["s"], body["o"], body.get("v"), body["n"], record.seq, tuple(body.get("b", ()))
            )
            if frame.window is not None:
                frame.window.setdefault(index, {})[body["k"]] = entry
                return self._after(record)
            if frame.journal_stmt != index:
                frame.journal = {}
                frame.journal_stmt = index
            frame.journal[body["k"]] = entry
        elif kind == "stmt":
            frame = self.frame(record.frame)
            if body.get("live"):
                _open_window(frame)
                return self._after(record)
            frame.window = None
            frame.next_index = body["i"] + 1
            frame.offset = body["end"]
            if body.get("ns") is not None:
                frame.ns = body["ns"]
                frame.ns_blobs = list(body.get("b") or ())
                frame.lost = dict(body.get("lost") or {})
            frame.journal = {}
            frame.journal_stmt = None
            frame.agent = self._agent_of(body)
            if "tn" in body:
                frame.task_names = body["tn"]
            if body.get("err"):
                frame.errors.append(body["err"])
        elif kind == "chunk":
            frame = self.frame(record.frame)
            frame.turns[body["t"]].chunks.append(body["text"])
        elif kind == "turn":
            frame = self.frame(record.frame)
            index = body["t"]
            frame.turns.append(
                TurnState(
                    index,
                    prompt=body.get("prompt"),
                    reply_filter=body.get("rf", 0),
                    fix=body.get("fix", 0),
                )
            )
            frame.turn = index
            frame.next_index = 0
            frame.offset = 0
            frame.journal = {}
            frame.journal_stmt = None
        elif kind == "turn_end":
            turn = self.frame(record.frame).turns[body["t"]]
            turn.complete = True
            turn.usage = body.get("usage")
            turn.ms = body.get("ms")
        elif kind == "retry":
            self.frame(record.frame).turns[body["t"]].retries += 1
        elif kind == "frame":
            frame = self.frame(record.frame)
            frame.playbook = body.get("playbook")
            frame.parent = body.get("parent")
            frame.args = body.get("args")
            frame.agent = self._agent_of(body)
        elif kind == "return":
            frame = self.frame(record.frame)
            frame.returned = True
            frame.result = body.get("v")
            frame.agent = self._agent_of(body)
        elif kind == "run":
            self.run_id = record.run_id
            self.program = body["program"]
            self.kind = body.get("kind", "script")
            self.source = body.get("source", "")
            self.entry = body.get("entry")
            if self.kind == "script":
                main = self.frame(record.frame)
                main.turns = [TurnState(0, [self.source], complete=True)]
                main.turn = 0
        elif kind == "status":
            self.status = body["status"]
            self.detail = dict(body.get("detail") or {})
        elif kind == "answer":
            self.answers[body["key"]] = body.get("value")
        elif kind == "ask":
            self.asks[body["key"]] = dict(body)
        self._after(record)

    def _after(self, record: Record) -> None:
        """What every record tells: how far output and events go."""
        body = record.body
        kind = record.kind
        op = body.get("op")
        if op is not None:
            self.output = max(self.output, op)
            frame = self.frame(record.frame) if kind not in ("await", "status") else None
            if frame is not None and frame.window is None:
                frame.output = op
        if kind not in ("status", "answer", "ask", "retry"):
            self.last_event_seq = record.seq
            frame_state = self.frames.get(record.frame)
            if frame_state is not None:
                frame_state.last_seq = record.seq

    def _agent_of(self, body: dict[str, Any]) -> bytes | None:
        """The agent state after a frame's record (which carries it when it changed)."""
        if "agent" in body:
            self.agent = body["agent"]
        return b"" if self.agent is None else self.agent

    # -- snapshots ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "program": self.program,
            "kind": self.kind,
            "source": self.source,
            "entry": self.entry,
            "status": self.status,
            "detail": self.detail,
            "answers": self.answers,
            "asks": self.asks,
            "agent": self.agent,
            "seq": self.seq,
            "last_event_seq": self.last_event_seq,
            "output": self.output,
            "time": self.time,
            "frames": [_frame_to_dict(f) for f in self.frames.values()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        state = cls(
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
            time=data["time"],
        )
        for item in data["frames"]:
            frame = _frame_from_dict(item)
            state.frames[frame.frame_id] = frame
        return state


def _open_window(frame: FrameState) -> None:
    """A boundary with a task still alive: the namespace stays the one before the window."""
    if frame.window is None:
        frame.window = {}
        if frame.journal_stmt is not None:
            frame.window[frame.journal_stmt] = frame.journal
    frame.journal = {}
    frame.journal_stmt = None


def _entries(journal: dict[int | str, AwaitEntry]) -> list[list[Any]]:
    return [
        [k, e.site, e.outcome, e.value, e.next_key, e.seq, list(e.blobs)]
        for k, e in journal.items()
    ]


def _journal_of(items: list[list[Any]]) -> dict[int | str, AwaitEntry]:
    return {
        key: AwaitEntry(site, outcome, value, next_key, seq, tuple(blobs))
        for key, site, outcome, value, next_key, seq, blobs in items
    }


def _frame_to_dict(frame: FrameState) -> dict[str, Any]:
    return {
        "id": frame.frame_id,
        "playbook": frame.playbook,
        "parent": frame.parent,
        "args": frame.args,
        "turns": [
            [t.index, t.text, t.complete, t.prompt, t.usage, t.ms, t.reply_filter, t.fix, t.retries]
            for t in frame.turns
        ],
        "turn": frame.turn,
        "next_index": frame.next_index,
        "offset": frame.offset,
        "ns": frame.ns,
        "ns_blobs": frame.ns_blobs,
        "lost": frame.lost,
        "journal": _entries(frame.journal),
        "journal_stmt": frame.journal_stmt,
        "window": None
        if frame.window is None
        else [[i, _entries(journal)] for i, journal in frame.window.items()],
        "errors": frame.errors,
        "returned": frame.returned,
        "result": frame.result,
        "last_seq": frame.last_seq,
        "task_names": frame.task_names,
        "output": frame.output,
        "agent": frame.agent,
    }


def _frame_from_dict(data: dict[str, Any]) -> FrameState:
    frame = FrameState(
        data["id"],
        playbook=data["playbook"],
        parent=data["parent"],
        args=data["args"],
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
        last_seq=data["last_seq"],
        task_names=data.get("task_names", 0),
        output=data.get("output", 0),
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
        frame.window = {i: _journal_of(items) for i, items in data["window"]}
    return frame
