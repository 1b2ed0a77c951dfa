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

# Library code that consumes the program's generator expressions lazily, awaiting between
# items: the expressions' own code (an append, a print, a filter) runs inside the library's
# await, so a resume must make that await again rather than answer it from the log.
import types

LIBRARY = '''
import asyncio


async def consume(items):
    out = []
    for item in items:
        await asyncio.sleep(0)
        out.append(item)
    return out
'''
streamlib = types.SimpleNamespace()
exec(compile(LIBRARY, "streamlib.py", "exec"), streamlib.__dict__)

seen = []
tested = []


async def main():
    first = await streamlib.consume(seen.append(i) or i * i for i in range(4))
    print("first", first, seen)
    book(f"first {first}")
    second = await streamlib.consume(
        print("item", i) or i for i in range(6) if tested.append(i) or i % 2
    )
    print("second", second, tested)
    book(f"second {second}")
    return len(seen) + len(tested)


print(await main())
