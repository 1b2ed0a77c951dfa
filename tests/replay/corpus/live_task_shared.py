# A background task and later statements mutate the same list, interleaved.
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


shared = []


async def background():
    for n in range(3):
        shared.append(f"bg{n}")
        await asyncio.sleep(0)
        book(f"bg {n}")


t = asyncio.create_task(background())
shared.append("main0")
await asyncio.sleep(0)
shared.append("main1")
await asyncio.sleep(0)
await t
print(shared)
