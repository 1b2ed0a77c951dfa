# An agent written the natural way: one `await main()`, a method appending to a log.
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


async def tool(n):
    await asyncio.sleep(0)
    return n * 3


class Agent:
    def __init__(self, name):
        self.name = name
        self.seen = []

    async def turn(self, n):
        with open("notes.log", "a") as notes:
            notes.write(f"{self.name}: turn {n} starts\n")
            result = await tool(n)
            notes.write(f"{self.name}: tool said {result}\n")
            if n % 3 == 0:
                book(f"report {n}")
                notes.write(f"{self.name}: reported {n}\n")
            await asyncio.sleep(0)
            notes.write(f"{self.name}: turn {n} ends\n")
        self.seen.append(result)


async def main():
    agent = Agent("scout")
    for n in range(8):
        await agent.turn(n)
    with open("notes.log", "a") as notes:
        notes.write(f"total {sum(agent.seen)}\n")
    return len(agent.seen)


turns = await main()
print("turns", turns)
with open("notes.log") as notes:
    print(notes.read(), end="")
