"""A program that embeds resumable and whose code keeps a generator across its turns.

``python generators_program.py STORE LEDGER`` prints each turn's outcome; the generator's
effects are calls of the tool ``book``, each one a line in LEDGER.
"""

from __future__ import annotations

import sys
from pathlib import Path

import resumable

STORE, LEDGER = sys.argv[1], Path(sys.argv[2])


def book(n: int) -> int:
    with LEDGER.open("a", encoding="utf-8") as file:
        file.write(f"book {n}\n")
    return n * 10


TURNS = [
    "import asyncio\nbooked = []\n\n"
    "def plan(n):\n"
    "    for i in range(n):\n"
    "        booked.append(book(i))\n"
    "        yield i\n\n"
    "steps = plan(5)\n"
    "next(steps)",
    "await asyncio.sleep(0)\nsecond = next(steps)\nprint(booked)\nsecond",
    "rest = list(steps)\nprint(booked)\n(second, rest)",
]

with resumable.open_run("plan-1", store=STORE, program="plan") as run:
    if run.finished:  # killed right after its last record: only report it
        print(run.status)
        sys.exit(0)
    code = run.executor(tools={"book": book})
    for text in TURNS:
        outcome = code.run_code(text)
        error = outcome.error.line_for_llm if outcome.error else None
        print(repr(outcome.value), repr(outcome.output), error)
    run.complete("done")
    print(run.status)
