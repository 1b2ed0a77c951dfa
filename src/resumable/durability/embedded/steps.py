"""Host tools as steps, and the await hook of embedded code.

A tool bound into an executor's namespace is wrapped: a sync tool's call is journaled
in the statement in progress (its result durable before the code sees it, answered
from the log on replay); an async tool returns a coroutine that the hook journals
when the statement awaits it. The hook awaits program coroutines for real (their
own awaits come back through it) and journals every other awaitable.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from resumable.durability.effects.foreign import is_foreign, mark_transparent
from resumable.durability.effects.steps import journaled
from resumable.durability.effects.tasks import (
    current_cursor,
    install_task_keys,
    reset_cursor,
    set_cursor,
)
from resumable.exec.hooks import HookBase

T = TypeVar("T")


def bind_tool(name: str, tool: Callable[..., Any]) -> Callable[..., Any]:
    """``tool`` as a step named ``tool:NAME``: the code calls it as it would call the tool."""
    if not callable(tool):
        raise TypeError(f"tool {name!r} is not callable ({type(tool).__name__}); pass a function")
    site = f"tool:{name}"
    if inspect.iscoroutinefunction(tool) or inspect.iscoroutinefunction(
        getattr(tool, "__call__", None)  # noqa: B004 - an object with an async __call__
    ):

        async def async_step(*args: Any, **kwargs: Any) -> Any:
            cursor = current_cursor()
            if cursor is None:
                return await tool(*args, **kwargs)
            return await cursor.journal.await_step(cursor, site, lambda: tool(*args, **kwargs))

        wrapper: Callable[..., Any] = async_step
    else:

        def step(*args: Any, **kwargs: Any) -> Any:
            return journaled(site, lambda: tool(*args, **kwargs))

        wrapper = step
    wrapper.__name__ = name
    wrapper.__doc__ = getattr(tool, "__doc__", None)
    wrapper.__wrapped__ = tool  # type: ignore[attr-defined]
    wrapper.__resumable_step__ = site  # type: ignore[attr-defined]
    return wrapper


class LoopOwner(Protocol):
    """What the hook uses of its executor: the loop its statements' awaits run on."""

    def program_loop(self) -> asyncio.AbstractEventLoop: ...


class StepHook(HookBase):
    """What rewritten awaits of embedded code call: foreign awaits are journaled."""

    def __init__(self, executor: LoopOwner) -> None:
        self.executor = executor

    def run(self, statement: Awaitable[Any]) -> Any:
        """Run a statement with top-level awaits on the executor's program loop."""
        loop = self.executor.program_loop()
        install_task_keys(loop)
        cursor = current_cursor()

        async def main() -> Any:
            set_cursor(cursor)  # the statement's own task holds the root cursor
            return await statement

        token = set_cursor(None)  # so the task running it is not taken for a spawned one
        try:
            return loop.run_until_complete(main())
        finally:
            reset_cursor(token)

    def await_(self, site: str, awaitable: Awaitable[T]) -> Awaitable[T]:
        cursor = current_cursor()
        if cursor is None or not inspect.isawaitable(awaitable) or not is_foreign(awaitable):
            return awaitable
        return cursor.journal.await_foreign(cursor, site, awaitable)


def _wrapper_code() -> Any:
    return bind_tool("probe", _probe).__code__


async def _probe() -> None:
    return None


mark_transparent(_wrapper_code())
