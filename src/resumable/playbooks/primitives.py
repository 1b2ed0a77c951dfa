"""What generated code can call: Step, Say, Return, End and the human-in-the-loop four.

Each primitive is a plain function that does its in-memory part at once - note the
step, print the line, append the observation - and returns an awaitable whose
result is journaled like any await. On replay the in-memory part runs again (it is
deterministic, and printing is muted until replay catches up), while the awaited
part is answered from the log. Human input lives in the awaited part, so an answer
given once is never asked for again.

``Return``/``End`` and waiting for a human are control signals: ``BaseException``
subclasses, so ``except Exception:`` in generated code does not swallow them.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import select
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

_POLL_SECONDS = 0.1
"""How soon a terminal read notices that its question timed out."""


class PlaybookReturn(BaseException):
    """``Return(value)``: the playbook whose frame raised it is done."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


class ProgramEnd(BaseException):
    """``End()``: the whole program is done."""


class WaitForInput(BaseException):
    """No human can answer now: checkpoint, mark the run waiting, exit with code 3."""

    def __init__(self, question: dict[str, Any]) -> None:
        super().__init__(question.get("prompt", ""))
        self.question = question


@dataclass
class FrameData:
    """Per-frame runtime data kept in the frame's namespace (so it is checkpointed with it)."""

    playbook: str
    step: str | None = None
    turn: int = -1
    observations: list[str] = field(default_factory=list)


_agent: contextvars.ContextVar[AgentState | None] = contextvars.ContextVar(
    "resumable_agent", default=None
)


class AgentState(dict[str, Any]):
    """Agent-wide state (the steps' ``$vars``): one dict shared by every frame of a run.

    It is checkpointed on its own (with the boundary record of the statement that
    changed it); a frame's namespace refers to it by reduction, so after a resume every
    frame sees the same restored dict again.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (current_agent, ())

    @contextmanager
    def current(self) -> Iterator[AgentState]:
        token = _agent.set(self)
        try:
            yield self
        finally:
            _agent.reset(token)


def current_agent() -> AgentState:
    """The agent state of the run being executed (what a pickled reference resolves to)."""
    agent = _agent.get()
    return AgentState() if agent is None else agent


class HumanChannel(Protocol):
    """How a question reaches a human (the runtime implements it)."""

    async def ask(self, kind: str, prompt: str, timeout: float | None, default: Any) -> Any: ...


async def _done(value: Any = None) -> Any:
    return value


def _say_line(agent: str, to: str, text: str) -> str:
    return f"{agent} → {to}: {text}"


def make_primitives(
    agent: str,
    frame: Callable[[], FrameData],
    human: HumanChannel,
) -> dict[str, Any]:
    """The primitives bound to one frame (``frame()`` returns its FrameData)."""

    def Step(step: str) -> Awaitable[None]:
        data = frame()
        data.step = str(step)
        data.observations.append(f"Step {step}")
        return _done()

    def Say(to: str, text: Any) -> Awaitable[None]:
        message = str(text)
        print(_say_line(agent, str(to), message), flush=False)
        frame().observations.append(f"Said to {to}: {message}")
        return _done()

    def Return(value: Any = None) -> Awaitable[None]:
        raise PlaybookReturn(value)

    def End() -> Awaitable[None]:
        raise ProgramEnd()

    def Input(prompt: str, *, timeout: float | None = None, default: Any = None) -> Awaitable[Any]:
        return _ask(frame, human, "input", str(prompt), timeout, default)

    def Approve(
        prompt: str, *, timeout: float | None = None, default: bool | None = None
    ) -> Awaitable[bool]:
        return _ask(frame, human, "approve", str(prompt), timeout, default)

    def Review(
        content: Any,
        prompt: str = "Review this",
        *,
        timeout: float | None = None,
        default: Any = None,
    ) -> Awaitable[Any]:
        return _ask(frame, human, "review", f"{prompt}:\n{content}", timeout, default)

    def Escalate(
        reason: str, *, to: str = "human", timeout: float | None = None, default: Any = None
    ) -> Awaitable[Any]:
        return _ask(frame, human, "escalate", f"[escalated to {to}] {reason}", timeout, default)

    return {
        "Step": Step,
        "Say": Say,
        "Return": Return,
        "End": End,
        "Input": Input,
        "Approve": Approve,
        "Review": Review,
        "Escalate": Escalate,
    }


def _ask(
    frame: Callable[[], FrameData],
    human: HumanChannel,
    kind: str,
    prompt: str,
    timeout: float | None,
    default: Any,
) -> Awaitable[Any]:
    frame().observations.append(f"Asked a human ({kind}): {prompt}")
    return human.ask(kind, prompt, timeout, default)


YES = frozenset({"yes", "y", "true", "ok", "okay", "approve", "approved", "1"})
NO = frozenset({"no", "n", "false", "reject", "rejected", "deny", "0"})


def approval(text: str) -> bool | None:
    """An answer to Approve: True, False, or None when it is neither (then it is asked again).

    Case and trailing punctuation do not matter: "Yes." and "OK!" approve, "No." rejects.
    """
    word = text.strip().rstrip(".!?,;: ").strip().lower()
    if word in YES:
        return True
    if word in NO:
        return False
    return None


def answer_problem(kind: str, text: str) -> str | None:
    """What is wrong with ``text`` as the answer to a question of ``kind`` (None: nothing)."""
    if kind == "approve" and approval(text) is None:
        return f"answer yes or no (yes/y/true/ok/approve or no/n/false/reject), not {text!r}"
    return None


def parse_answer(kind: str, text: str) -> Any:
    """A human's typed answer as the primitive returns it (Approve gives a bool)."""
    if kind == "approve":
        return bool(approval(text))
    return text


async def ask_terminal(prompt: str, timeout: float | None) -> str | None:
    """Ask on the terminal; None if the timeout passed first, EOFError if input is closed.

    The line is read by polling the descriptor, so a question that timed out leaves no
    reader behind: nothing blocks the exit and nothing steals the next answer.
    """
    if sys.__stderr__ is not None:
        sys.__stderr__.write(f"{prompt}\n> ")
        sys.__stderr__.flush()
    stop = threading.Event()
    reading = asyncio.get_running_loop().run_in_executor(None, _read_line, sys.stdin.fileno(), stop)
    try:
        return await asyncio.wait_for(reading, timeout)
    except TimeoutError:
        return None
    finally:
        stop.set()


def _read_line(fd: int, stop: threading.Event) -> str:
    """One line from ``fd``, giving up (with an empty string) soon after ``stop`` is set."""
    data = bytearray()
    while not stop.is_set():
        ready, _, _ = select.select([fd], [], [], _POLL_SECONDS)
        if not ready:
            continue
        chunk = os.read(fd, 1)  # a byte at a time: what follows the line stays for the next
        if not chunk:
            if data:
                break
            raise EOFError("the terminal closed its input")
        data += chunk
        if b"\n" in data:
            break
    return data.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")


def deadline_passed(asked_at: float, timeout: float | None) -> bool:
    return timeout is not None and time.time() >= asked_at + timeout
