"""RedisStore: runs in Redis, for a shared in-memory store with Redis's own persistence.

Design note. Every write that must not interleave or must be fenced is one Lua
script (EVALSHA): an append checks the run's epoch and last seq and adds the
records in one step, so two writers can never interleave and a stale owner never
writes. Lease expiry is read from the server clock (``TIME``) inside the scripts,
so clients on different machines agree on it.

Keys, under ``prefix`` (default ``resumable``); ``{id}`` is a cluster hash tag so a
run's keys share a slot::

    P:runs                 sorted set: run id scored by created_at
    P:run:{id}             hash: meta (JSON), epoch, owner, expires (ms), last_seq, last_write,
                           floor (the highest seq pruned)
    P:run:{id}:log         sorted set: seq -> 8-byte seq + 8-byte epoch + record
    P:run:{id}:blobs       hash: digest -> blob
    P:run:{id}:snaps       sorted set: seq -> 8-byte seq + snapshot
    P:mac_key              string

The scripts are in :mod:`resumable.store.redis.scripts`; opening the server, WAITAOF
(how durable an acknowledged write is) and error handling in
:mod:`resumable.store.redis.connection`.
"""

from __future__ import annotations

import json
import secrets
import struct
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from resumable.errors import StoreError
from resumable.store.aside import AsideConnection
from resumable.store.base import Lease, ReadResult, RunMeta, RunSummary, StoredRecord, check_seqs
from resumable.store.common import (
    already_exists,
    blob_missing,
    busy,
    check_fence,
    check_keep,
    check_run_id,
    check_status,
    damaged_meta,
    damaged_summary,
    lease_lost,
    not_found,
)
from resumable.store.holes import LogExtent
from resumable.store.meta_check import check_meta_json
from resumable.store.redis.connection import RedisConnection

_SEQ = struct.Struct(">Q")
_DELETE_BATCH = 1000
_SEQ_EPOCH = struct.Struct(">QQ")


class RedisStore(RedisConnection):
    """Runs in Redis keys under a prefix; appends and leases fenced by Lua scripts."""

    # -- key ------------------------------------------------------------------
    read_only = False
    """Opened only to be read: no key made (see ``to_read``)."""

    async def mac_key(self) -> bytes:
        key = f"{self.prefix}:mac_key"
        if self.read_only:  # no key: no run was written to verify
            return bytes(await self._call("get", key) or secrets.token_bytes(32))
        await self._call("set", key, secrets.token_bytes(32), nx=True)
        value = await self._call("get", key)
        return bytes(value)

    # -- runs -----------------------------------------------------------------
    async def create_run(self, meta: RunMeta) -> None:
        check_run_id(meta.run_id)
        check_status(meta)
        result = await self._write_meta("create", meta)
        if result[0] == 2:
            raise already_exists(meta.run_id, self.url)

    async def get_meta(self, run_id: str) -> RunMeta:
        check_run_id(run_id)
        fields = await self._call("hgetall", self._key(run_id))
        if not fields:
            raise not_found(run_id, self.url)
        return _meta_from_hash(run_id, fields, self.url)

    async def put_meta(self, meta: RunMeta) -> None:
        check_status(meta)
        result = await self._write_meta("put_meta", meta)
        if result[0] == 1:
            raise not_found(meta.run_id, self.url)

    async def _write_meta(self, script: str, meta: RunMeta) -> list[Any]:
        """Write the run's metadata and its place in the list of runs, in one script."""
        keys = [self._key(meta.run_id), f"{self.prefix}:runs"]
        args = [_meta_json(meta), repr(meta.created_at), meta.run_id]
        return await self._run(script, keys, args, durable=True)

    async def list_runs(self) -> list[RunSummary]:
        client = self._require()
        ids = [i.decode() for i in await self._call("zrevrange", f"{self.prefix}:runs", 0, -1)]
        pipe = client.pipeline(transaction=True)
        pipe.time()
        for run_id in ids:
            pipe.hgetall(self._key(run_id))
        (seconds, micros), *hashes = await self._execute(pipe, "while listing runs")
        now_ms = seconds * 1000 + micros // 1000
        summaries = []
        for run_id, fields in zip(ids, hashes, strict=True):
            if not fields:
                if await self._call("exists", self._key(run_id, ":log")):
                    problem = f"run {run_id}: its metadata key {self._key(run_id)} is missing"
                    summaries.append(damaged_summary(run_id, problem))
                continue  # else: deleted between the two reads
            last_write = fields.get(b"last_write")
            live = b"owner" in fields and int(fields.get(b"expires", 0)) > now_ms
            try:
                meta = _meta_from_hash(run_id, fields, self.url)
            except StoreError as err:
                summaries.append(damaged_summary(run_id, err.message))
                continue
            summaries.append(
                RunSummary(
                    meta,
                    last_seq=int(fields.get(b"last_seq", 0)),
                    last_write=float(last_write) if last_write else None,
                    live=live,
                )
            )
        return summaries

    async def delete_run(self, run_id: str) -> None:
        keys = [self._key(run_id, part) for part in ("", ":log", ":blobs", ":snaps")]
        result = await self._run("delete", [*keys, f"{self.prefix}:runs"], [run_id], durable=True)
        if result[0] == 1:
            raise not_found(run_id, self.url)

    # -- the log --------------------------------------------------------------
    async def append(self, run_id: str, records: Sequence[StoredRecord], lease: Lease) -> None:
        check_seqs(records, 0)
        if not records:
            epoch = await self._call("hget", self._key(run_id), "epoch")
            self._raise_for(run_id, lease, [1] if epoch is None else [2, epoch])
            return
        await self._append_on(self._require(), run_id, records, lease)

    async def _append_on(
        self, client: Any, run_id: str, records: Sequence[StoredRecord], lease: Lease
    ) -> None:
        args: list[Any] = [self._epoch_for(run_id, lease), records[0].seq, records[-1].seq]
        for record in records:
            args += [record.seq, _SEQ_EPOCH.pack(record.seq, record.epoch) + record.data]
        keys = [self._key(run_id), self._key(run_id, ":log"), self._key(run_id, ":snaps")]
        result = await self._run("append", keys, args, durable=True, client=client)
        self._raise_for(run_id, lease, result)
        if result[0] == 3:
            check_seqs(records, int(result[1]))

    def append_now(
        self,
        run_id: str,
        records: Sequence[StoredRecord],
        lease: Lease,
        blobs: Mapping[str, bytes] | None = None,
    ) -> bool:
        """``blobs`` and ``records`` written through a client of their own while the caller
        blocks (a synchronous step: the run's loop cannot await meanwhile)."""
        check_seqs(records, 0)
        self._require()
        if self._aside is None:
            self._aside = AsideConnection(self._connect_aside, _close_aside)

        async def write(client: Any) -> bool:
            for digest, data in (blobs or {}).items():
                await self._put_blob_on(client, run_id, digest, data)
            if records:
                await self._append_on(client, run_id, records, lease)
            return True

        return self._aside.run(write)

    async def read(self, run_id: str, after_seq: int = 0) -> ReadResult:
        pipe = self._require().pipeline(transaction=True)
        pipe.exists(self._key(run_id))
        pipe.zrangebyscore(self._key(run_id, ":log"), f"({after_seq}", "+inf")
        pipe.hget(self._key(run_id), "last_seq")
        exists, members, high_water = await self._execute(pipe, f"while reading run {run_id}")
        if not exists:
            raise not_found(run_id, self.url)
        records = []
        for member in members:
            seq, epoch = _SEQ_EPOCH.unpack_from(member)
            records.append(StoredRecord(seq, epoch, bytes(member[_SEQ_EPOCH.size :])))
        return ReadResult(records, high_water=None if high_water is None else int(high_water))

    async def log_extent(self, run_id: str) -> LogExtent:
        """The run's log counted on the server (``holes.log_gap`` reads it only on a gap)."""
        pipe = self._require().pipeline(transaction=True)
        pipe.exists(self._key(run_id))
        pipe.zcard(self._key(run_id, ":log"))
        pipe.zrange(self._key(run_id, ":log"), 0, 0, withscores=True)
        pipe.zrange(self._key(run_id, ":log"), -1, -1, withscores=True)
        pipe.hmget(self._key(run_id), "last_seq", "floor")
        exists, count, first, last, (high_water, floor) = await self._execute(
            pipe, f"while reading run {run_id}"
        )
        if not exists:
            raise not_found(run_id, self.url)
        return LogExtent(
            int(first[0][1]) if first else None,
            int(last[0][1]) if last else None,
            int(count),
            None if high_water is None else int(high_water),
            None if floor is None else int(floor),  # runs created before it was kept
        )

    # -- blobs ----------------------------------------------------------------
    async def put_blob(self, run_id: str, digest: str, data: bytes) -> None:
        await self._put_blob_on(self._require(), run_id, digest, data)

    async def _put_blob_on(self, client: Any, run_id: str, digest: str, data: bytes) -> None:
        keys = [self._key(run_id), self._key(run_id, ":blobs")]
        result = await self._run("put_blob", keys, [digest, data], durable=True, client=client)
        if result[0] == 1:
            raise not_found(run_id, self.url)

    async def get_blob(self, run_id: str, digest: str) -> bytes:
        data = await self._call("hget", self._key(run_id, ":blobs"), digest)
        if data is None:
            raise blob_missing(run_id, digest, self.url)
        return bytes(data)

    async def has_blob(self, run_id: str, digest: str) -> bool:
        return bool(await self._call("hexists", self._key(run_id, ":blobs"), digest))

    async def list_blobs(self, run_id: str) -> dict[str, int]:
        check_run_id(run_id)
        if not await self._call("exists", self._key(run_id)):
            raise not_found(run_id, self.url)
        key = self._key(run_id, ":blobs")
        digests = await self._call("hkeys", key)
        pipe = self._require().pipeline(transaction=False)
        for digest in digests:
            pipe.hstrlen(key, digest)
        sizes = await self._execute(pipe, f"while listing the blobs of run {run_id}")
        return {bytes(d).decode(): int(n) for d, n in zip(digests, sizes, strict=True)}

    async def delete_blobs(
        self, run_id: str, digests: Collection[str], lease: Lease | None = None
    ) -> int:
        # Fenced by the lease's epoch ('': not fenced), in batches: Lua's unpack() has a limit.
        epoch = "" if lease is None else self._epoch_for(run_id, lease)
        keys, wanted, deleted = [self._key(run_id), self._key(run_id, ":blobs")], list(digests), 0
        for start in range(0, max(len(wanted), 1), _DELETE_BATCH):
            batch = wanted[start : start + _DELETE_BATCH]
            result = await self._run("delete_blobs", keys, [epoch, *batch], durable=True)
            if lease is not None:
                self._raise_for(run_id, lease, result)
            elif result[0] == 1:
                raise not_found(run_id, self.url)
            deleted += int(result[1])
        return deleted

    # -- snapshots --------------------------------------------------------------
    async def put_snapshot(self, run_id: str, seq: int, data: bytes, lease: Lease) -> None:
        keys = [self._key(run_id), self._key(run_id, ":snaps")]
        args = [self._epoch_for(run_id, lease), seq, _SEQ.pack(seq) + data]
        self._raise_for(run_id, lease, await self._run("put_snapshot", keys, args, durable=True))

    async def get_snapshot(
        self, run_id: str, at_or_before: int | None = None
    ) -> tuple[int, bytes] | None:
        top = "+inf" if at_or_before is None else at_or_before
        found = await self._call("zrevrangebyscore", self._key(run_id, ":snaps"), top, "-inf", 0, 1)
        if not found:
            return None
        member = found[0]
        return _SEQ.unpack_from(member)[0], bytes(member[_SEQ.size :])

    async def prune(self, run_id: str, keep: int) -> int:
        check_keep(keep)
        keys = [self._key(run_id), self._key(run_id, ":snaps"), self._key(run_id, ":log")]
        result = await self._run("prune", keys, [keep], durable=True)
        if result[0] == 1:
            raise not_found(run_id, self.url)
        return int(result[1])

    # -- ownership ------------------------------------------------------------
    async def acquire(self, run_id: str, owner: str, ttl: float = 30.0) -> Lease:
        check_run_id(run_id)
        result = await self._run("acquire", [self._key(run_id)], [owner, _ms(ttl)], durable=True)
        if result[0] == 1:
            raise not_found(run_id, self.url)
        if result[0] == 2:
            raise busy(run_id, result[1].decode(), int(result[2]))
        return Lease(run_id, int(result[1]), owner, int(result[2]) / 1000)

    async def renew(self, lease: Lease, ttl: float = 30.0) -> Lease:
        result = await self._run(
            "renew", [self._key(lease.run_id)], [lease.epoch, lease.owner, _ms(ttl)]
        )
        if result[0] != 0:
            raise lease_lost(lease)
        return Lease(lease.run_id, lease.epoch, lease.owner, int(result[1]) / 1000)

    async def release(self, lease: Lease) -> None:
        await self._run("release", [self._key(lease.run_id)], [lease.epoch])

    # -- helpers --------------------------------------------------------------
    @staticmethod
    def _epoch_for(run_id: str, lease: Lease) -> int:
        """A lease for another run never matches: its epoch is replaced by an impossible one."""
        return lease.epoch if lease.run_id == run_id else -1

    def _raise_for(self, run_id: str, lease: Lease, result: list[Any]) -> None:
        if result[0] == 1:
            raise not_found(run_id, self.url)
        if result[0] == 2:
            check_fence(run_id, lease, int(result[1]), self.url)


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _meta_json(meta: RunMeta) -> str:
    """The runtime-owned metadata; epoch and owner are the lease's, kept beside it."""
    data = meta.to_json()
    del data["epoch"], data["owner"]
    return json.dumps(data)


def _meta_from_hash(run_id: str, fields: dict[bytes, bytes], url: str) -> RunMeta:
    try:
        data = json.loads(fields[b"meta"])
        owner = fields.get(b"owner")
        data.update(
            run_id=run_id,
            epoch=int(fields.get(b"epoch", 0)),
            owner=owner.decode() if owner else None,
        )
        check_meta_json(data)
        return RunMeta.from_json(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise damaged_meta(run_id, url, exc) from None


async def _close_aside(client: Any) -> None:
    await client.aclose()
