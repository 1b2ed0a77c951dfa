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


failures = {"count": 0}


@resumable.step
async def unreliable(n, attempt):
    await asyncio.sleep(0)
    if attempt in (1, 3):
        raise TimeoutError(f"timeout #{attempt}")
    book(f"unreliable {n}")
    return n + 1


async def with_retries(n):
    for attempt in range(5):
        try:
            failures["count"] += 1
            return await unreliable(n, failures["count"])
        except TimeoutError as exc:
            print("retrying after", exc)
    raise RuntimeError("no luck")


values = [await with_retries(n) for n in range(3)]
print("values", values, "failures", failures)
