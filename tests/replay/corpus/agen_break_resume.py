# An async for broken out of, then the same async generator finished in a later statement.
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


@resumable.step
async def fetch(n):
    await asyncio.sleep(0)
    return f"row {n}"


class Rows:
    def __init__(self, count):
        self.log = []
        self.stream = self._rows(count)

    async def _rows(self, count):
        try:
            for n in range(count):
                yield await fetch(n)
        finally:
            self.log.append("closed")
            book("rows closed")
            print("generator cleanup")


rows = Rows(5)
async for row in rows.stream:
    print("got", row)
    if row.endswith("2"):
        break
book("after loop")
print("log so far", rows.log)
left = [row async for row in rows.stream]
print("left", left, rows.log)
