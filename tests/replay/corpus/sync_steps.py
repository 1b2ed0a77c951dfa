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


import itertools

counter = itertools.count(1)


@resumable.step
def reserve(seat, number):
    book(f"reserve {seat} #{number}")
    return {"seat": seat, "ticket": number, "code": f"{seat}-{number:03d}"}


@resumable.step
def lookup(seat):
    return seat.lower()


async def main():
    tickets = []
    for seat in ("A1", "B2", "C3"):
        tickets.append(reserve(lookup(seat), next(counter)))
        await asyncio.sleep(0)
        print("reserved", tickets[-1])
    return tickets


tickets = await main()
print("tickets", tickets, "next", next(counter))
