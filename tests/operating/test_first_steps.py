"""What a newcomer meets first: --version, completion, the `run: <id>` line, --json outcomes,
help with an example everywhere, docs/cli.md in step with the app, and one clear line for
the common first mistakes."""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import metadata
from pathlib import Path

import pexpect
import pytest
from tests.crash.harness import EXAMPLES, REPO, resumable
from tests.operating.conftest import look
from typer.testing import CliRunner

from resumable.cli.commands import app
from resumable.cli.docs import render
from resumable.extras import DISTRIBUTION
from resumable.playbooks.primitives import answer_problem, approval, parse_answer


def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    shown = resumable(["--version"], tmp_path)
    assert shown.code == 0
    about = metadata(DISTRIBUTION)
    first, *urls = shown.stdout.splitlines()
    assert first == f"resumable {about['Version']}"
    assert urls == [entry.replace(", ", ": ", 1) for entry in about.get_all("Project-URL") or ()]


def test_shell_completion_is_offered(tmp_path: Path) -> None:
    helped = resumable(["--help"], tmp_path)
    assert "--install-completion" in helped.stdout
    assert "--show-completion" in helped.stdout


def test_every_command_help_has_an_example() -> None:
    runner = CliRunner()
    commands = render(app).count("\n### `resumable ")
    assert commands >= 15
    for line in render(app).splitlines():
        if line.startswith("### `resumable "):
            name = line.split()[2].rstrip("`")
            helped = runner.invoke(app, [name, "--help"])
            assert helped.exit_code == 0, name
            assert "Example: resumable " in helped.output, name


def test_docs_cli_md_is_generated_from_the_app() -> None:
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == render(app), "docs/cli.md is out of date: run python scripts/cli_docs.py"


SCRIPT = 'import asyncio\nawait asyncio.sleep(0)\nprint("hello")\n'


def test_exec_says_run_id_first_and_gives_a_json_outcome(tmp_path: Path) -> None:
    (tmp_path / "hello.py").write_text(SCRIPT)
    done = resumable(["exec", "hello.py", "--run-id", "h", "--json"], tmp_path)
    assert done.code == 0, done.stderr
    assert done.stderr.splitlines()[0] == "run: h"
    printed, outcome = done.stdout.splitlines()
    assert printed == "hello"
    assert json.loads(outcome) == {
        "run_id": "h",
        "status": "completed",
        "exit_code": 0,
        "message": "",
    }


def test_run_says_run_id_first_and_gives_a_json_outcome_when_it_waits(tmp_path: Path) -> None:
    program = EXAMPLES / "approval" / "approval.pb"
    waiting = resumable(["run", str(program), "--run-id", "a", "--no-input", "--json"], tmp_path)
    assert waiting.code == 3, waiting.stderr
    assert waiting.stderr.splitlines()[0] == "run: a"
    outcome = json.loads(waiting.stdout.splitlines()[-1])
    assert outcome["run_id"] == "a"
    assert outcome["status"] == "waiting"
    assert outcome["exit_code"] == 3


# -- Approve -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text", ["yes", "Y", "true", "OK", "approve", "Yes.", "ok!", " YES ", "y?"]
)
def test_approve_reads_yes(text: str) -> None:
    assert approval(text) is True
    assert parse_answer("approve", text) is True


@pytest.mark.parametrize("text", ["no", "N", "false", "Reject", "No.", "no!"])
def test_approve_reads_no(text: str) -> None:
    assert approval(text) is False
    assert parse_answer("approve", text) is False


@pytest.mark.parametrize("text", ["maybe", "", "yes please", "nope"])
def test_approve_asks_again_on_anything_else(text: str) -> None:
    assert approval(text) is None
    assert answer_problem("approve", text) is not None
    assert answer_problem("input", text) is None


def test_the_guides_answer_example_works_as_written(tmp_path: Path) -> None:
    """docs/guide.md: answer the questions of examples/approval one at a time."""
    guide = (REPO / "docs" / "guide.md").read_text(encoding="utf-8")
    program = EXAMPLES / "approval" / "approval.pb"
    assert 'resumable answer RUN_ID "a keyboard"' in guide
    assert 'resumable answer RUN_ID "Yes."' in guide
    first = resumable(["run", str(program), "--run-id", "g", "--no-input"], tmp_path)
    assert first.code == 3, first.stderr
    for answer in ("a keyboard", "Yes.", "gift wrap"):
        answered = look(["answer", "g", answer], tmp_path)
        assert answered.code == 0, answered.stderr
        went_on = resumable(["resume", "g", "--no-input"], tmp_path)
        if went_on.code == 0:
            break
        assert went_on.code == 3, went_on.stderr
    assert went_on.code == 0, went_on.stderr
    assert "Order for a keyboard: approved=True, note=gift wrap" in went_on.stdout


def test_an_answer_that_is_not_yes_or_no_is_refused_for_approve(tmp_path: Path) -> None:
    program = EXAMPLES / "approval" / "approval.pb"
    assert resumable(["run", str(program), "--run-id", "m", "--no-input"], tmp_path).code == 3
    assert look(["answer", "m", "socks"], tmp_path).code == 0
    assert resumable(["resume", "m", "--no-input"], tmp_path).code == 3
    refused = look(["answer", "m", "maybe"], tmp_path)
    assert refused.code == 2
    assert len(refused.stderr.splitlines()) == 1
    assert "yes or no" in refused.stderr
    shown = look(["show", "m"], tmp_path)
    assert "waiting for an answer (approve): Spend $20 on socks?" in shown.stdout
    assert "options: yes / no" in shown.stdout


# -- first mistakes ----------------------------------------------------------------------------
def test_asyncio_run_main_runs_durably_as_under_python(tmp_path: Path) -> None:
    """The usual end of an async script runs main() on the run's loop, every await journaled."""
    (tmp_path / "main.py").write_text(
        "import asyncio\nimport resumable\n\n\n@resumable.step\nasync def fetch(n):\n"
        "    return n * 2\n\n\nasync def main():\n    print('hi', await fetch(21), __file__)\n"
        "    return 0\n\n\n"
        'if __name__ == "__main__":\n    asyncio.run(main())\n'
    )
    done = resumable(["exec", "main.py", "--run-id", "m"], tmp_path)
    assert (done.code, done.stdout) == (0, "hi 42 main.py\n"), done.stderr
    history = look(["steps", "m"], tmp_path)
    assert "fetch" in history.stdout


def test_the_script_sees_its_own_argv_as_under_python(tmp_path: Path) -> None:
    (tmp_path / "argv.py").write_text("import sys\nprint(sys.argv)\n")
    done = resumable(["exec", "argv.py"], tmp_path)
    assert (done.code, done.stdout) == (0, "['argv.py']\n"), done.stderr


def test_asyncio_run_with_debug_on_is_refused_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text(
        "import asyncio\n\n\nasync def main():\n    print('hi')\n\n\n"
        'if __name__ == "__main__":\n    asyncio.run(main(), debug=True)\n'
    )
    refused = resumable(["exec", "main.py"], tmp_path)
    assert refused.code == 2
    assert refused.stderr.splitlines() == [
        "resumable: error: main.py:9: asyncio.run(..., debug=...) cannot apply: resumable runs "
        "the coroutine on the run's own loop, already running; set PYTHONASYNCIODEBUG=1 for "
        "the run's loop instead"
    ]
    assert not (tmp_path / ".resumable" / "runs").exists() or not any(
        (tmp_path / ".resumable" / "runs").iterdir()
    )


@pytest.mark.parametrize(
    ("command", "name", "other"),
    [("run", "script.py", "exec"), ("exec", "program.pb", "run")],
)
def test_the_wrong_command_for_the_file_names_the_right_one(
    tmp_path: Path, command: str, name: str, other: str
) -> None:
    (tmp_path / name).write_text("print(1)\n")
    refused = resumable([command, name], tmp_path)
    assert refused.code == 2
    assert refused.stderr.splitlines() == [
        f"resumable: error: {name} is a {'Python script' if other == 'exec' else 'playbook program'}"
        f": run it with `resumable {other} {name}`"
    ]


def test_idempotency_key_outside_a_durable_run_is_a_key_of_the_process() -> None:
    import resumable as package

    first, second = package.idempotency_key(), package.idempotency_key()
    assert first.startswith("local:")
    assert f":{os.getpid()}:" in first
    assert first != second
    assert first.rsplit("/", 1)[0] == second.rsplit("/", 1)[0]


@pytest.mark.parametrize(
    ("example", "stdin", "last_line"),
    [
        ("scenario/main.pb", "", "DataAgent → user: Done: 42, 32"),
        ("nested/nested.pb", "", "Planner → user: Plan: 3 days in Lisbon"),
        ("approval/approval.pb", "socks\nYes.\nnone\n", "approved=True, note=none"),
        ("ledger.py", "", "closing balances: {'alice': 9, 'bob': 9}"),
    ],
)
def test_enabled_false_runs_every_example_plainly(
    tmp_path: Path, example: str, stdin: str, last_line: str
) -> None:
    """Plainly: to the end, keeping nothing (the durable runs' output is checked elsewhere)."""
    command = "exec" if example.endswith(".py") else "run"
    (tmp_path / "playbooks.toml").write_text("[durability]\nenabled = false\n")
    env = {"SCENARIO_LEDGER": "ledger.txt"}
    plain = resumable([command, str(EXAMPLES / example)], tmp_path, env=env, stdin=stdin)
    assert plain.code == 0, plain.stderr
    assert last_line in plain.stdout.splitlines()[-1]
    assert not (tmp_path / ".resumable").exists()
    assert "run:" not in plain.stderr


def test_on_a_terminal_approve_asks_again_until_it_reads_yes_or_no(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    session = pexpect.spawn(
        sys.executable,
        ["-m", "resumable", "run", str(EXAMPLES / "approval" / "approval.pb")],
        cwd=str(tmp_path),
        env={**env, "RESUMABLE_DURABILITY_SYNC": "flush"},
        encoding="utf-8",
        timeout=30,
    )
    session.expect_exact("What should I buy?")
    session.sendline("a teapot")
    session.expect_exact("Spend $20 on a teapot?")
    session.sendline("maybe")
    session.expect_exact("Answer yes or no")
    session.expect_exact("Spend $20 on a teapot?")
    session.sendline("Yes.")
    session.expect_exact("Any changes to the order?")
    session.sendline("none")
    session.expect(pexpect.EOF)
    session.close()
    assert session.exitstatus == 0
    assert "Order for a teapot: approved=True, note=none" in session.before
