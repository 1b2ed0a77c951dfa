"""A fresh PostgreSQL schema per test, and worker processes that never outlive their test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import pytest

from .harness import POSTGRES_URL, Process, Schema, env_for


@pytest.fixture
def schema() -> Iterator[Schema]:
    fresh = Schema()
    try:
        fresh.query("SELECT 1")
    except (OSError, asyncpg.PostgresError) as err:
        pytest.fail(
            f"the fleet tests need PostgreSQL at {POSTGRES_URL} ({err}); scripts/test.sh starts it",
            pytrace=False,
        )
    yield fresh
    fresh.drop()


@pytest.fixture
def spawn(schema: Schema, tmp_path: Path) -> Iterator[Callable[..., Process]]:
    """Start `resumable ARGS...` in the background on the test's schema; all killed at the end."""
    started: list[Process] = []

    def start(*args: str, **env: str) -> Process:
        cwd = tmp_path / f"proc{len(started)}"
        cwd.mkdir()
        process = Process(list(args), cwd, env_for(schema, **env))
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
