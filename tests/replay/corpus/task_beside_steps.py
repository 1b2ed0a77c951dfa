# A background task runs beside awaits that never suspend (an async step with no await
# inside): under CPython the task makes no progress across them, and so on replay.
import asyncio

import resumable


def key():
    try:
        return resumable.idempotency_key()
    except resumable.ResumableError:
        return "-"


ticks = []


@resumable.step
async def book(what):
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"{what}\t{key()}\n")
    return len(ticks)


async def ticker():
    for n in range(6):
        await asyncio.sleep(0)
        ticks.append(n)


t = asyncio.create_task(ticker())
seen = [await book("first")]
for n in range(3):
    seen.append(await book(f"book {n}"))
    seen.append(await book(f"again {n}"))
    await asyncio.sleep(0)
    seen.append(len(ticks))
await t
print(seen, ticks)
