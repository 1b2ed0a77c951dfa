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


import contextlib

events = []


class Session:
    def __init__(self, name):
        self.name = name

    async def __aenter__(self):
        await asyncio.sleep(0)
        book(f"open {self.name}")
        events.append(f"enter {self.name}")
        return self

    async def __aexit__(self, *exc):
        await asyncio.sleep(0)
        book(f"close {self.name}")
        events.append(f"exit {self.name}")
        return False

    async def query(self, q):
        await asyncio.sleep(0)
        events.append(f"query {q}")
        return q.upper()


@contextlib.asynccontextmanager
async def transaction(log):
    log.append("begin")
    await asyncio.sleep(0)
    try:
        yield log
    finally:
        book("commit")
        log.append("commit")


async def main():
    log = []
    async with Session("db") as s, transaction(log):
        print(await s.query("select"))
        async with Session("cache") as c:
            print(await c.query("get"))
    print("events", events)
    print("log", log)


await main()
