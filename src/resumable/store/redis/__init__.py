"""The Redis store: runs in Redis, each fenced write one Lua script (needs redis).
Owns the store, the server connection and its durability (WAITAOF), and the scripts."""

from __future__ import annotations

from resumable.store.redis.store import RedisStore

__all__ = ["RedisStore"]
