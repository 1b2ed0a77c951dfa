# A file opened in one statement and written in later ones, in append and write mode.
import asyncio

journal = open("journal.txt", "a")
journal.write("opened\n")
state = open("state.txt", "w")


async def note(i):
    journal.write(f"note {i} begins\n")
    await asyncio.sleep(0)
    journal.write(f"note {i} ends\n")
    state.write(f"{i}\n")
    return i


for i in range(4):
    await note(i)
    print("noted", i)

total = 0
for i in range(4, 7):
    total += await note(i)
journal.write(f"total {total}\n")
journal.close()
state.close()
print(open("journal.txt").read(), end="")
print(open("state.txt").read().split())
