"""Questions for a human: asked on a terminal, or the run waits for `resumable answer`.

A question is keyed by the idempotency key of the await that asks it, recorded with
the time it was first asked (an ``ask`` record) and answered from the log once
answered, so a resume never asks again and a timeout counts from the first asking.
"""

from __future__ import annotations

import time
from typing import Any

from resumable.errors import UsageError
from resumable.journal import idempotency_key
from resumable.playbooks.primitives import (
    WaitForInput,
    ask_terminal,
    deadline_passed,
    parse_answer,
)
from resumable.session import RunSession


class HumanDesk:
    """Where the primitives Input/Approve/Review/Escalate send their questions."""

    def __init__(self, session: RunSession, *, interactive: bool) -> None:
        self.session = session
        self.interactive = interactive

    async def ask(self, kind: str, prompt: str, timeout: float | None, default: Any) -> Any:
        try:
            # per question, also for questions asked at once in spawned tasks (gather)
            key = idempotency_key()
        except UsageError:
            key = f"{self.session.run_id}/unkeyed/{kind}"
        state = self.session.state
        if key in state.answers:
            return parse_answer(kind, str(state.answers[key]))
        asked = state.asks.get(key)
        if asked is None:
            await self.session.manager.write(
                "ask",
                "main",
                {"key": key, "kind": kind, "prompt": prompt, "timeout": timeout, "at": time.time()},
            )
            asked = state.asks[key]
        if deadline_passed(asked["at"], timeout):
            return default
        question = {
            "key": key,
            "kind": kind,
            "prompt": prompt,
            "timeout": timeout,
            "at": asked["at"],
        }
        if self.interactive:
            remaining = None if timeout is None else max(0.0, asked["at"] + timeout - time.time())
            try:
                text = await ask_terminal(prompt, remaining)
            except EOFError:  # the terminal went away: wait for `resumable answer`
                raise WaitForInput(question) from None
            return default if text is None else parse_answer(kind, text)
        raise WaitForInput(question)
