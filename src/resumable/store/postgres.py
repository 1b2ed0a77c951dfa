"""PostgresStore: runs in PostgreSQL, the store for more than one machine.

Design note. Fencing lives in the database: an append is one statement that bumps
``runs.last_seq`` only where ``runs.epoch`` is the lease's epoch and the first new
seq follows the last one, and inserts the records of exactly those runs, so the
check and the write commit together (a concurrent ``acquire`` waits on the row lock
and the check is re-evaluated on the new row). Appends from many runs of one
process are committed together: a single writer task takes every append waiting
when it wakes and sends them as one statement (each item checked on its own, a
stale one refused alone), then releases every waiter. Nothing waits on a timer: an
append that finds nothing else pending is one round trip.

``sync``: ``fsync`` -> ``synchronous_commit = on`` (a commit is on the server's
disk before the append returns); ``flush`` -> ``off`` (acknowledged before the WAL
is flushed: a server crash may lose the last few hundred ms of commits, never
corrupt or tear them). Both survive the writing process being killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import asyncpg

from resumable.errors import (
    ConfigError,
    FencedError,
    ResumableError,
    RunBusyError,
    RunNotFoundError,
    SchemaVersionError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from resumable.store.base import (
    STATUSES,
    Lease,
    ReadResult,
    RunMeta,
    RunSummary,
    StoredRecord,
    check_seqs,
)

SCHEMA_VERSION = 1
SYNC_SETTINGS = {"fsync": "on", "flush": "off"}
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_DRIVER_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)

# Migrations by the version they lead to; {s} is the quoted schema.
_MIGRATIONS = {
    1: """
    CREATE TABLE {s}.runs (
        run_id text PRIMARY KEY,
        meta jsonb NOT NULL,
        status text NOT NULL,
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        epoch bigint NOT NULL DEFAULT 0,
        owner text,
        lease_expires_at timestamptz,
        last_seq bigint NOT NULL DEFAULT 0,
        last_write timestamptz
    );
    CREATE INDEX runs_claimable ON {s}.runs (created_at) WHERE status IN ('pending', 'running');
    CREATE TABLE {s}.records (
        run_id text NOT NULL REFERENCES {s}.runs ON DELETE CASCADE,
        seq bigint NOT NULL,
        epoch bigint NOT NULL,
        data bytea NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE {s}.blobs (
        run_id text NOT NULL REFERENCES {s}.runs ON DELETE CASCADE,
        digest text NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (run_id, digest)
    );
    CREATE TABLE {s}.snapshots (
        run_id text NOT NULL REFERENCES {s}.runs ON DELETE CASCADE,
        seq bigint NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE {s}.mac_key (
        id boolean PRIMARY KEY DEFAULT true CHECK (id),
        key bytea NOT NULL
    );
    """,
}

_RUN_COLUMNS = (
    "run_id, meta, status, created_at, updated_at, epoch, owner, last_seq, "
    "extract(epoch FROM last_write)::float8 AS last_write, "
    "coalesce(owner IS NOT NULL AND lease_expires_at > now(), false) AS live"
)

_APPEND = """
WITH items AS (
    SELECT * FROM unnest($1::int[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])
        AS i(item, run_id, epoch, first_seq, last_seq)
), locked AS (  -- rows locked in one order, so two writing processes cannot deadlock
    SELECT run_id FROM {s}.runs WHERE run_id IN (SELECT run_id FROM items)
    ORDER BY run_id FOR NO KEY UPDATE
), accepted AS (
    UPDATE {s}.runs AS r SET last_seq = i.last_seq, last_write = now()
    FROM items AS i JOIN locked AS l ON l.run_id = i.run_id
    WHERE r.run_id = i.run_id AND r.epoch = i.epoch AND r.last_seq < i.first_seq
    RETURNING i.item
), written AS (
    INSERT INTO {s}.records (run_id, seq, epoch, data)
    SELECT n.run_id, n.seq, n.epoch, n.data
    FROM unnest($6::int[], $7::text[], $8::bigint[], $9::bigint[], $10::bytea[])
        AS n(item, run_id, seq, epoch, data)
    JOIN accepted AS a ON a.item = n.item
)
SELECT item FROM accepted
"""

_CLAIM = """
WITH candidates AS (
    SELECT run_id FROM {s}.runs
    WHERE status IN ('pending', 'running') AND (owner IS NULL OR lease_expires_at < now())
    ORDER BY created_at, run_id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE {s}.runs AS r
SET epoch = r.epoch + 1, owner = $1, lease_expires_at = now() + make_interval(secs => $2)
FROM candidates AS c WHERE r.run_id = c.run_id
RETURNING r.run_id, r.epoch, extract(epoch FROM r.lease_expires_at)::float8, r.created_at
"""


@dataclass(frozen=True, slots=True)
class _Append:
    """One append waiting for the writer task."""

    run_id: str
    records: Sequence[StoredRecord]
    lease: Lease
    done: asyncio.Future[None]


class PostgresStore:
    """Runs in PostgreSQL tables under one schema; appends group-committed."""

    def __init__(
        self,
        dsn: str,
        *,
        sync: str = "fsync",
        schema: str = "resumable",
        pool_size: int = 8,
        connect_timeout: float = 10.0,
    ) -> None:
        if sync not in SYNC_SETTINGS:
            raise ConfigError(
                f"unknown sync mode {sync!r} for the PostgreSQL store; use 'fsync' or 'flush'",
                key="durability.sync",
                value=sync,
            )
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
        parts = urlsplit(dsn)
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
            for name, sql in {"append": _APPEND, "claim": _CLAIM}.items()
        }
        self._s = f'"{schema}"'
        self._pool: Any = None
        self._writer_conn: Any = None
        self._queue: asyncio.Queue[_Append | None] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None

    @classmethod
    def from_url(cls, url: str, *, sync: str = "fsync", **options: Any) -> Self:
        """``postgresql://user:pw@host:port/db?schema=name``; ``schema`` is ours, not the driver's."""
        parts = urlsplit(url)
        query = parse_qsl(parts.query)
        for key, value in query:
            if key == "schema":
                options.setdefault("schema", value)
        rest = urlencode([(k, v) for k, v in query if k != "schema"])
        return cls(urlunsplit(parts._replace(query=rest)), sync=sync, **options)

    # -- lifecycle ------------------------------------------------------------
    async def __aenter__(self) -> Self:
        self._pool = await self._connect()
        try:
            async with self._pool.acquire() as conn:
                await self._migrate(conn)
        except BaseException:
            await self._pool.close()
            self._pool = None
            raise
        self._queue = asyncio.Queue()
        self._writer = asyncio.create_task(self._write_loop(), name=f"resumable-pg:{self.schema}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._writer is not None:
            self._queue.put_nowait(None)
            await self._writer
            self._writer = None
        if self._pool is not None:
            if self._writer_conn is not None:
                await self._pool.release(self._writer_conn)
                self._writer_conn = None
            await self._pool.close()
            self._pool = None

    async def _connect(self) -> Any:
        where = f"{self.host}:{self.port}"
        try:
            return await asyncpg.create_pool(
                self.dsn,
                min_size=1,
                max_size=self.pool_size,
                timeout=self.connect_timeout,
                server_settings={
                    "synchronous_commit": SYNC_SETTINGS[self.sync],
                    "application_name": "resumable",
                },
            )
        except asyncpg.InvalidCatalogNameError as err:
            raise StoreUnavailableError(
                f"PostgreSQL at {where} has no database {self.database!r}; create it "
                f"(createdb {self.database}) or fix the store URL",
                host=self.host,
                port=self.port,
                database=self.database,
            ) from err
        except (
            asyncpg.InvalidPasswordError,
            asyncpg.InvalidAuthorizationSpecificationError,
        ) as err:
            raise StoreUnavailableError(
                f"PostgreSQL at {where} refused user {self.user!r} on database "
                f"{self.database!r} ({err}); check the user and password of the store URL",
                host=self.host,
                port=self.port,
                user=self.user,
            ) from err
        except (OSError, TimeoutError) as err:
            raise StoreUnavailableError(
                f"cannot connect to PostgreSQL at {where} ({err or type(err).__name__}); "
                "is PostgreSQL running?",
                host=self.host,
                port=self.port,
            ) from err
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as err:
            raise StoreUnavailableError(
                f"PostgreSQL at {where} refused the connection: {err}",
                host=self.host,
                port=self.port,
            ) from err

    async def _migrate(self, conn: Any) -> None:
        """Create or upgrade the schema; refuse one written by a newer resumable."""
        s = self._s
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"resumable:{s}")
                # Checked first: CREATE SCHEMA needs a right on the database even if it exists.
                if not await conn.fetchval(
                    "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", self.schema
                ):
                    await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {s}.resumable_schema_version "
                    "(version integer NOT NULL)"
                )
                found = await conn.fetchval(
                    f"SELECT max(version) FROM {s}.resumable_schema_version"
                )
                version = int(found or 0)
                if version > SCHEMA_VERSION:
                    raise SchemaVersionError(
                        f"PostgreSQL schema {self.schema} at {self.url} is at version {version}, "
                        f"written by a newer resumable; upgrade (this one knows {SCHEMA_VERSION})",
                        schema=self.schema,
                        version=version,
                    )
                for target in range(version + 1, SCHEMA_VERSION + 1):
                    await conn.execute(_MIGRATIONS[target].format(s=s))
                if version < SCHEMA_VERSION:
                    await conn.execute(f"DELETE FROM {s}.resumable_schema_version")
                    await conn.execute(
                        f"INSERT INTO {s}.resumable_schema_version VALUES ($1)", SCHEMA_VERSION
                    )
        except asyncpg.InsufficientPrivilegeError as err:
            raise StoreUnavailableError(
                f"PostgreSQL user {self.user!r} may not create the tables of schema "
                f"{self.schema!r} in database {self.database!r} ({err}); create the schema and "
                "grant the user USAGE, CREATE on it",
                user=self.user,
                schema=self.schema,
            ) from err
        except _DRIVER_ERRORS as err:
            raise self._failure(err, "preparing the schema") from err

    @contextlib.asynccontextmanager
    async def _conn(self, doing: str) -> AsyncIterator[Any]:
        """A pooled connection; driver failures come out as ``StoreError``."""
        if self._pool is None:
            raise StoreError(f"the PostgreSQL store {self.url} is not open (use `async with`)")
        try:
            async with self._pool.acquire() as conn:
                yield conn
        except _DRIVER_ERRORS as err:
            raise self._failure(err, doing) from err

    def _failure(self, err: BaseException, doing: str) -> StoreError:
        if isinstance(err, OSError | TimeoutError | asyncpg.PostgresConnectionError):
            return StoreUnavailableError(
                f"lost PostgreSQL at {self.host}:{self.port} while {doing}: {err}; "
                "is PostgreSQL running?",
                host=self.host,
                port=self.port,
            )
        return StoreError(f"PostgreSQL store {self.url}: {doing} failed: {err}")

    # -- key ------------------------------------------------------------------
    async def mac_key(self) -> bytes:
        async with self._conn("reading the MAC key") as conn:
            await conn.execute(
                f"INSERT INTO {self._s}.mac_key (key) VALUES ($1) ON CONFLICT DO NOTHING",
                secrets.token_bytes(32),
            )
            return bytes(await conn.fetchval(f"SELECT key FROM {self._s}.mac_key"))

    # -- runs -----------------------------------------------------------------
    async def create_run(self, meta: RunMeta) -> None:
        _check_status(meta)
        async with self._conn("creating a run") as conn:
            status = await conn.execute(
                f"INSERT INTO {self._s}.runs (run_id, meta, status, created_at, updated_at) "
                "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                meta.run_id,
                _meta_json(meta),
                meta.status,
                meta.created_at,
                meta.updated_at,
            )
        if status.endswith(" 0"):
            raise UsageError(
                f"a run with id {meta.run_id} already exists in {self.url}", run_id=meta.run_id
            )

    async def enqueue(self, meta: RunMeta) -> None:
        """Create the run as ``pending``, for a worker to ``claim``."""
        await self.create_run(replace(meta, status="pending"))

    async def get_meta(self, run_id: str) -> RunMeta:
        async with self._conn("reading a run") as conn:
            row = await conn.fetchrow(
                f"SELECT {_RUN_COLUMNS} FROM {self._s}.runs WHERE run_id = $1", run_id
            )
        if row is None:
            raise self._not_found(run_id)
        return _meta_from_row(row)

    async def put_meta(self, meta: RunMeta) -> None:
        _check_status(meta)
        async with self._conn("updating a run") as conn:
            status = await conn.execute(
                f"UPDATE {self._s}.runs SET meta = $2, status = $3, created_at = $4, "
                "updated_at = $5 WHERE run_id = $1",
                meta.run_id,
                _meta_json(meta),
                meta.status,
                meta.created_at,
                meta.updated_at,
            )
        if status.endswith(" 0"):
            raise self._not_found(meta.run_id)

    async def list_runs(self) -> list[RunSummary]:
        async with self._conn("listing runs") as conn:
            rows = await conn.fetch(
                f"SELECT {_RUN_COLUMNS} FROM {self._s}.runs ORDER BY created_at DESC, run_id DESC"
            )
        return [
            RunSummary(_meta_from_row(r), r["last_seq"], r["last_write"], r["live"]) for r in rows
        ]

    async def delete_run(self, run_id: str) -> None:
        async with self._conn("deleting a run") as conn:
            status = await conn.execute(f"DELETE FROM {self._s}.runs WHERE run_id = $1", run_id)
        if status.endswith(" 0"):
            raise self._not_found(run_id)

    # -- the log --------------------------------------------------------------
    async def append(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        check_seqs(records, 0)
        if lease.run_id != run_id or not records:
            async with self._conn("appending") as conn:
                epoch = await conn.fetchval(
                    f"SELECT epoch FROM {self._s}.runs WHERE run_id = $1", run_id
                )
            self._check_fence(run_id, lease, epoch)
            return
        if self._writer is None:
            raise StoreError(f"the PostgreSQL store {self.url} is not open (use `async with`)")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Append(run_id, list(records), lease, done))
        await done

    async def _write_loop(self) -> None:
        """Commit every append waiting when it wakes; a run's appends keep their order."""
        while True:
            first = await self._queue.get()
            if first is None:
                return
            batch, stopping = [first], False
            while not self._queue.empty():
                item = self._queue.get_nowait()
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            rounds: list[list[_Append]] = []
            seen: dict[str, int] = {}
            for item in batch:
                index = seen[item.run_id] = seen.get(item.run_id, -1) + 1
                if index == len(rounds):
                    rounds.append([])
                rounds[index].append(item)
            for group in rounds:
                try:
                    outcomes = await self._commit(group)
                except Exception as err:
                    outcomes = [err] * len(group)
                except BaseException as err:
                    for item in group:
                        if not item.done.done():
                            item.done.set_exception(StoreError(f"append interrupted: {err!r}"))
                    raise
                for item, outcome in zip(group, outcomes, strict=True):
                    if item.done.done():
                        continue
                    if outcome is None:
                        item.done.set_result(None)
                    else:
                        item.done.set_exception(outcome)
            if stopping:
                return

    async def _commit(self, group: list[_Append]) -> list[Exception | None]:
        """One statement for the whole group; why a refused item was refused comes after."""
        # Column arrays for unnest(): one row per append, one row per record.
        items = zip(
            *[
                (n, i.run_id, i.lease.epoch, i.records[0].seq, i.records[-1].seq)
                for n, i in enumerate(group)
            ],
            strict=True,
        )
        rows = zip(
            *[
                (n, i.run_id, r.seq, r.epoch, r.data)
                for n, i in enumerate(group)
                for r in i.records
            ],
            strict=True,
        )
        try:
            conn = await self._writer_connection()
            accepted = {row[0] for row in await conn.fetch(self._sql["append"], *items, *rows)}
        except asyncpg.PostgresError as err:
            if len(group) > 1 and not isinstance(err, asyncpg.PostgresConnectionError):
                return [(await self._commit([item]))[0] for item in group]
            await self._drop_writer_connection()
            return [self._failure(err, "appending")] * len(group)
        except (asyncpg.InterfaceError, OSError, TimeoutError) as err:
            await self._drop_writer_connection()
            return [self._failure(err, "appending")] * len(group)
        refused = [item for n, item in enumerate(group) if n not in accepted]
        if not refused:
            return [None] * len(group)
        async with self._conn("appending") as check:
            found = await check.fetch(
                f"SELECT run_id, epoch, last_seq FROM {self._s}.runs WHERE run_id = ANY($1)",
                [item.run_id for item in refused],
            )
        state = {row["run_id"]: (row["epoch"], row["last_seq"]) for row in found}
        outcomes: list[Exception | None] = []
        for n, item in enumerate(group):
            if n in accepted:
                outcomes.append(None)
                continue
            epoch, last_seq = state.get(item.run_id, (None, 0))
            try:
                self._check_fence(item.run_id, item.lease, epoch)
                check_seqs(item.records, last_seq)
                outcomes.append(StoreError(f"append to run {item.run_id} was refused"))
            except (ResumableError, ValueError) as err:
                outcomes.append(err)
        return outcomes

    async def _writer_connection(self) -> Any:
        """The writer's own connection, replaced once the server or the pool dropped it."""
        try:
            usable = self._writer_conn is not None and not self._writer_conn.is_closed()
        except asyncpg.InterfaceError:  # the pool took it back after the server closed it
            usable = False
        if not usable:
            await self._drop_writer_connection()
            self._writer_conn = await self._pool.acquire()
        return self._writer_conn

    async def _drop_writer_connection(self) -> None:
        if self._writer_conn is not None:
            conn, self._writer_conn = self._writer_conn, None
            with contextlib.suppress(*_DRIVER_ERRORS):
                await self._pool.release(conn)

    async def read(self, run_id: str, after_seq: int = 0) -> ReadResult:
        async with self._conn("reading the log") as conn:
            rows = await conn.fetch(
                f"SELECT seq, epoch, data FROM {self._s}.records "
                "WHERE run_id = $1 AND seq > $2 ORDER BY seq",
                run_id,
                after_seq,
            )
            if not rows and not await self._exists(conn, run_id):
                raise self._not_found(run_id)
        return ReadResult([StoredRecord(r[0], r[1], bytes(r[2])) for r in rows])

    # -- blobs ----------------------------------------------------------------
    async def put_blob(self, run_id: str, digest: str, data: bytes) -> None:
        try:
            async with self._conn("writing a blob") as conn:
                await conn.execute(
                    f"INSERT INTO {self._s}.blobs (run_id, digest, data) VALUES ($1, $2, $3) "
                    "ON CONFLICT DO NOTHING",
                    run_id,
                    digest,
                    data,
                )
        except StoreError as err:
            if isinstance(err.__cause__, asyncpg.ForeignKeyViolationError):
                raise self._not_found(run_id) from None
            raise

    async def get_blob(self, run_id: str, digest: str) -> bytes:
        async with self._conn("reading a blob") as conn:
            data = await conn.fetchval(
                f"SELECT data FROM {self._s}.blobs WHERE run_id = $1 AND digest = $2",
                run_id,
                digest,
            )
        if data is None:
            raise StoreError(
                f"blob {digest} of run {run_id} is missing from {self.url}",
                run_id=run_id,
                digest=digest,
            )
        return bytes(data)

    async def has_blob(self, run_id: str, digest: str) -> bool:
        async with self._conn("reading a blob") as conn:
            return bool(
                await conn.fetchval(
                    f"SELECT EXISTS (SELECT 1 FROM {self._s}.blobs "
                    "WHERE run_id = $1 AND digest = $2)",
                    run_id,
                    digest,
                )
            )

    # -- snapshots --------------------------------------------------------------
    async def put_snapshot(self, run_id: str, seq: int, data: bytes, lease: Lease) -> None:
        async with self._conn("writing a snapshot") as conn:
            written = await conn.fetchval(
                f"WITH holder AS (SELECT run_id FROM {self._s}.runs "
                "WHERE run_id = $1 AND epoch = $2 FOR SHARE) "
                f"INSERT INTO {self._s}.snapshots (run_id, seq, data) "
                "SELECT run_id, $3, $4 FROM holder "
                "ON CONFLICT (run_id, seq) DO UPDATE SET data = EXCLUDED.data RETURNING 1",
                run_id,
                lease.epoch if lease.run_id == run_id else -1,
                seq,
                data,
            )
            if written is None:
                epoch = await conn.fetchval(
                    f"SELECT epoch FROM {self._s}.runs WHERE run_id = $1", run_id
                )
                self._check_fence(run_id, lease, epoch)

    async def get_snapshot(
        self, run_id: str, at_or_before: int | None = None
    ) -> tuple[int, bytes] | None:
        async with self._conn("reading a snapshot") as conn:
            row = await conn.fetchrow(
                f"SELECT seq, data FROM {self._s}.snapshots WHERE run_id = $1 "
                "AND ($2::bigint IS NULL OR seq <= $2) ORDER BY seq DESC LIMIT 1",
                run_id,
                at_or_before,
            )
        return None if row is None else (row[0], bytes(row[1]))

    async def prune(self, run_id: str, keep: int) -> int:
        if keep < 1:
            raise ValueError(f"prune must keep at least one snapshot, not {keep}")
        async with self._conn("pruning") as conn, conn.transaction():
            if not await self._exists(conn, run_id):
                raise self._not_found(run_id)
            cut = await conn.fetchval(
                f"SELECT seq FROM {self._s}.snapshots WHERE run_id = $1 "
                "ORDER BY seq DESC OFFSET $2 LIMIT 1",
                run_id,
                keep,
            )
            if cut is None:
                return 0
            await conn.execute(
                f"DELETE FROM {self._s}.snapshots WHERE run_id = $1 AND seq <= $2", run_id, cut
            )
            status = await conn.execute(
                f"DELETE FROM {self._s}.records WHERE run_id = $1 AND seq <= $2", run_id, cut
            )
        return int(status.split()[-1])

    # -- ownership ------------------------------------------------------------
    async def acquire(self, run_id: str, owner: str, ttl: float = 30.0) -> Lease:
        async with self._conn("acquiring a run") as conn:
            row = await conn.fetchrow(
                f"UPDATE {self._s}.runs SET epoch = epoch + 1, owner = $2, "
                "lease_expires_at = now() + make_interval(secs => $3) "
                "WHERE run_id = $1 AND (owner IS NULL OR lease_expires_at < now()) "
                "RETURNING epoch, extract(epoch FROM lease_expires_at)::float8",
                run_id,
                owner,
                float(ttl),
            )
            if row is not None:
                return Lease(run_id, row[0], owner, row[1])
            holder = await conn.fetchrow(
                f"SELECT owner, epoch FROM {self._s}.runs WHERE run_id = $1", run_id
            )
        if holder is None:
            raise self._not_found(run_id)
        raise RunBusyError(
            f"run {run_id} is owned by {holder['owner']} (lease epoch {holder['epoch']}); "
            "wait for it to finish or for its lease to expire",
            run_id=run_id,
            owner=holder["owner"],
        )

    async def claim(self, owner: str, ttl: float, limit: int) -> list[Lease]:
        """Take up to ``limit`` runs that are ``pending`` or ``running`` with no live owner.

        Oldest first; rows another worker is claiming are skipped, not waited for.
        A ``waiting`` run waits for a human, not for a worker, so it is never claimed.
        """
        async with self._conn("claiming runs") as conn:
            rows = await conn.fetch(self._sql["claim"], owner, float(ttl), limit)
        rows = sorted(rows, key=lambda r: (r[3], r[0]))
        return [Lease(r[0], r[1], owner, r[2]) for r in rows]

    async def renew(self, lease: Lease, ttl: float = 30.0) -> Lease:
        async with self._conn("renewing a lease") as conn:
            expires = await conn.fetchval(
                f"UPDATE {self._s}.runs SET lease_expires_at = now() + make_interval(secs => $4) "
                "WHERE run_id = $1 AND epoch = $2 AND owner = $3 "
                "RETURNING extract(epoch FROM lease_expires_at)::float8",
                lease.run_id,
                lease.epoch,
                lease.owner,
                float(ttl),
            )
        if expires is None:
            raise FencedError(
                f"run {lease.run_id}: the lease of epoch {lease.epoch} was lost "
                "(released or taken over)",
                run_id=lease.run_id,
                epoch=lease.epoch,
            )
        return replace(lease, expires_at=expires)

    async def release(self, lease: Lease) -> None:
        async with self._conn("releasing a run") as conn:
            await conn.execute(
                f"UPDATE {self._s}.runs SET owner = NULL, lease_expires_at = NULL "
                "WHERE run_id = $1 AND epoch = $2",
                lease.run_id,
                lease.epoch,
            )

    # -- helpers --------------------------------------------------------------
    async def _exists(self, conn: Any, run_id: str) -> bool:
        return bool(
            await conn.fetchval(
                f"SELECT EXISTS (SELECT 1 FROM {self._s}.runs WHERE run_id = $1)", run_id
            )
        )

    def _not_found(self, run_id: str) -> RunNotFoundError:
        return RunNotFoundError(f"no run {run_id} in {self.url}", run_id=run_id)

    def _check_fence(self, run_id: str, lease: Lease, current: int | None) -> None:
        if current is None:
            raise self._not_found(run_id)
        if lease.run_id != run_id or lease.epoch != current:
            raise FencedError(
                f"run {run_id}: write refused, lease epoch {lease.epoch} is stale (the run is "
                f"at epoch {current}); another owner took the run over",
                run_id=run_id,
                epoch=lease.epoch,
                current_epoch=current,
            )


def _meta_json(meta: RunMeta) -> str:
    """The runtime-owned part of the metadata; epoch and owner are the lease's."""
    return json.dumps(
        {"program": meta.program, "kind": meta.kind, "parent": meta.parent, "extra": meta.extra}
    )


def _meta_from_row(row: Any) -> RunMeta:
    data = json.loads(row["meta"])
    return RunMeta(
        run_id=row["run_id"],
        program=data["program"],
        kind=data["kind"],
        status=row["status"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        epoch=row["epoch"],
        owner=row["owner"],
        parent=data["parent"],
        extra=data["extra"],
    )


def _check_status(meta: RunMeta) -> None:
    if meta.status not in STATUSES:
        raise ValueError(f"unknown run status {meta.status!r}; expected one of {STATUSES}")
