"""The PostgreSQL store's statements: reading runs, the append fenced at the head, claiming.

{s} in each is the quoted schema, filled in once when the store is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from resumable.store.group_commit import PendingAppend

RUN_COLUMNS = (
    "r.run_id, r.meta, r.status, r.created_at, r.updated_at, r.epoch, r.owner, "
    "greatest(r.seq_floor, latest.seq) AS last_seq, "
    "extract(epoch FROM coalesce(latest.written_at, r.last_write))::float8 AS last_write, "
    "coalesce(r.owner IS NOT NULL AND r.lease_expires_at > now(), false) AS live"
)
# The last record of each run, read backwards off the records' primary key.
RUNS = """{s}.runs AS r LEFT JOIN LATERAL (
    SELECT seq, written_at FROM {s}.records WHERE run_id = r.run_id ORDER BY seq DESC LIMIT 1
) AS latest ON true"""

# An append's fence is the run's head: one conditional update of its ``heads`` row,
# where the epoch is the lease's (kept equal to ``runs.epoch`` by the trigger of
# schema 4) and the last seq is the one before the append's first. The records are
# inserted only if it matched, so the fence, the insert and the new mark commit
# together; an acquire or claim of the run updates the same row, so the two are
# serialised and an append whose epoch went stale before it committed matches nothing.
# One record with plain parameters ($3 its seq, $4 its epoch, $5 its bytes):
APPEND_RECORD = """
WITH head AS (
    UPDATE {s}.heads SET last_seq = $3 WHERE run_id = $1 AND epoch = $2 AND last_seq = $3 - 1
    RETURNING run_id
)
INSERT INTO {s}.records (run_id, seq, epoch, data) SELECT run_id, $3, $4, $5 FROM head
"""

APPEND_ONE = """
WITH head AS (
    UPDATE {s}.heads SET last_seq = $7 WHERE run_id = $1 AND epoch = $2 AND last_seq = $3 - 1
    RETURNING run_id
)
INSERT INTO {s}.records (run_id, seq, epoch, data)
SELECT h.run_id, n.seq, n.epoch, n.data
FROM head AS h, unnest($4::bigint[], $5::bigint[], $6::bytea[]) AS n(seq, epoch, data)
"""

APPEND_MANY = """
WITH items AS (
    SELECT * FROM unnest($1::int[], $2::text[], $3::bigint[], $4::bigint[], $10::bigint[])
        AS i(item, run_id, epoch, first_seq, last_seq)
), accepted AS (
    UPDATE {s}.heads AS h SET last_seq = i.last_seq FROM items AS i
    WHERE h.run_id = i.run_id AND h.epoch = i.epoch AND h.last_seq = i.first_seq - 1
    RETURNING i.item
), written AS (
    INSERT INTO {s}.records (run_id, seq, epoch, data)
    SELECT n.run_id, n.seq, n.epoch, n.data
    FROM unnest($5::int[], $6::text[], $7::bigint[], $8::bigint[], $9::bytea[])
        AS n(item, run_id, seq, epoch, data)
    JOIN accepted AS a ON a.item = n.item
)
SELECT item FROM accepted
"""

# An append the head refused is looked at again with the head locked (nothing else
# appends to the run or takes it meanwhile): the epoch, then, in a statement of its
# own so that it sees what committed while the lock was awaited, the log's own last
# seq (not the mark: after a loss the user accepted, the run goes on from what is
# left, and the mark moves back with it). A later first seq is written after all.
LOCK_HEAD = "SELECT epoch FROM {s}.heads WHERE run_id = $1 FOR UPDATE"
LOG_END = """
SELECT greatest(seq_floor, (SELECT max(seq) FROM {s}.records WHERE run_id = $1))
FROM {s}.runs WHERE run_id = $1
"""
APPEND_LOCKED = """
WITH head AS (UPDATE {s}.heads SET last_seq = $5 WHERE run_id = $1 RETURNING run_id)
INSERT INTO {s}.records (run_id, seq, epoch, data)
SELECT h.run_id, n.seq, n.epoch, n.data
FROM head AS h, unnest($2::bigint[], $3::bigint[], $4::bytea[]) AS n(seq, epoch, data)
"""

PUT_BLOB = """
INSERT INTO {s}.blobs (run_id, digest, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING
"""

# Claiming takes the run's head too (the epoch trigger updates it), skipping a run whose
# head an append holds: claims never wait on appends, so no two lock orders meet.
CLAIM = """
WITH candidates AS (
    SELECT r.run_id FROM {s}.runs AS r JOIN {s}.heads AS h ON h.run_id = r.run_id
    WHERE r.status IN ('pending', 'running')
        AND (r.owner IS NULL OR r.lease_expires_at < now())
    ORDER BY r.created_at, r.run_id
    LIMIT $3
    FOR UPDATE OF r, h SKIP LOCKED
)
UPDATE {s}.runs AS r
SET epoch = r.epoch + 1, owner = $1, lease_expires_at = now() + make_interval(secs => $2)
FROM candidates AS c WHERE r.run_id = c.run_id
RETURNING r.run_id, r.epoch, extract(epoch FROM r.lease_expires_at)::float8, r.created_at
"""

# A run may have become claimable: workers listening on the store's channel are woken.
# A notification is a hint, never a queue: a spurious one costs a claim that finds
# nothing, and a missed one is made up by the worker's poll.
PUT_META = """
WITH updated AS (
    UPDATE {s}.runs SET meta = $2, status = $3, created_at = $4, updated_at = $5
    WHERE run_id = $1 RETURNING run_id, status
)
SELECT count(*) FROM updated
WHERE status NOT IN ('pending', 'running') OR pg_notify($6, run_id) IS NOT NULL
"""

RELEASE = """
WITH released AS (
    UPDATE {s}.runs SET owner = NULL, lease_expires_at = NULL
    WHERE run_id = $1 AND epoch = $2 RETURNING run_id, status
)
SELECT count(*) FROM released
WHERE status IN ('pending', 'running') AND pg_notify($3, run_id) IS NOT NULL
"""


def group_columns(group: list[PendingAppend]) -> list[Sequence[Any]]:
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
