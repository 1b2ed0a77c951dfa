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
async def price(item):
    await asyncio.sleep(0)
    return len(item) * 3


cart = {}
for item in ("apple", "kiwi", "banana"):
    cart[item] = await price(item)
    print("priced", item, cart[item])
book(f"cart {sorted(cart.items())}")
total = sum(cart.values())
discount = await price("discount") if total > 20 else 0
book(f"total {total - discount}")
print("total", total, "discount", discount)
while total > 10:
    total -= await price("x")
print("left", total)
