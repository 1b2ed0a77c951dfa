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

# A library helper that fans the program's coroutine out with asyncio.gather and sorts
# the results with the program's key function: tasks spawned by library code for program
# coroutines are keyed like the program's own, and their steps answered on a resume.
import types

LIBRARY = '''
import asyncio


async def fan_out(fn, items, *, key):
    results = await asyncio.gather(*(fn(item) for item in items))
    await asyncio.sleep(0)
    return sorted(results, key=key)
'''
poollib = types.SimpleNamespace()
exec(compile(LIBRARY, "poollib.py", "exec"), poollib.__dict__)

visits = {}
compared = []


async def score(word):
    await asyncio.sleep(0)
    visits[word] = visits.get(word, 0) + 1
    book(f"score {word}")
    await asyncio.sleep(0)
    return (word, len(word) * 10 + visits[word])


def by_score(pair):
    compared.append(pair[0])
    return -pair[1]


async def main():
    ranked = await poollib.fan_out(score, ["ant", "bee", "wasp", "moth"], key=by_score)
    print("ranked", ranked)
    again = await poollib.fan_out(score, ["bee", "fly"], key=by_score)
    print("again", again)
    print("visits", visits, "compared", len(compared))


await main()
