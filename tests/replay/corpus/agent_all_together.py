# An agent written the natural way: a class, an exit stack of the program's own context
# managers, a cached lookup, an async generator of work items, notes appended to a file
# inside main(), a context variable, and asyncio.run(main()) at the end.
import asyncio
import contextlib
import contextvars
import functools

import resumable

current = contextvars.ContextVar("current", default="idle")


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
async def call_tool(name, arg):
    await asyncio.sleep(0)
    return f"{name}({arg})"


@functools.lru_cache(maxsize=8)
def price(item):
    book(f"priced {item}")
    return len(item) * 3


class Session:
    def __init__(self, name, log):
        self.name, self.log = name, log

    async def __aenter__(self):
        self.log.append(f"open {self.name}")
        await call_tool("open", self.name)
        return self

    async def __aexit__(self, *exc):
        await call_tool("close", self.name)
        self.log.append(f"close {self.name}")
        book(f"closed {self.name}")


async def work_items(n):
    for i in range(n):
        yield await call_tool("next", i)


class Agent:
    def __init__(self):
        self.log = []
        self.total = 0

    async def handle(self, item, notes):
        token = current.set(item)
        try:
            result = await call_tool("act", item)
            self.total += price(item.split("(")[0])
            notes.write(f"{current.get()} -> {result}\n")
            print("handled", result)
        finally:
            current.reset(token)


async def main():
    agent = Agent()
    async with contextlib.AsyncExitStack() as stack:
        db = await stack.enter_async_context(Session("db", agent.log))
        web = await stack.enter_async_context(Session("web", agent.log))
        with open("notes.log", "a") as notes:
            async for item in work_items(5):
                await agent.handle(item, notes)
                await agent.handle(item, notes)
        print("sessions", db.name, web.name)
    print("log", agent.log)
    print("total", agent.total, price.cache_info())
    print("current", current.get())
    return 0


if __name__ == "__main__":
    asyncio.run(main())
