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


# contextlib.AsyncExitStack enters the program's own async context managers: its
# __aexit__ (library code) runs their __aexit__ bodies, which take steps, await foreign
# calls and update state. On a resume they must run again, not be answered from the log.
import contextlib

opened = []
closed = []


class Connection:
    def __init__(self, name):
        self.name = name
        self.open = False

    async def __aenter__(self):
        await asyncio.sleep(0)
        self.open = True
        opened.append(self.name)
        book(f"open {self.name}")
        return self

    async def __aexit__(self, *exc):
        await asyncio.sleep(0)
        # a task the program spawns here is the program's: journaled as one foreign await
        said = await asyncio.create_task(asyncio.sleep(0, f"bye {self.name}"))
        book(f"close {self.name}: {said}")
        self.open = False
        closed.append(self.name)
        return False


async def flush(log, name):
    await asyncio.sleep(0)
    log.append(f"flushed {name}")
    book(f"flush {name}")


async def main():
    log = []
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(Connection("a"))
        b = await stack.enter_async_context(Connection("b"))
        stack.push_async_callback(flush, log, "first")
        c = await stack.enter_async_context(Connection("c"))
        print("inside", a.open, b.open, c.open)
    print("after", a.open, b.open, c.open)
    return log


log = await main()
print("opened", opened)
print("closed", closed)
print("log", log)

stack = contextlib.AsyncExitStack()
d = await stack.enter_async_context(Connection("d"))
await stack.aclose()
print("d open", d.open, closed)
