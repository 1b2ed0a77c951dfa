"""The messages sent to the LLM for each turn of a playbook's frame.

A turn's prompt is the previous turn's prompt plus the previous response and what
came of it (the observations), so every prompt can be rebuilt from the log alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from resumable.llm.base import Message
from resumable.playbooks.program import PlaybookSpec, Program, StepSpec

PRIMITIVES = """\
Primitives (all must be awaited):
- await Step("Playbook:NN:CODE")   say which step you are executing
- await Say("user", text)          say something to the user
- await Return(value)              finish this playbook with a result
- await End()                      end the whole program
- await Input(prompt, timeout=None, default=None)     ask a human for text
- await Approve(prompt, timeout=None, default=None)   ask a human yes/no
- await Review(content, prompt, timeout=None, default=None)
- await Escalate(reason, to="human", timeout=None, default=None)
Every playbook is an async function you can await, e.g. x = await SomePlaybook().
`agent` is a dict shared by every playbook of the run: keep agent-wide $vars in it."""

RULES = """\
Reply with Python code only, no prose and no Markdown fences. Top-level await is allowed.
Variables persist between your replies. Execute the steps in order, calling Step before
each one, and finish with Return(...) or End()."""


def _steps(steps: Sequence[StepSpec], playbook: str, depth: int = 0) -> list[str]:
    lines = []
    for step in steps:
        lines.append(f"{'  ' * depth}- {step.ref(playbook)} {step.text}")
        lines.extend(_steps(step.children, playbook, depth + 1))
    return lines


def first_prompt(program: Program, spec: PlaybookSpec, args: dict[str, Any]) -> list[Message]:
    signatures = "\n".join(
        f"- {p.signature()}: {p.description.strip().splitlines()[0] if p.description.strip() else ''}"
        for p in program.playbooks.values()
    )
    system = (
        f"You are {program.agent}. {program.description.strip()}\n\n"
        f"Playbooks you can call:\n{signatures}\n\n{PRIMITIVES}\n\n{RULES}"
    )
    arguments = ", ".join(f"{k}={v!r}" for k, v in args.items()) or "none"
    task = (
        f"Execute playbook {spec.signature()} with arguments: {arguments}.\n"
        f"Steps:\n" + "\n".join(_steps(spec.steps, spec.name))
    )
    if spec.notes:
        task += "\nNotes:\n" + "\n".join(f"- {n}" for n in spec.notes)
    return [Message("system", system), Message("user", task)]


def next_prompt(
    previous: Sequence[Message], response: str, observations: Sequence[str]
) -> list[Message]:
    seen = "\n".join(observations) if observations else "(nothing happened)"
    return [
        *previous,
        Message("assistant", response),
        Message("user", f"Observations:\n{seen}\nContinue with the next step."),
    ]


MAX_TRACEBACK_LINES = 12
MAX_TRACEBACK_CHARS = 1500
QUOTE_CHARS = 400

NO_CODE_OBSERVATION = (
    "Error: your reply held no Python code to run (prose, reasoning and fences of other "
    "languages are not run). Reply with the Python code of the next step."
)


def error_observation(failure: Mapping[str, Any], reply: str) -> str:
    """What the model is told of an error in its reply: the line it wrote, a short traceback."""
    text = f"Error: {failure['message']}"
    lines = reply.splitlines()
    line = failure.get("line") or 0
    if 0 < line <= len(lines) and lines[line - 1].strip():
        text += f"\nLine {line} of your reply: {lines[line - 1].strip()}"
    trace = str(failure.get("traceback") or "").rstrip("\n")
    if trace:
        text += "\n" + _bounded(trace)
    return text


def _bounded(trace: str) -> str:
    """The end of a traceback (where the error is), at most a few lines and characters."""
    lines = trace.splitlines()
    cut = len(lines) > MAX_TRACEBACK_LINES
    kept = "\n".join(lines[-MAX_TRACEBACK_LINES:])
    if len(kept) > MAX_TRACEBACK_CHARS:
        kept, cut = kept[-MAX_TRACEBACK_CHARS:], True
    return ("(traceback shortened)\n" if cut else "") + kept


def quote(reply: str) -> str:
    """A reply quoted in one line of an error message, shortened if long."""
    text = reply if len(reply) <= QUOTE_CHARS else reply[: QUOTE_CHARS - 3] + "..."
    return repr(text)


def to_wire(messages: Sequence[Message]) -> list[list[str]]:
    return [[m.role, m.content] for m in messages]


def from_wire(data: Sequence[Sequence[str]]) -> list[Message]:
    return [Message(role, content) for role, content in data]  # type: ignore[arg-type]
