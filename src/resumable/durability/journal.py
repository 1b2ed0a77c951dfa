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

Logs written before this model journaled program awaits as well: a statement in progress
recorded that way is replayed from its leaf awaits (its records whose body ran no other
await), which is what the new model journals.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import socket
import time
import warnings
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Collection, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from resumable.durability.foreign import is_foreign
from resumable.durability.order import ReplayOrder
from resumable.durability.state import AwaitEntry
from resumable.durability.tail import tail_await_site
from resumable.durability.tasks import (
    Key,
    TaskCursor,
    current_cursor,
    install_task_keys,
    reset_cursor,
    set_cursor,
)
from resumable.errors import CodeError, NonDeterminismError
from resumable.exec.hooks import DirectHook, HookBase, is_program_code, is_program_generator
from resumable.exec.streaming import Statement

if TYPE_CHECKING:
    from resumable.durability.checkpoints import CheckpointManager
    from resumable.durability.snapshot import Snapshotter

T = TypeVar("T")

_in_flight: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "resumable_await", default=None
)

_DIRECT = DirectHook()

NEW_MODEL = -1
"""The ``n`` of an await record written by this model (older logs hold a key counter)."""


def idempotency_key() -> str:
    """The key of the effect in flight: the same in the run that crashed and on resume.

    Inside a step or a foreign await it names that call; in program code of a durable
    statement it names the next foreign await or step of the running task. Tools use it to
    de-duplicate the one effect a crash may repeat.

    Outside a durable run (plain Python, ``enabled = false``) nothing is ever resumed, so
    there is nothing to repeat: the key is this process's own, ``local:HOST:PID:START/N``,
    a new ``N`` for each call, so no two effects share one.
    """
    key = await_key()
    if key is not None:
        return key
    global _local_calls
    _local_calls += 1
    return f"{_PROCESS_KEY}/{_local_calls}"


_PROCESS_KEY = f"local:{socket.gethostname()}:{os.getpid()}:{int(time.time() * 1000)}"
_local_calls = 0


def await_key() -> str | None:
    """The idempotency key of the await or step in flight in a durable run; None outside one."""
    key = _in_flight.get()
    if key is not None:
        return key
    cursor = current_cursor()
    if cursor is not None:
        return cursor.journal.full_key(cursor.peek())
    return None


class ReplayDiverged(BaseException):
    """Replay left the recorded path: carries the NonDeterminismError for the runner.

    A BaseException, so ``except Exception:`` in the program cannot swallow it and let
    the run go on along a path the log never saw.
    """

    def __init__(self, error: NonDeterminismError) -> None:
        super().__init__(error.message)
        self.error = error


def _discard(awaitable: Awaitable[Any] | None) -> None:
    """Drop an awaitable that replay answers from the log, without running it."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()


def legacy_leaves(journal: dict[Any, AwaitEntry]) -> dict[Any, AwaitEntry]:
    """An in-progress journal of the older model, as this model keys it (root task only)."""
    if not journal or all(entry.next_key == NEW_MODEL for entry in journal.values()):
        return journal
    leaves = [e for k, e in journal.items() if isinstance(k, int) and e.next_key == k + 1]
    leaves.sort(key=lambda entry: entry.seq)
    return dict(enumerate(leaves))


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
        task_names: int = 0,
    ) -> None:
        self.manager = manager
        self.frame_id = frame_id
        self.namespace = namespace
        self.snapshotter = snapshotter
        self.turn = turn
        self._replay_index = replay_index
        self._pending_replay = legacy_leaves(dict(replay or {}))
        self._replay: dict[Any, AwaitEntry] = {}
        self._order: ReplayOrder | None = None
        self._on_live = on_live
        self._exclude = exclude
        self._extras = extras
        """Run-level state to carry in the same boundary record (e.g. agent-wide state)."""
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
        return self._live and cursor.statement == self._generation

    def next_task_name(self) -> str:
        self._task_names += 1
        return f"Task-{self._task_names + 1}"

    def full_key(self, key: Key) -> str:
        return f"{self._key_prefix}{self.turn}.{self._index}.{key}"

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
        entry = self._replayed_entry(key, site, None)
        if entry is not None:
            if self._order is not None:
                self._order.drop(entry.seq)
            value: T = self._answer(entry)
            return value
        flight = _in_flight.set(self.full_key(key))
        token = set_cursor(None)
        try:
            value = thunk()
        except Exception as exc:
            self._defer(cursor, key, site, "e", exc)
            raise
        finally:
            reset_cursor(token)
            _in_flight.reset(flight)
        self._defer(cursor, key, site, "v", value)
        return value

    # -- statements -----------------------------------------------------------------
    async def statement_started(self, statement: Statement, index: int) -> None:
        self._index = index
        self._tail_site = tail_await_site(statement)
        self._generation += 1
        self._live = True
        install_task_keys(asyncio.get_running_loop())
        if index == self._replay_index:
            self._replay = self._pending_replay
            self._pending_replay = {}
            self._replay_index = None
            seqs = [entry.seq for entry in self._replay.values() if entry.outcome != "x"]
            self._order = ReplayOrder(seqs, self._stuck) if seqs else None
        else:
            self._replay = {}
            self._order = None
        set_cursor(TaskCursor(self, self._generation))

    def statement_aborted(self, statement: Statement, index: int) -> None:
        """A control signal (stop, divergence, end of program) ended the statement."""
        self._end_statement()

    def _end_statement(self) -> dict[Any, AwaitEntry]:
        self._live = False
        set_cursor(None)
        leftover, self._replay = self._replay, {}
        if self._order is not None:
            self._order.cancel()
            self._order = None
        return leftover

    async def statement_finished(
        self, statement: Statement, index: int, error: CodeError | None
    ) -> None:
        leftover = self._end_statement()
        if leftover:
            first = min(leftover.values(), key=lambda entry: entry.seq)
            raise ReplayDiverged(
                NonDeterminismError(
                    f"statement {index} (line {statement.line}) finished without reaching await "
                    f"site {first.site} that the log recorded; the program is not deterministic",
                    frame=self.frame_id,
                    site=first.site,
                    seq=first.seq,
                )
            )
        capture = self.snapshotter.capture(self.namespace, exclude=self._exclude)
        await self.manager.put_blobs(capture.new_blobs)
        unchanged = capture.data == self._last_ns
        self._last_ns = capture.data
        body: dict[str, Any] = {
            "t": self.turn,
            "i": index,
            "end": statement.end,
            "ns": None if unchanged else capture.data,
        }
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
        await self.manager.write("stmt", self.frame_id, body)

    # -- awaits -----------------------------------------------------------------------
    def will_replay(self) -> bool:
        """True if the running task's next foreign await will be answered from the log."""
        cursor = current_cursor()
        if cursor is None or not self._replay:
            return False
        entry = self._replay.get(cursor.peek())
        return entry is not None and entry.outcome != "x"

    def aiter(self, site: str, iterable: AsyncIterable[T]) -> AsyncIterator[T]:
        proxy = _DIRECT.aiter(site, iterable)
        iterator = proxy._iterator  # type: ignore[attr-defined]
        if is_program_generator(iterator):
            # Program code: replay drives it for real, so it stands where it stood (its
            # own foreign awaits are journaled where they are).
            return proxy
        proxy._hook = self  # type: ignore[attr-defined]
        if _program_method(iterator, "__anext__"):
            return proxy  # each step's awaitable is judged as any other await
        return _FastForward(self, proxy, iterator)

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
        entry = self._replayed_entry(key, site, awaitable)
        if entry is not None:
            _discard(awaitable)
            if self._order is not None:
                await self._order.turn(entry.seq)
            return self._answer(entry)  # type: ignore[no-any-return]
        if awaitable is None:
            assert start is not None
            awaitable = start()
        if self.manager.deferred:
            with _outside():
                await self.manager.flush()
        flight = _in_flight.set(self.full_key(key))
        token = set_cursor(None)
        try:
            result = await awaitable
        except Exception as exc:
            await self._record(cursor, key, site, "e", exc)
            raise
        finally:
            reset_cursor(token)
            _in_flight.reset(flight)
        with _outside():
            await self._record(cursor, key, site, "v", result)
        return result

    def _replayed_entry(
        self, key: Key, site: str, awaitable: Awaitable[Any] | None
    ) -> AwaitEntry | None:
        """The recorded result at ``key`` to answer with (None: make the call for real)."""
        if not self._replay:
            return None
        entry = self._replay.pop(key, None)
        if entry is None:
            return None
        if entry.site != site:
            _discard(awaitable)
            if self._order is not None:
                self._order.cancel()
            raise ReplayDiverged(
                NonDeterminismError(
                    f"replay reached await site {site} where the log recorded site "
                    f"{entry.site} (key {key} of statement {self._index}); the program "
                    "is not deterministic (does it branch on the clock or randomness?)",
                    frame=self.frame_id,
                    site=site,
                    recorded_site=entry.site,
                    seq=entry.seq,
                )
            )
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

    def _stuck(self, seq: int, waiting: list[int]) -> BaseException:
        expected = next((e.site for e in self._replay.values() if e.seq == seq), "?")
        return ReplayDiverged(
            NonDeterminismError(
                f"replay of statement {self._index} never reached await site {expected} "
                f"(record {seq}) that the log says completed next, while awaits recorded at "
                f"{waiting} waited for it; the program is not deterministic",
                frame=self.frame_id,
                site=expected,
                seq=seq,
            )
        )

    def _replayed(self, entry: AwaitEntry) -> None:
        if self._on_live is not None and (
            entry.seq >= self.manager.replay_until or not self._replay
        ):
            self._on_live()

    def _body(self, key: Key, site: str, outcome: str) -> dict[str, Any]:
        return {"t": self.turn, "i": self._index, "k": key, "s": site, "n": NEW_MODEL, "o": outcome}

    async def _record(
        self, cursor: TaskCursor, key: Key, site: str, outcome: str, value: Any
    ) -> None:
        if not self.live(cursor):
            return  # the statement is over: a task it left running is not journaled
        body = self._body(key, site, outcome)
        try:
            pickled = self.snapshotter.dumps_value(value, self.namespace)
        except Exception as exc:  # not picklable: this await will run again on resume
            body["o"] = "x"
            body["v"] = f"{type(value).__name__}: {exc}"
        else:
            body["v"] = pickled.data
            if pickled.blobs:
                body["b"] = sorted(pickled.blobs)
                await self.manager.put_blobs(pickled.new_blobs)
        alone = cursor.path == "" and cursor.spawns == 0  # no task of the statement runs on
        ends = alone and site == self._tail_site
        await self.manager.write_await(self.frame_id, body, ends_statement=ends)

    def _defer(self, cursor: TaskCursor, key: Key, site: str, outcome: str, value: Any) -> None:
        """Record a synchronous step; durable with the next record the run writes."""
        if not self.live(cursor):
            return
        body = self._body(key, site, outcome)
        blobs: dict[str, bytes] = {}
        try:
            pickled = self.snapshotter.dumps_value(value, self.namespace)
        except Exception as exc:
            body["o"] = "x"
            body["v"] = f"{type(value).__name__}: {exc}"
            warnings.warn(
                f"{site.removeprefix('step:')} returned a {type(value).__name__} that cannot "
                f"be pickled ({exc}); the step will run again if the run is resumed before "
                "this statement ends",
                RuntimeWarning,
                stacklevel=4,
            )
        else:
            body["v"] = pickled.data
            if pickled.blobs:
                body["b"] = sorted(pickled.blobs)
                blobs = dict(pickled.new_blobs)
        self.manager.defer_await(self.frame_id, body, blobs)


class _outside:
    """Runtime work inside a task's await: it spawns nothing that gets a key."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = set_cursor(None)

    def __exit__(self, *exc: object) -> None:
        reset_cursor(self._token)


def _program_method(obj: Any, name: str) -> bool:
    method = getattr(type(obj), name, None)
    code = getattr(method, "__code__", None)
    return code is not None and is_program_code(code)


class _FastForward(AsyncIterator[T]):
    """Steps of a foreign async iterator, journaled; after replay the iterator is advanced.

    Replay answers the steps taken before the crash from the log without touching the
    fresh iterator, so before its first live step the iterator is advanced past them
    (their items are read again and dropped).
    """

    def __init__(
        self, recorder: FrameRecorder, proxy: AsyncIterator[T], iterator: AsyncIterator[T]
    ) -> None:
        self._recorder = recorder
        self._proxy = proxy
        self._iterator = iterator
        self._behind = 0

    def __aiter__(self) -> _FastForward[T]:
        return self

    async def __anext__(self) -> T:
        if self._recorder.will_replay():
            self._behind += 1
        else:
            while self._behind:
                self._behind -= 1
                with _outside():
                    await self._iterator.__anext__()
        return await self._proxy.__anext__()
