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
async def produce_item(i):
    await asyncio.sleep(0)
    book(f"produce {i}")
    return f"item{i}"


@resumable.step
async def consume_item(worker, item):
    await asyncio.sleep(0)
    book(f"consume {worker} {item}")


async def producer(queue, count):
    for i in range(count):
        await queue.put(await produce_item(i))
    await queue.put(None)
    await queue.put(None)


async def consumer(queue, worker, handled):
    while True:
        item = await queue.get()
        if item is None:
            return
        await consume_item(worker, item)
        handled.append((worker, item))


async def main():
    queue = asyncio.Queue(maxsize=2)
    handled = []
    await asyncio.gather(
        producer(queue, 6), consumer(queue, "w1", handled), consumer(queue, "w2", handled)
    )
    print("handled", sorted(item for _, item in handled))


await main()
