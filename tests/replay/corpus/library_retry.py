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


# A retry helper from a library (a module that is not the program: built here from
# source under its own file name, as an installed package would be) calling the
# program's coroutine back: each attempt is the program's own code (steps, state), so
# the helper's await runs again on a resume; the helper's own sleeps are not journaled.
import types

LIBRARY = '''
import asyncio


async def retry(make_call, *, attempts=4, delay=0):
    failures = []
    for attempt in range(1, attempts + 1):
        try:
            return await make_call(attempt)
        except ConnectionError as exc:
            failures.append(str(exc))
            await asyncio.sleep(delay)
    raise RuntimeError(f"gave up: {failures}")


async def each(items, callback):
    done = []
    for item in items:
        done.append(await callback(item))
        await asyncio.sleep(0)
    return done
'''
retrylib = types.SimpleNamespace()
exec(compile(LIBRARY, "retrylib.py", "exec"), retrylib.__dict__)

calls = []


@resumable.step
async def fetch(name, attempt):
    await asyncio.sleep(0)
    book(f"fetch {name} attempt {attempt}")
    if attempt < 3:
        raise ConnectionError(f"{name} refused on {attempt}")
    return f"{name}-data"


async def get(name, attempt):
    calls.append((name, attempt))
    return await fetch(name, attempt)


async def main():
    first = await retrylib.retry(lambda attempt: get("alpha", attempt))
    print("first", first)
    sizes = await retrylib.each(["x", "yy", "zzz"], measure)
    print("sizes", sizes)
    return first


async def measure(item):
    value = await retrylib.retry(lambda attempt: get(item, attempt + 1))
    return len(value)


print(await main())
print("calls", calls)
