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


# An async generator the program defines, driven by anext(), asend(), athrow() and
# aclose() inside one statement: each resumes the program's own body, which takes steps
# and changes state, so on a resume each runs again (its foreign awaits are answered).
state = {"sent": [], "errors": 0, "closed": False}


async def accumulator(start):
    total = start
    try:
        while True:
            try:
                value = yield total
            except ValueError as exc:
                state["errors"] += 1
                book(f"error {exc}")
                total = 0
                continue
            await asyncio.sleep(0)
            if value is not None:
                state["sent"].append(value)
                total += value
                book(f"add {value} -> {total}")
    finally:
        await asyncio.sleep(0)
        state["closed"] = True
        book(f"closed at {total}")


async def drive():
    gen = accumulator(10)
    print("first", await anext(gen))
    print("send 5", await gen.asend(5))
    print("send 7", await gen.asend(7))
    print("throw", await gen.athrow(ValueError("reset")))
    print("send 3", await gen.asend(3))
    print("next", await anext(gen, "no more"))
    await gen.aclose()
    print("after close", await anext(gen, "exhausted"))
    return state


print(await drive())
print(state["sent"], state["errors"], state["closed"])
