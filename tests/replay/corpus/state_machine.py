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


from dataclasses import dataclass, field


@dataclass
class Order:
    id: int
    state: str = "new"
    history: list = field(default_factory=list)


@resumable.step
async def transition(order_id, state):
    await asyncio.sleep(0)
    book(f"order {order_id} -> {state}")
    return {"id": order_id, "state": state}


async def advance(order):
    for state in ("paid", "packed", "shipped"):
        reply = await transition(order.id, state)
        order.state = reply["state"]
        order.history.append(order.state)


orders = [Order(i) for i in range(3)]
for order in orders:
    await advance(order)
    print(order)
