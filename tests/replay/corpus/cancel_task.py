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
async def quick(i):
    await asyncio.sleep(0)
    book(f"quick {i}")
    return i


async def forever():
    try:
        while True:
            await asyncio.sleep(0.005)
            log.append("tick")
    except asyncio.CancelledError:
        log.append("cancelled")
        raise


async def main():
    background = asyncio.create_task(forever())
    for i in range(3):
        await quick(i)
    background.cancel()
    try:
        await background
    except asyncio.CancelledError:
        print("background cancelled", "cancelled" in log)


await main()
