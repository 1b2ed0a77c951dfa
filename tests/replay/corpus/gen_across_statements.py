# A sync generator created in one statement and consumed over the next ones.
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
async def fetch(n):
    await asyncio.sleep(0)
    return n * 3


def batches(items, size):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            print("batch ready", batch)
            yield batch
            batch = []
    if batch:
        yield batch


done = []
gen = batches(range(7), 3)
first = next(gen)
book(f"first {first}")
value = await fetch(len(first))
done.append(value)
second = next(gen)
print("second", second, "value", value)
for rest in gen:
    book(f"rest {rest}")
    done.append(await fetch(len(rest)))
print("done", done, next(gen, "exhausted"))
