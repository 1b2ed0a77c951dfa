"""The PostgreSQL store's statements: reading runs, the fenced append, claiming.

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

# An append's fence: the run's row at the lease's epoch, share-locked so that an
# acquire in progress is waited for and its new epoch seen; then its first seq must
# follow the last one of the log (not the high-water mark: after a loss the user
# accepted, the run goes on from what is left). Only the run's head is updated.
APPEND_ONE = """
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

APPEND_MANY = """
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

CLAIM = """
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
