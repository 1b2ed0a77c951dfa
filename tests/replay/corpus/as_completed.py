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


async def main():
    # Tasks, not bare coroutines: as_completed spawns tasks for coroutines from a set,
    # in an order that changes from one process to the next (and so would their keys).
    for finished in asyncio.as_completed([asyncio.create_task(slow(n)) for n in range(4)]):
        n = await finished
        order.append(n)
    print("finished", sorted(order))


await main()
