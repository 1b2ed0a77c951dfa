# A lazy pipeline of generators (map, filter, enumerate, zip) consumed across statements.
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
async def score(x):
    await asyncio.sleep(0)
    return x * x


def numbers(n):
    for i in range(n):
        print("produce", i)
        yield i


evens = filter(lambda x: x % 2 == 0, numbers(10))
doubled = map(lambda x: x * 2, evens)
pairs = zip(doubled, "abcdef")
indexed = enumerate(pairs, 1)
i, (d, letter) = next(indexed)
book(f"pair {i} {d} {letter}")
s = await score(d)
print("score", s)
for i, (d, letter) in indexed:
    s = await score(d)
    book(f"pair {i} {d} {letter} {s}")
    if i == 3:
        break
print("next", next(indexed))
print("left", list(indexed))
