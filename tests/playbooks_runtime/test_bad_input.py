"""Bad input: one clear line and exit code 2, or an observation when the LLM caused it.

Nothing is lost either way: a run stopped by a problem outside it resumes once the
cause is fixed.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.crash.harness import EXAMPLES
from tests.playbooks_runtime import SCENARIO_TRANSCRIPT, cli, errors, prompts, show, write_program

GREETER = """# Greeter
Greets people by name.

## Main
### Steps
- Greet Ann through Greet
- End

## Greet($name)
Makes a greeting.
### Steps
- Return a greeting for $name
"""

GREET = ['await Return(f"Hello, {name}")\n']


def _runs(cwd: Path) -> list[dict[str, object]]:
    if not (cwd / ".resumable").exists():  # a refusal that made no store left no run
        return []
    listed = cli(["runs", "--json"], cwd)
    assert listed.code == 0, listed.stderr
    rows: list[dict[str, object]] = json.loads(listed.stdout)
    return rows


def test_a_malformed_program_is_one_line_naming_where(tmp_path: Path) -> None:
    program = tmp_path / "broken.pb"
    program.write_text(
        "# Broken\nAn agent.\n\n## Main\n### Steps\n- Start\n\n```python\n@playbook\ndef Sync():\n"
        "    pass\n```\n"
    )
    refused = cli(["run", str(program)], tmp_path)
    assert refused.code == 2
    (line,) = errors(refused)
    assert str(program) in line
    assert "Sync is decorated with @playbook but is not `async def`" in line
    assert refused.stdout == ""
    assert _runs(tmp_path) == []


def test_a_missing_program_is_one_line(tmp_path: Path) -> None:
    refused = cli(["run", "nowhere.pb"], tmp_path)
    assert refused.code == 2
    (line,) = errors(refused)
    assert "nowhere.pb" in line
    assert _runs(tmp_path) == []


def test_an_unknown_provider_is_one_line_and_the_run_keeps_its_checkpoints(
    tmp_path: Path,
) -> None:
    scenario = str(EXAMPLES / "scenario" / "main.pb")
    ledger = {"SCENARIO_LEDGER": str(tmp_path / "ledger.txt")}
    refused = cli(["run", scenario], tmp_path, env={"RESUMABLE_LLM_PROVIDER": "gemini", **ledger})
    assert refused.code == 2
    (line,) = errors(refused)
    assert all(word in line for word in ("gemini", "scripted", "openai"))
    assert _runs(tmp_path) == []
    crashed = cli(
        ["run", scenario, "--run-id", "r"], tmp_path, env={"RESUMABLE_CRASH_AFTER": "25", **ledger}
    )
    assert crashed.code < 0
    again = cli(["resume", "r"], tmp_path, env={"RESUMABLE_LLM_PROVIDER": "gemini", **ledger})
    assert again.code == 2
    assert len(errors(again)) == 1
    assert [(row["run_id"], row["records"]) for row in _runs(tmp_path)] == [("r", 25)]
    done = cli(["resume", "r"], tmp_path, env=ledger)
    assert done.code == 0, done.stderr
    assert (crashed.stdout + done.stdout).splitlines() == SCENARIO_TRANSCRIPT


def test_a_playbook_without_responses_stops_the_run_until_they_are_written(
    tmp_path: Path,
) -> None:
    main = ['greeting = await Greet("Ann")\nawait Say("user", greeting)\nawait End()\n']
    program = write_program(tmp_path, "greeter", GREETER, {"Main": main})
    stopped = cli(["run", str(program), "--run-id", "r"], tmp_path)
    assert stopped.code == 2
    (line,) = errors(stopped)
    assert "no scripted response for call 1 of playbook 'Greet'" in line
    write_program(tmp_path, "greeter", GREETER, {"Main": main, "Greet": GREET})
    done = cli(["resume", "r"], tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == ["Greeter → user: Hello, Ann"]


def test_wrong_arguments_and_unknown_playbooks_are_observations_for_the_llm(
    tmp_path: Path,
) -> None:
    main = [
        'greeting = await Greet()\nawait Say("user", "not reached")\n',
        'greeting = await Greeter("Ann")\n',
        'greeting = await Greet("Ann", "Bo")\n',
        'greeting = await Greet(name="Ann")\nawait Say("user", greeting)\nawait End()\n',
    ]
    program = write_program(tmp_path, "greeter", GREETER, {"Main": main, "Greet": GREET})
    three_fixes = {"RESUMABLE_RUNTIME_MAX_FIX_ATTEMPTS": "3"}  # three failed replies in a row
    done = cli(["run", str(program), "--run-id", "r"], tmp_path, env=three_fixes)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == ["Greeter → user: Hello, Ann"]
    _, *observed = prompts(show(tmp_path, "r"))
    assert len(observed) == 3
    assert "TypeError: Greet($name): missing a required argument: 'name' (line 1" in observed[0]
    assert "greeting = await Greet()" in observed[0]
    assert "NameError: name 'Greeter' is not defined (line 1" in observed[1]
    assert "TypeError: Greet($name): too many positional arguments (line 1" in observed[2]
