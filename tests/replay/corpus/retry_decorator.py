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


import functools

attempts = {"n": 0}


def retry(times):
    def decorate(fn):
        @functools.wraps(fn)
        async def wrapper(*args):
            for attempt in range(1, times + 1):
                try:
                    return await fn(*args)
                except ConnectionError as exc:
                    print(f"attempt {attempt} failed: {exc}")
                    await asyncio.sleep(0)
            raise RuntimeError(f"gave up after {times}")

        return wrapper

    return decorate


@resumable.step
async def flaky_call(n, attempt):
    await asyncio.sleep(0)
    book(f"call {n} attempt {attempt}")
    if attempt % 3 != 0:
        raise ConnectionError(f"call {n} refused")
    return n * 100


@retry(3)
async def call(n):
    attempts["n"] += 1  # program memory: a step's body changes none (it is not replayed)
    return await flaky_call(n, attempts["n"])


async def main():
    results = []
    for n in range(3):
        results.append(await call(n))
        print("got", results[-1])
    return results


print("results", await main())
