"""PostgresStore: runs in PostgreSQL, the store for more than one machine.

Design note. Fencing lives in the database: an append is one statement that
share-locks the run's row where ``runs.epoch`` is the lease's epoch, checks that the
first new seq follows the run's last one (read backwards off the records' primary
key) and inserts the records of exactly those runs, so the check and the write
commit together (a concurrent ``acquire`` holds or waits for the row: the append
waits for it and re-checks the new epoch). The runs row is not updated, and the
records have no foreign key to check: the fence proves the run exists. The same
statement sets the run's high-water mark in the narrow ``heads`` table, so a log that
later misses its tail or part of its middle is noticed on resume. Appends from many runs of
one process are committed together: a single writer task (:mod:`.group_commit`)
takes every append waiting when it wakes and sends them as one statement (each item
checked on its own, a stale one refused alone), then releases every waiter. Nothing
waits on a timer: an append that finds nothing else pending is one round trip of a
statement with plain parameters. The tables and their migrations are in
:mod:`.postgres_schema`.

``sync``: ``fsync`` -> ``synchronous_commit = on`` (a commit is on the server's
disk before the append returns); ``flush`` -> ``off`` (acknowledged before the WAL
is flushed: a server crash may lose the last few hundred ms of commits, never
corrupt or tear them). Both survive the writing process being killed.
"""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, Self
from urllib.parse import unquote, urlunsplit

import asyncpg

from resumable.errors import (
    ConfigError,
    ResumableError,
    StoreError,
    StoreUnavailableError,
)
from resumable.store.base import (
    Lease,
    ReadResult,
    RunMeta,
    RunSummary,
    StoredRecord,
    check_seqs,
)
from resumable.store.common import (
    already_exists,
    blob_missing,
    busy,
    check_fence,
    check_keep,
    check_run_id,
    check_status,
    check_sync,
    damaged_summary,
    lease_lost,
    meta_from_row,
    meta_json,
    not_found,
    split_url,
    take_option,
)
from resumable.store.group_commit import GroupCommit, PendingAppend
from resumable.store.postgres_schema import SCHEMA_VERSION, migrate

__all__ = ["SCHEMA_VERSION", "SYNC_SETTINGS", "PostgresStore"]

SYNC_SETTINGS = {"fsync": "on", "flush": "off"}
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_DRIVER_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)

_RUN_COLUMNS = (
    "r.run_id, r.meta, r.status, r.created_at, r.updated_at, r.epoch, r.owner, "
    "greatest(r.seq_floor, latest.seq) AS last_seq, "
    "extract(epoch FROM coalesce(latest.written_at, r.last_write))::float8 AS last_write, "
    "coalesce(r.owner IS NOT NULL AND r.lease_expires_at > now(), false) AS live"
)
# The last record of each run, read backwards off the records' primary key.
_RUNS = """{s}.runs AS r LEFT JOIN LATERAL (
    SELECT seq, written_at FROM {s}.records WHERE run_id = r.run_id ORDER BY seq DESC LIMIT 1
) AS latest ON true"""

# An append's fence: the run's row at the lease's epoch, share-locked so that an
# acquire in progress is waited for and its new epoch seen; then its first seq must
# follow the last one of the log (not the high-water mark: after a loss the user
# accepted, the run goes on from what is left). Only the run's head is updated.
_APPEND_ONE = """
WITH fenced AS (
    SELECT run_id, seq_floor FROM {s}.runs WHERE run_id = $1 AND epoch = $2 FOR SHARE
), accepted AS (
    SELECT run_id FROM fenced
    WHERE greatest(seq_floor, (SELECT max(seq) FROM {s}.records WHERE run_id = $1)) < $3
), head AS (
    UPDATE {s}.heads AS h SET last_seq = $7 FROM accepted AS a WHERE h.run_id = a.run_id
)
INSERT INTO {s}.records (run_id, seq, epoch, data)
SELECT a.run_id, n.seq, n.epoch, n.data
FROM accepted AS a, unnest($4::bigint[], $5::bigint[], $6::bytea[]) AS n(seq, epoch, data)
RETURNING 1
"""

_APPEND_MANY = """
WITH items AS (
    SELECT * FROM unnest($1::int[], $2::text[], $3::bigint[], $4::bigint[], $10::bigint[])
        AS i(item, run_id, epoch, first_seq, last_seq)
), fenced AS (
    SELECT i.item, r.run_id, r.seq_floor, i.first_seq
    FROM {s}.runs AS r JOIN items AS i ON i.run_id = r.run_id AND i.epoch = r.epoch
    ORDER BY r.run_id FOR SHARE OF r
), accepted AS (
    SELECT f.item FROM fenced AS f
    WHERE greatest(
        f.seq_floor, (SELECT max(seq) FROM {s}.records AS x WHERE x.run_id = f.run_id)
    ) < f.first_seq
), written AS (
    INSERT INTO {s}.records (run_id, seq, epoch, data)
    SELECT n.run_id, n.seq, n.epoch, n.data
    FROM unnest($5::int[], $6::text[], $7::bigint[], $8::bigint[], $9::bytea[])
        AS n(item, run_id, seq, epoch, data)
    JOIN accepted AS a ON a.item = n.item
), head AS (
    UPDATE {s}.heads AS h SET last_seq = i.last_seq
    FROM accepted AS a JOIN items AS i ON i.item = a.item
    WHERE h.run_id = i.run_id
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
                "append_one": _APPEND_ONE,
                "append_many": _APPEND_MANY,
                "claim": _CLAIM,
                "runs": _RUNS,
            }.items()
        }
        self._s = f'"{schema}"'
        self._pool: Any = None
        self._writer_conn: Any = None
        self._writer = GroupCommit(
            self._commit, name=f"resumable-pg:{schema}", one_append_per_run=True
        )

    @classmethod
    def from_url(cls, url: str, *, sync: str = "fsync", **options: Any) -> Self:
        """``postgresql://user:pw@host:port/db?schema=name``; ``schema`` is ours, not the driver's."""
        split_url(url, "PostgreSQL")
        return cls(take_option(url, "schema", options), sync=sync, **options)

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
        self._writer.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._writer.stop()
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
        except ValueError as err:  # the driver's own reading of the URL
            raise ConfigError(
                f"[durability] url {self.url!r} is not a valid PostgreSQL URL ({err})",
                key="durability.url",
            ) from err
        except (asyncpg.PostgresError, asyncpg.InterfaceError) as err:
            raise StoreUnavailableError(
                f"PostgreSQL at {where} refused the connection: {err}",
                host=self.host,
                port=self.port,
            ) from err

    async def _migrate(self, conn: Any) -> None:
        """Create or upgrade the schema; refuse one written by a newer resumable."""
        try:
            await migrate(
                conn, schema=self.schema, url=self.url, user=self.user, database=self.database
            )
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
        check_run_id(meta.run_id)
        check_status(meta)
        async with self._conn("creating a run") as conn, conn.transaction():
            status = await conn.execute(
                f"INSERT INTO {self._s}.runs (run_id, meta, status, created_at, updated_at) "
                "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                meta.run_id,
                meta_json(meta),
                meta.status,
                meta.created_at,
                meta.updated_at,
            )
            if status.endswith(" 0"):
                raise already_exists(meta.run_id, self.url)
            await conn.execute(
                f"INSERT INTO {self._s}.heads (run_id, last_seq) VALUES ($1, 0) "
                "ON CONFLICT (run_id) DO UPDATE SET last_seq = 0",
                meta.run_id,
            )

    async def enqueue(self, meta: RunMeta) -> None:
        """Create the run as ``pending``, for a worker to ``claim``."""
        await self.create_run(replace(meta, status="pending"))

    async def get_meta(self, run_id: str) -> RunMeta:
        check_run_id(run_id)
        async with self._conn("reading a run") as conn:
            row = await conn.fetchrow(
                f"SELECT {_RUN_COLUMNS} FROM {self._sql['runs']} WHERE r.run_id = $1", run_id
            )
        if row is None:
            raise not_found(run_id, self.url)
        return meta_from_row(row, self.url)

    async def put_meta(self, meta: RunMeta) -> None:
        check_status(meta)
        async with self._conn("updating a run") as conn:
            status = await conn.execute(
                f"UPDATE {self._s}.runs SET meta = $2, status = $3, created_at = $4, "
                "updated_at = $5 WHERE run_id = $1",
                meta.run_id,
                meta_json(meta),
                meta.status,
                meta.created_at,
                meta.updated_at,
            )
        if status.endswith(" 0"):
            raise not_found(meta.run_id, self.url)

    async def list_runs(self) -> list[RunSummary]:
        async with self._conn("listing runs") as conn:
            rows = await conn.fetch(
                f"SELECT {_RUN_COLUMNS} FROM {self._sql['runs']} "
                "ORDER BY r.created_at DESC, r.run_id DESC"
            )
        summaries = []
        for r in rows:
            try:
                meta = meta_from_row(r, self.url)
            except StoreError as err:
                summaries.append(damaged_summary(r["run_id"], err.message))
                continue
            summaries.append(RunSummary(meta, r["last_seq"], r["last_write"], r["live"]))
        return summaries

    async def delete_run(self, run_id: str) -> None:
        async with self._conn("deleting a run") as conn, conn.transaction():
            # The run's row first: an append in progress is waited for, a later one refused.
            status = await conn.execute(f"DELETE FROM {self._s}.runs WHERE run_id = $1", run_id)
            if status.endswith(" 0"):
                raise not_found(run_id, self.url)
            await conn.execute(f"DELETE FROM {self._s}.records WHERE run_id = $1", run_id)
            await conn.execute(f"DELETE FROM {self._s}.heads WHERE run_id = $1", run_id)

    # -- the log --------------------------------------------------------------
    async def append(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        check_seqs(records, 0)
        if lease.run_id != run_id or not records:
            async with self._conn("appending") as conn:
                epoch = await conn.fetchval(
                    f"SELECT epoch FROM {self._s}.runs WHERE run_id = $1", run_id
                )
            check_fence(run_id, lease, epoch, self.url)
            return
        if not self._writer.running:
            raise StoreError(f"the PostgreSQL store {self.url} is not open (use `async with`)")
        await self._writer.submit(run_id, records, lease)

    async def _commit(self, group: list[PendingAppend]) -> list[Exception | None]:
        """One statement for the whole group; why a refused item was refused comes after."""
        try:
            conn = await self._writer_connection()
            if len(group) == 1:
                (only,) = group
                columns = zip(*[(r.seq, r.epoch, r.data) for r in only.records], strict=True)
                written = await conn.fetch(
                    self._sql["append_one"],
                    only.run_id,
                    only.lease.epoch,
                    only.records[0].seq,
                    *columns,
                    only.records[-1].seq,
                )
                accepted = {0} if written else set()
            else:
                accepted = {
                    row[0] for row in await conn.fetch(self._sql["append_many"], *_columns(group))
                }
        except asyncpg.UniqueViolationError:
            # Another writer of the same epoch committed these seqs first: refused below.
            if len(group) > 1:
                return [(await self._commit([item]))[0] for item in group]
            accepted = set()
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
                f"SELECT {_RUN_COLUMNS} FROM {self._sql['runs']} WHERE r.run_id = ANY($1)",
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
                check_fence(item.run_id, item.lease, epoch, self.url)
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
            # The head first: an append commits it with its records, so the records
            # read next include at least those it counts.
            high_water = await conn.fetchval(
                f"SELECT last_seq FROM {self._s}.heads WHERE run_id = $1", run_id
            )
            rows = await conn.fetch(
                f"SELECT seq, epoch, data FROM {self._s}.records "
                "WHERE run_id = $1 AND seq > $2 ORDER BY seq",
                run_id,
                after_seq,
            )
            if not rows and not await self._exists(conn, run_id):
                raise not_found(run_id, self.url)
        records = [StoredRecord(r[0], r[1], bytes(r[2])) for r in rows]
        return ReadResult(records, high_water=high_water)

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
                raise not_found(run_id, self.url) from None
            raise

    async def get_blob(self, run_id: str, digest: str) -> bytes:
        async with self._conn("reading a blob") as conn:
            data = await conn.fetchval(
                f"SELECT data FROM {self._s}.blobs WHERE run_id = $1 AND digest = $2",
                run_id,
                digest,
            )
        if data is None:
            raise blob_missing(run_id, digest, self.url)
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
                check_fence(run_id, lease, epoch, self.url)

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
        check_keep(keep)
        async with self._conn("pruning") as conn, conn.transaction():
            if not await self._exists(conn, run_id):
                raise not_found(run_id, self.url)
            cut = await conn.fetchval(
                f"SELECT seq FROM {self._s}.snapshots WHERE run_id = $1 "
                "ORDER BY seq DESC OFFSET $2 LIMIT 1",
                run_id,
                keep,
            )
            if cut is None:
                return 0
            # The run's last seq and write time outlive its records.
            await conn.execute(
                f"UPDATE {self._s}.runs AS r SET seq_floor = x.seq, last_write = x.written_at "
                f"FROM (SELECT seq, written_at FROM {self._s}.records WHERE run_id = $1 "
                "AND seq <= $2 ORDER BY seq DESC LIMIT 1) AS x "
                "WHERE r.run_id = $1 AND x.seq > r.seq_floor",
                run_id,
                cut,
            )
            await conn.execute(
                f"DELETE FROM {self._s}.snapshots WHERE run_id = $1 AND seq <= $2", run_id, cut
            )
            status = await conn.execute(
                f"DELETE FROM {self._s}.records WHERE run_id = $1 AND seq <= $2", run_id, cut
            )
        return int(status.split()[-1])

    # -- ownership ------------------------------------------------------------
    async def acquire(self, run_id: str, owner: str, ttl: float = 30.0) -> Lease:
        check_run_id(run_id)
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
            raise not_found(run_id, self.url)
        raise busy(run_id, holder["owner"], holder["epoch"])

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
            raise lease_lost(lease)
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


def _columns(group: list[PendingAppend]) -> list[Sequence[Any]]:
    """The arrays of the group statement: one row per append, then one per record."""
    items = list(
        zip(
            *[(n, i.run_id, i.lease.epoch, i.records[0].seq) for n, i in enumerate(group)],
            strict=True,
        )
    )
    rows = zip(
        *[(n, i.run_id, r.seq, r.epoch, r.data) for n, i in enumerate(group) for r in i.records],
        strict=True,
    )
    return [*items, *rows, [i.records[-1].seq for i in group]]
