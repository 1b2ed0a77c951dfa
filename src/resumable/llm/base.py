"""The contract between the playbook runtime and an LLM provider.

The runtime asks for one response per turn and streams its chunks into the
executor as they arrive. After a crash mid-response it asks again with the
recorded ``prefix``: the provider returns only the continuation, so no text is
duplicated and a response that was complete is never requested again.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]

CONTINUE_INSTRUCTION = (
    "Your previous response was cut off. Continue exactly where it stopped, without "
    "repeating anything already written: output only the remaining text."
)
"""The user turn that asks a chat model to continue a response it was cut off in."""


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message as the provider sends it."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """A failed request about to be made again: said on stderr and recorded in the run."""

    attempt: int
    """1 for the first retry."""
    delay: float
    reason: str
    status: int | None = None

    def line(self) -> str:
        return f"retrying in {self.delay:.1f} s: {self.reason}"


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One LLM call of one frame; ``prefix`` is text already received before a crash.

    ``on_retry`` is awaited before each retry's wait, so the caller can say it and
    record it.
    """

    messages: tuple[Message, ...]
    playbook: str
    call_index: int
    frame_id: str
    prefix: str = ""
    on_retry: Callable[[RetryNotice], Awaitable[None]] | None = field(
        default=None, compare=False, repr=False
    )


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of the last call, when the provider reports them."""

    prompt_tokens: int | None
    completion_tokens: int | None


@runtime_checkable
class LLMProvider(Protocol):
    """Streams one response per request; errors are :class:`~resumable.errors.LLMError`."""

    name: str

    def stream(self, request: LLMRequest) -> AsyncGenerator[str, None]:
        """Yield the chunks of the response, or only of its rest after ``request.prefix``."""
        ...

    @property
    def last_usage(self) -> Usage | None:
        """Usage of the most recent ``stream`` call, once it finished."""
        ...

    async def aclose(self) -> None:
        """Release connections; the provider is not used afterwards."""
        ...


def continuation_messages(messages: tuple[Message, ...], prefix: str) -> tuple[Message, ...]:
    """The conversation that asks a chat model for the rest of a response cut after ``prefix``."""
    if not prefix:
        return messages
    return (*messages, Message("assistant", prefix), Message("user", CONTINUE_INSTRUCTION))
