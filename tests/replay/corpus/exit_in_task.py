# A task the program spawned calls sys.exit(4): under asyncio.run the SystemExit leaves
# the event loop, so the program ends there with that code, after what it printed.
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


@resumable.step
async def check(n):
    await asyncio.sleep(0)
    book(f"check {n}")
    return n * 2


async def worker():
    total = 0
    for n in range(3):
        total += await check(n)
        print("worker checked", n, total)
    print("worker gives up with", total)
    sys.exit(4)


print("starting")
task = asyncio.create_task(worker())
for n in range(5):
    await asyncio.sleep(0)
    print("main tick", n)
await task
print("never printed")
