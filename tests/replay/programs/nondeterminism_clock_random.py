# The clock, random, uuid, urandom and secrets in program code: the same values after a resume.
# stdout only shows what follows from those values, so it equals a plain CPython run's.
import asyncio
import datetime
import os
import random
import secrets
import time
import uuid

import resumable


@resumable.step
def record(line):
    with open("ledger.txt", "a") as ledger:
        ledger.write(line + "\n")


async def main():
    seen = []
    for i in range(3):
        token = uuid.uuid4().hex
        n = random.randint(0, 10**9)
        stamp = time.time()
        order = list(range(6))
        random.shuffle(order)
        record(f"{i} {token} {n} {stamp!r} {order}")
        seen.append((token, n, stamp, order))
        await asyncio.sleep(0)
    return seen


seen = await main()
now = datetime.datetime.now()
salt = os.urandom(4).hex() + secrets.token_hex(4)
record(f"now {now.isoformat()} {salt}")
await asyncio.sleep(0)
with open("ledger.txt") as f:
    lines = f.read().splitlines()
print(len(lines), [f"{i} {t} {n} {s!r} {o}" for i, (t, n, s, o) in enumerate(seen)] == lines[:3])
print(lines[3] == f"now {now.isoformat()} {salt}", len({t for t, _, _, _ in seen}))
