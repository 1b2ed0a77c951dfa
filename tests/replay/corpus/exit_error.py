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
async def step_one():
    await asyncio.sleep(0)
    book("one")
    return 1


async def main():
    total = await step_one()
    print("total", total)
    book("before failure")
    raise ValueError(f"bad total {total}")


await main()
print("never printed")
