"""Durable LLM calls: wrap any callable so each response is journaled per turn.

The n-th call through a wrapper named ``name`` is turn n of that LLM in the run. Its
response is durable before the caller gets it; on a resumed run the turns that have a
response are answered from the log - the client is not called - and the first turn
without one calls it for real. The response must be picklable (a provider object that
is not can be turned into text or a dataclass by the wrapped callable).

A streaming client is wrapped with :class:`DurableStream`: each chunk is durable as it
arrives, so after a crash mid-stream the turn is continued from its recorded prefix
(the client is called with ``prefix=`` and returns only the rest) and a response
received whole is never requested again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from resumable.durability.embedded.boundary import host_facing, public_error
from resumable.durability.embedded.journal import JournaledRun
from resumable.durability.log.store_faults import StoreFailed

R = TypeVar("R")


class DurableLLM(Generic[R]):
    """``call`` with every response journaled in ``run`` (see the module doc)."""

    def __init__(self, run: JournaledRun, call: Callable[..., R], *, name: str = "llm") -> None:
        if not callable(call):
            raise TypeError(f"durable LLM {name!r}: {type(call).__name__} is not callable")
        self.run = run
        self.call = call
        self.name = name

    @host_facing
    def __call__(self, *args: Any, **kwargs: Any) -> R:
        journal = self.run.journal(f"llm:{self.name}")
        return journal.call(self.name, lambda: self.call(*args, **kwargs))


class DurableStream:
    """``call(*args, prefix=TEXT, **kwargs)`` yielding text chunks, journaled chunk by chunk.

    ``call`` must return the continuation of a response after ``prefix`` (the whole
    response when ``prefix`` is empty): ask a chat model with
    :func:`resumable.llm.base.continuation_messages`, or pass the prefix as an
    assistant message to a client that continues it.
    """

    def __init__(
        self, run: JournaledRun, call: Callable[..., Iterable[str]], *, name: str = "llm"
    ) -> None:
        if not callable(call):
            raise TypeError(f"durable LLM {name!r}: {type(call).__name__} is not callable")
        self.run = run
        self.call = call
        self.name = name

    @host_facing
    def __call__(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        """The response's chunks: recorded ones first, then the client's continuation."""
        journal = self.run.journal(f"llm:{self.name}")
        key = journal.next_key
        journal.next_key += 1
        if journal.recorded(key) is not None:
            whole: str = journal._answer(key, self.name, {})
            return iter([whole])
        return self._stream(journal, key, journal.partial(key, self.name), args, kwargs)

    def _stream(
        self, journal: Any, key: int, chunks: list[str], args: Any, kwargs: Any
    ) -> Iterator[str]:
        yield from chunks
        try:
            for chunk in self.call(*args, prefix="".join(chunks), **kwargs):
                journal.write(f"{key}:{len(chunks)}", self.name, chunk)
                chunks.append(chunk)
                yield chunk
            journal.write(key, self.name, "".join(chunks))
        except StoreFailed as failed:
            raise public_error(failed) from None
