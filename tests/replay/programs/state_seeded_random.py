# A seeded global random generator (and a Random of the program's own) across statements.
import asyncio
import random

random.seed(42)
rng = random.Random(7)
print("first", random.random(), rng.randint(0, 1000))
await asyncio.sleep(0)
print("second", random.randint(0, 10**6), rng.random())
deck = list(range(10))
random.shuffle(deck)
await asyncio.sleep(0)
print("deck", deck, random.choice("abcdefgh"))
await asyncio.sleep(0)
print("third", random.sample(range(100), 3), rng.choice("xyz"))
