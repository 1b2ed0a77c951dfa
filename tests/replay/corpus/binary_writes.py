# Binary appends, writelines and print(file=...) inside one statement with awaits.
import asyncio
from pathlib import Path


async def record(rounds):
    for n in range(rounds):
        with open("frames.bin", "ab") as frames:
            frames.write(bytes([n, n + 1]))
            await asyncio.sleep(0)
            frames.write(bytearray(b"|"))
            frames.writelines([b"x" * n, b";"])
        with Path("lines.txt").open("a") as lines:
            print("round", n, file=lines)
            await asyncio.sleep(0)
            lines.writelines([f"a{n}\n", f"b{n}\n"])
            print("round", n, "done", file=lines, flush=True)
    return rounds


print("rounds", await record(5))
print(open("frames.bin", "rb").read())
print(open("lines.txt").read(), end="")
