"""An async script that ends the usual way, `asyncio.run(main())` at the top level."""

import asyncio

import resumable


def key():
    try:
        return resumable.idempotency_key()
    except resumable.ResumableError:
        return "-"


@resumable.step
async def charge(who, amount):
    await asyncio.sleep(0)
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"charge {who} {amount}\t{key()}\n")
    return amount


class Till:
    def __init__(self):
        self.total = 0
        self.receipts = []

    async def ring(self, who, amount):
        paid = await charge(who, amount)
        self.total += paid
        self.receipts.append(f"{who}:{paid}")
        print("rang", who, paid, "total", self.total)


till = Till()


async def main():
    for who, amount in [("ann", 3), ("bo", 5), ("cy", 7)]:
        await till.ring(who, amount)
    both = await asyncio.gather(charge("dee", 1), charge("eve", 2))
    print("gathered", both)
    return till.total + sum(both)


total = asyncio.run(main())
print("total", total, till.receipts)
asyncio.run(till.ring("fay", 11))
print("after", till.total)
