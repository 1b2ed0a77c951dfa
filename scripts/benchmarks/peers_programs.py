"""The programs `bench.py peers` runs, one per system, as the text of a file of their own.

Every program does the same job: ``N`` steps, each adding one to a counter that lives beside
a large value (``BIG`` characters) that never changes: base64 of SHA-256 digests, the same
in every program, so that no store can compress it below 3/4 of its size. A step's effect is one line appended
to the effects file (``EFFECTS``): the step's counter and the wall clock, so the benchmark
can count effects made twice and time the steps the same way for every system. Each program
prints the final counter as its last line of output.

Settings come from the environment: ``PEERS_STEPS``, ``PEERS_BIG``, ``PEERS_EFFECTS``,
``PEERS_STORE`` (a folder, a SQLite file or a PostgreSQL URL) and ``PEERS_MODE`` (``start``
or ``resume``; the resumable program does not read it: ``resumable resume`` resumes it).
"""

from __future__ import annotations

_BIG = """

def make_big(size):
    digests = (hashlib.sha256(str(i).encode()).digest() for i in range(size // 32 + 1))
    return base64.b64encode(b"".join(digests)).decode()[:size]

"""

RESUMABLE = '''\
"""Plain async Python: a step is a tool call with an effect, so it is a @resumable.step."""
import asyncio
import base64
import hashlib
import os
import time

import resumable

STEPS = int(os.environ["PEERS_STEPS"])
EFFECTS = os.environ["PEERS_EFFECTS"]
#BIG
big = make_big(int(os.environ["PEERS_BIG"]))


@resumable.step
async def step(counter):
    with open(EFFECTS, "a") as effects:
        effects.write(f"{counter} {time.time()}\\n")
    return counter + 1


async def main():
    counter = 0
    for _ in range(STEPS):
        counter = await step(counter)
    print(counter)


asyncio.run(main())
'''

LANGGRAPH = '''\
"""A LangGraph graph of one node that loops until the counter reaches the steps."""
import base64
import contextlib
import hashlib
import os
import sqlite3
import time
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

STEPS = int(os.environ["PEERS_STEPS"])
EFFECTS = os.environ["PEERS_EFFECTS"]
STORE = os.environ["PEERS_STORE"]
#BIG

class State(TypedDict):
    counter: int
    big: str


def step(state):
    with open(EFFECTS, "a") as effects:
        effects.write(f"{state['counter']} {time.time()}\\n")
    return {"counter": state["counter"] + 1}


def more(state):
    return "step" if state["counter"] < STEPS else END


def saver(stack):
    if STORE.startswith("postgresql://"):
        from langgraph.checkpoint.postgres import PostgresSaver

        saver = stack.enter_context(PostgresSaver.from_conn_string(STORE))
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(sqlite3.connect(STORE, check_same_thread=False))
    saver.setup()
    return saver


builder = StateGraph(State)
builder.add_node("step", step)
builder.add_edge(START, "step")
builder.add_conditional_edges("step", more)
with contextlib.ExitStack() as stack:
    graph = builder.compile(checkpointer=saver(stack))
    config = {"configurable": {"thread_id": "peers"}, "recursion_limit": STEPS + 10}
    if os.environ["PEERS_MODE"] == "start":
        state = {"counter": 0, "big": make_big(int(os.environ["PEERS_BIG"]))}
    else:
        state = None  # go on from the thread's last checkpoint
    final = graph.invoke(state, config, durability="sync")
    print(final["counter"])
'''

DBOS = '''\
"""A DBOS workflow of N steps; a resume is DBOS's recovery of the pending workflow at launch."""
import base64
import hashlib
import os
import time

from dbos import DBOS, SetWorkflowID

STEPS = int(os.environ["PEERS_STEPS"])
EFFECTS = os.environ["PEERS_EFFECTS"]
STORE = os.environ["PEERS_STORE"]
if not STORE.startswith("postgresql://"):
    STORE = "sqlite:///" + STORE
#BIG

DBOS(config={"name": "peers", "system_database_url": STORE, "run_admin_server": False})


@DBOS.step()
def step(counter):
    with open(EFFECTS, "a") as effects:
        effects.write(f"{counter} {time.time()}\\n")
    return counter + 1


@DBOS.workflow()
def work(big, steps):
    counter = 0
    for _ in range(steps):
        counter = step(counter)
    return counter


DBOS.launch()  # recovers this executor's pending workflows
if os.environ["PEERS_MODE"] == "start":
    with SetWorkflowID("peers"):
        handle = DBOS.start_workflow(work, make_big(int(os.environ["PEERS_BIG"])), STEPS)
else:
    handle = DBOS.retrieve_workflow("peers")
print(handle.get_result())
DBOS.destroy()
'''

PROGRAMS = {
    name: program.replace("#BIG\n", _BIG)
    for name, program in (("resumable", RESUMABLE), ("langgraph", LANGGRAPH), ("dbos", DBOS))
}
