"""Failing replies go back to the model, which gets ``max_fix_attempts`` replies to fix them."""

from __future__ import annotations

from pathlib import Path

from tests.playbooks_runtime import cli, prompts, show, write_program

AGENT = '''# Fixer
Fetches data and reports on it.

## Main
### Steps
- Fetch the data and tell the user about it
- End

```python
import os


@playbook
async def Fetch() -> dict:
    """Fetches the data (an effect: a line in the ledger)."""
    with open(os.environ["FIX_LEDGER"], "a", encoding="utf-8") as out:
        out.write("Fetch\\n")
    return {"items": [3, 5]}
```
'''

FIRST = (
    "Let me fetch the data first.\n"
    "```python\n"
    'await Say("user", "fetching")\n'
    'total = (await Fetch())["total"]\n'
    'await Say("user", "not reached")\n'
    "```\n"
)
FIXED = (
    'await Say("user", "the data has no total; 2 items")\n'
    'await Input("Anything else?")\n'
    "await End()\n"
)


def _env(folder: Path, **extra: str) -> dict[str, str]:
    return {"FIX_LEDGER": str(folder / "ledger.txt"), **extra}


def _ledger(folder: Path) -> list[str]:
    path = folder / "ledger.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_the_model_sees_its_error_and_the_line_and_fixes_it(tmp_path: Path) -> None:
    program = write_program(tmp_path, "fixer", AGENT, {"Main": [FIRST, FIXED]})
    env = _env(tmp_path)
    waiting = cli(["run", str(program), "--run-id", "r", "--no-input"], tmp_path, env=env)
    assert waiting.code == 3, waiting.stderr
    first, observed = prompts(show(tmp_path, "r", env=env), "main")
    assert "Error" not in first
    assert "Error: KeyError: 'total' (line 4 of the response)" in observed
    assert 'Line 4 of your reply: total = (await Fetch())["total"]' in observed
    assert len(observed) < 2500  # the traceback is short
    assert cli(["answer", "r", "no"], tmp_path, env=env).code == 0
    done = cli(["resume", "r"], tmp_path, env=env)
    assert done.code == 0, done.stderr
    assert (waiting.stdout + done.stdout).splitlines() == [
        "Fixer → user: fetching",
        "Fixer → user: the data has no total; 2 items",
    ]
    assert _ledger(tmp_path) == ["Fetch"]  # the failed statement's Fetch ran once


def test_a_crash_while_the_failing_statement_runs_does_not_fetch_again(tmp_path: Path) -> None:
    clean_dir = tmp_path / "clean"
    program = write_program(clean_dir, "fixer", AGENT, {"Main": [FIRST, FIXED]})
    clean = cli(
        ["run", str(program), "--run-id", "r", "--no-input"], clean_dir, env=_env(clean_dir)
    )
    assert clean.code == 3, clean.stderr
    # 8: Fetch's result is durable; 11: the turn that tells the model of the error is
    for crash_after in (8, 11):
        folder = tmp_path / str(crash_after)
        program = write_program(folder, "fixer", AGENT, {"Main": [FIRST, FIXED]})
        env = _env(folder)
        crashed = cli(
            ["run", str(program), "--run-id", "r", "--no-input"],
            folder,
            env=env | {"RESUMABLE_CRASH_AFTER": str(crash_after)},
        )
        assert crashed.code < 0, crashed.stderr
        resumed = cli(["resume", "r", "--no-input"], folder, env=env)
        assert resumed.code == 3, resumed.stderr
        assert crashed.stdout + resumed.stdout == clean.stdout
        assert _ledger(folder) == ["Fetch"]
        assert prompts(show(folder, "r", env=env)) == prompts(show(clean_dir, "r", env=env))


NO_CODE = [
    "I will greet the user now.",
    "<think>The user wants a greeting.</think>\nSure! Greeting the user is the next step.",
    "```text\nHello!\n```\nThat is the greeting.",
]


def test_a_model_that_never_writes_code_fails_after_max_fix_attempts(tmp_path: Path) -> None:
    program = write_program(tmp_path, "fixer", AGENT, {"Main": NO_CODE})
    env = _env(tmp_path)
    failed = cli(["run", str(program), "--run-id", "r"], tmp_path, env=env)
    assert failed.code == 1
    assert "Traceback" not in failed.stderr
    (line,) = [x for x in failed.stderr.splitlines() if "replies in a row failed" in x]
    assert line.startswith("playbook Main (frame main): 3 replies in a row failed")
    assert "[runtime] max_fix_attempts = 2" in line
    assert "last problem: the reply held no Python code to run" in line
    assert repr(NO_CODE[-1]) in line  # the last reply, quoted
    assert failed.stderr.splitlines()[-1] == "resumable: run r failed"
    view = show(tmp_path, "r", env=env)
    assert view["status"] == "failed"
    # nothing lost: every reply and every observation is in the run
    said = prompts(view, "main")
    assert len(said) == 3
    assert all("held no Python code" in p for p in said[1:])


def test_max_fix_attempts_zero_fails_at_the_first_failing_reply(tmp_path: Path) -> None:
    program = write_program(tmp_path, "fixer", AGENT, {"Main": [FIRST, FIXED]})
    env = _env(tmp_path, RESUMABLE_RUNTIME_MAX_FIX_ATTEMPTS="0")
    failed = cli(["run", str(program), "--run-id", "r"], tmp_path, env=env)
    assert failed.code == 1
    assert "1 replies in a row failed ([runtime] max_fix_attempts = 0)" in failed.stderr
    assert "last problem: KeyError: 'total' (line 4 of the response)" in failed.stderr
