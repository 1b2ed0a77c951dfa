"""The REPL behind ``run_code``: a durable executor fed on a worker thread.

The agent runs on its event loop; the snippet runs in CPython statement by statement
under :class:`~resumable.durability.embedded.executor.DurableExecutor`, on a worker
thread (the executor drives its own loop for top-level awaits). A function of the
snippet that stands for an agent tool hands the call back to the agent's loop, where
it goes through the agent's tool manager - so ``ResumableDurability`` journals it by
its tool-call id - and the snippet awaits the answer; the executor journals that
answer in the statement in progress too.

Nested call ids are ``<run_code call id>__<n>``, n counted per ``run_code`` call at
the moment of the call. The count lives in the namespace, so it is checkpointed with
it: a resumed snippet gives its calls the ids they had.

``restart=True`` starts a new namespace in a frame of its own (``code_mode.1``, ...):
the restart is part of the run, and a resume does not bring the old names back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ToolCallPart, ToolReturn
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import ToolDenied

from resumable.durability.effects.steps import journaled
from resumable.durability.embedded.boundary import keeping_the_stop_signal
from resumable.durability.embedded.executor import DurableExecutor
from resumable.durability.embedded.outcome import Outcome
from resumable.errors import ResumableError
from resumable.integrations.pydantic_ai.values import for_snippet

if TYPE_CHECKING:
    from resumable.durability.embedded.run import DurableRun

CANCEL_GRACE_SECONDS = 5.0
"""How long a cancelled run waits for its snippet to end before the cancellation goes on."""

CALLS = "__code_mode_calls__"
"""Namespace name of (run_code call id, nested calls made so far)."""


class Stop(BaseException):
    """Carries an error of resumable itself out of the snippet (not shown to the model)."""

    def __init__(self, error: ResumableError) -> None:
        super().__init__(error.message)
        self.error = error


class CodeExecutor(DurableExecutor):
    """A durable executor whose tools are bound as given (they journal themselves)."""

    def _bound(self, name: str, tool: Callable[..., Any]) -> Callable[..., Any]:
        return tool


@dataclass(kw_only=True)
class Dispatch:
    """What the snippet's tool functions of one ``run_code`` call hand their calls to."""

    session: CodeSession
    parent_id: str
    tool_manager: ToolManager[Any]
    loop: asyncio.AbstractEventLoop
    max_tool_calls: int

    def next_id(self) -> str:
        """Reserve the next nested call id (at the call, before anything is awaited)."""
        namespace = self.session.executor.namespace
        parent, count = namespace.get(CALLS, (self.parent_id, 0))
        if parent != self.parent_id:
            count = 0
        if count >= self.max_tool_calls:
            raise RuntimeError(
                f"Code mode allows {self.max_tool_calls} nested tool calls per `run_code` call "
                "and this snippet asked for more. Call fewer tools, or split the work across "
                "several `run_code` calls."
            )
        namespace[CALLS] = (self.parent_id, count + 1)
        return f"{self.parent_id}__{count + 1}"

    async def call(self, tool_name: str, call_id: str, kwargs: dict[str, Any]) -> Any:
        """Run the call on the agent's loop and wait for it (from the snippet's loop)."""
        future = self.session.track(
            asyncio.run_coroutine_threadsafe(self._handle(tool_name, call_id, kwargs), self.loop)
        )
        try:
            return await asyncio.wrap_future(future)
        except ResumableError as error:
            raise Stop(error) from None

    def call_sync(self, tool_name: str, call_id: str, kwargs: dict[str, Any]) -> Any:
        """The same for a sequential tool, which the snippet calls without ``await``."""
        future = self.session.track(
            asyncio.run_coroutine_threadsafe(self._handle(tool_name, call_id, kwargs), self.loop)
        )

        def wait() -> Any:
            try:
                return future.result()
            except ResumableError as error:
                raise Stop(error) from None

        return journaled(f"tool:{tool_name}", wait)

    async def _handle(self, tool_name: str, call_id: str, kwargs: dict[str, Any]) -> Any:
        part = ToolCallPart(tool_name=tool_name, args=kwargs, tool_call_id=call_id)
        result = await self.tool_manager.handle_call(part, wrap_validation_errors=False)
        if isinstance(result, ToolDenied):
            raise RuntimeError(f"Tool {tool_name!r} call denied: {result.message}")
        if isinstance(result, ToolReturn):
            result = result.return_value
        return for_snippet(result)


class NestedTool:
    """A tool as the snippet calls it: ``await name(**kwargs)`` (or ``name(**kwargs)``)."""

    def __init__(self, dispatch: Dispatch, tool_name: str, *, sequential: bool) -> None:
        self.dispatch = dispatch
        self.tool_name = tool_name
        self.sequential = sequential

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args:
            raise TypeError(f"{self.tool_name}() takes keyword arguments only")
        call_id = self.dispatch.next_id()
        if self.sequential:
            return self.dispatch.call_sync(self.tool_name, call_id, kwargs)
        coroutine: Coroutine[Any, Any, Any] = self.dispatch.call(self.tool_name, call_id, kwargs)
        return coroutine

    def __repr__(self) -> str:
        return f"<tool {self.tool_name}>"


class CodeSession:
    """One agent run's REPL: its namespace, journaled in ``run`` (plain if None)."""

    def __init__(self, run: DurableRun | None) -> None:
        self.run = run
        self.generation = 0
        self.executor = self._new_executor()
        self.in_flight: set[Future[Any]] = set()
        """The snippet's tool calls running on the agent's loop (cancelled with the run)."""
        self.worker: asyncio.Future[Outcome] | None = None
        """The snippet running on its thread, while it runs."""

    def track(self, future: Future[Any]) -> Future[Any]:
        self.in_flight.add(future)
        future.add_done_callback(self.in_flight.discard)
        return future

    def _new_executor(self) -> CodeExecutor:
        frame = "code_mode" if self.generation == 0 else f"code_mode.{self.generation}"
        return CodeExecutor(self.run, frame=frame)

    def restart(self) -> None:
        """A new, empty namespace from the next snippet on (durable: a frame of its own)."""
        self.executor.close()
        self.generation += 1
        self.executor = self._new_executor()

    async def run_code(self, code: str, tools: dict[str, NestedTool]) -> Outcome:
        """Run ``code`` as the next turn of the namespace (on a worker thread)."""
        executor = self.executor
        executor.bind_tools(tools)
        with keeping_the_stop_signal():  # the worker's context: a store fault stays the signal
            worker = asyncio.ensure_future(asyncio.to_thread(executor.run_code, code))
        self.worker = worker
        try:
            return await asyncio.shield(worker)
        except asyncio.CancelledError:
            # The agent's run is cancelled: so are the tool calls the snippet awaits (they
            # see CancelledError), and the snippet, which they fail, is given a moment to
            # end before the cancellation goes on to the caller.
            for future in list(self.in_flight):
                future.cancel()
            await asyncio.wait({worker}, timeout=CANCEL_GRACE_SECONDS)
            if worker.done() and not worker.cancelled():
                worker.exception()  # retrieved: the snippet ended with the cancellation
            raise
        except Stop as stop:
            raise stop.error from None
        finally:
            if worker.done():
                self.worker = None

    def close(self) -> None:
        """Close the executor (once its snippet has ended, when one still runs)."""
        worker, executor = self.worker, self.executor
        if worker is not None and not worker.done():
            worker.add_done_callback(lambda _: executor.close())
            return
        executor.close()
