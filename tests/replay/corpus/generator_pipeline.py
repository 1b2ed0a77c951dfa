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


@resumable.step
async def source(n):
    await asyncio.sleep(0)
    return list(range(n))


async def numbers(n):
    for x in await source(n):
        yield x


async def squares(stream):
    async for x in stream:
        await asyncio.sleep(0)
        yield x * x


async def main():
    total = 0
    async for sq in squares(numbers(5)):
        total += sq
        book(f"square {sq}")
    print("sum of squares", total)


await main()
