"""The PostgreSQL store's tables, and the migrations that create or upgrade them.

A store opened on a schema brings it to :data:`SCHEMA_VERSION` under an advisory
lock, so several processes opening it at once migrate it once; a schema written by
a newer resumable is refused, never downgraded.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from resumable.errors import SchemaVersionError, StoreUnavailableError

SCHEMA_VERSION = 4

# Migrations by the version they lead to; {s} is the quoted schema.
MIGRATIONS = {
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
    # Version 2 makes an append cheaper. Records no longer reference runs: the append's
    # fence already proves the run exists, and delete_run deletes the records itself.
    # The run's last seq and write time are read off the records' primary key, not
    # bumped by every append; seq_floor keeps the highest seq pruned away (or written
    # before this version), so a run whose records were all pruned still refuses
    # seqs at or below it.
    2: """
    ALTER TABLE {s}.records DROP CONSTRAINT IF EXISTS records_run_id_fkey;
    ALTER TABLE {s}.runs RENAME COLUMN last_seq TO seq_floor;
    """,
    # Version 3 brings back a high-water mark, narrow and apart from the runs row (which
    # an append only share-locks): the seq of the last record acknowledged, set in the
    # append's own statement, so records deleted from the tail or the middle of a log
    # are noticed on resume instead of completed effects running again.
    3: """
    CREATE TABLE {s}.heads (run_id text PRIMARY KEY, last_seq bigint NOT NULL)
        WITH (fillfactor = 50);
    INSERT INTO {s}.heads (run_id, last_seq)
    SELECT r.run_id, greatest(r.seq_floor, coalesce(max(x.seq), 0))
    FROM {s}.runs AS r LEFT JOIN {s}.records AS x ON x.run_id = r.run_id
    GROUP BY r.run_id, r.seq_floor;
    """,
    # Version 4 moves the append's fence onto the run's head: ``heads.epoch`` is the
    # run's epoch, set by a trigger in the transaction of every acquire or claim that
    # bumps ``runs.epoch`` (an older resumable's too), so an append is one conditional
    # update of the head plus its insert, with no lock on ``runs`` and no read of the log.
    4: """
    ALTER TABLE {s}.heads ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
    INSERT INTO {s}.heads (run_id, last_seq)
    SELECT r.run_id, greatest(r.seq_floor, coalesce(max(x.seq), 0))
    FROM {s}.runs AS r LEFT JOIN {s}.records AS x ON x.run_id = r.run_id
    GROUP BY r.run_id, r.seq_floor
    ON CONFLICT (run_id) DO NOTHING;
    UPDATE {s}.heads AS h SET epoch = r.epoch FROM {s}.runs AS r WHERE r.run_id = h.run_id;
    CREATE FUNCTION {s}.fence_appends() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE {s}.heads SET epoch = NEW.epoch WHERE run_id = NEW.run_id;
        RETURN NULL;
    END $$;
    CREATE TRIGGER fence_appends AFTER UPDATE OF epoch ON {s}.runs FOR EACH ROW
        WHEN (NEW.epoch IS DISTINCT FROM OLD.epoch) EXECUTE FUNCTION {s}.fence_appends();
    """,
}


async def migrate(conn: Any, *, schema: str, url: str, user: str, database: str) -> None:
    """Create or upgrade ``schema``; refuse one written by a newer resumable.

    Driver errors other than a missing privilege are left to the caller.
    """
    s = f'"{schema}"'
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"resumable:{s}")
            # Checked first: CREATE SCHEMA needs a right on the database even if it exists.
            if not await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema
            ):
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {s}.resumable_schema_version "
                "(version integer NOT NULL)"
            )
            found = await conn.fetchval(f"SELECT max(version) FROM {s}.resumable_schema_version")
            version = int(found or 0)
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"PostgreSQL schema {schema} at {url} is at version {version}, "
                    f"written by a newer resumable; upgrade (this one knows {SCHEMA_VERSION})",
                    schema=schema,
                    version=version,
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                await conn.execute(MIGRATIONS[target].format(s=s))
            if version < SCHEMA_VERSION:
                await conn.execute(f"DELETE FROM {s}.resumable_schema_version")
                await conn.execute(
                    f"INSERT INTO {s}.resumable_schema_version VALUES ($1)", SCHEMA_VERSION
                )
    except asyncpg.InsufficientPrivilegeError as err:
        raise StoreUnavailableError(
            f"PostgreSQL user {user!r} may not create the tables of schema "
            f"{schema!r} in database {database!r} ({err}); create the schema and "
            "grant the user USAGE, CREATE on it",
            user=user,
            schema=schema,
        ) from err
