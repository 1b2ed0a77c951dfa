# A sync context manager generator entered on an ExitStack and closed statements later.
import asyncio
import contextlib

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
    return n + 100


@contextlib.contextmanager
def session(name, log):
    log.append(f"open {name}")
    print("open", name)
    try:
        yield name.upper()
    finally:
        log.append(f"close {name}")
        book(f"close {name}")


log = []
stack = contextlib.ExitStack()
a = stack.enter_context(session("a", log))
value = await fetch(1)
b = stack.enter_context(session("b", log))
book(f"{a} {b} {value}")
value = await fetch(2)
stack.close()
print("log", log, value)
