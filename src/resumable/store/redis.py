"""RedisStore: runs in Redis, for a shared in-memory store with Redis's own persistence.

Design note. Every write that must not interleave or must be fenced is one Lua
script (EVALSHA): an append checks the run's epoch and last seq and adds the
records in one step, so two writers can never interleave and a stale owner never
writes. Lease expiry is read from the server clock (``TIME``) inside the scripts,
so clients on different machines agree on it.

Keys, under ``prefix`` (default ``resumable``); ``{id}`` is a cluster hash tag so a
run's keys share a slot::

    P:runs                 sorted set: run id scored by created_at
    P:run:{id}             hash: meta (JSON), epoch, owner, expires (ms), last_seq, last_write
    P:run:{id}:log         sorted set: seq -> 8-byte seq + 8-byte epoch + record
    P:run:{id}:blobs       hash: digest -> blob
    P:run:{id}:snaps       sorted set: seq -> 8-byte seq + snapshot
    P:mac_key              string

Durability is the server's: an acknowledged write is in Redis's memory (it survives
the writing process being killed); what survives a Redis restart depends on
``appendonly``/``appendfsync``. With ``sync="fsync"`` each write is followed by
``WAITAOF 1 0`` (fsynced to the local append-only file) when the server has AOF on
and knows WAITAOF (Redis >= 7.2) and does not already fsync every write; otherwise
the store logs once what the server does guarantee.
"""

from __future__ import annotations

import json
import logging
import secrets
import struct
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlunsplit

import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, RedisError, ResponseError

from resumable.errors import (
    ConfigError,
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
    damaged_meta,
    damaged_summary,
    lease_lost,
    not_found,
    split_url,
    take_option,
)

log = logging.getLogger(__name__)

_SEQ = struct.Struct(">Q")
_SEQ_EPOCH = struct.Struct(">QQ")

_NOW_MS = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

# Scripts return {code, ...}: 0 ok, 1 no such run, 2 refused (fenced / busy), 3 bad seq.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {2} end
redis.call('HSET', KEYS[1], 'meta', ARGV[1], 'epoch', 0, 'last_seq', 0)
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return {0}
"""
_PUT_META = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {1} end
redis.call('HSET', KEYS[1], 'meta', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return {0}
"""
_DELETE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {1} end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('ZREM', KEYS[5], ARGV[1])
return {0}
"""
_FENCE = """
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then return {1} end
if tonumber(epoch) ~= tonumber(ARGV[1]) then return {2, epoch} end
"""
_APPEND = (
    _FENCE
    + """
local last = 0
local top = redis.call('ZREVRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #top > 0 then last = tonumber(top[2]) end
local snap = redis.call('ZREVRANGE', KEYS[3], 0, 0, 'WITHSCORES')
if #snap > 0 and tonumber(snap[2]) > last then last = tonumber(snap[2]) end
if tonumber(ARGV[2]) <= last then return {3, last} end
for i = 4, #ARGV, 2 do redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i + 1]) end
local t = redis.call('TIME')
redis.call('HSET', KEYS[1], 'last_seq', ARGV[3], 'last_write', t[1] .. '.' .. string.format('%06d', tonumber(t[2])))
return {0}
"""
)
_PUT_SNAPSHOT = (
    _FENCE
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[2], ARGV[2], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return {0}
"""
)
_PUT_BLOB = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {1} end
redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
return {0}
"""
_PRUNE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {1} end
local cut = redis.call('ZREVRANGE', KEYS[2], ARGV[1], ARGV[1], 'WITHSCORES')
if #cut == 0 then return {0, 0} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', cut[2])
return {0, redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', cut[2])}
"""
_ACQUIRE = (
    _NOW_MS
    + """
local state = redis.call('HMGET', KEYS[1], 'epoch', 'owner', 'expires')
if not state[1] then return {1} end
if state[2] and tonumber(state[3] or 0) > now then return {2, state[2], state[1]} end
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'expires', now + tonumber(ARGV[2]))
return {0, epoch, now + tonumber(ARGV[2])}
"""
)
_RENEW = (
    _NOW_MS
    + """
local state = redis.call('HMGET', KEYS[1], 'epoch', 'owner')
if not state[1] then return {1} end
if tonumber(state[1]) ~= tonumber(ARGV[1]) or state[2] ~= ARGV[2] then return {2, state[1]} end
redis.call('HSET', KEYS[1], 'expires', now + tonumber(ARGV[3]))
return {0, now + tonumber(ARGV[3])}
"""
)
_RELEASE = """
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if epoch and tonumber(epoch) == tonumber(ARGV[1]) then redis.call('HDEL', KEYS[1], 'owner', 'expires') end
return {0}
"""
_SCRIPTS = {
    "create": _CREATE,
    "put_meta": _PUT_META,
    "delete": _DELETE,
    "append": _APPEND,
    "put_snapshot": _PUT_SNAPSHOT,
    "put_blob": _PUT_BLOB,
    "prune": _PRUNE,
    "acquire": _ACQUIRE,
    "renew": _RENEW,
    "release": _RELEASE,
}


class RedisStore:
    """Runs in Redis keys under a prefix; appends and leases fenced by Lua scripts."""

    def __init__(
        self, url: str, *, sync: str = "fsync", prefix: str = "resumable", timeout: float = 10.0
    ) -> None:
        check_sync(sync, "Redis")
        if not prefix or any(c in prefix for c in "{}* "):
            raise ConfigError(
                f"Redis key prefix {prefix!r} is empty or has {{}}* or spaces", key="durability.url"
            )
        self.redis_url = url
        self.sync = sync
        self.prefix = prefix
        self.timeout = timeout
        parts = split_url(url, "Redis")
        self.host = parts.hostname or "localhost"
        self.port = parts.port or 6379
        self.user = parts.username or "default"
        self.where = parts.path if parts.scheme == "unix" else f"{self.host}:{self.port}"
        netloc = parts.netloc.rsplit("@", 1)[-1]
        if parts.username or parts.password:
            netloc = f"{parts.username or ''}{':***' if parts.password else ''}@{netloc}"
        self.url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        self._client: aioredis.Redis | None = None
        self._scripts: dict[str, Any] = {}
        self._waitaof = False

    @classmethod
    def from_url(cls, url: str, *, sync: str = "fsync", **options: Any) -> Self:
        """``redis://[user:pw@]host:port/db?prefix=name``; ``prefix`` is ours, not the driver's."""
        split_url(url, "Redis")
        return cls(take_option(url, "prefix", options), sync=sync, **options)

    # -- lifecycle ------------------------------------------------------------
    async def __aenter__(self) -> Self:
        where = self.where
        client = aioredis.Redis.from_url(
            self.redis_url, socket_connect_timeout=self.timeout, socket_timeout=self.timeout * 3
        )
        try:
            await client.ping()
            info = await client.info()
        except AuthenticationError as err:
            await client.aclose()
            raise StoreUnavailableError(
                f"Redis at {where} refused user {self.user!r} ({err}); check the user and "
                "password of the store URL",
                host=self.host,
                port=self.port,
                user=self.user,
            ) from err
        except (RedisError, OSError) as err:
            await client.aclose()
            raise StoreUnavailableError(
                f"cannot connect to Redis at {where} ({err}); is Redis running?",
                host=self.host,
                port=self.port,
            ) from err
        self._client = client
        self._scripts = {name: client.register_script(body) for name, body in _SCRIPTS.items()}
        self._waitaof = self.sync == "fsync" and await self._choose_waitaof(info)
        return self

    async def _choose_waitaof(self, info: dict[str, Any]) -> bool:
        """WAITAOF only where it adds something: AOF on, Redis >= 7.2, not ``appendfsync always``."""
        where = f"Redis at {self.where}"
        if not int(info.get("aof_enabled", 0)):
            log.warning(
                "%s has appendonly off: records are in memory only and do not survive a "
                "Redis restart (sync='fsync' cannot change that)",
                where,
            )
            return False
        version = tuple(int(p) for p in str(info.get("redis_version", "0")).split(".")[:2])
        try:
            policy = (await self._require().config_get("appendfsync")).get("appendfsync")
        except RedisError:
            policy = None
        if policy == "always":
            return False
        if version < (7, 2):
            log.warning(
                "%s is older than 7.2 (no WAITAOF): with appendfsync %s a Redis crash or power "
                "loss can lose the last second of records",
                where,
                policy or "unknown",
            )
            return False
        return True

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _require(self) -> aioredis.Redis:
        if self._client is None:
            raise StoreError(f"the Redis store {self.url} is not open (use `async with`)")
        return self._client

    def _key(self, run_id: str, part: str = "") -> str:
        return f"{self.prefix}:run:{{{run_id}}}{part}"

    async def _run(
        self, name: str, keys: list[str], args: list[Any], *, durable: bool = False
    ) -> list[Any]:
        """Run one script; with WAITAOF in the same round trip when the write must be on disk."""
        client = self._require()
        try:
            if not (durable and self._waitaof):
                result: list[Any] = await self._scripts[name](keys=keys, args=args)
                return result
            pipe = client.pipeline(transaction=False)
            await self._scripts[name](keys=keys, args=args, client=pipe)
            pipe.execute_command("WAITAOF", 1, 0, int(self.timeout * 1000))
            result, synced = await pipe.execute()
        except ResponseError as err:
            raise StoreError(f"Redis store {self.url}: {name} failed: {err}") from err
        except (RedisError, OSError) as err:
            raise StoreUnavailableError(
                f"lost Redis at {self.where} during {name} ({err}); is Redis running?",
                host=self.host,
                port=self.port,
            ) from err
        if result[0] == 0 and int(synced[0]) < 1:
            raise StoreError(f"Redis at {self.where} did not fsync its append-only file in time")
        return result

    async def _call(self, method: str, *args: Any, **options: Any) -> Any:
        """One plain command, with connection failures as ``StoreError``."""
        client = self._require()
        try:
            return await getattr(client, method)(*args, **options)
        except (RedisError, OSError) as err:
            raise StoreUnavailableError(
                f"lost Redis at {self.where} during {method} ({err}); is Redis running?",
                host=self.host,
                port=self.port,
            ) from err

    # -- key ------------------------------------------------------------------
    async def mac_key(self) -> bytes:
        key = f"{self.prefix}:mac_key"
        await self._call("set", key, secrets.token_bytes(32), nx=True)
        value = await self._call("get", key)
        return bytes(value)

    # -- runs -----------------------------------------------------------------
    async def create_run(self, meta: RunMeta) -> None:
        check_run_id(meta.run_id)
        check_status(meta)
        keys = [self._key(meta.run_id), f"{self.prefix}:runs"]
        result = await self._run(
            "create", keys, [_meta_json(meta), repr(meta.created_at), meta.run_id], durable=True
        )
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
        keys = [self._key(meta.run_id), f"{self.prefix}:runs"]
        result = await self._run(
            "put_meta", keys, [_meta_json(meta), repr(meta.created_at), meta.run_id], durable=True
        )
        if result[0] == 1:
            raise not_found(meta.run_id, self.url)

    async def list_runs(self) -> list[RunSummary]:
        client = self._require()
        ids = [i.decode() for i in await self._call("zrevrange", f"{self.prefix}:runs", 0, -1)]
        pipe = client.pipeline(transaction=True)
        pipe.time()
        for run_id in ids:
            pipe.hgetall(self._key(run_id))
        try:
            (seconds, micros), *hashes = await pipe.execute()
        except (RedisError, OSError) as err:
            raise StoreUnavailableError(
                f"lost Redis at {self.where} while listing runs ({err})",
                host=self.host,
                port=self.port,
            ) from err
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
        args: list[Any] = [self._epoch_for(run_id, lease), records[0].seq, records[-1].seq]
        for record in records:
            args += [record.seq, _SEQ_EPOCH.pack(record.seq, record.epoch) + record.data]
        keys = [self._key(run_id), self._key(run_id, ":log"), self._key(run_id, ":snaps")]
        result = await self._run("append", keys, args, durable=True)
        self._raise_for(run_id, lease, result)
        if result[0] == 3:
            check_seqs(records, int(result[1]))

    async def read(self, run_id: str, after_seq: int = 0) -> ReadResult:
        pipe = self._require().pipeline(transaction=True)
        pipe.exists(self._key(run_id))
        pipe.zrangebyscore(self._key(run_id, ":log"), f"({after_seq}", "+inf")
        pipe.hget(self._key(run_id), "last_seq")
        try:
            exists, members, high_water = await pipe.execute()
        except (RedisError, OSError) as err:
            raise StoreUnavailableError(
                f"lost Redis at {self.where} while reading run {run_id} ({err})",
                host=self.host,
                port=self.port,
            ) from err
        if not exists:
            raise not_found(run_id, self.url)
        records = []
        for member in members:
            seq, epoch = _SEQ_EPOCH.unpack_from(member)
            records.append(StoredRecord(seq, epoch, bytes(member[_SEQ_EPOCH.size :])))
        return ReadResult(records, high_water=None if high_water is None else int(high_water))

    # -- blobs ----------------------------------------------------------------
    async def put_blob(self, run_id: str, digest: str, data: bytes) -> None:
        keys = [self._key(run_id), self._key(run_id, ":blobs")]
        result = await self._run("put_blob", keys, [digest, data], durable=True)
        if result[0] == 1:
            raise not_found(run_id, self.url)

    async def get_blob(self, run_id: str, digest: str) -> bytes:
        data = await self._call("hget", self._key(run_id, ":blobs"), digest)
        if data is None:
            raise blob_missing(run_id, digest, self.url)
        return bytes(data)

    async def has_blob(self, run_id: str, digest: str) -> bool:
        return bool(await self._call("hexists", self._key(run_id, ":blobs"), digest))

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
        return RunMeta.from_json(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise damaged_meta(run_id, url, exc) from None
