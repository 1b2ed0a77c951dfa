"""Agent-wide state is exact across a kill in a playbook called mid-statement.

The statement of Main changes ``agent`` and then calls Inner, which changes it too. A
kill at any record, inside Inner or after it returned, replays that statement of Main
from its start: its change must be applied once, and Inner's completed statements keep
theirs, so the resumed run says what the uninterrupted one said. The suite kills it after
10 records spread over the run; ``python scripts/playbook_sweep.py`` after every record.
"""

from __future__ import annotations

from pathlib import Path

from tests.playbooks_runtime import kill_at_records, write_program

PROGRAM = """\
# Counter
Counts in one statement that calls another playbook.

## Main
### Steps
- Start at zero
- Count one and let Inner count ten, then report

## Inner
### Steps
- Count ten more and return the count
"""

RESPONSES = {
    "Main": [
        'await Step("Main:01:ACT")\nagent["n"] = 0\nagent["log"] = []\n',
        'await Step("Main:02:ACT")\n'
        "if True:\n"
        '    agent["n"] += 1\n'
        '    agent["log"].append("main")\n'
        "    got = await Inner()\n"
        '    agent["n"] += 100\n'
        "await Say(\"user\", f\"n={agent['n']} got={got} log={agent['log']}\")\n"
        "await End()\n",
    ],
    "Inner": [
        'await Step("Inner:01:RET")\n'
        'agent["n"] += 10\n'
        'agent["log"].append("inner")\n'
        'await Say("user", f"inner sees {agent[\'n\']}")\n'
        'await Return(agent["n"])\n'
    ],
}

EXPECTED = [
    "Counter → user: inner sees 11",
    "Counter → user: n=111 got=11 log=['main', 'inner']",
]


def test_a_statement_that_changes_agent_then_calls_a_killed_playbook_changes_it_once(
    tmp_path: Path,
) -> None:
    write_program(tmp_path, "counter", PROGRAM, RESPONSES)
    done, wrong = kill_at_records(tmp_path, "counter.pb")
    assert done.stdout.splitlines() == EXPECTED
    assert not wrong, f"killed after these records the run said something else: {wrong}"
