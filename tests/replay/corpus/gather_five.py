# ledger order: any (concurrent tasks book in whatever order they run)
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


done = []


@resumable.step
async def work(i, part):
    await asyncio.sleep(0.001 * (5 - i))
    book(f"work {i}.{part}")
    return i * 10 + part


async def branch(i):
    total = 0
    for part in range(3):
        total += await work(i, part)
    done.append(i)
    return total


results = await asyncio.gather(*(branch(i) for i in range(5)))
print("results", results, "branches done", sorted(done))
