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


collected = {}


@resumable.step
async def measure(name):
    await asyncio.sleep(0)
    book(f"measure {name}")
    return len(name)


async def probe(name):
    value = await measure(name)
    collected[name] = value
    value += await measure(name + "!")
    return value


async def main():
    async with asyncio.TaskGroup() as group:
        tasks = {n: group.create_task(probe(n)) for n in ("x", "yy", "zzz")}
    print({n: t.result() for n, t in tasks.items()})
    print("collected", collected)


await main()
