# ledger order: any (concurrent tasks book in whatever order they run)
# Tasks kept in a list while they still run, gathered by a later statement.
import asyncio

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


async def work(n):
    for step in range(2):
        await asyncio.sleep(0)
        book(f"work {n}.{step}")
    return n * n


tasks = [asyncio.create_task(work(n)) for n in range(3)]
print("spawned", len(tasks))
await asyncio.sleep(0)
print("results", await asyncio.gather(*tasks))
