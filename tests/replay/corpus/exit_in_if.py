import asyncio
import sys

import resumable


def key():
    try:
        return resumable.idempotency_key()
    except resumable.ResumableError:
        return "-"


@resumable.step
def book(what):
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"{what}\t{key()}\n")
    return what


async def check(n):
    await asyncio.sleep(0)
    return book(f"check {n}") and n * 2


total = 0
for n in range(3):
    total += await check(n)
    print("checked", n, total)

if total > 4:
    print("too many:", total)
    print("giving up with", total, file=sys.stderr)
    await check(9)
    print("after the last check")
    sys.exit(3)
print("never printed")
