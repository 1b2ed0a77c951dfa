"""A program that embeds resumable: three turns of code, two tools, an LLM; run by the tests.

``python program.py STORE LEDGER`` prints each turn's outcome and the run's result.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import resumable

STORE, LEDGER = sys.argv[1], Path(sys.argv[2])


def note(line: str) -> None:
    with LEDGER.open("a", encoding="utf-8") as file:
        file.write(line + "\n")


def pay(who: str, cents: int) -> str:
    note(f"pay {who} {cents}")
    return f"paid {who}"


async def quote(item: str) -> int:
    await asyncio.sleep(0)
    note(f"quote {item}")
    return len(item) * 10


def refuse(item: str) -> None:
    note(f"refuse {item}")
    raise ValueError(f"{item} is out of stock")


def writer(prompt: str) -> str:
    note(f"llm {prompt}")
    return f"dear customer, {prompt}"


TURNS = [
    "class Order:\n    def __init__(self):\n        self.items = []\n\n"
    "order = Order()\nfor item in ['tea', 'cake']:\n"
    "    order.items.append((item, await quote(item)))\n    print(item)\norder.items",
    "try:\n    refuse('jam')\nexcept ValueError as exc:\n    print('refused:', exc)\n"
    "receipts = [pay('ada', price) for _, price in order.items]\nreceipts",
    "refuse('milk')",
    "sum(price for _, price in order.items)",
]

with resumable.open_run("order-1", store=STORE, program="shop") as run:
    if run.finished:  # killed right after its last record: only report it
        print(run.status, repr(run.result))
        sys.exit(0)
    llm = run.llm(writer, name="writer")
    code = run.executor(tools={"pay": pay, "quote": quote, "refuse": refuse})
    for text in TURNS:
        outcome = code.run_code(text)
        error = outcome.error.line_for_llm if outcome.error else None
        print(repr(outcome.value), repr(outcome.output), error)
    letter = llm(f"your total is {outcome.value}")
    run.complete(letter)
    print(run.status, repr(run.result))
