"""Questions for a human: asked on a terminal, or the run waits for `resumable answer`.

A question is keyed by the idempotency key of the await that asks it, recorded with
the time it was first asked (an ``ask`` record) and answered from the log once
answered, so a resume never asks again and a timeout counts from the first asking.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from resumable.durability.effects.keys import await_key
from resumable.durability.runs.session import RunSession
from resumable.playbooks.primitives import (
    WaitForInput,
    answer_problem,
    ask_terminal,
    deadline_passed,
    parse_answer,
)


class HumanDesk:
    """Where the primitives Input/Approve/Review/Escalate send their questions."""

    def __init__(
        self,
        session: RunSession,
        *,
        interactive: bool,
        on_ask: Callable[[str], None] | None = None,
    ) -> None:
        self.session = session
        self.interactive = interactive
        self.on_ask = on_ask
        """Told before a question goes to the terminal (a status line makes room for it)."""

    async def ask(self, kind: str, prompt: str, timeout: float | None, default: Any) -> Any:
        # per question, also for questions asked at once in spawned tasks (gather)
        key = await_key() or f"{self.session.run_id}/unkeyed/{kind}"
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
            if self.on_ask is not None:
                self.on_ask(prompt)
            ask = prompt
            while True:
                left = None if timeout is None else max(0.0, asked["at"] + timeout - time.time())
                try:
                    text = await ask_terminal(ask, left)
                except EOFError:  # the terminal went away: wait for `resumable answer`
                    raise WaitForInput(question) from None
                if text is None:
                    return default
                problem = answer_problem(kind, text)
                if problem is None:
                    return parse_answer(kind, text)
                ask = f"{problem[0].upper()}{problem[1:]}. {prompt}"
        raise WaitForInput(question)
