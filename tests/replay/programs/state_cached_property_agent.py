# An agent class whose body holds a lock (functools.cached_property on 3.11), kept across awaits.
import asyncio
import functools
import threading


class Agent:
    lock = threading.RLock()

    def __init__(self, name):
        self.name = name
        self.calls = 0

    @functools.cached_property
    def tools(self):
        self.calls += 1
        return ["search", "write"]

    async def act(self, step):
        with self.lock:
            await asyncio.sleep(0)
            return f"{self.name} step {step} with {self.tools} (computed {self.calls}x)"


agent = Agent("scout")
print(await agent.act(0))
for step in range(1, 3):
    print(await agent.act(step))
print(agent.tools is agent.tools, agent.calls)
