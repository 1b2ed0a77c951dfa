"""ResumableDurability: a pydantic-ai agent run as a resumable run.

A durable engine on pydantic-ai's public durable-execution surface
(``BaseDurabilityCapability`` and a callable operation backend). Each
``agent.run(prompt, run_id=...)`` opens the run ``run_id`` in the store - starting it,
or attaching to it where a crashed process left it - and every model request and tool
call of the agent goes through :mod:`~resumable.integrations.pydantic_ai.journal`:
recorded before the agent goes on, answered from the log on a resume. A second process
on a live run gets :class:`~resumable.errors.RunBusyError`; a run id of another agent
is refused, naming both.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.capabilities import WrapRunHandler
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    DurableOperationId,
    JournalCallableOperationBackend,
    ModelRequestId,
    RoleBasedOperationConfig,
    ToolsetCallToolId,
)
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import AgentDepsT, RunContext

from resumable.durability.embedded.run import DurableRun, open_run
from resumable.errors import UsageError
from resumable.integrations.pydantic_ai import journal

CURRENT_RUN: ContextVar[DurableRun | None] = ContextVar("resumable_pydantic_ai_run", default=None)
"""The run of the agent run in progress (set by ResumableDurability around the run)."""

_NO_CONFIG = RoleBasedOperationConfig[None](model=None, event=None, capability=None, tool=None)


def current_run() -> DurableRun | None:
    """The resumable run the current agent run is journaled in, if any."""
    return CURRENT_RUN.get()


class ResumableOperationBackend(JournalCallableOperationBackend[None]):
    """Runs pydantic-ai's durable operations through the run's journal."""

    def __init__(self, *, agent_name: str, default_model_id: str | None) -> None:
        super().__init__(
            agent_name=agent_name, default_model_id=default_model_id, config=_NO_CONFIG
        )

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: None,
    ) -> object:
        del config
        run = current_run()
        if run is None:
            return await body()
        if isinstance(operation_id, ModelRequestId):
            messages = cache_key[1]
            assert isinstance(messages, list)
            return await journal.model_request(run, name, messages, body)
        if isinstance(operation_id, ToolsetCallToolId):
            tool_name, ctx = cache_key[0], cache_key[2]
            assert isinstance(tool_name, str)
            assert isinstance(ctx, RunContext)
            call_id = ctx.tool_call_id or ""
            return await journal.tool_call(run, name, tool_name, call_id, body)
        # Discovery, argument validation and events are cheap and deterministic: run again.
        return await body()


@dataclass(init=False)
class ResumableDurability(BaseDurabilityCapability[AgentDepsT]):
    """Make an agent's runs resumable: ``agent.run(prompt, run_id=...)`` starts or resumes.

    ``store`` is a folder, ``sqlite:FILE``, ``postgresql://...`` or ``redis://...`` (as
    for :func:`resumable.open_run`). The run id is pydantic-ai's own ``run_id``; a run
    belongs to the agent's ``name`` (or ``program=``).
    """

    engine_spec: ClassVar[DurabilityEngineSpec] = DurabilityEngineSpec(
        engine_name="resumable",
        durable_unit_noun="record",
        durable_container_noun="run",
        codec=JSON_CODEC,
        wrapped_toolset_kinds=frozenset({"function", "mcp"}),
        toolset_lifecycles={"function": "enter-always", "mcp": "enter-always"},
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
    )

    def __init__(
        self,
        *,
        store: str | os.PathLike[str] = ".resumable",
        program: str | None = None,
        models: Mapping[str, Model] | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(models=models, event_stream_handler=event_stream_handler, name=name)
        self.store = store
        self.program = program

    @property
    def in_durable_context(self) -> bool:
        return current_run() is not None

    def get_durable_operation_backend(self) -> ResumableOperationBackend:
        return ResumableOperationBackend(
            agent_name=self.name, default_model_id=self.default_model_id
        )

    def program_name(self) -> str:
        """What the runs of this agent belong to: ``pydantic-ai:<agent name>``."""
        return self.program or f"pydantic-ai:{self.name}"

    async def wrap_run(
        self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """Open the run ``ctx.run_id`` around the agent run; complete it when the run ends."""
        if current_run() is not None:
            raise UsageError(
                "a resumable agent run is already in progress in this task; await it before "
                "starting another run of a ResumableDurability agent"
            )
        run_id = ctx.run_id
        if not run_id:
            raise UsageError("the agent run has no run_id: pass run_id= to agent.run()")
        run = await asyncio.to_thread(
            open_run, run_id, store=self.store, program=self.program_name()
        )
        token = CURRENT_RUN.set(run)
        try:
            result = await super().wrap_run(ctx, handler=handler)
            if not run.finished:
                await asyncio.to_thread(run.complete, _recordable(result.output))
            return result
        finally:
            CURRENT_RUN.reset(token)
            await asyncio.to_thread(run.close)


def _recordable(output: Any) -> Any:
    """The run's output as it is recorded (its repr if it cannot be pickled)."""
    import pickle

    try:
        pickle.dumps(output)
    except Exception:
        return repr(output)
    return output
