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


order = []


@resumable.step
async def slow(n):
    await asyncio.sleep(0.004 * (4 - n))
    book(f"slow {n}")
    return n


@resumable.step
async def quick(n):
    await asyncio.sleep(0)
    book(f"quick {n}")
    return -n


async def main():
    # Bare coroutines: their tasks are spawned in the order they are passed, so each
    # keeps its key (and its journaled result) on replay.
    # Two steps: a coroutine answered with another's result would reach another site.
    coros = [slow(n) if n % 2 else quick(n) for n in range(1, 5)]
    for finished in asyncio.as_completed(coros):
        order.append(await finished)
    print("finished", sorted(order))


await main()
