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


progress = []


@resumable.step
async def compute(n):
    await asyncio.sleep(0)
    book(f"compute {n}")
    return n * n


async def pipeline(n):
    value = await compute(n)
    progress.append(value)
    return value + await compute(value)


async def main():
    first = await asyncio.wait_for(pipeline(2), timeout=30)
    second = await asyncio.wait_for(pipeline(3), timeout=30)
    print("results", first, second, progress)


await main()
