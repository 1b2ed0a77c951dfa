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


shared = []


@resumable.step
async def write(who, i):
    await asyncio.sleep(0)
    book(f"write {who} {i}")


async def writer(who, lock, ready):
    await ready.wait()
    for i in range(2):
        async with lock:
            shared.append(f"{who}{i}")
            await write(who, i)
            shared.append(f"{who}{i}.")


async def main():
    lock = asyncio.Lock()
    ready = asyncio.Event()
    tasks = [asyncio.create_task(writer(w, lock, ready)) for w in "pq"]
    await asyncio.sleep(0)
    ready.set()
    await asyncio.gather(*tasks)
    # under the lock each writer's pair of appends stays together, whatever the order
    pairs = [shared[i : i + 2] for i in range(0, len(shared), 2)]
    print("paired", all(b == a + "." for a, b in pairs), sorted(shared))


await main()
