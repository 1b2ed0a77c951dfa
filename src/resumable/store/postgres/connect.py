"""The PostgreSQL store's connection: its URL, its pool, and how driver errors read.

The store's sections (:mod:`.store`, :mod:`.ownership`,
:mod:`.snapshots`) share this base: a pooled connection whose failures come
out as ``StoreError``, and the statements formatted for the store's schema.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote, urlunsplit

import asyncpg

from resumable.errors import ConfigError, StoreError, StoreUnavailableError
from resumable.store.common import check_sync, split_url
from resumable.store.postgres.schema import migrate
from resumable.store.postgres.sql import (
    APPEND_LOCKED,
    APPEND_MANY,
    APPEND_ONE,
    APPEND_RECORD,
    CLAIM,
    LOCK_HEAD,
    LOG_END,
    PUT_BLOB,
    PUT_META,
    RELEASE,
    RUNS,
)

SYNC_SETTINGS = {"fsync": "on", "flush": "off"}
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # a connection the server dropped while the client used it
    OSError,
    TimeoutError,
)
CONNECTION_LOST = (
    asyncpg.PostgresConnectionError,
    asyncpg.OperatorInterventionError,  # the server ended the session (pg_terminate_backend)
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
)
"""What a connection the server or the network dropped raises: worth one more try on a
new connection (an append is fenced at its head, so it cannot be written twice)."""


class PostgresConnection:
    """The store's URL and pool; every section of the store reaches PostgreSQL through it."""

    def __init__(
        self,
        dsn: str,
        *,
        sync: str = "fsync",
        schema: str = "resumable",
        pool_size: int = 8,
        connect_timeout: float = 10.0,
    ) -> None:
        check_sync(sync, "PostgreSQL")
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigError(
                f"PostgreSQL schema name {schema!r} is not a plain identifier "
                "(letters, digits, underscores)",
                key="durability.url",
            )
        self.dsn = dsn
        self.sync = sync
        self.schema = schema
        self.pool_size = max(pool_size, 2)
        self.connect_timeout = connect_timeout
        parts = split_url(dsn, "PostgreSQL")
        self.host = parts.hostname or "localhost"
        self.port = parts.port or 5432
        self.user = unquote(parts.username or "") or "(default user)"
        self.database = unquote(parts.path.lstrip("/")) or "(default database)"
        netloc = parts.netloc.rsplit("@", 1)[-1]
        if parts.username:
            netloc = f"{parts.username}{':***' if parts.password else ''}@{netloc}"
        self.url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        self._sql = {
            name: sql.format(s=f'"{schema}"')
            for name, sql in {
                "append_record": APPEND_RECORD,
                "append_one": APPEND_ONE,
                "append_many": APPEND_MANY,
                "lock_head": LOCK_HEAD,
                "log_end": LOG_END,
                "append_locked": APPEND_LOCKED,
                "claim": CLAIM,
                "put_meta": PUT_META,
                "release": RELEASE,
                "runs": RUNS,
                "put_blob": PUT_BLOB,
            }.items()
        }
        self._s = f'"{schema}"'
        self.channel = f"resumable:{schema}"
        """Where the store announces runs a worker may claim now (LISTEN/NOTIFY)."""
        self._pool: Any = None

    async def _connect(self) -> Any:
        where = f"{self.host}:{self.port}"
        try:
            return await asyncpg.create_pool(
                self.dsn,
                min_size=1,
                max_size=self.pool_size,
                timeout=self.connect_timeout,
                server_settings=self._settings(),
            )
        except asyncpg.InvalidCatalogNameError as err:
            raise self._unavailable(
                f"PostgreSQL at {where} has no database {self.database!r}; create it "
                f"(createdb {self.database}) or fix the store URL",
                database=self.database,
            ) from err
        except (
            asyncpg.InvalidPasswordError,
            asyncpg.InvalidAuthorizationSpecificationError,
        ) as err:
            raise self._unavailable(
                f"PostgreSQL at {where} refused user {self.user!r} on database "
                f"{self.database!r} ({err}); check the user and password of the store URL",
                user=self.user,
            ) from err
        except (OSError, TimeoutError) as err:
            raise self._unavailable(
                f"cannot connect to PostgreSQL at {where} ({err or type(err).__name__}); "
                "is PostgreSQL running?",
            ) from err
        except ValueError as err:  # the driver's own reading of the URL
            raise ConfigError(
                f"[durability] url {self.url!r} is not a valid PostgreSQL URL ({err})",
                key="durability.url",
            ) from err
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as err:
            raise self._unavailable(
                f"PostgreSQL at {where} refused the connection: {err}",
            ) from err

    def _settings(self, **more: str) -> dict[str, str]:
        """The session settings of the store's connections (and ``more``)."""
        return {
            "synchronous_commit": SYNC_SETTINGS[self.sync],
            "application_name": "resumable",
        } | more

    async def _migrate(self, conn: Any) -> None:
        """Create or upgrade the schema; refuse one written by a newer resumable."""
        try:
            await migrate(
                conn, schema=self.schema, url=self.url, user=self.user, database=self.database
            )
        except DRIVER_ERRORS as err:
            raise self._failure(err, "preparing the schema") from err

    @contextlib.asynccontextmanager
    async def _conn(self, doing: str) -> AsyncIterator[Any]:
        """A pooled connection; driver failures come out as ``StoreError``."""
        if self._pool is None:
            raise StoreError(f"the PostgreSQL store {self.url} is not open (use `async with`)")
        try:
            async with self._pool.acquire() as conn:
                yield conn
        except DRIVER_ERRORS as err:
            raise self._failure(err, doing) from err

    def _unavailable(self, message: str, **fields: object) -> StoreUnavailableError:
        """The server cannot be used: the message says why, the fields say which server."""
        return StoreUnavailableError(message, host=self.host, port=self.port, **fields)

    def _failure(self, err: BaseException, doing: str) -> StoreError:
        if isinstance(err, OSError | TimeoutError | asyncpg.PostgresConnectionError):
            return self._unavailable(
                f"lost PostgreSQL at {self.host}:{self.port} while {doing}: {err}; "
                "is PostgreSQL running?",
            )
        return StoreError(f"PostgreSQL store {self.url}: {doing} failed: {err}")

    # -- helpers --------------------------------------------------------------
    async def _exists(self, conn: Any, run_id: str) -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT EXISTS (SELECT 1 FROM {self._s}.runs WHERE run_id = $1)", run_id
            )
        )
