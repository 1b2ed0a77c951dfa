# A library's async generator (compiled from another file: foreign) read over several
# statements with `async for ... break`: its steps come from the log on replay, and the
# stream is moved past them before its first live step.
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


SDK = """
import asyncio

async def stream(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield f"chunk {i}"
"""
sdk = {}
exec(compile(SDK, "sdk_stream.py", "exec"), sdk)

chunks = sdk["stream"](7)
async for chunk in chunks:
    print("first", chunk)
    break
book("first read")
async for chunk in chunks:
    print("next", chunk)
    if chunk.endswith("3"):
        break
book("middle")
rest = [chunk async for chunk in chunks]
book(f"rest {len(rest)}")
print("rest", rest)
