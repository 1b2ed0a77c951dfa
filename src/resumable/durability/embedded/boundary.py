"""What the embedding application sees when the store fails under its run.

Inside the run, a failing store is :class:`~resumable.durability.log.store_faults.StoreFailed`,
a ``BaseException`` that the run's own code cannot catch. At the API the application
calls (``open_run``, the executor's ``run_code``/``feed``/``finish``, ``complete``,
``fail``, ``close``, journaled model calls) it becomes
:class:`~resumable.errors.StoreFailedError`, an ordinary error naming the store's fault
and the fix: the run is ``interrupted``, and opening it again continues it.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from resumable.durability.log.store_faults import StopsOnStoreFaults, StoreFailed
from resumable.errors import StoreFailedError

F = TypeVar("F", bound=Callable[..., Any])

_KEEP_SIGNAL = contextvars.ContextVar("resumable_keep_store_signal", default=False)


@contextmanager
def keeping_the_stop_signal() -> Iterator[None]:
    """Inside an integration (an agent framework that drives the executor): the API lets
    ``StoreFailed`` through as it is, so that the framework's own ``except Exception:``
    (which turns a tool's error into a message to the model) cannot catch it and go on."""
    token = _KEEP_SIGNAL.set(True)
    try:
        yield
    finally:
        _KEEP_SIGNAL.reset(token)


def public_error(failed: StoreFailed) -> StoreFailedError:
    """The application's error for ``failed``: its reason, with the embedded fix."""
    reason = failed.reason.replace(
        f"`resumable resume {failed.run_id}`",
        f"open run {failed.run_id} again (`resumable.open_run`) to continue it",
    )
    return StoreFailedError(reason, run_id=failed.run_id, kind=failed.kind)


def host_facing(method: F) -> F:
    """``method``, raising :class:`StoreFailedError` where the run's store failed."""

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except StoreFailed as failed:
            if _KEEP_SIGNAL.get():
                raise
            raise public_error(failed) from None

    return cast(F, guarded)


def refuse_effects_after(manager: StopsOnStoreFaults) -> None:
    """Before an effect, a step or a model call starts: once the run's store failed, none
    does (its record could not be written after it); the fault is raised again instead."""
    if manager.failure is not None:
        raise manager.failure.again()
