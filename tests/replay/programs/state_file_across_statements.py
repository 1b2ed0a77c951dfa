# A file opened for writing in one statement and written in later ones, with awaits between.
import asyncio

with open("input.txt", "w") as seed:
    seed.write("first line\nsecond line\nthird line\n")

ledger = open("ledger.txt", "w")
ledger.write("start\n")
for i in range(3):
    ledger.write(f"line {i}\n")
    await asyncio.sleep(0)
    print("wrote", i)

blob = open("data.bin", "ab")
blob.write(bytes([1, 2, 3]))
await asyncio.sleep(0)
source = open("input.txt")
print(source.readline().strip())
await asyncio.sleep(0)
print(source.readline().strip())
appended = open("appended.txt", "a")
for word in ("alpha", "beta"):
    appended.write(word + "\n")
    await asyncio.sleep(0)
ledger.write("end\n")
for f in (ledger, blob, source, appended):
    f.close()
print(open("ledger.txt").read(), end="")
print(open("data.bin", "rb").read())
print(open("appended.txt").read(), end="")
