"""A port, in our own words, of pydantic-ai-harness's code mode cases to ResumableCodeMode.

The harness's sdist ships no tests, so its code-mode contract is restated here: what a
tool's result looks like inside ``run_code`` (bytes of any encoding, multimodal content,
JSON keys), what the model gets back (leaf by leaf, multimodal content as such, the
``{"code_mode": True}`` metadata), how tool names become Python names and which tools
stay beside ``run_code``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from resumable.integrations.pydantic_ai import ResumableCodeMode


def _agent(codes: list[str], tools: list[Any], seen: list[ModelMessage]) -> Agent[None, str]:
    """An agent whose model sends ``codes`` as run_code calls, then repeats the last return."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen[:] = messages
        seen_tools.append(sorted(t.name for t in info.function_tools))
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn < len(codes):
            return ModelResponse(
                parts=[ToolCallPart("run_code", {"code": codes[turn]}, f"c{turn}")]
            )
        return ModelResponse(parts=[TextPart("done")])

    seen_tools: list[list[str]] = []
    agent = Agent(
        FunctionModel(respond, model_name="port"), tools=tools, capabilities=[ResumableCodeMode()]
    )
    agent.seen_tools = seen_tools  # type: ignore[attr-defined]
    return agent


def _returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]


def _errors(messages: list[ModelMessage]) -> list[str]:
    """The errors the model was shown (a snippet's error is a retry)."""
    return [
        p.content
        for p in _returns(messages)
        if isinstance(p.content, str) and p.content.startswith(("Runtime error", "The code"))
    ]


def _run(agent: Agent[None, str]) -> None:
    asyncio.run(agent.run("go"))


def test_bytes_of_any_encoding_reach_the_snippet_as_bytes() -> None:
    async def blob() -> bytes:
        """Raw bytes, not UTF-8."""
        return b"\xff\xfe\x00"

    seen: list[ModelMessage] = []
    _run(_agent(["data = await blob()\n(len(data), data[0], type(data).__name__)"], [blob], seen))
    assert _returns(seen)[0].content == (3, 255, "bytes")


def test_keys_that_collide_as_json_are_a_retry_naming_both() -> None:
    async def table() -> dict[Any, str]:
        """Two keys, one JSON key."""
        return {1: "a", "1": "b"}

    seen: list[ModelMessage] = []
    _run(_agent(["t = await table()", "'fixed'"], [table], seen))
    (error,) = _errors(seen)
    assert "a mapping has keys 1 and '1', which both render as the JSON key '1'" in error


def test_binary_content_from_a_tool_goes_back_to_the_model_as_multimodal_content() -> None:
    image = BinaryContent(data=b"\x89PNG\r\n", media_type="image/png")

    async def snapshot() -> BinaryContent:
        """An image."""
        return image

    seen: list[ModelMessage] = []
    _run(_agent(["print('taken')\nawait snapshot()"], [snapshot], seen))
    (part,) = _returns(seen)
    assert part.content == ["taken\n", image]


def test_the_last_value_is_converted_leaf_by_leaf() -> None:
    seen: list[ModelMessage] = []
    code = "class Box:\n    def __repr__(self):\n        return 'Box()'\n{'n': float('nan'), 'box': Box(), 'xs': [1, 2]}"
    _run(_agent([code], [], seen))
    assert _returns(seen)[0].content == {"n": "nan", "box": "Box()", "xs": [1, 2]}


def test_a_json_key_collision_in_the_last_value_is_a_retry() -> None:
    seen: list[ModelMessage] = []
    _run(_agent(["{1: 'a', '1': 'b'}", "'fixed'"], [], seen))
    (error,) = _errors(seen)
    assert "keys 1 and '1', which both render as the JSON key '1'" in error


def test_the_return_carries_code_mode_metadata() -> None:
    seen: list[ModelMessage] = []
    _run(_agent(["1 + 1"], [], seen))
    (part,) = _returns(seen)
    assert (part.content, part.metadata) == (2, {"code_mode": True})


def test_tool_names_become_python_names_and_a_collision_is_dropped_with_a_warning() -> None:
    def keyword_tool() -> str:
        """A tool named for."""
        return "loop"

    def dashed() -> str:
        """a-b"""
        return "dash"

    def dotted() -> str:
        """a.b"""
        return "dot"

    tools = [
        Tool(keyword_tool, name="for"),
        Tool(dashed, name="a-b"),
        Tool(dotted, name="a.b"),
    ]
    seen: list[ModelMessage] = []
    with pytest.warns(UserWarning, match=r"tool 'a\.b' \(sanitized to 'a_b'\) collides with 'a-b'"):
        _run(_agent(["(await for_(), await a_b())"], tools, seen))
    assert _returns(seen)[0].content == ("loop", "dash")


def test_a_tool_that_runs_code_stays_beside_run_code() -> None:
    def shell(command: str) -> str:
        """Run a shell command."""
        return command

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    tools = [Tool(shell, metadata={"code_arg_name": "command"}), Tool(add)]
    seen: list[ModelMessage] = []
    agent = _agent(["await add(a=1, b=2)"], tools, seen)
    _run(agent)
    assert agent.seen_tools[0] == ["run_code", "shell"]  # type: ignore[attr-defined]
    assert _returns(seen)[0].content == 3


def test_cancelling_the_run_cancels_the_tool_the_code_awaits_and_closes_cleanly() -> None:
    seen_by_tool: list[str] = []

    async def slow() -> str:
        """Takes its time."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen_by_tool.append("cancelled")
            raise
        return "late"

    agent = _agent(["await slow()"], [slow], [])

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.run("go"), 0.5)

    asyncio.run(main())
    assert seen_by_tool == ["cancelled"]
