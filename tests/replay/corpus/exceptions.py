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


class Declined(Exception):
    pass


@resumable.step
async def charge(amount):
    await asyncio.sleep(0)
    if amount > 50:
        raise Declined(f"{amount} is over the limit")
    book(f"charge {amount}")
    return amount


async def pay(amounts):
    paid = []
    for amount in amounts:
        try:
            paid.append(await charge(amount))
        except Declined as exc:
            print("declined:", exc)
            paid.append(await charge(amount // 2))
        finally:
            print("after", amount)
    return paid


try:
    print("paid", await pay([10, 80, 30]))
    await charge(99)
except Declined as exc:
    print("final decline", exc)
