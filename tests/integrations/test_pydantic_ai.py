"""resumable.integrations.pydantic_ai against the real pydantic-ai and pydantic-ai-harness.

The kill -9 tests run examples/pydantic_ai (an agent in code mode with two ledger tools
and a scripted FunctionModel making four run_code calls) through
scripts/pydantic_ai_crash.py, for a deterministic sample of crash points; the script
itself tries every one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness import CodeMode

import pydantic_ai_crash as crash
import resumable
from resumable.errors import NonDeterminismError, RunBusyError, UsageError
from resumable.integrations.pydantic_ai import ResumableCodeMode, ResumableDurability

SAMPLE = [2, 11, 20, 29, 38]
"""Crash points tested here (the trip run writes 44 records); the script tries every one."""


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    folder = tmp_path_factory.mktemp("pydantic_ai")
    reference, durable = crash.baselines(folder)
    return reference, durable, folder


def test_uninterrupted_run_equals_the_harness_code_mode(baselines: Any) -> None:
    reference, durable, _ = baselines
    assert reference.answer == "answer: booked: T-F-ROME-ada to Rome for 90"
    assert durable.answer == reference.answer
    assert durable.ledger == reference.ledger
    assert reference.ledger.splitlines() == [
        "search Paris",
        "search Rome",
        "search Oslo",
        "book F-ROME ada",
    ]
    assert durable.calls == reference.calls == 5


@pytest.mark.parametrize("n", SAMPLE)
def test_killed_after_record_n_finishes_as_if_never_killed(n: int, baselines: Any) -> None:
    reference, durable, folder = baselines
    found, returncode = crash.problems(n, folder, reference, durable)
    assert returncode == -9  # the first process really was killed
    assert found == []


@pytest.mark.parametrize("n", [4, 13])
def test_msgpack_and_a_class_resume_exactly(n: int, tmp_path: Path) -> None:
    reference, durable = crash.baselines(tmp_path, "packer")
    assert durable.answer == "answer: booked: Bag T-F-OSLO-bo"
    assert durable.ledger.splitlines() == ["search Paris", "search Oslo", "book F-OSLO bo"]
    found, returncode = crash.problems(n, tmp_path, reference, durable, "packer")
    assert returncode == -9
    assert found == []


# -- in-process: CodeMode's visible behaviour, durability, bad input ----------------------


class Stopped(Exception):
    """The process stopping while it waits for the model (the run is left unfinished)."""


def scripted(
    calls: list[dict[str, Any]], log: list[list[Any]] | None = None, stop_at: int | None = None
) -> FunctionModel:
    """A model sending the n-th run_code call (n from the conversation), then the last return.

    It records what each request's last part said in ``log``; at turn ``stop_at`` it
    raises Stopped, as a process stopped while waiting for the model (a KeyboardInterrupt
    would leave asyncio.run's loop without finishing its tasks, and AnyIO's worker threads
    with it, so the test process could not exit).
    """

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if log is not None:
            log.append([getattr(p, "content", None) for p in messages[-1].parts])
        if turn == stop_at:
            raise Stopped
        if turn < len(calls):
            return ModelResponse(parts=[ToolCallPart("run_code", calls[turn], f"c{turn}")])
        return ModelResponse(parts=[TextPart(repr(messages[-1].parts[-1].content))])

    return FunctionModel(respond, model_name="scripted")


def run(agent: Agent[None, str], run_id: str | None = None) -> str:
    return asyncio.run(agent.run("go", run_id=run_id)).output


RETURN_SHAPES = [
    "x = 1",
    "print('hi')",
    "print('a', 2)\n{'k': [1, 2]}",
    "[n * 2 for n in range(3)]",
    "None",
]


def test_return_shapes_are_code_modes() -> None:
    calls = [{"code": code} for code in RETURN_SHAPES]
    theirs: list[list[Any]] = []
    ours: list[list[Any]] = []
    run(Agent(scripted(calls, theirs), capabilities=[CodeMode()]))
    run(Agent(scripted(calls, ours), capabilities=[ResumableCodeMode()]))
    assert ours == theirs
    assert ours[1:] == [
        [{}],
        [{"output": "hi\n"}],
        [{"output": "a 2\n", "result": {"k": [1, 2]}}],
        [[0, 2, 4]],
        [{}],
    ]


def test_an_error_is_a_retry_that_keeps_earlier_assignments() -> None:
    log: list[list[Any]] = []
    calls = [{"code": "a = 6\nb = a / 0\nc = 1"}, {"code": "(a, 'b' in dir(), 'c' in dir())"}]
    out = run(Agent(scripted(calls, log), capabilities=[ResumableCodeMode()]))
    (retry,) = log[1]
    assert retry.startswith("Runtime error:\nTraceback (most recent call last):\n")
    assert retry.endswith("ZeroDivisionError: division by zero")
    assert out == "(6, False, False)"


def _trip_tools(ledger: list[str]) -> list[Callable[..., Any]]:
    async def reserve(seat: str) -> str:
        """Reserve a seat."""
        ledger.append(seat)
        return f"seat {seat}"

    return [reserve]


def test_nested_calls_go_through_the_tool_manager_with_stable_ids(tmp_path: Path) -> None:
    ledger: list[str] = []
    calls = [{"code": "for s in ['1A', '1B']:\n    await reserve(seat=s)\n"}]
    agent = Agent(
        scripted(calls),
        name="seats",
        tools=_trip_tools(ledger),
        capabilities=[ResumableCodeMode(), ResumableDurability(store=tmp_path)],
    )
    result = asyncio.run(agent.run("go", run_id="ids"))
    returned = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert ledger == ["1A", "1B"]
    assert returned[0].tool_call_id == "c0"
    with resumable.open_run("ids", store=tmp_path, program="pydantic-ai:seats") as done:
        frames = sorted(f for f in done.state.frames if f.startswith("host:pydantic-ai:tool:"))
    assert frames == ["host:pydantic-ai:tool:c0__1", "host:pydantic-ai:tool:c0__2"]


def test_a_resume_answers_finished_work_from_the_log(tmp_path: Path) -> None:
    ledger: list[str] = []
    calls = [
        {"code": "a = await reserve(seat='1A')\na"},
        {"code": "b = await reserve(seat='2B')\n[a, b]"},
    ]

    def agent(model: FunctionModel) -> Agent[None, str]:
        capabilities = [ResumableCodeMode(), ResumableDurability(store=tmp_path)]
        return Agent(model, name="seats", tools=_trip_tools(ledger), capabilities=capabilities)

    with pytest.raises(Stopped):
        run(agent(scripted(calls, stop_at=2)), "r1")
    log: list[list[Any]] = []
    assert run(agent(scripted(calls, log)), "r1") == "['seat 1A', 'seat 2B']"
    assert ledger == ["1A", "2B"]  # each effect once
    assert len(log) == 1  # only the request that never got a response
    info = resumable.open_run("r1", store=tmp_path, program="pydantic-ai:seats")
    with info:
        assert (info.status, info.result) == ("completed", "['seat 1A', 'seat 2B']")


def test_restart_clears_the_namespace_durably(tmp_path: Path) -> None:
    calls = [
        {"code": "x = 5"},
        {"code": "y = 1", "restart": True},
        {"code": "sorted(n for n in ('x', 'y') if n in globals())"},
    ]

    def agent(model: FunctionModel) -> Agent[None, str]:
        capabilities = [ResumableCodeMode(), ResumableDurability(store=tmp_path)]
        return Agent(model, name="restarts", capabilities=capabilities)

    with pytest.raises(Stopped):
        run(agent(scripted(calls, stop_at=2)), "r1")
    assert run(agent(scripted(calls)), "r1") == "['y']"


def test_replayed_request_with_other_messages_is_refused(tmp_path: Path) -> None:
    calls = [{"code": "1 + 1"}, {"code": "2 + 2"}]
    capabilities = [ResumableCodeMode(), ResumableDurability(store=tmp_path)]
    with pytest.raises(Stopped):
        run(Agent(scripted(calls, stop_at=1), name="n", capabilities=capabilities), "r1")
    other = Agent(scripted(calls), name="n", capabilities=capabilities)
    with pytest.raises(NonDeterminismError, match=r"model request 1 \(n__model.request\)"):
        asyncio.run(other.run("another prompt", run_id="r1"))


def test_a_run_id_of_another_agent_is_refused_naming_both(tmp_path: Path) -> None:
    calls = [{"code": "1"}]
    first = Agent(
        scripted(calls), name="planner", capabilities=[ResumableDurability(store=tmp_path)]
    )
    run(first, "shared")
    second = Agent(
        scripted(calls), name="booker", capabilities=[ResumableDurability(store=tmp_path)]
    )
    with pytest.raises(UsageError, match="'pydantic-ai:planner', not to 'pydantic-ai:booker'"):
        run(second, "shared")


def test_a_tool_result_that_is_not_json_is_refused_naming_the_tool(tmp_path: Path) -> None:
    async def opaque() -> object:
        """Return something that is not data."""
        return object()

    for capabilities, code in (([], None), ([ResumableCodeMode()], "await opaque()")):
        model = (
            scripted([{"code": code}])
            if code
            else FunctionModel(lambda m, i: ModelResponse(parts=[ToolCallPart("opaque", {})]))
        )
        agent = Agent(
            model,
            name="opaque",
            tools=[opaque],
            capabilities=[*capabilities, ResumableDurability(store=tmp_path)],
        )
        with pytest.raises(UsageError, match="tool 'opaque' returned a value that cannot be"):
            run(agent, f"r{len(capabilities)}")


def test_a_second_process_on_a_live_run_is_busy(tmp_path: Path) -> None:
    seen: list[BaseException] = []

    async def peek() -> str:
        """Try to open the run this agent run holds."""
        try:
            resumable.open_run("live", store=tmp_path, program="pydantic-ai:busy").close()
        except RunBusyError as error:
            seen.append(error)
        return "ok"

    model = FunctionModel(
        lambda m, i: (
            ModelResponse(parts=[ToolCallPart("peek", {})])
            if len(m) == 1
            else ModelResponse(parts=[TextPart("done")])
        )
    )
    agent = Agent(
        model, name="busy", tools=[peek], capabilities=[ResumableDurability(store=tmp_path)]
    )
    assert run(agent, "live") == "done"
    assert len(seen) == 1


def test_without_durability_code_mode_runs_plainly() -> None:
    calls = [{"code": "import msgpack\nclass P:\n    n = 3\nmsgpack.unpackb(msgpack.packb([P.n]))"}]
    log: list[list[Any]] = []
    run(Agent(scripted(calls, log), capabilities=[ResumableCodeMode()]))
    assert log[1] == [[3]]
    assert not any(isinstance(p, RetryPromptPart) for p in log[1])
