"""The drivers of each kind of run, found by kind: this layer never imports them.

A driver continues an attached run of one kind (``script``, ``playbook``, ...) to its end. It
calls :func:`register_driver` when its module is imported; :mod:`resumable.drivers` names
every driver's module (:func:`register_driver_module`) without importing it, so a resume loads
only the driver of the run it continues, as a plugin is found.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from resumable.config import Config
from resumable.durability.runs.session import RunOutcome, RunSession
from resumable.errors import UsageError

Driver = Callable[..., Awaitable[RunOutcome]]
"""Drives an attached run of one kind to its end: ``driver(session, config, env=..., **options)``."""

_DRIVERS: dict[str, Driver] = {}
_MODULES: dict[str, str] = {}
"""Where the driver of a kind not registered yet is: importing the module registers it."""


def register_driver(kind: str, driver: Driver) -> None:
    """Make ``resume`` continue runs of ``kind`` with ``driver`` (each driver's module calls
    this when it is imported)."""
    _DRIVERS[kind] = driver


def register_driver_module(kind: str, module: str) -> None:
    """Name the module whose import registers the driver of ``kind``, loaded on first use."""
    _MODULES[kind] = module


def driver_for(kind: str, run_id: str) -> Driver:
    """The driver of ``kind``, its module imported if need be; a clear error if none is known."""
    if kind not in _DRIVERS and kind in _MODULES:
        importlib.import_module(_MODULES[kind])
    driver = _DRIVERS.get(kind)
    if driver is None:
        raise UsageError(
            f"run {run_id} is a {kind!r} run and nothing that can continue it is loaded; "
            "import the package that started it (or resumable.drivers) before resuming",
            run_id=run_id,
        )
    return driver


async def resume_session(
    session: RunSession, config: Config, *, env: Mapping[str, str], **options: Any
) -> RunOutcome:
    """Drive an attached run with its kind's driver; a replay that leaves the recorded path
    fails the run (going on would act on a history the log never saw)."""
    from resumable.durability.replay.divergence import ReplayDiverged

    driver = driver_for(session.state.kind, session.run_id)
    try:
        return await driver(session, config, env=env, **options)
    except ReplayDiverged as diverged:
        await session.set_status("failed", {"error": diverged.error.message})
        raise diverged.error from None
