"""A plain async script: each `book` step books an effect in a ledger.

The same file runs under `python examples/ledger.py` and, durably, under
`resumable exec examples/ledger.py`: there `asyncio.run(main())` runs `main()` on the
run's own loop, as `await main()`, so every await inside it is checkpointed. Kill it at
any point (RESUMABLE_CRASH_AFTER=N, or kill -9) and `resumable resume` finishes it with
the same output, each effect booked once (only the step that was in flight when the
process died may be booked twice, under the same key). Under plain `python` a step is
the plain function.
"""

import asyncio
import os

import resumable

LEDGER = os.environ.get("LEDGER", "ledger.txt")
DELAY = float(os.environ.get("BOOK_DELAY", "0"))


@resumable.step
async def book(what, amount):
    """An external effect: one line in the ledger, tagged with the await's idempotency key."""
    await asyncio.sleep(DELAY)
    with open(LEDGER, "a", encoding="utf-8") as ledger:
        ledger.write(f"{resumable.idempotency_key()} {what} {amount}\n")
    return amount


accounts = {"alice": 10, "bob": 5}
history = []
audit = history  # an alias: appending to one must show in the other after a resume
print("opening balances:", accounts)


async def pay_interest():
    for name in sorted(accounts):
        paid = await book(f"interest:{name}", accounts[name] // 5)
        accounts[name] += paid
        history.append((name, paid))
        print(f"interest for {name}: {paid}")


async def main():
    await pay_interest()

    if accounts["alice"] > accounts["bob"]:
        moved = await book("transfer:alice->bob", 3)
        accounts["alice"] -= moved
        accounts["bob"] += moved
        print("moved", moved, "from alice to bob")
    else:
        print("no transfer")

    try:
        await book("fee", 1)
        raise ValueError("card declined")
    except ValueError as exc:
        refund = await book("refund", 1)
        print(f"fee failed ({exc}), refunded {refund}")
    finally:
        print("fee step done")

    squares = [await book(f"square:{i}", i * i) for i in range(3)]
    print("squares:", squares)

    print("audit entries:", len(audit), "history entries:", len(history))
    results = await asyncio.gather(book("parallel:a", 1), book("parallel:b", 2))
    print("parallel:", results, "total:", sum(results) + sum(squares))
    print("closing balances:", accounts)


if __name__ == "__main__":
    asyncio.run(main())
