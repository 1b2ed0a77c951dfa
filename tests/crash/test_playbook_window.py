"""A task (or generator) a playbook keeps past its statement survives a kill at any record.

The LLM's code starts a background task in one response and reads what it did in the
next (while the reply streamed, the task went on), or while a nested playbook runs. A
resume restores the namespace from before the task's statement and replays every
statement since, across responses and frames, answering the task's awaits from the log
in the order they arrived: the resumed run says what the uninterrupted one said. The suite
kills each run after 10 records spread over it; ``python scripts/playbook_sweep.py`` after
every record.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.playbooks_runtime import kill_at_records, write_program

# Chunks of a reply arrive 5 ms apart, so the task runs on while the next reply streams.
STREAMING = "[llm]\nchunk_delay_seconds = 0.005\n"
# Replies arrive at once: the task moves only when program code awaits, so the
# interleaving is the program's, the same in every run.
AT_ONCE = ""

TICKER = """\
import asyncio
agent["ticks"] = []
async def ticker(n):
    for i in range(n):
        await asyncio.sleep(0)
        agent["ticks"].append(i)
        print(f"tick {i}")
    return len(agent["ticks"])
"""

ACROSS_TURNS = (
    """\
# Ticker
Runs a ticker across two replies.

## Main
### Steps
- Start the ticker
- Report what it did
""",
    STREAMING,
    {
        "Main": [
            'await Step("Main:01:ACT")\n'
            + TICKER
            + "t = asyncio.create_task(ticker(6))\n"
            + 'await Say("user", f"started with {len(agent[\'ticks\'])} ticks")\n',
            "seen = len(agent['ticks'])\n"
            'await Step("Main:02:ACT")\n'
            "n = await t\n"
            'await Say("user", f"saw {seen} before the reply, {n} in all")\n'
            "await End()\n",
        ]
    },
    [
        *[f"tick {i}" for i in range(6)],  # while the rest of the first reply streamed
        "Ticker → user: started with 6 ticks",
        "Ticker → user: saw 6 before the reply, 6 in all",
    ],
)

WHILE_NESTED = (
    """\
# Ticker
Runs a ticker while a nested playbook works.

## Main
### Steps
- Start the ticker and ask Helper
- Report

## Helper
### Steps
- Count the ticks and return them
""",
    AT_ONCE,
    {
        "Main": [
            'await Step("Main:01:ACT")\n'
            + TICKER
            + "t = asyncio.create_task(ticker(8))\n"
            + "got = await Helper()\n"
            + "n = await t\n"
            + 'await Say("user", f"helper saw {got}, {n} in all")\n'
            + "await End()\n",
        ],
        "Helper": [
            "import asyncio\n"
            "await asyncio.sleep(0)\n"
            'await Step("Helper:01:ACT")\n'
            'await Say("user", f"helper sees {len(agent[\'ticks\'])}")\n'
            "await asyncio.sleep(0)\n"
            "await asyncio.sleep(0)\n"
            "await Return(len(agent['ticks']))\n",
        ],
    },
    [
        "Ticker → user: helper sees 0",
        *[f"tick {i}" for i in range(8)],
        "Ticker → user: helper saw 2, 8 in all",
    ],
)

GENERATOR_ACROSS_TURNS = (
    """\
# Ticker
Works through a plan kept as a generator across two replies.

## Main
### Steps
- Make the plan and take its first item
- Take the rest
""",
    AT_ONCE,
    {
        "Main": [
            'await Step("Main:01:ACT")\n'
            "import asyncio\n"
            "def plan(n):\n"
            "    for i in range(n):\n"
            '        agent["planned"] = i\n'
            '        yield f"item {i}"\n'
            "todo = plan(4)\n"
            "await asyncio.sleep(0)\n"
            'await Say("user", f"first {next(todo)}")\n',
            'await Step("Main:02:ACT")\n'
            'await Say("user", f"then {next(todo)}, planned {agent[\'planned\']}")\n'
            "rest = list(todo)\n"
            'await Say("user", f"rest {rest}, planned {agent[\'planned\']}")\n'
            "await End()\n",
        ]
    },
    [
        "Ticker → user: first item 0",
        "Ticker → user: then item 1, planned 1",
        "Ticker → user: rest ['item 2', 'item 3'], planned 3",
    ],
)


def _sweep(
    tmp_path: Path, program: str, settings: str, responses: dict[str, list[str]]
) -> list[str]:
    write_program(tmp_path, "ticker", program, responses)
    (tmp_path / "playbooks.toml").write_text(settings)
    done, wrong = kill_at_records(tmp_path, "ticker.pb")
    assert not wrong, f"killed after these records the run said something else: {wrong}"
    return done.stdout.splitlines()


@pytest.mark.parametrize(
    ("program", "settings", "responses", "expected"),
    [
        pytest.param(*ACROSS_TURNS, id="across-replies"),
        pytest.param(*WHILE_NESTED, id="while-a-nested-playbook-runs"),
        pytest.param(*GENERATOR_ACROSS_TURNS, id="a-generator-across-replies"),
    ],
)
def test_a_task_kept_past_its_statement_resumes_exactly_after_a_kill_at_any_record(
    tmp_path: Path,
    program: str,
    settings: str,
    responses: dict[str, list[str]],
    expected: list[str] | None,
) -> None:
    said = _sweep(tmp_path, program, settings, responses)
    if expected is not None:
        assert said == expected
