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


def make_tally():
    items = []
    total = 0

    async def add(n):
        nonlocal total
        value = await asyncio.sleep(0, n)
        book(f"add {value}")
        total += value
        items.append(value)
        return total, list(items)

    return add


add = make_tally()


async def main():
    await add(5)
    return await add(7)


print("tally", await main())
print("again", await add(1))
