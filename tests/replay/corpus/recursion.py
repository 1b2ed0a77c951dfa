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


depth_seen = []


async def descend(n):
    if n == 0:
        await asyncio.sleep(0)
        book("bottom")
        return 0
    if n % 200 == 0:
        depth_seen.append(n)
        book(f"level {n}")
    return 1 + await descend(n - 1)


print("depth", await descend(600), depth_seen)


async def fib(n):
    if n < 2:
        return await asyncio.sleep(0, n)
    return await fib(n - 1) + await fib(n - 2)


print("fib", await fib(10))
book("fib done")
