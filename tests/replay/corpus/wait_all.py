# ledger order: any (concurrent tasks book in whatever order they run)
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


@resumable.step
async def ping(host):
    await asyncio.sleep(0)
    book(f"ping {host}")
    return host.upper()


async def check(host, status):
    status[host] = await ping(host)
    return status[host]


async def main():
    status = {}
    tasks = [asyncio.create_task(check(h, status)) for h in ("alpha", "beta", "gamma")]
    done, pending = await asyncio.wait(tasks)
    print(sorted(t.result() for t in done), len(pending))
    print("status", status)


await main()
