"""Fresh store locations for the contract suite: a folder, a file, a schema, a key prefix.

The PostgreSQL and Redis tests use the servers on 127.0.0.1 (``scripts/test.sh``
starts them); each test gets its own schema or key prefix with a random suffix and
removes it afterwards, so test runs can share a server. A server that is down fails
the tests with a message saying so: a skipped store test would hide a broken store.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from resumable.store.base import CheckpointStore

POSTGRES_URL = os.environ.get(
    "RESUMABLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("RESUMABLE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

DB_KINDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]
ALL_KINDS = ["file", *DB_KINDS]


@dataclass
class StoreSite:
    """One store location; ``open()`` makes a new, unopened instance on it (a new connection)."""

    kind: str
    open: Callable[..., CheckpointStore]


def _file_site(tmp_path: Path) -> StoreSite:
    def open_file(**options: Any) -> CheckpointStore:
        from resumable.store.filesystem import FileStore

        return FileStore(tmp_path / "runs", **options)

    return StoreSite("file", open_file)


def _sqlite_site(tmp_path: Path) -> StoreSite:
    from resumable.store.sqlite import SQLiteStore

    return StoreSite("sqlite", lambda **options: SQLiteStore(tmp_path / "runs.db", **options))


async def _postgres_site() -> AsyncIterator[StoreSite]:
    import asyncpg

    from resumable.store.postgres import PostgresStore

    schema = f"resumable_test_{secrets.token_hex(6)}"
    try:
        conn = await asyncpg.connect(POSTGRES_URL, timeout=10)
    except (OSError, asyncpg.PostgresError) as err:
        pytest.fail(
            f"the PostgreSQL store tests need a server at {POSTGRES_URL} ({err}); "
            "scripts/test.sh starts one",
            pytrace=False,
        )
    try:
        yield StoreSite(
            "postgres",
            lambda **options: PostgresStore(POSTGRES_URL, schema=schema, **options),
        )
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


async def _redis_site() -> AsyncIterator[StoreSite]:
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError

    from resumable.store.redis import RedisStore

    prefix = f"resumable-test-{secrets.token_hex(6)}"
    client = aioredis.Redis.from_url(REDIS_URL, socket_connect_timeout=5)
    try:
        await client.ping()
    except (OSError, RedisError) as err:
        await client.aclose()
        pytest.fail(
            f"the Redis store tests need a server at {REDIS_URL} ({err}); "
            "scripts/test.sh starts one",
            pytrace=False,
        )
    try:
        yield StoreSite("redis", lambda **options: RedisStore(REDIS_URL, prefix=prefix, **options))
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def _site(kind: str, tmp_path: Path) -> AsyncIterator[StoreSite]:
    if kind == "file":
        yield _file_site(tmp_path)
    elif kind == "sqlite":
        yield _sqlite_site(tmp_path)
    elif kind == "postgres":
        async for site in _postgres_site():
            yield site
    elif kind == "redis":
        async for site in _redis_site():
            yield site
    else:
        raise AssertionError(f"unknown store kind {kind}")


@pytest.fixture(params=ALL_KINDS)
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreSite]:
    """A fresh location for every store kind."""
    async for found in _site(request.param, tmp_path):
        yield found


@pytest.fixture(params=DB_KINDS)
async def db_site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreSite]:
    """A fresh location for the lease-based stores (expiring leases, many connections)."""
    async for found in _site(request.param, tmp_path):
        yield found


@pytest.fixture
async def postgres_site() -> AsyncIterator[StoreSite]:
    """A fresh PostgreSQL schema, for the PostgreSQL-only tests."""
    async for found in _postgres_site():
        yield found


@pytest.fixture
def postgres_url() -> str:
    return POSTGRES_URL


@pytest.fixture
def redis_url() -> str:
    return REDIS_URL


@pytest.fixture
async def store(site: StoreSite) -> AsyncIterator[CheckpointStore]:
    """An opened store on a fresh location."""
    async with site.open() as opened:
        yield opened
