"""The playbook runtime's guarantees as a user sees them: ``resumable`` in real processes.

Helpers shared by these tests: write a small program with its scripted responses,
run the command line, read ``show --json``.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import tomli_w
from tests.crash.harness import Result, resumable
from tests.replay.state_harness import spread

SCENARIO_TRANSCRIPT = [
    "DataAgent → user: Hello!",
    "DataAgent → user: SomePlaybook thinks the answer is 42",
    "DataAgent → user: Result: 42",
    "DataAgent → user: Got data: {'items': [3, 5, 8], 'source': 'inventory'}",
    "DataAgent → user: Processed: 32",
    "DataAgent → user: Done: 42, 32",
]
"""What examples/scenario says: 6 * 7 from SomePlaybook, sum([3, 5, 8]) * 2 from ProcessData."""


def write_program(folder: Path, name: str, source: str, responses: dict[str, list[str]]) -> Path:
    """``name.pb`` and the ``name.responses.toml`` the scripted provider answers from."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / f"{name}.pb"
    program.write_text(source, encoding="utf-8")
    table = {
        playbook: [{"response": r} for r in answers] for playbook, answers in responses.items()
    }
    (folder / f"{name}.responses.toml").write_text(tomli_w.dumps(table), encoding="utf-8")
    return program


def cli(
    args: list[str], cwd: Path, *, env: dict[str, str] | None = None, timeout: float = 60
) -> Result:
    """``resumable ARGS`` in a fresh process (no RESUMABLE_* from outside, sync = flush)."""
    return resumable(args, cwd, env=env, timeout=timeout)


def show(cwd: Path, run_id: str, *, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``resumable show RUN_ID --json``, parsed."""
    shown = cli(["show", run_id, "--json"], cwd, env=env)
    assert shown.code == 0, shown.stderr
    data: dict[str, Any] = json.loads(shown.stdout)
    return data


def errors(result: Result) -> list[str]:
    """The lines of stderr that report an error (the runtime's other lines say what it does)."""
    assert "Traceback" not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("resumable: error:")]


def prompts(view: dict[str, Any], frame_id: str = "main") -> list[str]:
    """The last user message of every LLM call a frame made, in order."""
    (frame,) = [f for f in view["frames"] if f["frame_id"] == frame_id]
    return [call["prompt"][-1][1] for call in frame["llm_calls"]]


CRASH_POINTS = "RESUMABLE_TEST_CRASH_POINTS"
"""How many records a crash sweep kills a run after: ``all`` for every one of them."""


def kill_at_records(cwd: Path, program: str, points: int = 10) -> tuple[Result, list[Any]]:
    """Run ``program`` once whole, then killed after each of ``points`` records spread over
    the run (first and last included; every record with ``RESUMABLE_TEST_CRASH_POINTS=all``,
    as ``scripts/playbook_sweep.py`` runs them) and resumed each time.

    Returns the whole run and what went otherwise: (record, what the two processes
    printed, the end of the resume's stderr) for each kill whose transcript differs.
    """
    done = cli(["run", program, "--run-id", "ref"], cwd)
    assert done.code == 0, done.stderr
    runs = json.loads(cli(["runs", "--json"], cwd).stdout)
    (records,) = [row["records"] for row in runs if row["run_id"] == "ref"]
    wanted = os.environ.get(CRASH_POINTS, str(points))
    count = records if wanted == "all" else int(wanted)
    wrong: list[Any] = []
    for point in spread(records, count):  # the last record, the final status, is left out
        run_id = f"k{point}"
        env = {"RESUMABLE_CRASH_AFTER": str(point)}
        crashed = cli(["run", program, "--run-id", run_id], cwd, env=env)
        assert crashed.code == -signal.SIGKILL, (point, crashed.stderr)
        resumed = cli(["resume", run_id], cwd)
        said = crashed.stdout + resumed.stdout
        if resumed.code != 0 or said != done.stdout:
            wrong.append((point, said.splitlines(), resumed.stderr.strip()[-300:]))
    return done, wrong
