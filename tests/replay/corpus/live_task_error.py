# A background task whose body fails mid-way: the exception surfaces at the later await.
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


async def fragile():
    await asyncio.sleep(0)
    book("fragile start")
    await asyncio.sleep(0)
    raise RuntimeError("broke mid-way")


t = asyncio.create_task(fragile())
print("started")
await asyncio.sleep(0)
try:
    await t
except RuntimeError as exc:
    print("failed", exc)
