"""durable_agent: a smolagents CodeAgent whose run survives kill -9.

The agent is patched in place. Its model is wrapped so every response is journaled
(a finished response is never requested again); its executor is bound to the run, so
code actions are checkpointed statement by statement and tool calls are steps; each
finished memory step is journaled too. A fresh process that builds the same agent
and calls ``agent.run(task)`` with the same ``run_id`` replays the agent loop from
the journal - the model is not called, the completed code actions are not run - and
so rebuilds ``agent.memory.steps`` exactly, then continues the interrupted code
action at its statement in progress. A memory step that comes out different on
replay (another model, other tools) stops the run with NonDeterminismError.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from smolagents.memory import ActionStep

from resumable.durability.embedded.run import DurableRun, open_run
from resumable.errors import NonDeterminismError, UsageError
from resumable.integrations.smolagents.executor import DurablePythonExecutor


class DurableModel:
    """The agent's model with its responses journaled in the bound run.

    Memory steps finished since the last call are journaled first: a step is only
    known complete once the agent goes on (a step cut short by an exception - the
    model unreachable, an interrupt - is finalized by smolagents too, and must not be
    recorded as if it were the step a resume will produce).
    """

    def __init__(self, model: Any) -> None:
        self.wrapped = model
        self.run: DurableRun | None = None
        self.finished_steps: list[dict[str, Any]] = []

    def journal_steps(self) -> None:
        """Journal the finished memory steps; one that differs from the log stops the run."""
        steps, self.finished_steps = self.finished_steps, []
        run = self.run
        if run is None:
            return
        for summary in steps:
            recorded = run.journal("memory").call("step", _returning(summary))
            if recorded != summary:
                raise NonDeterminismError(
                    f"run {run.run_id}: memory step {summary['step']} came out different on "
                    f"replay (recorded {recorded!r}, now {summary!r}); the agent is not the one "
                    "that started the run, or its model or tools are not deterministic",
                    run_id=run.run_id,
                )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    def generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        run = self.run
        if run is None:
            return self.wrapped.generate(messages, *args, **kwargs)
        self.journal_steps()
        return run.journal("model").call(
            "generate", lambda: _picklable(self.wrapped.generate(messages, *args, **kwargs))
        )

    def __call__(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self.generate(messages, *args, **kwargs)


def _returning(value: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    return lambda: value


def _picklable(message: Any) -> Any:
    """The response with its raw provider object dropped if that cannot be journaled."""
    raw = getattr(message, "raw", None)
    if raw is None:
        return message
    try:
        pickle.dumps(raw)
    except Exception:
        return replace(message, raw=None)
    return message


def _memory(step: ActionStep) -> dict[str, Any]:
    """What a memory step says, for the journal and the replay check."""
    return {
        "step": step.step_number,
        "model_output": step.model_output,
        "code": step.code_action,
        "observations": step.observations,
        "error": None if step.error is None else str(step.error),
        "final": step.is_final_answer,
    }


def default_program(agent: Any) -> str:
    """The name a run of ``agent`` belongs to: its class, name and tools."""
    name = getattr(agent, "name", None) or ""
    tools = ",".join(sorted(agent.tools))
    return f"smolagents:{type(agent).__name__}:{name}:{tools}"


def durable_agent(
    agent: Any,
    *,
    run_id: str,
    store: str | os.PathLike[str] = ".resumable",
    program: str | None = None,
) -> Any:
    """Make ``agent.run(task)`` start run ``run_id`` or resume it; returns the agent."""
    executor = getattr(agent, "python_executor", None)
    if not isinstance(executor, DurablePythonExecutor):
        raise UsageError(
            "durable_agent needs a CodeAgent built with executor=DurablePythonExecutor(...); "
            f"this agent's executor is {type(executor).__name__}"
        )
    if getattr(agent, "stream_outputs", False):
        raise UsageError(
            "durable_agent does not journal streamed model output yet; "
            "build the CodeAgent with stream_outputs=False"
        )
    model = agent.model if isinstance(agent.model, DurableModel) else DurableModel(agent.model)
    agent.model = model
    owner = program or default_program(agent)
    original = agent.run

    def remember(step: ActionStep, agent: Any = None) -> None:
        if model.run is not None:
            model.finished_steps.append(_memory(step))

    agent.step_callbacks.register(ActionStep, remember)

    def run(task: str, *args: Any, stream: bool = False, **kwargs: Any) -> Any:
        if stream:
            raise UsageError("durable_agent runs with stream=False only")
        durable = open_run(run_id, store=store, program=owner)
        try:
            if durable.status == "failed":
                raise UsageError(f"run {run_id} failed: {durable.error}", run_id=run_id)
            # A completed run is replayed whole from its journal (the model is not called,
            # no code runs), so the agent's memory comes back as well as its answer.
            recorded = durable.journal("task").call("task", lambda: task)
            if recorded != task:
                raise UsageError(
                    f"run {run_id} runs task {recorded!r}, not {task!r}; "
                    "resume it with its own task (agent.resume()) or choose another run id",
                    run_id=run_id,
                )
            model.run = durable
            executor.attach(durable)
            result = original(task, *args, stream=False, **kwargs)
            model.journal_steps()
            if not durable.finished:
                durable.complete(result)
            return result
        finally:
            model.finished_steps.clear()
            model.run = None
            executor.attach(None)
            durable.close()

    def resume(**kwargs: Any) -> Any:
        """Go on with run ``run_id`` and its recorded task (replayed whole if it finished)."""
        with open_run(run_id, store=store, program=owner, create=False) as durable:
            found, task = durable.journal("task").peek("task")
        if not found:
            raise UsageError(
                f"run {run_id} has no task yet: start it with agent.run(task)", run_id=run_id
            )
        return run(task, **kwargs)

    agent.run = run
    agent.resume = resume
    return agent
