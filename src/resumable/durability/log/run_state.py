"""The folded state of a run: what its log says, record by record.

One fold serves both sides: the :class:`CheckpointManager` applies every record it
writes (so a snapshot is just this state, serialised), and recovery applies the
records read back after the latest snapshot. Folding is cheap - dictionary updates,
nothing unpickled - so it can sit on the per-await path.

Record kinds and their bodies (short keys: they are written at every await):

=========  ================================================================
run        program, kind, source (the exact text that runs), entry
frame      playbook, parent, key (the parent's await key), args (pickle), b (blobs
           the pickle refers to), agent (agent-wide state, when the caller's
           statement changed it)
turn       t (turn index), prompt (messages), rf (version of the reply filter the
           response goes through; absent: none, the response is run as received),
           fix (replies in a row before this one that failed: errors, no code)
chunk      t, text (a batch of streamed response text)
turn_end   t, usage, ms
await      t, i (statement), k (key: n in the statement's task, "TASK:n" in a task
           it spawned), s (site), n (-1; older logs: the next key), o (outcome
           tag: v value, e exception, x not picklable), v (pickle), b (blobs), p
           (program output produced when it completed, in characters), y (0: it
           returned without suspending its task, written while tasks run; absent:
           it did)
start      t, i: statement i of turn t started here, between the results before and
           after it (written while the program's tasks run, or after results arrived
           between two statements; replay starts the statement again at this point)
stmt       t, i, end (offset after the statement in the text the executor ran:
           the response as the reply filter passed it on), ns (pickle or None when
           unchanged), b (blob digests), err, lost, agent (agent-wide state, when
           the statement changed it), tn (tasks the program has spawned unnamed so
           far, when it changed: the next one is Task-(tn+2)), live (a task the
           frame spawned is still running: no namespace, see ``window``)
return     v (pickle of the frame's return value), b (blobs it refers to), agent (as
           in stmt)
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

from resumable.durability.log.records import Record

Position = tuple[int, int]
"""A statement of a frame: (turn, index in that turn's code)."""


@dataclass(slots=True)
class AwaitEntry:
    """One completed await of the statement in progress."""

    site: str
    outcome: str
    value: bytes | str | None
    next_key: int
    seq: int
    blobs: tuple[str, ...] = ()
    output: int | None = None
    """Program output produced when the await completed (None: not recorded)."""
    yielded: bool = True
    """Whether the await suspended its task (other tasks could run meanwhile)."""


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
    args_blobs: list[str] = field(default_factory=list)
    turns: list[TurnState] = field(default_factory=list)
    turn: int = -1
    next_index: int = 0
    offset: int = 0
    ns: bytes | None = None
    ns_blobs: list[str] = field(default_factory=list)
    lost: dict[str, str] = field(default_factory=dict)
    journal: dict[int | str, AwaitEntry] = field(default_factory=dict)
    journal_stmt: int | None = None
    window: dict[Position, dict[int | str, AwaitEntry]] | None = None
    """While a task outlives the statement that spawned it: the journals of every
    statement since the boundary the namespace is from (the replay window)."""
    window_start: tuple[int, int, int] | None = None
    """Where the replay window starts (turn, statement index, offset): the position of
    the boundary ``ns`` is from. None when no window is open."""
    marks: dict[Position, int] = field(default_factory=dict)
    """Statements of the window or in progress that started while the program's tasks
    ran: the seq of their ``start`` record, their place among the results."""
    task_names: int = 0
    output: int = 0
    """Program output produced (in characters) when the frame's last boundary was written."""
    files: dict[str, int] = field(default_factory=dict)
    """What the program had written to each tracked file at that boundary (see
    :mod:`resumable.durability.effects.written_files`)."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    returned: bool = False
    result: bytes | None = None
    result_blobs: list[str] = field(default_factory=list)
    """Blobs the pickle of the return value refers to (a resume loads it from the log)."""
    last_seq: int = 0
    agent: bytes | None = None
    """Agent-wide state as of the frame's newest boundary (or its call, or its return):
    what a resume restores on entering the frame, so its statement in progress starts
    from the agent state it started from. ``b""``: none yet; None: not known (a
    snapshot older than this field)."""

    def journal_blobs(self) -> list[str]:
        """Blob digests the results of the statement in progress (or the window) refer to."""
        journals = [self.journal, *(self.window or {}).values()]
        return [digest for journal in journals for e in journal.values() for digest in e.blobs]

    def resume_point(self) -> tuple[int, int, int]:
        """(turn, statement index, offset) a resume runs the frame's code from."""
        if self.window_start is not None:
            return self.window_start
        return (max(self.turn, 0), self.next_index, self.offset)

    def replay_journals(self) -> dict[Position, dict[int | str, AwaitEntry]]:
        """What replay answers from, by statement: the window's, or the one in progress."""
        if self.window is not None:
            return self.window
        if self.journal_stmt is None or not self.journal:
            return {}
        return {(max(self.turn, 0), self.journal_stmt): self.journal}

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
    files: dict[str, int] = field(default_factory=dict)
    """What the program had written to each tracked file at the last durable record."""
    last_await: int = 0
    """Seq of the newest ``await`` record."""
    windows: set[str] = field(default_factory=set)
    """Frames with a replay window open: the run's window is open while any is."""
    counted_output: bool = False
    """Playbook runs: every record's output position counts from the run's start, across
    resumes (runs recorded before that muted replay until it caught up instead)."""
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
            self.last_await = record.seq
            frame = self.frame(record.frame)
            index = body["i"]
            entry = AwaitEntry(
                body["s"],
                body["o"],
                body.get("v"),
                body["n"],
                record.seq,
                tuple(body.get("b", ())),
                body.get("p"),
                bool(body.get("y", 1)),
            )
            if frame.window is not None:
                frame.window.setdefault((body.get("t", 0), index), {})[body["k"]] = entry
                return self._after(record)
            if frame.journal_stmt != index:
                frame.journal = {}
                frame.journal_stmt = index
            frame.journal[body["k"]] = entry
        elif kind == "stmt":
            frame = self.frame(record.frame)
            if body.get("live"):
                _open_window(frame)
                self.windows.add(frame.frame_id)
                frame.next_index = body["i"] + 1
                frame.offset = body["end"]
                return self._after(record)
            self._close_windows(frame)
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
        elif kind == "start":
            self.frame(record.frame).marks[(body["t"], body["i"])] = record.seq
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
            if frame.window is None:
                frame.marks = {}
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
            frame.args_blobs = list(body.get("b") or ())
            frame.agent = self._agent_of(body)
        elif kind == "return":
            frame = self.frame(record.frame)
            frame.returned = True
            frame.result = body.get("v")
            frame.result_blobs = list(body.get("b") or ())
            frame.agent = self._agent_of(body)
        elif kind == "run":
            self.run_id = record.run_id
            self.program = body["program"]
            self.kind = body.get("kind", "script")
            self.source = body.get("source", "")
            self.entry = body.get("entry")
            self.counted_output = self.kind == "script" or bool(body.get("out"))
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

    def window_beyond(self, frame_id: str) -> bool:
        """Whether a frame on the stack other than ``frame_id`` has a replay window open."""
        return any(f != frame_id and not self.frames[f].returned for f in self.windows)

    def _close_windows(self, frame: FrameState) -> None:
        """A boundary with no task running: the frame's window closes, and so do those of
        the frames that returned inside it (a resume does not run them again)."""
        for frame_id in [frame.frame_id, *self.windows]:
            other = self.frames[frame_id]
            if other is frame or other.returned:
                other.window = None
                other.window_start = None
                other.marks = {}
                self.windows.discard(frame_id)

    def _after(self, record: Record) -> None:
        """What every record tells: how far output and events go."""
        body = record.body
        kind = record.kind
        written = body.get("of")
        if written:
            files = self.files
            for path, count in written.items():
                files[path] = max(files.get(path, 0), count)
        op = body.get("op")
        if op is not None:
            self.output = max(self.output, op)
            frame = self.frame(record.frame) if kind not in ("await", "status") else None
            if frame is not None and frame.window is None:
                frame.output = op
                if self.files:
                    frame.files = dict(self.files)
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


def _open_window(frame: FrameState) -> None:
    """A boundary with a task still alive: the namespace stays the one before the window."""
    if frame.window is None:
        frame.window = {}
        turn = max(frame.turn, 0)
        frame.window_start = (turn, frame.next_index, frame.offset)
        if frame.journal_stmt is not None:
            frame.window[(turn, frame.journal_stmt)] = frame.journal
    frame.journal = {}
    frame.journal_stmt = None
