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


trace = []


@resumable.step
async def leaf(path):
    await asyncio.sleep(0)
    book(f"leaf {path}")
    return path


async def node(path, depth):
    if depth == 0:
        trace.append(path)
        return [await leaf(path)]
    children = await asyncio.gather(*(node(f"{path}.{i}", depth - 1) for i in range(2)))
    return [x for child in children for x in child]


print("leaves", await node("r", 2))
print("trace", sorted(trace))
