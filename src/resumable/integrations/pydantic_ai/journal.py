"""The records pydantic-ai's durable operations leave in a run, and their replay.

Two kinds of operation are journaled, each in a host journal of the run (see
:class:`~resumable.durability.embedded.journal.HostJournal`):

- a model request, by its operation name and occurrence: the n-th request named
  ``trip_planner__model.request`` is entry n of that name. The entry keeps a digest of
  the messages the request was made with; a replayed request whose messages differ
  raises :class:`~resumable.errors.NonDeterminismError`.
- a tool call, by its tool-call id (a nested call from ``run_code`` has a stable id
  too): one entry per id. Calls that end in control flow (``ModelRetry``, a deferral)
  are not recorded, so they run again, as pydantic-ai's other journal engines do.

A completed operation is never made again: its recorded result is returned instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from resumable.durability.replay.divergence import ReplayDiverged
from resumable.errors import NonDeterminismError, UsageError

if TYPE_CHECKING:
    from resumable.durability.embedded.run import DurableRun

RECORDED_TOOL_RESULTS = frozenset({"tool_return", "tool_content_result"})
"""Kinds of encoded tool results that are recorded; the others are control flow."""


def messages_digest(messages: Sequence[Any]) -> str:
    """A digest of what a model request says: its parts, not its timestamps or ids."""
    said: list[Any] = []
    for message in messages:
        instructions = getattr(message, "instructions", None)
        parts = [
            [
                type(part).__name__,
                getattr(part, "content", None),
                getattr(part, "tool_name", None),
                getattr(part, "args", None),
                getattr(part, "tool_call_id", None),
            ]
            for part in getattr(message, "parts", ())
        ]
        said.append([type(message).__name__, instructions, parts])
    text = json.dumps(to_jsonable_python(said, fallback=repr), sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


async def _write(run: DurableRun, kind: str, site: str, value: Any) -> None:
    journal = run.journal(kind)
    body, blobs = journal.body(site, value, {})
    await asyncio.to_thread(run.write, [("await", journal.frame_id, body)], blobs)


def _recorded(run: DurableRun, kind: str, site: str) -> tuple[bool, Any]:
    try:
        return run.journal(kind).peek(site)
    except ReplayDiverged as diverged:
        raise diverged.error from None


async def model_request(
    run: DurableRun, name: str, messages: Sequence[Any], body: Callable[[], Awaitable[object]]
) -> object:
    """A model request by name and occurrence; a recorded one is answered from the log."""
    digest = messages_digest(messages)
    kind = f"pydantic-ai:{name}"
    occurrence = run.journal(kind).next_key
    found, entry = _recorded(run, kind, name)
    if found:
        if entry["messages"] != digest:
            raise NonDeterminismError(
                f"run {run.run_id}: model request {occurrence + 1} ({name}) was made with other "
                "messages than the ones recorded; the agent, its prompt or its tools are not "
                "the ones that started this run, or they are not deterministic",
                run_id=run.run_id,
                site=name,
            )
        return entry["response"]
    response = await body()
    await _write(run, kind, name, {"messages": digest, "response": response})
    return response


async def tool_call(
    run: DurableRun,
    name: str,
    tool_name: str,
    tool_call_id: str,
    body: Callable[[], Awaitable[object]],
) -> object:
    """A tool call by its tool-call id; a recorded one is answered from the log."""
    kind = f"pydantic-ai:tool:{tool_call_id}"
    found, payload = _recorded(run, kind, name)
    if found:
        return payload
    try:
        payload = await body()
    except PydanticSerializationError as exc:
        raise UsageError(
            f"tool {tool_name!r} returned a value that cannot be recorded as JSON ({exc}); "
            f"make {tool_name!r} return JSON-serializable data (dicts, lists, str, numbers, "
            "pydantic models)",
            run_id=run.run_id,
        ) from None
    if isinstance(payload, dict) and payload.get("kind") in RECORDED_TOOL_RESULTS:
        await _write(run, kind, name, payload)
    return payload
