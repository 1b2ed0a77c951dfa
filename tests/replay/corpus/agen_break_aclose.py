# An async for broken out of, the generator closed in the next statement.
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
async def fetch(n):
    await asyncio.sleep(0)
    return f"row {n}"


async def rows(log):
    try:
        for n in range(10):
            yield await fetch(n)
    finally:
        log.append("closed")
        book("rows closed")
        print("generator cleanup")


log = []
stream = rows(log)
async for row in stream:
    print("got", row)
    if row.endswith("2"):
        break
book("after loop")
await stream.aclose()
print("log", log)
