"""ResumableCodeMode: pydantic-ai code mode whose snippets run in CPython, durably.

``Agent(..., capabilities=[ResumableCodeMode(), ResumableDurability(store=...)])``: the
agent's tools are folded into one ``run_code`` tool, as with pydantic-ai-harness's
``CodeMode``, but the code runs in real CPython (any library, classes, everything) under
resumable's executor: its namespace is checkpointed at every statement and lives on
across ``run_code`` calls and across processes. With ``ResumableDurability`` a crashed
run resumes: finished ``run_code`` calls return their recorded results, the interrupted
one continues from its statement in progress. CPython is not a sandbox: the code runs
with the rights of the process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic_ai import AbstractToolset
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.capabilities import ToolSearch as _ToolSearch
from pydantic_ai.exceptions import UserError
from pydantic_ai.tools import AgentDepsT, ToolSelector

from resumable.integrations.pydantic_ai.toolset import ResumableCodeToolset


@dataclass
class ResumableCodeMode(AbstractCapability[AgentDepsT]):
    """Expose the selected tools (``tools="all"``, names, a predicate or metadata) in ``run_code``."""

    tools: ToolSelector[AgentDepsT] = field(default="all")
    max_retries: int = 3
    max_tool_calls: int = 100

    def __post_init__(self) -> None:
        if self.max_tool_calls < 1:
            raise UserError("`max_tool_calls` must be at least 1")

    def get_ordering(self) -> CapabilityOrdering:
        """Outermost, around ToolSearch, as CodeMode is."""
        return CapabilityOrdering(position="outermost", wraps=[_ToolSearch])

    def get_wrapper_toolset(
        self, toolset: AbstractToolset[AgentDepsT]
    ) -> AbstractToolset[AgentDepsT] | None:
        return ResumableCodeToolset(
            wrapped=toolset,
            tool_selector=self.tools,
            max_retries=self.max_retries,
            max_tool_calls=self.max_tool_calls,
        )
