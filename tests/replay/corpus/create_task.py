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


log = []


@resumable.step
async def download(name):
    await asyncio.sleep(0)
    book(f"download {name}")
    return name * 2


async def job(name):
    data = await download(name)
    log.append(name)
    return data


async def main():
    first = asyncio.create_task(job("a"))
    second = asyncio.create_task(job("b"))
    pending = [asyncio.create_task(job(n)) for n in "cde"]
    print("first", await first)
    results = [await t for t in pending]
    print("second", await second, "rest", results)
    print("log", log)


await main()
