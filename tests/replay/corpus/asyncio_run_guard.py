# ledger order: any (concurrent tasks book in whatever order they run)
"""`if __name__ == "__main__": sys.exit(asyncio.run(main()))`, with `from asyncio import run`
as well: the same file runs under `python` and `resumable exec`."""

import asyncio
import sys
from asyncio import run as run_async

import resumable

seen = []


def key():
    try:
        return resumable.idempotency_key()
    except resumable.ResumableError:
        return "-"


@resumable.step
def book(what):
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"{what}\t{key()}\n")
    return len(what)


@resumable.step
async def fetch(n):
    await asyncio.sleep(0)
    return n * n


async def worker(n, results):
    value = await fetch(n)
    results[n] = value
    book(f"worker {n} -> {value}")


async def warm_up():
    book("warm up")
    seen.append(await fetch(9))


async def main(limit):
    results = {}
    async with asyncio.TaskGroup() as group:
        for n in range(limit):
            group.create_task(worker(n, results))
    for n in sorted(results):
        print("result", n, results[n])
    seen.extend(results.values())
    if sum(results.values()) > 10:
        print("too much:", sum(results.values()))
        return 4
    return 0


run_async(warm_up())
print("warmed up", seen)

if __name__ == "__main__":
    code = asyncio.run(main(5), debug=False)
    print("seen", sorted(seen), "exit code", code)

sys.exit(code)
