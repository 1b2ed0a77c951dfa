# An agent object that keeps its work queue as a generator in an attribute.
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
async def tool(task):
    await asyncio.sleep(0)
    return f"{task}: ok"


class Agent:
    def __init__(self, tasks):
        self.results = []
        self.queue = self._plan(tasks)

    def _plan(self, tasks):
        for n, task in enumerate(tasks):
            print("planning", n, task)
            yield task

    async def step(self):
        task = next(self.queue, None)
        if task is None:
            return False
        self.results.append(await tool(task))
        book(task)
        return True


agent = Agent(["search", "read", "write"])
await agent.step()
print("results", agent.results)
await agent.step()
agents = [agent]
while await agents[0].step():
    print("more", len(agent.results))
print("final", agent.results)
