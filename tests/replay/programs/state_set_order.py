# Set iteration order depends on the string hash seed: sets made after a resume iterate the same.
import asyncio

print(list({f"word{i}" for i in range(12)}))
await asyncio.sleep(0)
print(list({f"more{i}" for i in range(12)}))
await asyncio.sleep(0)
kept = [w for w in {f"kept{i}" for i in range(12)}]  # a list: its order is saved as it is
await asyncio.sleep(0)
print(list({f"last{i}" for i in range(12)}), kept)
