# Generators that finish: the window closes, and an exhausted generator stays exhausted.
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
    return n * 2


def countdown(n):
    while n:
        yield n
        n -= 1


c = countdown(2)
print("one", next(c))
x = await fetch(1)
print("two", next(c), x)
print("end", next(c, "over"))
y = await fetch(2)
book(f"y {y}")
print("still over", list(c), y)
z = await fetch(3)
book(f"z {z}")
c2 = countdown(3)
print("c2", next(c2))
print("total", x + y + z, list(c2))
