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

# Library code that drives the program's generators: contextlib.aclosing around a program
# async generator left early (its aclose runs the program's finally, which takes a step),
# and library coroutines that consume a program async generator and a sync generator.
# Each resumes the program's own code, so each runs again on a resume.
import contextlib
import types

LIBRARY = '''
import asyncio


async def collect(agen, limit):
    out = []
    async for item in agen:
        out.append(item)
        if len(out) == limit:
            break
    await agen.aclose()
    return out


async def total(numbers):
    await asyncio.sleep(0)
    return sum(numbers)
'''
streamlib = types.SimpleNamespace()
exec(compile(LIBRARY, "streamlib.py", "exec"), streamlib.__dict__)

seen = []
cleanups = []


async def ticks(name, n):
    try:
        for i in range(n):
            await asyncio.sleep(0)
            seen.append(f"{name}{i}")
            yield i
    finally:
        cleanups.append(name)
        book(f"cleanup {name}")


def squares(n):
    for i in range(n):
        seen.append(f"sq{i}")
        yield i * i


async def main():
    got = []
    async with contextlib.aclosing(ticks("a", 10)) as stream:
        async for i in stream:
            got.append(i)
            if i == 2:
                break
    print("aclosing", got, cleanups)
    print("collect", await streamlib.collect(ticks("b", 10), 3), cleanups)
    print("total", await streamlib.total(squares(4)))
    book(f"seen {len(seen)}")
    return seen


print(await main())
