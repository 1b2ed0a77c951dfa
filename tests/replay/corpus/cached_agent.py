# An agent whose method is memoised with lru_cache, run with asyncio.run(main()) under the
# `if __name__` guard: a resume neither embeds a text twice nor changes cache_info().
import asyncio
import functools

import resumable


def key():
    try:
        return resumable.idempotency_key()
    except resumable.ResumableError:
        return "-"


@resumable.step
async def llm(prompt):
    await asyncio.sleep(0)
    return f"answer to {prompt}"


@resumable.step
def embed(text):
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"embed {text}\t{key()}\n")
    return sum(map(ord, text)) % 97


class Agent:
    def __init__(self, name):
        self.name = name
        self.memory = []

    @functools.lru_cache(maxsize=4)
    def score(self, text):
        return embed(text)

    async def think(self, question):
        answer = await llm(question)
        total = self.score(question) + self.score(answer)
        self.memory.append((question, total))
        print(self.name, question, "->", answer, total)
        return total


agent = Agent("ada")
other = Agent("bob")


async def main():
    for question in ["a", "b", "a", "c", "b", "d", "e", "a"]:
        await agent.think(question)
    await other.think("a")
    print("after main", Agent.score.cache_info())
    return sum(total for _, total in agent.memory)


if __name__ == "__main__":
    print("sum", asyncio.run(main()))

print("again", asyncio.run(agent.think("e")), Agent.score.cache_info())
Agent.score.cache_clear()
print("cleared", asyncio.run(agent.think("e")), Agent.score.cache_info(), len(agent.memory))
