# Files created with "x" and rewritten with "w" inside one statement, between awaits.
import asyncio


async def main():
    for n in range(3):
        await asyncio.sleep(0)
        with open(f"report{n}.txt", "x") as report:
            report.write(f"report {n}\n")
            await asyncio.sleep(0)
            report.write("done\n")
        with open("latest.txt", "w") as latest:
            latest.write(f"latest {n}\n")
            await asyncio.sleep(0)
            latest.write("of 3\n")
        print("reported", n)
    return n + 1


print("reports", await main())
