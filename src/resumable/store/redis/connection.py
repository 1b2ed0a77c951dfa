"""The Redis store's connection: opening it, choosing WAITAOF, running scripts and commands.

Durability is the server's: an acknowledged write is in Redis's memory (it survives
the writing process being killed); what survives a Redis restart depends on
``appendonly``/``appendfsync``. With ``sync="fsync"`` each write is followed by
``WAITAOF 1 0`` (fsynced to the local append-only file) when the server has AOF on
and knows WAITAOF (Redis >= 7.2) and does not already fsync every write; otherwise
the connection logs once what the server does guarantee.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Self
from urllib.parse import urlunsplit

import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, RedisError, ResponseError

from resumable.errors import ConfigError, StoreError, StoreUnavailableError
from resumable.store.aside import AsideConnection
from resumable.store.common import ClosedOnExit, check_sync, split_url, take_option
from resumable.store.redis.scripts import SCRIPTS

log = logging.getLogger(__name__)


class RedisConnection(ClosedOnExit):
    """One Redis server under a key prefix: scripts and commands, failures as store errors."""

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
        self._aside: AsideConnection | None = None
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
        self._scripts = {name: client.register_script(body) for name, body in SCRIPTS.items()}
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

    async def _connect_aside(self) -> aioredis.Redis:
        """A client of its own, for :class:`~resumable.store.aside.AsideConnection`."""
        return aioredis.Redis.from_url(
            self.redis_url, socket_connect_timeout=self.timeout, socket_timeout=self.timeout * 3
        )

    async def aclose(self) -> None:
        if self._aside is not None:
            aside, self._aside = self._aside, None
            await asyncio.to_thread(aside.close)
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
        self,
        name: str,
        keys: list[str],
        args: list[Any],
        *,
        durable: bool = False,
        client: aioredis.Redis | None = None,
    ) -> list[Any]:
        """Run one script (on ``client``: another than the store's own, see ``append_now``);
        with WAITAOF in the same round trip when the write must be on disk."""
        client = client or self._require()
        try:
            if not (durable and self._waitaof):
                result: list[Any] = await self._scripts[name](keys=keys, args=args, client=client)
                return result
            pipe = client.pipeline(transaction=False)
            await self._scripts[name](keys=keys, args=args, client=pipe)
            pipe.execute_command("WAITAOF", 1, 0, int(self.timeout * 1000))
            result, synced = await pipe.execute()
        except ResponseError as err:
            raise StoreError(f"Redis store {self.url}: {name} failed: {err}") from err
        except (RedisError, OSError) as err:
            raise self._lost(f"during {name}", err) from err
        if result[0] == 0 and int(synced[0]) < 1:
            raise StoreError(f"Redis at {self.where} did not fsync its append-only file in time")
        return result

    async def _call(self, method: str, *args: Any, **options: Any) -> Any:
        """One plain command, with connection failures as ``StoreError``."""
        client = self._require()
        try:
            return await getattr(client, method)(*args, **options)
        except (RedisError, OSError) as err:
            raise self._lost(f"during {method}", err) from err

    async def _execute(self, pipe: Any, during: str) -> list[Any]:
        """Send a pipeline of plain commands, with connection failures as ``StoreError``."""
        try:
            result: list[Any] = await pipe.execute()
        except (RedisError, OSError) as err:
            raise self._lost(during, err) from err
        return result

    def _lost(self, during: str, err: Exception) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"lost Redis at {self.where} {during} ({err}); is Redis running?",
            host=self.host,
            port=self.port,
        )
