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
async def tool(name, arg):
    await asyncio.sleep(0)
    book(f"tool {name} {arg}")
    return f"{name}({arg})"


class Agent:
    def __init__(self, goal):
        self.goal = goal
        self.step = 0
        self.memory = []

    async def think(self):
        await asyncio.sleep(0)
        return ["search", "read", "write"][self.step % 3]

    async def act(self):
        action = await self.think()
        result = await tool(action, self.step)
        self.memory.append(result)
        print(f"step {self.step}: {action} -> {result}")
        self.step += 1

    async def run(self, steps):
        while self.step < steps:
            await self.act()
        return self.memory


agent = Agent("report")
memory = await agent.run(5)
print("memory", memory, "steps", agent.step)
