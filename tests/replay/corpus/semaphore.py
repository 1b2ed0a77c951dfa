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


active = {"now": 0, "max": 0}


@resumable.step
async def fetch(i):
    await asyncio.sleep(0.001 * (i % 3))
    book(f"fetch {i}")
    return i


async def limited(sem, i):
    async with sem:
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        value = await fetch(i)
        active["now"] -= 1
        return value


async def main():
    sem = asyncio.Semaphore(2)
    values = await asyncio.gather(*(limited(sem, i) for i in range(6)))
    print("values", values, "max active", active["max"])


await main()
