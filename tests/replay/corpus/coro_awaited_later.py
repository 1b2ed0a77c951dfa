# A coroutine created in one statement and awaited in a later one.
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
async def fetch(name):
    await asyncio.sleep(0)
    return name.upper()


async def job(name, log):
    log.append(f"start {name}")
    value = await fetch(name)
    book(f"job {name}")
    log.append(f"end {name}")
    return value


log = []
later = job("alpha", log)
pending = {"beta": job("beta", log)}
print("created", log)
book("before awaiting")
a = await later
print("a", a, log)
b = await pending.pop("beta")
print("b", b, log)
