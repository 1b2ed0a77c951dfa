"""The journal of a frame's statements: foreign awaits and steps recorded, replayed, checked.

Replay re-executes program code. On resume the statement in progress runs again from its
start on the namespace of its last boundary, and every function the program defined runs
for real, so whatever it did to memory happens again. Only *foreign* awaits (see
:mod:`resumable.durability.effects.foreign`) and *steps* are journaled: each one completed is
recorded under its task's key (:mod:`resumable.durability.effects.tasks`), and on replay it is
answered from the log, in the order the results arrived before the crash
(:mod:`resumable.durability.replay.order`), without being made again. The site recorded at a key
must be the site replay reaches there, else the run stops with NonDeterminismError.

An await the hook lets through costs nothing (:meth:`FrameRecorder.await_` returns a program
coroutine itself); replay discards the awaitable it does not need. Awaits journaled "not
replayable" (results that cannot be pickled) or "transparent" (foreign awaits that ran program
code, :mod:`resumable.durability.replay.scopes`) run again on resume."""

from __future__ import annotations

import asyncio
import inspect
import warnings
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Collection, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from resumable.durability.effects.call_sites import call_kind
from resumable.durability.effects.foreign import is_foreign
from resumable.durability.effects.tasks import (
    Key,
    TaskCursor,
    current_cursor,
    install_task_keys,
    outside_keys,
    set_cursor,
)
from resumable.durability.log.run_state import AwaitEntry, Position
from resumable.durability.log.tail import ends_statement, tail_await_site
from resumable.durability.replay import scopes
from resumable.durability.replay.boundaries import Boundaries
from resumable.durability.replay.divergence import site_changed, site_missed
from resumable.durability.replay.fast_forward import journaled_iterator
from resumable.durability.replay.generations import Generations
from resumable.durability.replay.interleaving import Interleaving
from resumable.durability.replay.recording import NEW_MODEL, discard, legacy_leaves, record_value
from resumable.durability.replay.task_exit import TaskExits
from resumable.errors import CodeError
from resumable.exec.hooks import HookBase
from resumable.exec.output import program_output_position, seek_program_output
from resumable.exec.streaming import Statement

if TYPE_CHECKING:
    from resumable.durability.capture.snapshot import Snapshotter
    from resumable.durability.log.writer import RecordWriter
    from resumable.durability.replay.order import ReplayOrder

T = TypeVar("T")


class FrameRecorder(HookBase):
    """The durable hook and statement observer of one frame.

    Every await of the frame's statements goes through :meth:`await_`; every finished
    statement becomes a boundary record holding the namespace.
    """

    def __init__(
        self,
        manager: RecordWriter,
        frame_id: str,
        namespace: dict[str, Any],
        snapshotter: Snapshotter,
        *,
        turn: int = 0,
        replay: dict[Position, dict[Any, AwaitEntry]] | None = None,
        order: ReplayOrder | None = None,
        marks: dict[Position, int] | None = None,
        on_live: Callable[[], None] | None = None,
        exclude: Collection[str] = ("__builtins__", "__resumable__"),
        extras: Callable[[], Awaitable[dict[str, Any]]] | None = None,
        on_answer: Callable[[str], None] | None = None,
        rerun: Callable[[str], bool] | None = None,
        task_names: int = 0,
        namespace_pickle: bytes | None = None,
    ) -> None:
        self.manager = manager
        self.frame_id = frame_id
        self.namespace = namespace
        self.snapshotter = snapshotter
        self.turn = turn
        self._replay = {at: legacy_leaves(dict(j)) for at, j in (replay or {}).items()}
        """Journals of the statements replay runs again: the one in progress, and those of
        the replay window when a task outlived its own statement."""
        self._scoped = scopes.has_scopes(self._replay)  # records made inside foreign awaits
        self._order = order
        """The run's replay order: every journaled result released as it arrived before."""
        self._interleaving = Interleaving(manager, frame_id, order, marks)
        self._generations = Generations()
        self._on_live = on_live
        self._boundaries = Boundaries(manager, frame_id, namespace, snapshotter, exclude, extras)
        self._boundaries.previous(namespace_pickle, task_names)  # what the log holds already
        self._on_answer = on_answer
        """Told the idempotency key of each await replay answers from the log."""
        self._rerun = rerun
        """Says, by idempotency key, which recorded awaits replay makes again all the same
        (a playbook that ran beside the program's tasks: its code is the program's)."""
        self._index = -1
        self._tail_site: str | None = None
        self._generation, self._live = 0, False
        self._task_names = task_names
        self._key_prefix = f"{manager.run_id}/{frame_id}/"
        self.exits = TaskExits()

    # -- what task cursors report to (resumable.durability.effects.tasks.KeyedJournal) ---------
    def live(self, cursor: TaskCursor) -> bool:
        generation = cursor.statement
        return (self._live and generation == self._generation) or (
            generation in self._generations.open
        )

    def track(self, cursor: TaskCursor, task: asyncio.Task[Any]) -> None:
        """A task spawned by program code: a boundary it outlives opens a replay window."""
        self._generations.track(cursor.statement, task)
        self.manager.tasks.add(task)
        task.add_done_callback(self.manager.tasks.discard)
        self.exits.watch(task)  # a sys.exit() in it ends the run (task_exit)

    def _position(self, generation: int) -> Position:
        """The statement (turn, index) that spawned the generation's tasks."""
        return self._generations.position(generation, (self.turn, self._index))

    def _key_of(self, cursor: TaskCursor | None, key: Key) -> str:
        turn, index = self._position(self._generation if cursor is None else cursor.statement)
        return f"{self._key_prefix}{turn}.{index}.{key}"

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
        effect = call_kind(site) != "clock/random"  # a step or tool: all before it durable
        (self.manager.settle_before_step if effect else self.manager.settle)()
        scope = scopes.Scope(cursor, key, self._key_of(cursor, key), None)
        try:
            value = thunk()
        except Exception as exc:
            self._defer(cursor, key, site, "e", exc)
            raise
        finally:
            scope.close()
        self._defer(cursor, key, site, "v", value)
        return value

    # -- statements -----------------------------------------------------------------
    async def statement_started(self, statement: Statement, index: int) -> None:
        install_task_keys(asyncio.get_running_loop())
        await self.take_place(index)
        self.begin(statement, index)

    def waits(self, index: int) -> bool:
        """Whether statement ``index`` must wait for its place among recorded results."""
        return self._interleaving.waits((self.turn, index), replayed=self._replayed_at(index))

    async def take_place(self, index: int) -> None:
        """Wait for statement ``index``'s place among the results replay releases."""
        await self._interleaving.start((self.turn, index), replayed=self._replayed_at(index))

    def _replayed_at(self, index: int) -> bool:
        return bool(self._replay.get((self.turn, index)))

    def begin(self, statement: Statement, index: int) -> None:
        """Statement ``index`` starts in the running task: its awaits are journaled now."""
        self._index = index
        self._tail_site = tail_await_site(statement, index)
        self._generation += 1
        position = (self.turn, index)
        self._live = True
        self._generations.begin(self._generation, position, self._replay.pop(position, {}))
        scopes.start_statement(TaskCursor(self, self._generation))

    def statement_aborted(self, statement: Statement, index: int) -> None:
        """A control signal (stop, divergence, end of program) ended the statement."""
        self._end_statement()

    def _end_statement(self) -> dict[Any, AwaitEntry]:
        self._live = False
        set_cursor(None)
        self._interleaving.ended()
        return self._generations.end(self._generation)

    async def statement_finished(
        self, statement: Statement, index: int, error: CodeError | None
    ) -> None:
        self.end(statement, index)
        await self.write_boundary(statement, index, error)

    def end(self, statement: Statement, index: int) -> None:
        """Statement ``index`` finished: replay must have reached every result it recorded."""
        if leftover := self._end_statement():
            first = min(leftover.values(), key=lambda entry: entry.seq)
            if self._order is not None:
                self._order.cancel()
            raise site_missed(self.frame_id, index, statement.line, first)

    async def write_boundary(
        self, statement: Statement, index: int, error: CodeError | None = None
    ) -> None:
        await self._boundaries.write(
            self.turn, index, statement, error, live=self._window_open(), tasks=self._task_names
        )

    def _window_open(self) -> bool:
        """A boundary saves no namespace while a task runs, or while a frame further out
        replays from before such a task (its replay runs this frame's code again)."""
        manager = self.manager
        beyond = manager.state.window_beyond(self.frame_id)
        return bool(self._generations.open or manager.tasks_running() or beyond)

    # -- awaits -----------------------------------------------------------------------
    def will_replay(self) -> bool:
        """True if the running task's next foreign await will be answered from the log."""
        cursor = current_cursor()
        replay = None if cursor is None else self._generations.replay(cursor.statement)
        if cursor is None or not replay:
            return False
        entry = replay.get(cursor.peek())
        return entry is not None and entry.outcome not in scopes.RUN_AGAIN

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
        rerun = (
            entry is not None and self._rerun is not None and self._rerun(self._key_of(cursor, key))
        )
        if entry is not None and not rerun:
            discard(awaitable)
            if self._order is not None:
                await self._order.turn(entry.seq, entry.yielded)
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
        scope = scopes.Scope(cursor, key, self._key_of(cursor, key), None if start else awaitable)
        turned = self._interleaving.watch_turns()
        try:
            try:
                result = await awaitable
            finally:
                scope.close()
        except Exception as exc:
            if entry is None:
                with outside_keys():
                    await self._record(cursor, key, site, scope.outcome("e", exc), exc, turned)
            raise
        if entry is not None:  # made again where it stood: its record is in the log
            if self._order is not None:
                await self._order.turn(entry.seq, suspended=False)
            return result
        with outside_keys():
            await self._record(cursor, key, site, scope.outcome("v", result), result, turned)
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
        if entry.outcome in scopes.RUN_AGAIN:  # not replayable, or transparent: made again
            self._replayed(entry)
            return None
        scopes.drop_scope(self._scoped, replay, key, self._order)  # answered: not its scope
        return entry

    def _answer(self, entry: AwaitEntry) -> Any:
        self._replayed(entry)
        if entry.output is not None:
            seek_program_output(entry.output)  # what it printed is not printed again
        value = self.snapshotter.loads_value(
            entry.value,  # type: ignore[arg-type]
            load_blob=self.manager.load_blob_sync,
            ns=self.namespace,
        )
        if entry.outcome == "e":
            raise value
        return value

    def _replayed(self, entry: AwaitEntry) -> None:
        if self._on_live is not None and (
            entry.seq >= self.manager.replay_until or not self._generations.pending()
        ):
            self._on_live()

    def _body(self, cursor: TaskCursor, key: Key, site: str, outcome: str) -> dict[str, Any]:
        turn, index = self._position(cursor.statement)
        body = {"t": turn, "i": index, "k": key, "s": site, "n": NEW_MODEL, "o": outcome}
        position = program_output_position()
        if position is not None:
            body["p"] = position
        return body

    async def _record(
        self,
        cursor: TaskCursor,
        key: Key,
        site: str,
        outcome: str,
        value: Any,
        turned: list[None] | None = None,
    ) -> None:
        if not self.live(cursor):
            return  # the statement is over: a task it left running is not journaled
        body = self._body(cursor, key, site, outcome)
        if turned == []:
            body["y"] = 0  # it returned without suspending the task
        blobs, _ = record_value(body, self.snapshotter, value, self.namespace)
        if blobs:
            await self.manager.put_blobs(blobs)
        others = self.manager.tasks_running()  # tasks the program spawned, of any statement
        ends = ends_statement(cursor, site, self._tail_site, others_running=others)
        await self.manager.write_await(self.frame_id, body, ends_statement=ends)

    def _defer(self, cursor: TaskCursor, key: Key, site: str, outcome: str, value: Any) -> None:
        """Record a synchronous call; durable with the next record the run writes (before the
        next step starts: ``settle_before_step``)."""
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
