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


class Acc:
    def __init__(self):
        self.items = []

    async def add(self, k):
        await asyncio.sleep(0)
        book(f"add {k}")
        self.items.append(k)
        return k * k


acc = Acc()
squares = [await acc.add(k) for k in range(3)]
print("squares", squares, "items", acc.items)
pairs = {k: await acc.add(k) for k in range(3, 5)}
print("pairs", pairs, "items", acc.items)
