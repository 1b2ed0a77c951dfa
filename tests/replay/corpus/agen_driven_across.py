# An async generator advanced by several `async for ... break` statements, then to its end.
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
    return [n * 10 + i for i in range(2)]


async def pages(count, log):
    try:
        for n in range(count):
            items = await page(n)
            book(f"page {n}")
            await asyncio.sleep(0)
            yield items
    finally:
        log.append("pages done")
        print("generator finally")


log = []
stream = pages(5, log)
async for first in stream:
    break
print("first", first)
totals = [sum(first)]
async for items in stream:
    totals.append(sum(items))
    if len(totals) == 3:
        break
print("totals", totals, log)
book(f"middle {totals}")
async for items in stream:
    print("rest", items)
print("end", totals, log)
