"""Journals of an embedded run: results answered from the log instead of asked again.

Two shapes share one record format (``await`` records, so recovery folds them as it
folds every other):

- :class:`HostJournal` - calls the embedding program makes (an LLM call, the outcome of
  a code action, a memory step): the n-th call of one kind gets key n in a frame of
  its own (``host:KIND``) that no statement ever resets, so its answers stay in the
  folded state for the whole run.
- :class:`StatementJournal` - steps (tool calls) and foreign awaits of the statement
  in progress of a code frame: key n is the n-th one the statement reached; on replay
  of that statement the recorded ones are answered without running again.

Either way a recorded *site* (what was called) must match the site reached on
replay; otherwise :class:`~resumable.errors.NonDeterminismError` names both.
"""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from resumable.durability.keys import in_flight
from resumable.durability.recording import NEW_MODEL, discard, record_value
from resumable.durability.state import AwaitEntry
from resumable.durability.tasks import TaskCursor, reset_cursor, set_cursor
from resumable.errors import NonDeterminismError

if TYPE_CHECKING:
    from resumable.durability.embedded.run import DurableRun

T = TypeVar("T")

_NOTHING = object()


class Diverged(BaseException):
    """Replay left the recorded path; carries the error for the embedding program.

    A BaseException, so ``except Exception:`` in program code cannot swallow it.
    """

    def __init__(self, error: NonDeterminismError) -> None:
        super().__init__(error.message)
        self.error = error


class _Journal:
    """Keys, replay lookup and durable writes shared by both journals."""

    def __init__(self, run: DurableRun, frame_id: str) -> None:
        self.run = run
        self.frame_id = frame_id
        self.replay: dict[Any, AwaitEntry] = {}
        self.next_key = 0

    def _answer(self, key: Any, site: str, ns: dict[str, Any]) -> Any:
        """The recorded result for ``key``, raised if it was an exception; _NOTHING if none."""
        entry = self.replay.pop(key, None)
        if entry is None:
            return _NOTHING
        if entry.site != site:
            raise Diverged(
                NonDeterminismError(
                    f"replay of {self.frame_id} reached {site!r} as call {key} where run "
                    f"{self.run.run_id} recorded {entry.site!r}; the program or agent is not "
                    "the one that started this run, or it is not deterministic",
                    frame=self.frame_id,
                    site=site,
                    recorded_site=entry.site,
                    seq=entry.seq,
                )
            )
        if entry.outcome == "x":  # its result could not be pickled: it runs again
            return _NOTHING
        value = self.run.load_value(entry.value, ns)  # type: ignore[arg-type]
        if entry.outcome == "e":
            raise value
        return value

    def _body(self, key: Any, site: str, outcome: str, value: Any, ns: Mapping[str, Any]) -> Any:
        body: dict[str, Any] = {"k": key, "s": site, "n": NEW_MODEL, "o": outcome}
        snapshotter = self.run.session_or_fail().snapshotter
        blobs, exc = record_value(body, snapshotter, value, ns)
        if exc is not None:
            warnings.warn(
                f"the result of {site} cannot be checkpointed and it will run again on resume: {exc}",
                RuntimeWarning,
                stacklevel=4,
            )
        return body, blobs

    def call(
        self, key: int, site: str, thunk: Callable[[], T], ns: dict[str, Any], extra: dict[str, Any]
    ) -> T:
        found = self._answer(key, site, ns)
        if found is not _NOTHING:
            return found  # type: ignore[no-any-return]
        try:
            result = thunk()
        except Exception as exc:
            body, blobs = self._body(key, site, "e", exc, ns)
            self.run.write([("await", self.frame_id, {**extra, **body})], blobs)
            raise
        body, blobs = self._body(key, site, "v", result, ns)
        self.run.write([("await", self.frame_id, {**extra, **body})], blobs)
        return result


class HostJournal(_Journal):
    """Calls of one kind made by the embedding program, keyed by their order."""

    def __init__(self, run: DurableRun, kind: str) -> None:
        super().__init__(run, f"host:{kind}")
        frame = run.state_frame(self.frame_id)
        if frame is not None:
            self.replay = dict(frame.journal)

    def recorded(self, key: int) -> AwaitEntry | None:
        return self.replay.get(key)

    def call(  # type: ignore[override]
        self, site: str, thunk: Callable[[], T], ns: dict[str, Any] | None = None
    ) -> T:
        """``thunk()``'s result, journaled as the next call; answered from the log on replay."""
        key = self.next_key
        self.next_key += 1
        return super().call(key, site, thunk, {} if ns is None else ns, {"t": 0, "i": 0})

    def peek(self, site: str, ns: dict[str, Any] | None = None) -> tuple[bool, Any]:
        """(True, value) if the next call is recorded: it is consumed and answered."""
        key = self.next_key
        if key not in self.replay:
            return False, None
        self.next_key += 1
        return True, self._answer(key, site, {} if ns is None else ns)

    def partial(self, key: int, site: str) -> list[str]:
        """The chunks of call ``key`` recorded before it completed (keys ``KEY:0``, ...)."""
        chunks: list[str] = []
        while f"{key}:{len(chunks)}" in self.replay:
            chunks.append(self._answer(f"{key}:{len(chunks)}", site, {}))
        return chunks

    def write(self, key: int | str, site: str, value: Any) -> None:
        """Record ``value`` for ``key`` now, durably (a chunk, or a whole result)."""
        body, blobs = self._body(key, site, "v", value, {})
        self.run.write([("await", self.frame_id, {"t": 0, "i": 0, **body})], blobs)

    def body(self, site: str, value: Any, ns: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
        """The record of ``value`` as the next call (to be written with other records)."""
        key = self.next_key
        self.next_key += 1
        body, blobs = self._body(key, site, "v", value, ns)
        return {"t": 0, "i": 0, **body}, blobs


class StatementJournal(_Journal):
    """Steps and foreign awaits of the statement in progress of one code frame.

    It is the :class:`~resumable.durability.tasks.KeyedJournal` of the statement's
    tasks, so ``resumable.step``, ``journaled`` and ``resumable.idempotency_key()`` work
    in embedded code as in a script. Unlike a script's, a sync step's record is durable
    before the step returns (the caller's thread can wait for the store).
    """

    def __init__(self, run: DurableRun, frame_id: str) -> None:
        super().__init__(run, frame_id)
        self.turn = 0
        self.index = -1
        self.active = False
        self._generation = 0
        self._tasks = 0
        self._cursor: contextvars.Token[TaskCursor | None] | None = None

    def begin(self, turn: int, index: int, replay: dict[Any, AwaitEntry] | None) -> None:
        self.turn, self.index = turn, index
        self.replay = dict(replay or {})
        self.active = True
        self._generation += 1
        self._cursor = set_cursor(TaskCursor(self, self._generation))

    def abandon(self) -> None:
        """The statement stopped without finishing (a control signal went through it)."""
        self.active = False
        self.replay = {}
        if self._cursor is not None:
            reset_cursor(self._cursor)
            self._cursor = None

    def end(self, line: int) -> None:
        """The statement finished: every recorded call must have been reached again."""
        leftover = self.replay
        self.abandon()
        if leftover:
            first = leftover[min(leftover, key=str)]
            raise Diverged(
                NonDeterminismError(
                    f"statement {self.index} (line {line}) of {self.frame_id} finished without "
                    f"reaching {first.site!r}, which run {self.run.run_id} recorded; the program "
                    "is not deterministic",
                    frame=self.frame_id,
                    site=first.site,
                    seq=first.seq,
                )
            )

    # -- KeyedJournal --------------------------------------------------------------------
    def live(self, cursor: TaskCursor) -> bool:
        return self.active and cursor.statement == self._generation

    def next_task_name(self) -> str:
        self._tasks += 1
        return f"Task-{self._tasks}"

    def spawned(self, cursor: TaskCursor, coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
        return coro

    def full_key(self, key: Any) -> str:
        return f"{self.run.run_id}/{self.frame_id}/{self.turn}.{self.index}.{key}"

    def _extra(self) -> dict[str, Any]:
        return {"t": self.turn, "i": self.index}

    def call_step(self, cursor: TaskCursor, site: str, thunk: Callable[[], T]) -> T:
        key = cursor.take()
        ns = self.namespace()
        found = self._answer(key, site, ns)
        if found is not _NOTHING:
            return found  # type: ignore[no-any-return]
        flight = in_flight.set(self.full_key(key))
        token = set_cursor(None)  # inside a step nothing is journaled again
        try:
            result = thunk()
        except Exception as exc:
            self._write(key, site, "e", exc, ns)
            raise
        finally:
            reset_cursor(token)
            in_flight.reset(flight)
        self._write(key, site, "v", result, ns)
        return result

    def await_foreign(
        self, cursor: TaskCursor, site: str, awaitable: Awaitable[T]
    ) -> Coroutine[Any, Any, T]:
        return self._await(cursor, site, awaitable, None)

    def await_step(
        self, cursor: TaskCursor, site: str, start: Callable[[], Awaitable[T]]
    ) -> Coroutine[Any, Any, T]:
        return self._await(cursor, site, None, start)

    async def _await(
        self,
        cursor: TaskCursor,
        site: str,
        awaitable: Awaitable[T] | None,
        start: Callable[[], Awaitable[T]] | None,
    ) -> T:
        key = cursor.take()
        ns = self.namespace()
        found = self._answer(key, site, ns)
        if found is not _NOTHING:
            if awaitable is not None:
                discard(awaitable)
            return found  # type: ignore[no-any-return]
        flight = in_flight.set(self.full_key(key))
        token = set_cursor(None)
        try:
            if awaitable is None:
                assert start is not None
                awaitable = start()
            result = await awaitable
        except Exception as exc:
            self._write(key, site, "e", exc, ns)
            raise
        finally:
            reset_cursor(token)
            in_flight.reset(flight)
        self._write(key, site, "v", result, ns)
        return result

    def _write(self, key: Any, site: str, outcome: str, value: Any, ns: dict[str, Any]) -> None:
        body, blobs = self._body(key, site, outcome, value, ns)
        self.run.write([("await", self.frame_id, {**self._extra(), **body})], blobs)

    namespace: Callable[[], dict[str, Any]] = dict
    """The executor's namespace (set by the executor: results unpickle against it)."""
