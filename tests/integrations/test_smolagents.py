"""resumable.integrations.smolagents against the real smolagents package.

The kill -9 test runs examples/smolagents (a CodeAgent with two ledger tools and a
scripted model making five code actions) through scripts/smolagents_crash.py, for a
deterministic sample of crash points; the script itself tries every one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from smolagents import CodeAgent, LocalPythonExecutor, tool
from smolagents.local_python_executor import ExecutionTimeoutError, InterpreterError
from smolagents.memory import ActionStep
from smolagents.models import ChatMessage, MessageRole, Model

import smolagents_crash as crash
from resumable.errors import UsageError
from resumable.integrations.smolagents import DurablePythonExecutor, durable_agent

SAMPLE = [2, 13, 25, 37, 49]
"""Crash points tested here (the run writes 54 records); the script tries every one."""


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    folder = tmp_path_factory.mktemp("smolagents")
    local, durable = crash.baselines(folder)
    return local, durable, folder


def test_uninterrupted_run_equals_smolagents_own_executor(baselines: Any) -> None:
    local, durable, _ = baselines
    assert local.answer == "answer: 3 lines, total 31, subtotal was 19"
    assert durable.answer == local.answer
    assert durable.ledger == local.ledger
    assert local.ledger.count("sale ") == 3
    assert durable.calls == local.calls == 5
    steps = [s for s in durable.memory if s["type"] == "ActionStep"]
    assert "KeyError: 'figs'" in steps[2]["error"]  # the failing action, shown to the model


@pytest.mark.parametrize("n", SAMPLE)
def test_killed_after_record_n_finishes_as_if_never_killed(n: int, baselines: Any) -> None:
    local, durable, folder = baselines
    found, returncode = crash.problems(n, folder, local, durable)
    assert returncode == -9  # the first process really was killed
    assert found == []


# -- in-process: the PythonExecutor contract and bad input --------------------------------


def test_errors_are_worded_as_smolagents_words_them() -> None:
    ours, theirs = DurablePythonExecutor(), LocalPythonExecutor([])
    for executor in (ours, theirs):
        executor.send_tools({})
    for code in ("import os", "from os import path", "y = 1 / 0", "x = = 1"):
        with pytest.raises(InterpreterError) as expected:
            theirs(code)
        with pytest.raises(InterpreterError) as got:
            ours(code)
        assert str(got.value) == str(expected.value), code


def test_code_output_logs_and_final_answer_follow_the_contract() -> None:
    executor = DurablePythonExecutor(additional_authorized_imports=["json"])
    executor.send_tools({"final_answer": lambda value: value})
    executor.send_variables({"start": 2})
    out = executor("import json\nprint('hi', start)\nx = start * 21")
    assert (out.output, out.logs, out.is_final_answer) == (42, "hi 2\n", False)
    assert str(executor.state["_print_outputs"]) == "hi 2\n"
    out = executor("print('bye')\nfinal_answer(json.dumps({'x': x}))\nprint('never')")
    assert (out.output, out.logs, out.is_final_answer) == ('{"x": 42}', "bye\n", True)


class Scripted(Model):  # type: ignore[misc]
    """Answers with the n-th action, n counted from the conversation; counts its calls."""

    def __init__(self, actions: list[str], stop_at: int | None = None) -> None:
        super().__init__(model_id="scripted")
        self.actions = actions
        self.stop_at = stop_at
        self.calls = 0

    def generate(self, messages: list[Any], stop_sequences: Any = None, **_: Any) -> ChatMessage:
        turn = sum(1 for m in messages if m.role == MessageRole.ASSISTANT)
        if turn == self.stop_at:
            raise KeyboardInterrupt  # the process is stopped while waiting for the model
        self.calls += 1
        code = self.actions[turn]
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"<code>\n{code}\n</code>")


def _agent(model: Model, tools: list[Any], store: Path | str, run_id: str = "r1") -> Any:
    agent = CodeAgent(
        tools=tools, model=model, executor=DurablePythonExecutor(), verbosity_level=-1
    )
    return durable_agent(agent, run_id=run_id, store=store)


def test_a_tool_that_raises_is_shown_journaled_and_not_run_again(tmp_path: Path) -> None:
    calls: list[str] = []

    @tool
    def reserve(seat: str) -> str:
        """Reserve a seat.

        Args:
            seat: which seat
        """
        calls.append(seat)
        raise ValueError(f"seat {seat} is taken")

    actions = ["r = reserve('1A')", "final_answer('gave up on 1A')"]
    with pytest.raises(KeyboardInterrupt):
        _agent(Scripted(actions, stop_at=1), [reserve], tmp_path).run("book 1A")
    assert calls == ["1A"]
    model = Scripted(actions)
    agent = _agent(model, [reserve], tmp_path)
    assert agent.resume() == "gave up on 1A"
    assert calls == ["1A"]  # answered from the log: the tool did not run again
    assert model.calls == 1  # only the response that was never received
    first = agent.memory.steps[1]
    assert isinstance(first, ActionStep)
    assert "ValueError: seat 1A is taken" in str(first.error)


def test_a_finished_run_answers_without_calling_the_model(tmp_path: Path) -> None:
    model = Scripted(["final_answer(6 * 7)"])
    assert _agent(model, [], tmp_path).run("six times seven") == 42
    again = Scripted(["final_answer(0)"])
    agent = _agent(again, [], tmp_path)
    assert agent.run("six times seven") == 42
    assert again.calls == 0
    assert len(agent.memory.steps) == 2  # the task and the action, replayed from the log
    assert agent.memory.steps[1].code_action == "final_answer(6 * 7)"
    assert agent.resume() == 42


def test_another_agent_or_task_on_the_run_id_is_refused_naming_both(tmp_path: Path) -> None:
    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    with pytest.raises(KeyboardInterrupt):
        _agent(Scripted(["x = 1"], stop_at=1), [], tmp_path).run("task one")
    with pytest.raises(UsageError, match="runs task 'task one', not 'task two'"):
        _agent(Scripted(["x = 1"]), [], tmp_path).run("task two")
    with pytest.raises(
        UsageError,
        match=r"belongs to embedded program 'smolagents:CodeAgent::final_answer', not to 'smolagents:CodeAgent::final_answer,ping'",
    ):
        _agent(Scripted(["x = 1"]), [ping], tmp_path).run("task one")


def test_bad_store_and_executor_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="'ftp://x' uses scheme 'ftp', which is not a store"):
        _agent(Scripted(["x = 1"]), [], "ftp://x").run("t")
    plain = CodeAgent(tools=[], model=Scripted(["x = 1"]), verbosity_level=-1)
    with pytest.raises(
        UsageError, match="needs a CodeAgent built with executor=DurablePythonExecutor"
    ):
        durable_agent(plain, run_id="r", store=tmp_path)


# -- smolagents' guard rails, on by default ------------------------------------------------


@pytest.mark.parametrize(
    ("code", "imports", "refused"),
    [
        ("import random\nrandom._os.system(':')", [], "Forbidden access to module: os"),
        ("import importlib\nimportlib.import_module('os')", ["importlib"], "module: os"),
        ("import sys\nsys.modules['os']", ["sys"], "Forbidden access to module: os"),
        ("from random import _os\n_os", [], "Forbidden access to module: os"),
        ("().__class__.__base__", [], "Forbidden access to dunder attribute: __base__"),
        ("getattr((), '__class__')", [], "Forbidden access to dunder attribute: __class__"),
        ("eval('1 + 1')", [], "Forbidden function evaluation: 'eval'"),
        ("exec('x = 1')", [], "Forbidden function evaluation: 'exec'"),
        ("__import__('os')", [], "Forbidden function evaluation: '__import__'"),
        ("add_two = 3", [], "Cannot assign to name 'add_two': doing this would erase"),
        ("i = 0\nwhile True:\n    i += 1", [], "iterations in While loop exceeded"),
    ],
)
def test_smolagents_guard_rails_refuse_as_smolagents_does(
    code: str, imports: list[str], refused: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("smolagents.local_python_executor.MAX_WHILE_ITERATIONS", 50)
    for executor in (DurablePythonExecutor(imports), LocalPythonExecutor(imports)):
        executor.send_tools({"add_two": lambda x: x + 2})
        with pytest.raises(InterpreterError, match=refused):
            executor(code)


def test_base_helpers_are_there_and_guards_false_runs_plain_cpython() -> None:
    executor = DurablePythonExecutor()
    executor.send_tools({})
    assert executor("sqrt(16) + ceil(0.5)").output == 5.0
    plain = DurablePythonExecutor(guards=False)
    plain.send_tools({"add_two": lambda x: x + 2})
    assert plain("import random\nrandom._os.__name__").output == "os"
    assert plain("add_two = 3\neval('add_two * 2')").output == 6


def test_a_function_given_as_final_answer_keeps_its_source() -> None:
    executor = DurablePythonExecutor()
    executor.send_tools({"final_answer": lambda value: value})
    out = executor("def twice(x):\n    return 2 * x\nfinal_answer(twice)")
    assert out.is_final_answer
    assert out.output.__source__ == "def twice(x):\n    return 2 * x"
    assert out.output(4) == 8


def test_timeout_interrupts_the_statement_in_progress() -> None:
    executor = DurablePythonExecutor(timeout_seconds=0.5)
    executor.send_tools({})
    with pytest.raises(ExecutionTimeoutError, match=r"maximum execution time of 0\.5 seconds"):
        executor("for n in range(10**12):\n    pass")  # (a while loop would meet the cap)
    assert executor("n").output is not None  # the state is there; the executor goes on
    assert executor("1 + 1").output == 2


def test_a_timed_out_action_is_journaled_and_the_run_resumes_past_it(tmp_path: Path) -> None:
    actions = ["for n in range(10**12):\n    pass", "final_answer('went on')"]

    def agent(model: Model) -> Any:
        executor = DurablePythonExecutor(timeout_seconds=0.3)
        built = CodeAgent(tools=[], model=model, executor=executor, verbosity_level=-1)
        return durable_agent(built, run_id="slow", store=tmp_path)

    with pytest.raises(KeyboardInterrupt):
        agent(Scripted(actions, stop_at=1)).run("loop")
    model = Scripted(actions)
    resumed = agent(model)
    assert resumed.resume() == "went on"
    assert model.calls == 1  # the timed-out action came from the log, not from the model
    first = resumed.memory.steps[1]
    assert "maximum execution time of 0.3 seconds" in str(first.error)
