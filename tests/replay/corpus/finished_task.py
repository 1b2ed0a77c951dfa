# ledger order: any (concurrent tasks book in whatever order they run)
# Tasks that finished in the statement that created them, kept at top level and used by
# later statements: their results, exceptions and names are the same after a resume.
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


async def work(n):
    await asyncio.sleep(0)
    book(f"work {n}")
    return n * 2


async def fail(n):
    await asyncio.sleep(0)
    book(f"fail {n}")
    raise ValueError(f"bad {n}")


async def settle(*coros):
    tasks = [asyncio.create_task(coro) for coro in coros]
    await asyncio.wait(tasks)
    return tasks


done, broken = await settle(work(3), fail(4))
print("names", done.get_name(), broken.get_name())
print("done", done.done(), done.result())
print("awaited", await done)
try:
    await broken
except ValueError as exc:
    print("failed", exc)
batch = await settle(*(work(n) for n in range(3)))
print("gathered", await asyncio.gather(*batch))
print("again", [task.result() for task in batch], [task.get_name() for task in batch])
