"""Await keys, replay of the statement in progress, and the determinism check.

Keys are handed out when an await of the statement's own task is *reached*, and the
record written when it *completes* carries the key counter at that moment
(``next_key``). So ``await helper()`` whose body awaits twice takes key n, its inner
awaits n+1 and n+2, and the next await of the statement n+3; on replay a completed
``await helper()`` is answered from the log at key n without running the body, and
the counter jumps to the recorded n+3. A crash inside the body replays the two
levels the same way: key n is not in the log, so the body runs again and its inner
completed awaits are answered from the log.

Awaits in tasks the statement spawns (``create_task``, ``gather``) pass straight
through: the statement's own await of them is what gets journaled.

Replay discards the awaitable it does not need: a coroutine is closed before it
ever ran, a future is cancelled. A result that cannot be pickled is journaled as
"not replayable" and that await runs again on resume.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any, TypeVar

from resumable.errors import CodeError, NonDeterminismError, UsageError
from resumable.hooks import HookBase, is_program_generator
from resumable.state import AwaitEntry
from resumable.streaming import Statement

if TYPE_CHECKING:
    from resumable.checkpoints import CheckpointManager
    from resumable.snapshot import Snapshotter

T = TypeVar("T")

_in_flight: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "resumable_await", default=None
)


_active: contextvars.ContextVar[FrameRecorder | None] = contextvars.ContextVar(
    "resumable_recorder", default=None
)
"""The recorder whose statement is running; tasks the statement spawns inherit it."""


def idempotency_key() -> str:
    """The key of the await in flight: the same in the run that crashed and on resume.

    Tools use it to de-duplicate the one effect a crash may repeat (the await that was
    running when the process died). In a task spawned by the statement (``gather``,
    ``create_task``) it is the spawning await's key plus the task's rank in asking.
    """
    recorder = _active.get()
    task = asyncio.current_task()
    if recorder is not None and task is not recorder._task and recorder._root_key is not None:
        children = recorder._children
        child = children.get(task)
        if child is None:
            child = children[task] = f"{recorder._root_key}/{len(children) + 1}"
        return child
    key = _in_flight.get()
    if key is None:
        raise UsageError(
            "resumable.idempotency_key() was called outside an awaited call of a durable run; "
            "call it from code awaited by the program"
        )
    return key


class ReplayDiverged(BaseException):
    """Replay left the recorded path: carries the NonDeterminismError for the runner.

    A BaseException, so ``except Exception:`` in the program cannot swallow it and let
    the run go on along a path the log never saw.
    """

    def __init__(self, error: NonDeterminismError) -> None:
        super().__init__(error.message)
        self.error = error


def _discard(awaitable: Awaitable[Any]) -> None:
    """Drop an awaitable that replay answers from the log, without running it."""
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    elif isinstance(awaitable, asyncio.Future):
        awaitable.cancel()


class FrameRecorder(HookBase):
    """The durable hook and statement observer of one frame.

    Every await of the frame's statements goes through :meth:`await_`; every
    finished statement becomes a boundary record holding the namespace.
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
        replay: dict[int, AwaitEntry] | None = None,
        on_live: Callable[[], None] | None = None,
        exclude: Collection[str] = ("__builtins__", "__resumable__"),
        extras: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self.manager = manager
        self.frame_id = frame_id
        self.namespace = namespace
        self.snapshotter = snapshotter
        self.turn = turn
        self._replay_index = replay_index
        self._pending_replay = dict(replay or {})
        self._replay: dict[int, AwaitEntry] = {}
        self._on_live = on_live
        self._exclude = exclude
        self._extras = extras
        """Run-level state to carry in the same boundary record (e.g. agent-wide state)."""
        self._index = -1
        self._next_key = 0
        self._task: asyncio.Task[Any] | None = None
        self._last_ns: bytes | None = None
        self._key_prefix = f"{manager.run_id}/{frame_id}/"
        self._root_key: str | None = None
        self._children: dict[asyncio.Task[Any] | None, str] = {}

    def set_previous_namespace(self, data: bytes | None) -> None:
        """The namespace pickle the log already holds, so an unchanged one is not rewritten."""
        self._last_ns = data

    # -- statements -----------------------------------------------------------------
    async def statement_started(self, statement: Statement, index: int) -> None:
        self._index = index
        self._next_key = 0
        self._task = asyncio.current_task()
        _active.set(self)
        if index == self._replay_index:
            self._replay = self._pending_replay
            self._pending_replay = {}
            self._replay_index = None
        else:
            self._replay = {}

    async def statement_finished(
        self, statement: Statement, index: int, error: CodeError | None
    ) -> None:
        leftover = self._replay
        self._replay = {}
        self._task = None
        if leftover:
            first = leftover[min(leftover)]
            raise ReplayDiverged(
                NonDeterminismError(
                    f"statement {index} (line {statement.line}) finished without reaching await site "
                    f"{first.site} that the log recorded; the program is not deterministic",
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
        """True if the next await of the statement's task will be answered from the log."""
        entry = self._replay.get(self._next_key) if self._replay else None
        return entry is not None and entry.outcome != "x"

    def aiter(self, site: str, iterable: AsyncIterable[T]) -> AsyncIterator[T]:
        proxy = super().aiter(site, iterable)
        iterator = proxy._iterator  # type: ignore[attr-defined]
        if is_program_generator(iterator):
            # Its own awaits are journaled: replay drives it for real, so it stands
            # exactly where it stood when the process died.
            return _Direct(iterator)
        return _FastForward(self, proxy, iterator)

    async def await_(self, site: str, awaitable: Awaitable[T]) -> T:
        if self._task is None or asyncio.current_task() is not self._task:
            return await awaitable
        key = self._next_key
        self._next_key = key + 1
        if self._replay:
            entry = self._replay.pop(key, None)
            if entry is not None:
                if entry.site != site:
                    _discard(awaitable)
                    raise ReplayDiverged(
                        NonDeterminismError(
                            f"replay reached await site {site} where the log recorded site "
                            f"{entry.site} (await {key} of statement {self._index}); the program "
                            "is not deterministic (does it branch on the clock or randomness?)",
                            frame=self.frame_id,
                            site=site,
                            recorded_site=entry.site,
                            seq=entry.seq,
                        )
                    )
                if entry.outcome != "x":
                    _discard(awaitable)
                    for inner in range(key + 1, entry.next_key):
                        # awaits inside the body being skipped: answered with it
                        self._replay.pop(inner, None)
                    self._next_key = entry.next_key
                    self._replayed(entry)
                    value = self.snapshotter.loads_value(
                        entry.value,  # type: ignore[arg-type]
                        load_blob=self.manager.load_blob_sync,
                        ns=self.namespace,
                    )
                    if entry.outcome == "e":
                        raise value
                    return value  # type: ignore[no-any-return]
                self._replayed(entry)
        full_key = f"{self._key_prefix}{self.turn}.{self._index}.{key}"
        token = _in_flight.set(full_key)
        active = _active.set(self)
        saved = self._root_key, self._children
        self._root_key, self._children = full_key, {}
        try:
            result = await awaitable
        except Exception as exc:
            await self._record(key, site, "e", exc)
            raise
        finally:
            _in_flight.reset(token)
            _active.reset(active)
            self._root_key, self._children = saved
        await self._record(key, site, "v", result)
        return result

    def _replayed(self, entry: AwaitEntry) -> None:
        if self._on_live is not None and entry.seq >= self.manager.replay_until:
            self._on_live()

    async def _record(self, key: int, site: str, outcome: str, value: Any) -> None:
        body: dict[str, Any] = {
            "t": self.turn,
            "i": self._index,
            "k": key,
            "s": site,
            "n": self._next_key,
            "o": outcome,
        }
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
        await self.manager.write_await(self.frame_id, body)


class _Direct(AsyncIterator[T]):
    """Steps of a program-defined async generator, not journaled themselves."""

    def __init__(self, iterator: AsyncIterator[T]) -> None:
        self._iterator = iterator

    def __aiter__(self) -> _Direct[T]:
        return self

    def __anext__(self) -> Awaitable[T]:
        return self._iterator.__anext__()


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
                await self._iterator.__anext__()
        return await self._proxy.__anext__()
