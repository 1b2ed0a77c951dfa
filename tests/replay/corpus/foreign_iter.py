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


class Feed:
    """A stand-in for a library's async iterator: its steps are foreign awaits."""

    def __init__(self, items):
        self.items = list(items)

    def __aiter__(self):
        return self

    def __anext__(self):
        if not self.items:
            raise StopAsyncIteration
        return asyncio.sleep(0, self.items.pop(0))


async def main():
    seen = []
    async for item in Feed("abcd"):
        seen.append(item)
        book(f"seen {item}")
    print("seen", seen)


await main()
