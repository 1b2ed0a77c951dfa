"""The journal of a frame's statements: foreign awaits and steps recorded, replayed, checked.

Replay re-executes program code. On resume the statement in progress runs again from its
start on the namespace of its last boundary, and every function the program defined runs
for real, so whatever it did to memory happens again. Only *foreign* awaits (see
:mod:`resumable.durability.foreign`) and *steps* are journaled: each one completed is
recorded under its task's key (:mod:`resumable.durability.tasks`), and on replay it is
answered from the log, in the order the results arrived before the crash
(:mod:`resumable.durability.order`), without being made again. The site recorded at a key
must be the site replay reaches there, else the run stops with NonDeterminismError.

An await the hook lets through costs nothing: :meth:`FrameRecorder.await_` is a plain
function that returns a program coroutine itself. Replay discards the awaitable it does not
need (a coroutine is closed before it ever ran, a future cancelled). A result that cannot
be pickled is journaled as "not replayable" and that await runs again on resume.
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Iterable,
)
from typing import TYPE_CHECKING, Any, TypeVar

from resumable.durability.divergence import never_reached, site_changed, site_missed
from resumable.durability.fast_forward import journaled_iterator
from resumable.durability.foreign import is_foreign
from resumable.durability.generations import Generations
from resumable.durability.keys import in_flight
from resumable.durability.order import ReplayOrder
from resumable.durability.recording import NEW_MODEL, discard, legacy_leaves, record_value
from resumable.durability.state import AwaitEntry
from resumable.durability.tail import ends_statement, tail_await_site
from resumable.durability.tasks import (
    Key,
    TaskCursor,
    current_cursor,
    install_task_keys,
    outside_keys,
    reset_cursor,
    set_cursor,
)
from resumable.errors import CodeError
from resumable.exec.hooks import HookBase
from resumable.exec.streaming import Statement

if TYPE_CHECKING:
    from resumable.durability.checkpoints import CheckpointManager
    from resumable.durability.snapshot import Snapshotter

T = TypeVar("T")


class FrameRecorder(HookBase):
    """The durable hook and statement observer of one frame.

    Every await of the frame's statements goes through :meth:`await_`; every finished
    statement becomes a boundary record holding the namespace.
    """

    def __init__(
        self,
        manager: CheckpointManager,
        frame_id: str,
        namespace: dict[str, Any],
        snapshotter: Snapshotter,
        *,
        turn: int = 0,
        replay_index: int | None = None,
        replay: dict[Any, AwaitEntry] | None = None,
        on_live: Callable[[], None] | None = None,
        exclude: Collection[str] = ("__builtins__", "__resumable__"),
        extras: Callable[[], Awaitable[dict[str, Any]]] | None = None,
        on_answer: Callable[[str], None] | None = None,
        task_names: int = 0,
        window: dict[int, dict[Any, AwaitEntry]] | None = None,
    ) -> None:
        self.manager = manager
        self.frame_id = frame_id
        self.namespace = namespace
        self.snapshotter = snapshotter
        self.turn = turn
        self._replay_index = replay_index
        self._pending_replay = legacy_leaves(dict(replay or {}))
        self._window = {i: legacy_leaves(dict(j)) for i, j in (window or {}).items()}
        """Journals of the statements replay runs again because a task outlived its own."""
        self._windows = window is not None  # else tasks are journaled within their statement
        self._generations = Generations()
        self._order: ReplayOrder | None = None
        self._on_live = on_live
        self._exclude = exclude
        self._extras = extras
        """Run-level state to carry in the same boundary record (e.g. agent-wide state)."""
        self._on_answer = on_answer
        """Told the idempotency key of each await replay answers from the log."""
        self._index = -1
        self._tail_site: str | None = None
        self._generation = 0
        self._live = False
        self._task_names = task_names
        self._names_recorded = task_names
        self._last_ns: bytes | None = None
        self._key_prefix = f"{manager.run_id}/{frame_id}/"

    def set_previous_namespace(self, data: bytes | None) -> None:
        """The namespace pickle the log already holds, so an unchanged one is not rewritten."""
        self._last_ns = data

    # -- what task cursors report to (resumable.durability.tasks.KeyedJournal) ---------
    def live(self, cursor: TaskCursor) -> bool:
        generation = cursor.statement
        return (self._live and generation == self._generation) or (
            generation in self._generations.open
        )

    def track(self, cursor: TaskCursor, task: asyncio.Task[Any]) -> None:
        """A task spawned by program code: a boundary it outlives opens a replay window."""
        if self._windows:
            self._generations.track(cursor.statement, task)

    def _key_of(self, cursor: TaskCursor | None, key: Key) -> str:
        generation = self._generation if cursor is None else cursor.statement
        index = self._generations.index(generation, self._index)
        return f"{self._key_prefix}{self.turn}.{index}.{key}"

    def next_task_name(self) -> str:
        self._task_names += 1
        return f"Task-{self._task_names + 1}"

    def full_key(self, key: Key) -> str:
        """``key`` of the running task, named under the statement that spawned the task."""
        return self._key_of(current_cursor(), key)

    def spawned(self, cursor: TaskCursor, coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
        if not is_foreign(coro):
            return coro
        name = getattr(coro, "__qualname__", type(coro).__name__)
        return self._journal(cursor, f"task:{name}", coro, None)

    def await_step(
        self, cursor: TaskCursor, site: str, start: Callable[[], Awaitable[T]]
    ) -> Coroutine[Any, Any, T]:
        return self._journal(cursor, site, None, start)

    def call_step(self, cursor: TaskCursor, site: str, thunk: Callable[[], T]) -> T:
        key = cursor.take()
        entry = self._replayed_entry(cursor, key, site, None)
        if entry is not None:
            if self._order is not None:
                self._order.drop(entry.seq)
            return self._answer(entry)  # type: ignore[no-any-return]
        self.manager.settle()  # a step is an effect: the boundary before it must be durable
        flight = in_flight.set(self._key_of(cursor, key))
        token = set_cursor(None)
        try:
            value = thunk()
        except Exception as exc:
            self._defer(cursor, key, site, "e", exc)
            raise
        finally:
            reset_cursor(token)
            in_flight.reset(flight)
        self._defer(cursor, key, site, "v", value)
        return value

    # -- statements -----------------------------------------------------------------
    async def statement_started(self, statement: Statement, index: int) -> None:
        self._index = index
        self._tail_site = tail_await_site(statement)
        self._generation += 1
        self._live = True
        install_task_keys(asyncio.get_running_loop())
        replay: dict[Any, AwaitEntry] = {}
        if self._window:  # one order for the window: its tasks' results interleave
            if self._order is None:
                self._order = self._order_of(e for j in self._window.values() for e in j.values())
            replay = self._window.pop(index, {})
        elif index == self._replay_index:
            replay, self._pending_replay, self._replay_index = self._pending_replay, {}, None
            self._order = self._order_of(replay.values())
        elif not self._generations.pending():
            self._order = None
        self._generations.begin(self._generation, index, replay)
        set_cursor(TaskCursor(self, self._generation))

    def statement_aborted(self, statement: Statement, index: int) -> None:
        """A control signal (stop, divergence, end of program) ended the statement."""
        self._end_statement()

    def _end_statement(self) -> dict[Any, AwaitEntry]:
        self._live = False
        set_cursor(None)
        leftover = self._generations.end(self._generation)
        if self._order is not None and not self._window and not self._generations.pending():
            self._order.cancel()
            self._order = None
        return leftover

    async def statement_finished(
        self, statement: Statement, index: int, error: CodeError | None
    ) -> None:
        leftover = self._end_statement()
        if leftover:
            first = min(leftover.values(), key=lambda entry: entry.seq)
            raise site_missed(self.frame_id, index, statement.line, first)
        if self._generations.open:
            # A task outlives the statement: a resume starts from the boundary before
            # the oldest such statement, so this namespace is never restored.
            self._last_ns = None
            await self.manager.write_boundary(self.frame_id, self._boundary(index, statement))
            return
        capture = self.snapshotter.capture(self.namespace, exclude=self._exclude)
        await self.manager.put_blobs(capture.new_blobs)
        unchanged = capture.data == self._last_ns
        self._last_ns = capture.data
        body = self._boundary(index, statement)
        body["ns"] = None if unchanged else capture.data
        if not unchanged:
            body["b"] = sorted(capture.blobs)
            if capture.lost:
                body["lost"] = capture.lost
        if self._task_names != self._names_recorded:
            body["tn"] = self._names_recorded = self._task_names
        if error is not None:
            body["err"] = {
                "t": self.turn,
                "message": error.message,
                "line": getattr(error, "line", 0),
                "kind": getattr(error, "kind", "exception"),
                "traceback": getattr(error, "traceback", ""),
            }
        if self._extras is not None:
            body.update(await self._extras())
        await self.manager.write_boundary(self.frame_id, body)

    def _boundary(self, index: int, statement: Statement) -> dict[str, Any]:
        body: dict[str, Any] = {"t": self.turn, "i": index, "end": statement.end, "ns": None}
        if self._generations.open:
            body["live"] = True
        return body

    # -- awaits -----------------------------------------------------------------------
    def will_replay(self) -> bool:
        """True if the running task's next foreign await will be answered from the log."""
        cursor = current_cursor()
        replay = None if cursor is None else self._generations.replay(cursor.statement)
        if cursor is None or not replay:
            return False
        entry = replay.get(cursor.peek())
        return entry is not None and entry.outcome != "x"

    def aiter(self, site: str, iterable: AsyncIterable[T]) -> AsyncIterator[T]:
        return journaled_iterator(self, site, iterable)

    def await_(self, site: str, awaitable: Awaitable[T]) -> Awaitable[T]:
        cursor = current_cursor()
        if cursor is None or not inspect.isawaitable(awaitable) or not is_foreign(awaitable):
            return awaitable
        return cursor.journal.await_foreign(cursor, site, awaitable)

    def await_foreign(
        self, cursor: TaskCursor, site: str, awaitable: Awaitable[T]
    ) -> Coroutine[Any, Any, T]:
        return self._journal(cursor, site, awaitable, None)

    async def _journal(
        self,
        cursor: TaskCursor,
        site: str,
        awaitable: Awaitable[T] | None,
        start: Callable[[], Awaitable[T]] | None,
    ) -> T:
        key = cursor.take()
        entry = self._replayed_entry(cursor, key, site, awaitable)
        if entry is not None:
            discard(awaitable)
            if self._order is not None:
                await self._order.turn(entry.seq)
            if self._on_answer is not None:
                self._on_answer(self._key_of(cursor, key))
            return self._answer(entry)  # type: ignore[no-any-return]
        if awaitable is None:
            assert start is not None
            awaitable = start()
        if self.manager.deferred:  # the barrier: what the run wrote before must be durable
            try:
                with outside_keys():
                    await self.manager.flush()
            except BaseException:
                discard(awaitable)  # it never starts
                raise
        flight = in_flight.set(self._key_of(cursor, key))
        token = set_cursor(None)
        try:
            result = await awaitable
        except Exception as exc:
            await self._record(cursor, key, site, "e", exc)
            raise
        finally:
            reset_cursor(token)
            in_flight.reset(flight)
        with outside_keys():
            await self._record(cursor, key, site, "v", result)
        return result

    def _replayed_entry(
        self, cursor: TaskCursor, key: Key, site: str, awaitable: Awaitable[Any] | None
    ) -> AwaitEntry | None:
        """The recorded result at ``key`` to answer with (None: make the call for real)."""
        replay = self._generations.replay(cursor.statement)
        if not replay:
            return None
        entry = replay.pop(key, None)
        if entry is None:
            return None
        if entry.site != site:
            discard(awaitable)
            if self._order is not None:
                self._order.cancel()
            raise site_changed(self.frame_id, self._index, key, site, entry)
        if entry.outcome == "x":  # not replayable: made again
            self._replayed(entry)
            return None
        return entry

    def _answer(self, entry: AwaitEntry) -> Any:
        self._replayed(entry)
        value = self.snapshotter.loads_value(
            entry.value,  # type: ignore[arg-type]
            load_blob=self.manager.load_blob_sync,
            ns=self.namespace,
        )
        if entry.outcome == "e":
            raise value
        return value

    def _order_of(self, entries: Iterable[AwaitEntry]) -> ReplayOrder | None:
        seqs = [entry.seq for entry in entries if entry.outcome != "x"]
        return ReplayOrder(seqs, self._stuck) if seqs else None

    def _stuck(self, seq: int, waiting: list[int]) -> BaseException:
        entries = self._generations.entries()
        expected = next((e.site for e in entries if e.seq == seq), "?")
        return never_reached(self.frame_id, self._index, expected, seq, waiting)

    def _replayed(self, entry: AwaitEntry) -> None:
        if self._on_live is not None and (
            entry.seq >= self.manager.replay_until or not self._generations.pending()
        ):
            self._on_live()

    def _body(self, cursor: TaskCursor, key: Key, site: str, outcome: str) -> dict[str, Any]:
        index = self._generations.index(cursor.statement, self._index)
        return {"t": self.turn, "i": index, "k": key, "s": site, "n": NEW_MODEL, "o": outcome}

    async def _record(
        self, cursor: TaskCursor, key: Key, site: str, outcome: str, value: Any
    ) -> None:
        if not self.live(cursor):
            return  # the statement is over: a task it left running is not journaled
        body = self._body(cursor, key, site, outcome)
        blobs, _ = record_value(body, self.snapshotter, value, self.namespace)
        if blobs:
            await self.manager.put_blobs(blobs)
        others = bool(self._generations.open)  # tasks of earlier statements still run
        ends = ends_statement(cursor, site, self._tail_site, others_running=others)
        await self.manager.write_await(self.frame_id, body, ends_statement=ends)

    def _defer(self, cursor: TaskCursor, key: Key, site: str, outcome: str, value: Any) -> None:
        """Record a synchronous step; durable with the next record the run writes."""
        if not self.live(cursor):
            return
        body = self._body(cursor, key, site, outcome)
        blobs, exc = record_value(body, self.snapshotter, value, self.namespace)
        if exc is not None:
            warnings.warn(
                f"{site.removeprefix('step:')} returned a {type(value).__name__} that cannot "
                f"be pickled ({exc}); the step will run again if the run is resumed before "
                "this statement ends",
                RuntimeWarning,
                stacklevel=4,
            )
        self.manager.defer_await(self.frame_id, body, blobs)
