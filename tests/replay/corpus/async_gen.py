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
async def page(n):
    await asyncio.sleep(0)
    return [n * 10 + i for i in range(3)]


async def pages(count, seen):
    for n in range(count):
        items = await page(n)
        seen.append(n)
        for item in items:
            yield item


async def main():
    seen = []
    total = 0
    async for item in pages(3, seen):
        total += item
        if item % 2 == 0:
            book(f"even {item}")
        print("item", item, "total", total)
    evens = [x async for x in pages(2, seen) if x % 2 == 0]
    print("evens", evens, "seen", seen)


await main()
