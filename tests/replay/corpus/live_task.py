# A task kept in a variable while it still runs, awaited two statements later.
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


async def worker():
    await asyncio.sleep(0)
    book("worker start")
    print("worker between")
    await asyncio.sleep(0)
    book("worker end")
    return 42


t = asyncio.create_task(worker())
print("between")
book("main")
r = await t
print("got", r, t.get_name())
