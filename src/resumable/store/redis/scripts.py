"""The Lua scripts of the Redis store: every write that must not interleave or is fenced.

Each script runs on the server in one step (EVALSHA), so two writers never interleave
and a stale owner never writes. Lease expiry is read from the server clock (``TIME``)
inside the scripts, so clients on different machines agree on it. The keys they touch
are described in :mod:`resumable.store.redis`.
"""

_NOW_MS = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

# Scripts return {code, ...}: 0 ok, 1 no such run, 2 refused (fenced / busy), 3 bad seq.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {2} end
redis.call('HSET', KEYS[1], 'meta', ARGV[1], 'epoch', 0, 'last_seq', 0, 'floor', 0)
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
if last == 0 and tonumber(ARGV[2]) > 1 and (tonumber(redis.call('HGET', KEYS[1], 'last_seq')) or 0) == 0 then
  -- a log that starts later (a pruned run copied by `resumable migrate`): not a loss
  local floor = tonumber(redis.call('HGET', KEYS[1], 'floor')) or 0
  if tonumber(ARGV[2]) - 1 > floor then redis.call('HSET', KEYS[1], 'floor', tonumber(ARGV[2]) - 1) end
end
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
_DELETE_BLOBS = """
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then return {1} end
if ARGV[1] ~= '' and tonumber(epoch) ~= tonumber(ARGV[1]) then return {2, epoch} end
if #ARGV < 2 then return {0, 0} end
return {0, redis.call('HDEL', KEYS[2], unpack(ARGV, 2))}
"""
_PRUNE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {1} end
local keep = tonumber(ARGV[1])
if redis.call('ZCARD', KEYS[2]) <= keep then return {0, 0} end
local cut = redis.call('ZREVRANGE', KEYS[2], keep - 1, keep - 1, 'WITHSCORES')
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. cut[2])
local floor = tonumber(redis.call('HGET', KEYS[1], 'floor')) or 0
if tonumber(cut[2]) > floor then redis.call('HSET', KEYS[1], 'floor', cut[2]) end
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
SCRIPTS = {
    "create": _CREATE,
    "put_meta": _PUT_META,
    "delete": _DELETE,
    "append": _APPEND,
    "put_snapshot": _PUT_SNAPSHOT,
    "put_blob": _PUT_BLOB,
    "delete_blobs": _DELETE_BLOBS,
    "prune": _PRUNE,
    "acquire": _ACQUIRE,
    "renew": _RENEW,
    "release": _RELEASE,
}
