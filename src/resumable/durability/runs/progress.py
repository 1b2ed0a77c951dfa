"""What a run is doing, for the people watching it: counters and a stream of events.

The drivers report here (frame entered, turn started, text streamed, statement run,
retry); a listener - the CLI's status line, its ``--events json`` lines - is told
of every event. Nothing here writes anywhere: showing it is the listener's job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Listener = Callable[[str, dict[str, Any]], None]
"""Called with the event's kind and its fields."""

CHARS_PER_TOKEN = 4
"""Tokens of text still streaming are estimated; a finished turn counts what the provider billed."""


class RunProgress:
    """The counters of one run, updated by its driver as it goes."""

    def __init__(self, listener: Listener | None = None) -> None:
        self.listener = listener
        self.run_id = ""
        self.playbook = ""
        self.frame = ""
        self.turn = 0
        self.statements = 0
        self.checkpoints = 0
        self.turns = 0
        self.retries = 0
        self.started = time.monotonic()
        self._billed = 0
        self._streaming = 0

    @property
    def tokens(self) -> int:
        """Completion tokens: billed for finished turns, estimated for the one streaming."""
        return self._billed + -(-self._streaming // CHARS_PER_TOKEN)

    def emit(self, kind: str, **fields: Any) -> None:
        if self.listener is not None:
            self.listener(kind, fields)

    def run_started(self, run_id: str) -> None:
        self.run_id = run_id
        self.emit("run", run_id=run_id)

    def frame_entered(self, playbook: str, frame: str) -> None:
        self.playbook, self.frame = playbook, frame
        self.emit("frame", playbook=playbook, frame=frame)

    def turn_started(self, turn: int) -> None:
        self.turn = turn
        self.turns += 1
        self.emit("turn", playbook=self.playbook, frame=self.frame, turn=turn + 1)

    def streamed(self, text: str) -> None:
        self._streaming += len(text)
        self.emit("tokens", tokens=self.tokens)

    def turn_ended(self, completion_tokens: int | None) -> None:
        estimate = -(-self._streaming // CHARS_PER_TOKEN)
        self._billed += estimate if completion_tokens is None else completion_tokens
        self._streaming = 0
        self.emit("turn_end", tokens=self.tokens)

    def statement_done(self, checkpoints: int, *, statements: int | None = None) -> None:
        self.statements = self.statements + 1 if statements is None else statements
        self.checkpoints = checkpoints
        self.emit("statement", statements=self.statements, checkpoints=checkpoints)

    def asking(self, prompt: str) -> None:
        """A question is about to be asked on the terminal."""
        self.emit("ask", prompt=prompt)

    def retried(self, line: str, attempt: int, delay: float) -> None:
        self.retries += 1
        self.emit("retry", message=line, attempt=attempt, delay=round(delay, 3))

    def summary(self, status: str) -> str:
        """One line for the end of the run."""
        seconds = time.monotonic() - self.started
        parts = [plural(self.statements, "statement"), plural(self.checkpoints, "checkpoint")]
        if self.turns:
            parts += [plural(self.turns, "LLM turn"), plural(self.tokens, "token")]
        parts.append(plural(self.retries, "retry", "retries"))
        return f"{status} in {seconds:.1f} s: {', '.join(parts)}"


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 statement``, ``2 statements`` (``words``: the plural when it is not ``word + s``)."""
    return f"{count} {word if count == 1 else (words or word + 's')}"
