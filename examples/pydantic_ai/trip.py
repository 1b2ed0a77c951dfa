"""A trip-planner agent in code mode with a scripted offline model: no network, no key.

Two async tools write to a ledger file (``TRIP_LEDGER``, default ``ledger.txt``). The
model (a pydantic-ai ``FunctionModel``) makes four ``run_code`` calls: a dict of offers
carried across calls, a loop of tool calls with prints, a snippet that raises (and is
corrected by the next call), then a final text answer built from the state. The
``packer`` script instead uses a third-party library (msgpack) and a class - Python
that pydantic-ai-harness's Monty sandbox cannot run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

PRICES = {"Paris": 120, "Rome": 90, "Oslo": 150}

TRIP = [
    'plan = {}\noffer = await search_flights(city="Paris")\nplan["Paris"] = offer\nplan',
    'for city in ["Rome", "Oslo"]:\n'
    "    offer = await search_flights(city=city)\n"
    "    plan[city] = offer\n"
    '    print(city, offer["price"])\n'
    'sum([o["price"] for o in plan.values()])',
    'cheapest = sorted([(plan[c]["price"], c) for c in plan])[0][1]\n'
    'ticket = await book_flight(flight=plan[cheapest]["flight"], traveller="ada")\n'
    'ticket["seat"]',
    'summary = ticket["ticket"] + " to " + cheapest + " for " + str(plan[cheapest]["price"])\n'
    "summary",
]

PACKER = [
    "import msgpack\n\n"
    "class Bag:\n"
    "    def __init__(self):\n"
    "        self.offers = []\n\n"
    "    def packed(self):\n"
    "        return msgpack.packb(self.offers)\n\n"
    "bag = Bag()\n"
    'for city in ["Paris", "Oslo"]:\n'
    "    bag.offers.append(await search_flights(city=city))\n"
    "len(bag.packed())",
    'ticket = await book_flight(flight=msgpack.unpackb(bag.packed())[1]["flight"], '
    'traveller="bo")\n'
    'type(bag).__name__ + " " + ticket["ticket"]',
]

SCRIPTS = {"trip": TRIP, "packer": PACKER}


def _write(variable: str, default: str, line: str) -> None:
    with Path(os.environ.get(variable, default)).open("a", encoding="utf-8") as file:
        file.write(line + "\n")


async def search_flights(city: str) -> dict[str, Any]:
    """Find the cheapest flight to a city (the search is logged in the ledger)."""
    _write("TRIP_LEDGER", "ledger.txt", f"search {city}")
    return {"flight": f"F-{city.upper()}", "price": PRICES[city]}


async def book_flight(flight: str, traveller: str) -> dict[str, str]:
    """Book a flight for a traveller and return the ticket (logged in the ledger)."""
    _write("TRIP_LEDGER", "ledger.txt", f"book {flight} {traveller}")
    return {"ticket": f"T-{flight}-{traveller}", "flight": flight}


def scripted_model(script: list[str]) -> FunctionModel:
    """A model that sends the snippets of ``script`` one by one, then a final answer.

    It answers from the conversation alone (how many responses it holds), as a real
    model would, and logs each call in ``TRIP_CALLS`` (default ``calls.txt``).
    """

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        _write("TRIP_CALLS", "calls.txt", "call")
        turn = sum(isinstance(message, ModelResponse) for message in messages)
        if turn < len(script):
            call = ToolCallPart("run_code", {"code": script[turn]}, tool_call_id=f"call_{turn}")
            return ModelResponse(parts=[call])
        last = messages[-1].parts[-1]
        return ModelResponse(parts=[TextPart(f"booked: {getattr(last, 'content', '')}")])

    return FunctionModel(respond, model_name="scripted")


def trip_agent(capabilities: list[Any], script: str = "trip") -> Agent[None, str]:
    """The agent, named ``trip_planner``, with the given code-mode capabilities."""
    return Agent(
        scripted_model(SCRIPTS[script]),
        name="trip_planner",
        tools=[search_flights, book_flight],
        capabilities=capabilities,
    )
