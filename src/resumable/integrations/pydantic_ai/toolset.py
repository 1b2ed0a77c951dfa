"""The ``run_code`` toolset: the agent's selected tools become functions of a snippet.

It keeps the visible behaviour of pydantic-ai-harness's ``CodeMode``: one
``run_code(code, restart=False)`` tool with the selected tools' signatures in its
description, the same return shape (the last expression's value; ``{"output": ...}``
when the snippet printed, with ``"result"`` when it also has a value; ``{}`` for
neither), an error returned to the model as a retry (assignments made before the
failing line are kept), and calls from the snippet dispatched through the agent's tool
manager with ids ``<run_code call id>__<n>``. What differs is where the snippet runs:
in CPython, under resumable's executor (see
:mod:`~resumable.integrations.pydantic_ai.session`).
"""

from __future__ import annotations

import asyncio
import keyword
import re
import warnings
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, NotRequired, cast

from pydantic import Field, TypeAdapter
from pydantic_ai import AbstractToolset, RunContext, ToolDefinition, WrapperToolset
from pydantic_ai.exceptions import ModelRetry, UserError
from pydantic_ai.messages import ToolReturn
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import AgentDepsT, ToolSelector, matches_tool_selector
from pydantic_ai.toolsets.abstract import ToolsetTool
from typing_extensions import TypedDict

from resumable.durability.embedded.outcome import Outcome
from resumable.integrations.pydantic_ai.durability import current_run
from resumable.integrations.pydantic_ai.session import CodeSession, Dispatch, NestedTool
from resumable.integrations.pydantic_ai.values import KeyCollision, contains_multimodal, for_model

RUN_CODE = "run_code"

DESCRIPTION = """Execute Python code in a persistent Python REPL and return its result.

Variables, functions, classes and imports persist between calls; pass `restart: true` to \
start from an empty namespace. The last expression of the code is returned (no need to \
`print` it); printed output is returned too. Top-level `await` works. On an error, the \
assignments made before the failing line are kept."""


class RunCodeArguments(TypedDict):
    """Arguments of a ``run_code`` call (the same as pydantic-ai-harness's)."""

    code: Annotated[str, Field(description="The Python code to execute in the sandbox.")]
    restart: NotRequired[
        Annotated[
            bool,
            Field(
                description="Set to true to reset REPL state. When false (default), state is "
                "preserved between calls."
            ),
        ]
    ]


_ARGS = TypeAdapter(RunCodeArguments)


@dataclass
class RunCodeTool(ToolsetTool[AgentDepsT]):
    """The ``run_code`` tool, with the tools its snippets may call."""

    callable_defs: dict[str, ToolDefinition] = field(default_factory=dict)
    original_names: dict[str, str] = field(default_factory=dict)
    wrapped_tools: dict[str, ToolsetTool[AgentDepsT]] = field(default_factory=dict)


@dataclass
class SessionBox:
    """The REPL of one agent run, shared by the toolset's copies for each step."""

    session: CodeSession | None = None


@dataclass
class ResumableCodeToolset(WrapperToolset[AgentDepsT]):
    """``run_code`` in place of the selected tools; the others stay native."""

    tool_selector: ToolSelector[AgentDepsT] = "all"
    max_retries: int = 3
    max_tool_calls: int = 100
    box: SessionBox = field(default_factory=SessionBox)

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> AbstractToolset[AgentDepsT]:
        """A copy with a REPL of its own for this agent run."""
        return replace(self, wrapped=await self.wrapped.for_run(ctx), box=SessionBox())

    async def __aexit__(self, *args: Any) -> bool | None:
        session, self.box.session = self.box.session, None
        try:
            return await self.wrapped.__aexit__(*args)
        finally:
            if session is not None:
                session.close()

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        wrapped_tools = await self.wrapped.get_tools(ctx)
        native: dict[str, ToolsetTool[AgentDepsT]] = {}
        callable_defs: dict[str, ToolDefinition] = {}
        original_names: dict[str, str] = {}
        for name, tool in wrapped_tools.items():
            tool_def = tool.tool_def
            if (
                tool_def.kind != "function"
                or tool_def.unless_native
                or _framework_tool(tool_def)
                or not ctx.is_tool_available(tool_def)
                or not await matches_tool_selector(self.tool_selector, ctx, tool_def)
            ):
                native[name] = tool
                continue
            safe = _python_name(name)
            if safe == RUN_CODE:
                raise UserError(
                    f"tool {name!r} would be called {safe!r} inside run_code, which is taken; "
                    "rename the tool"
                )
            if safe in callable_defs:
                warnings.warn(
                    f"code mode: tool {name!r} (sanitized to {safe!r}) collides with "
                    f"{original_names[safe]!r}; {name!r} will be hidden from run_code",
                    UserWarning,
                    stacklevel=2,
                )
                continue
            original_names[safe] = name
            callable_defs[safe] = replace(tool_def, name=safe)
        if RUN_CODE in native:
            raise UserError(f"tool name {RUN_CODE!r} is reserved for code mode; rename your tool")
        native[RUN_CODE] = RunCodeTool(
            toolset=self,
            tool_def=ToolDefinition(
                name=RUN_CODE,
                description=_description(callable_defs),
                parameters_json_schema=_ARGS.json_schema(),
                metadata={"code_arg_name": "code", "code_arg_language": "python"},
                sequential=True,
            ),
            max_retries=self.max_retries,
            args_validator=cast(Any, _ARGS.validator),  # a SchemaValidator
            callable_defs=callable_defs,
            original_names=original_names,
            wrapped_tools=wrapped_tools,
        )
        return native

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        if not isinstance(tool, RunCodeTool):
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        session = self.box.session
        if session is None:
            session = self.box.session = CodeSession(current_run())
        if tool_args.get("restart", False):
            session.restart()
        parent = ctx.tool_manager
        assert parent is not None, "run_code is called by the agent's tool manager"
        dispatch = Dispatch(
            session=session,
            parent_id=ctx.tool_call_id or "pyd_ai_code_mode",
            tool_manager=ToolManager(
                toolset=self.wrapped,
                root_capability=parent.root_capability,
                ctx=ctx,
                tools=tool.wrapped_tools,
            ),
            loop=asyncio.get_running_loop(),
            max_tool_calls=self.max_tool_calls,
        )
        tools = {
            safe: NestedTool(dispatch, tool.original_names[safe], sequential=tool_def.sequential)
            for safe, tool_def in tool.callable_defs.items()
        }
        outcome = await session.run_code(tool_args["code"], tools)
        return tool_return(outcome)


def tool_return(outcome: Outcome) -> ToolReturn[Any]:
    """What the model sees of a snippet, in CodeMode's shape; an error is a retry."""
    failure = outcome.error
    if failure is not None:
        if failure.syntax:
            where = f"  line {failure.line}\n    {failure.text.strip()}\n" if failure.text else ""
            raise ModelRetry(
                f"Syntax error in code:\n{outcome.output}{where}SyntaxError: {failure.message}"
            )
        raise ModelRetry(
            f"Runtime error:\n{outcome.output}Traceback (most recent call last):\n"
            f"{failure.traceback}".rstrip("\n")
        )
    try:
        value = None if outcome.value is None else for_model(outcome.value)
    except KeyCollision as collision:
        raise ModelRetry(f"The code's last value cannot be returned: {collision}") from None
    output = outcome.output
    returned: Any
    if not output:
        returned = value if value is not None else {}
    elif value is None:
        returned = {"output": output}
    elif contains_multimodal(value):
        returned = [output, *value] if isinstance(value, list) else [output, value]
    else:
        returned = {"output": output, "result": value}
    return ToolReturn(return_value=returned, metadata={"code_mode": True})


def _python_name(name: str) -> str:
    """The tool's name as a Python function (the harness's rule: ``for`` is ``for_``)."""
    safe = re.sub(r"[^a-zA-Z0-9_]", "_", name)
    if safe and safe[0].isdigit():
        safe = f"_{safe}"
    if keyword.iskeyword(safe):
        safe = f"{safe}_"
    return safe or "_"


def _framework_tool(tool_def: ToolDefinition) -> bool:
    """Tool search, capability loading and code-running tools stay beside ``run_code``."""
    kind = getattr(tool_def, "tool_kind", None)
    code = bool(tool_def.metadata and "code_arg_name" in tool_def.metadata)
    return kind in ("tool-search", "capability-load") or code


def _description(callable_defs: dict[str, ToolDefinition]) -> str:
    if not callable_defs:
        return DESCRIPTION
    functions = "\n\n".join(
        tool_def.render_signature("...", is_async=not tool_def.sequential)
        for tool_def in callable_defs.values()
    )
    return (
        f"{DESCRIPTION}\n\nThese functions are defined in the namespace; call them with "
        "keyword arguments, and `await` the async ones:\n\n"
        f"```python\n{functions}\n```"
    )
