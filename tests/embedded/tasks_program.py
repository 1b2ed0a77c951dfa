"""A program that embeds resumable and whose code keeps a task running across its turns.

``python tasks_program.py STORE LEDGER`` prints each turn's outcome; the task's effects are
calls of the tool ``book``, each one a line in LEDGER.
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
    "import asyncio\nticks = []\n\n"
    "async def ticker(n):\n"
    "    for i in range(n):\n"
    "        await asyncio.sleep(0)\n"
    "        ticks.append(book(i))\n"
    "    return len(ticks)\n\n"
    "async def start():\n"
    "    return asyncio.create_task(ticker(6))\n\n"
    "t = await start()\n"
    "await asyncio.sleep(0)\n"
    "len(ticks)",
    "await asyncio.sleep(0)\nseen = len(ticks)\nawait asyncio.sleep(0)\nprint(ticks)\nseen",
    "n = await t\nprint(ticks)\n(seen, n)",
]

with resumable.open_run("ticks-1", store=STORE, program="ticker") as run:
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
