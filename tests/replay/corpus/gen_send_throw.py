# A generator-based state machine driven with send() and throw() across statements.
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
async def charge(amount):
    await asyncio.sleep(0)
    return amount * 100


def account():
    balance = 0
    while True:
        try:
            amount = yield balance
        except ValueError as exc:
            print("rejected", exc)
            book(f"rejected {exc}")
            continue
        balance += amount
        book(f"deposit {amount}")


acct = account()
next(acct)
cents = await charge(3)
print("balance", acct.send(cents))
acct.throw(ValueError("negative"))
cents = await charge(5)
print("balance", acct.send(cents))
acct.close()
print("closed", acct.gi_frame is None)
