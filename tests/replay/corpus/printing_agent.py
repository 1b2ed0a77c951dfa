# Prints around every await and step: the random-kill output test kills it anywhere.
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
def think(n):
    return f"thought {n}"


async def tool(n):
    await asyncio.sleep(0.001)
    return n * n


class Agent:
    def __init__(self):
        self.results = []

    async def turn(self, n):
        print("turn", n, "starts")
        result = await tool(n)
        print("tool said", result)
        print(think(n))
        if n % 4 == 0:
            book(f"milestone {n}")
            print("booked milestone", n)
        await asyncio.sleep(0)
        print("turn", n, "ends")
        self.results.append(result)


agent = Agent()
for n in range(12):
    await agent.turn(n)
    print("after turn", n)


async def main():
    for n in range(12, 24):
        await agent.turn(n)
        print("main after turn", n)
    return sum(agent.results)


total = await main()
print("total", total)
