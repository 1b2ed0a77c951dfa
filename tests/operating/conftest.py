"""Each test of operating runs sees one store: a folder, or a fresh PostgreSQL schema."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest
from tests.crash.harness import Result
from tests.fleet.harness import LEASE_SECONDS, POSTGRES_URL, Schema
from typer.testing import CliRunner

from resumable.cli.commands import app


@dataclass
class Place:
    """Where a test's runs live: its folder, and the environment naming its store."""

    work: Path
    store: str
    env: dict[str, str] = field(default_factory=dict)
    schema: Schema | None = None


@pytest.fixture(params=["file", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    work = tmp_path / "work"
    work.mkdir()
    if request.param == "file":
        yield Place(work, "file")
        return
    schema = Schema()
    try:
        schema.query("SELECT 1")
    except (OSError, asyncpg.PostgresError) as err:
        pytest.fail(f"these tests need PostgreSQL at {POSTGRES_URL} ({err})", pytrace=False)
    env = {
        "RESUMABLE_DURABILITY_STORE": "postgres",
        "RESUMABLE_DURABILITY_URL": schema.url,
        "RESUMABLE_DURABILITY_LEASE_SECONDS": str(LEASE_SECONDS),
    }
    try:
        yield Place(work, "postgres", env, schema)
    finally:
        schema.drop()


def look(args: list[str], cwd: Path, *, env: dict[str, str] | None = None) -> Result:
    """A `resumable` command run in this process: for commands that only read or write the
    store (runs, show, steps, fork, cancel, answer), where a fresh interpreter buys nothing."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("RESUMABLE_")}
    full: dict[str, str | None] = {**unset, "RESUMABLE_DURABILITY_SYNC": "flush", **(env or {})}
    with contextlib.chdir(cwd):
        done = CliRunner().invoke(app, args, env=full, catch_exceptions=False)
    return Result(done.exit_code, done.stdout, done.stderr)
