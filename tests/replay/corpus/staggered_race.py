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

# asyncio.staggered.staggered_race: a stdlib helper (library code) that spawns a task of
# its own for each of the program's coroutine factories until one succeeds. The program
# code in those tasks takes steps and changes state, so the race runs again on a resume,
# each attempt's steps answered under the keys of the helper's tasks.
from asyncio.staggered import staggered_race

tried = []


def mirror(name, works):
    async def fetch():
        tried.append(name)
        await asyncio.sleep(0)
        book(f"try {name}")
        if not works:
            raise ConnectionError(f"{name} is down")
        return f"payload from {name}"

    return fetch


async def main():
    winner, index, errors = await staggered_race(
        [mirror("eu", False), mirror("us", False), mirror("asia", True), mirror("au", True)],
        None,
    )
    print(winner, index, [str(e) if e else None for e in errors])
    second = await staggered_race([mirror("local", True)], None)
    print(second[0], second[1])
    return tried


print(await main())
