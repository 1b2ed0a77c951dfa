"""A shop assistant CodeAgent with a scripted offline model: no network, no API key.

Two tools write to a ledger file (``SHOP_LEDGER``, default ``ledger.txt``); the model's
five code actions keep state in variables, define a helper and a class used later,
loop over tool calls with prints, raise once (and fix it in the next action), and end
with a final answer computed from that state.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from smolagents import CodeAgent, LocalPythonExecutor, tool
from smolagents.models import ChatMessage, MessageRole, Model

PRICES = {"apple": 3, "pear": 5, "fig": 7}


def _ledger(line: str) -> None:
    with Path(os.environ.get("SHOP_LEDGER", "ledger.txt")).open("a", encoding="utf-8") as file:
        file.write(line + "\n")


@tool
def lookup_price(item: str) -> int:
    """Look up the unit price of an item (the lookup is logged in the ledger).

    Args:
        item: the item's name
    """
    _ledger(f"lookup {item}")
    return PRICES[item]


@tool
def record_sale(item: str, amount: int) -> str:
    """Record a sale in the ledger and return its receipt.

    Args:
        item: the item sold
        amount: what the customer paid
    """
    _ledger(f"sale {item} {amount}")
    return f"receipt: {item} for {amount}"


ACTIONS = [
    """def with_tax(amount):
    return round(amount * 1.2)

class Basket:
    def __init__(self):
        self.lines = []

    def add(self, item, qty, price):
        self.lines.append((item, qty, price))

    def total(self):
        return sum(qty * price for _, qty, price in self.lines)

basket = Basket()
prices = {}
for item in ["apple", "pear", "fig"]:
    prices[item] = lookup_price(item)
    print(f"{item} costs {prices[item]}")""",
    """for item, qty in [("apple", 3), ("pear", 2)]:
    basket.add(item, qty, prices[item])
    receipt = record_sale(item=item, amount=with_tax(qty * prices[item]))
    print(receipt)
subtotal = basket.total()
print("subtotal", subtotal)""",
    """basket.add("fig", 1, prices["figs"])""",
    """basket.add("fig", 1, prices["fig"])
print(record_sale(item="fig", amount=with_tax(prices["fig"])))
total = with_tax(basket.total())""",
    """final_answer(f"{len(basket.lines)} lines, total {total}, subtotal was {subtotal}")""",
]


class ScriptedModel(Model):  # type: ignore[misc]
    """Answers the n-th call with the n-th action, n counted from the conversation itself.

    Each call is appended to ``SHOP_CALLS`` (when set) so tests can count them.
    """

    def __init__(self) -> None:
        super().__init__(model_id="scripted")

    def generate(
        self, messages: list[Any], stop_sequences: Any = None, **kwargs: Any
    ) -> ChatMessage:
        turn = sum(1 for m in messages if _role(m) == MessageRole.ASSISTANT)
        calls = os.environ.get("SHOP_CALLS")
        if calls:
            with Path(calls).open("a", encoding="utf-8") as file:
                file.write(f"{turn}\n")
        code = ACTIONS[min(turn, len(ACTIONS) - 1)]
        return ChatMessage(
            role=MessageRole.ASSISTANT,
            content=f"Thought: step {turn + 1}.\n<code>\n{code}\n</code>",
        )


def _role(message: Any) -> Any:
    return message["role"] if isinstance(message, dict) else message.role


TASK = "Sell 3 apples, 2 pears and a fig; tell me the total with tax."


def build_agent(*, durable: bool = True) -> CodeAgent:
    """The same agent every time: with resumable's executor, or smolagents' own."""
    if durable:
        from resumable.integrations.smolagents import DurablePythonExecutor

        executor: Any = DurablePythonExecutor()
    else:
        executor = LocalPythonExecutor([])
    return CodeAgent(
        tools=[lookup_price, record_sale],
        model=ScriptedModel(),
        executor=executor,
        max_steps=8,
        verbosity_level=-1,
    )
