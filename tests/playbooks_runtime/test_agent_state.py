"""Agent-wide state: one `agent` dict shared by every frame, checkpointed, the same after a resume."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.playbooks_runtime import cli, write_program

PROGRAM = """\
# Counter
Counts visits across playbooks.

## Main
### Steps
- Start counting
- Visit twice and report

## Visit
### Steps
- Count one more visit and return the count
"""

RESPONSES = {
    "Main": [
        'await Step("Main:01:ACT")\nagent["visits"] = 0\nagent["log"] = ["start"]\n',
        'await Step("Main:02:QUE")\n'
        "first = await Visit()\n"
        "second = await Visit()\n"
        'await Say("user", f"visits={agent[\'visits\']} first={first} second={second} '
        "log={agent['log']}\")\n"
        "await End()\n",
    ],
    "Visit": [
        'await Step("Visit:01:RET")\n'
        'agent["visits"] += 1\n'
        'agent["log"].append(f"visit {agent[\'visits\']}")\n'
        'await Say("user", f"visit number {agent[\'visits\']}")\n'
        'await Return(agent["visits"])\n'
    ],
}

EXPECTED = [
    "Counter → user: visit number 1",
    "Counter → user: visit number 2",
    "Counter → user: visits=2 first=1 second=2 log=['start', 'visit 1', 'visit 2']",
]


def test_agent_state_is_shared_by_frames(tmp_path: Path) -> None:
    write_program(tmp_path, "counter", PROGRAM, RESPONSES)
    done = cli(["run", "counter.pb", "--run-id", "ref"], tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == EXPECTED


def test_agent_state_survives_a_kill_across_the_run(tmp_path: Path) -> None:
    write_program(tmp_path, "counter", PROGRAM, RESPONSES)
    assert cli(["run", "counter.pb", "--run-id", "ref"], tmp_path).code == 0
    runs = json.loads(cli(["runs", "--json"], tmp_path).stdout)
    (records,) = [row["records"] for row in runs if row["run_id"] == "ref"]
    for point in range(1, records, 3):  # a spread sample: the full sweeps run on the scenario
        run_id = f"k{point}"
        crashed = cli(
            ["run", "counter.pb", "--run-id", run_id],
            tmp_path,
            env={"RESUMABLE_CRASH_AFTER": str(point)},
        )
        assert crashed.code == -signal.SIGKILL, crashed.stderr
        resumed = cli(["resume", run_id], tmp_path)
        assert resumed.code == 0, resumed.stderr
        said = (crashed.stdout + resumed.stdout).splitlines()
        assert said == EXPECTED, f"killed after record {point}"
