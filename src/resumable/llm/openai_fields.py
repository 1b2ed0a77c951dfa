"""The parts of an OpenAI-compatible answer besides its text: error bodies, Retry-After,
and the token usage of every request one reply took."""

from __future__ import annotations

import contextlib
import email.utils
import json
from datetime import UTC, datetime
from typing import Any

from resumable.llm.base import Usage


def retry_after(value: str | None) -> float | None:
    if not value:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_message(body: bytes) -> str:
    """The human part of an error body: OpenAI's ``error.message``, else the text itself."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:300] or "(empty body)"
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if isinstance(data.get("message"), str):
            return str(data["message"])
    return text[:300]


def usage_of(data: dict[str, Any]) -> Usage:
    prompt = data.get("prompt_tokens")
    completion = data.get("completion_tokens")
    return Usage(
        prompt if isinstance(prompt, int) else None,
        completion if isinstance(completion, int) else None,
    )


def total_usage(tally: list[Usage]) -> Usage | None:
    """Usage summed over every request one ``stream`` call made (each was billed)."""
    if not tally:
        return None
    prompts = [u.prompt_tokens for u in tally if u.prompt_tokens is not None]
    completions = [u.completion_tokens for u in tally if u.completion_tokens is not None]
    return Usage(sum(prompts) if prompts else None, sum(completions) if completions else None)
