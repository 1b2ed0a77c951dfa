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


@resumable.step
async def named_work(i):
    await asyncio.sleep(0)
    book(f"named {i}")
    return asyncio.current_task().get_name()


async def worker(i):
    seen = await named_work(i)
    return f"{asyncio.current_task().get_name()}/{seen}"


async def main():
    print("root", asyncio.current_task().get_name())
    print(await asyncio.gather(worker(1), worker(2)))
    t = asyncio.create_task(worker(3), name="custom")
    print(await t, t.get_name())
    u = asyncio.ensure_future(worker(4))
    print(await u, u.get_name())


await main()
await main()
