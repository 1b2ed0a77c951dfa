"""Human in the loop: wait (exit 3), answer, resume; timeouts; asking on a terminal."""

from __future__ import annotations

import ast
import os
import signal
import sys
import time
from pathlib import Path

import pexpect
import pytest
from tests.crash.harness import EXAMPLES, Result
from tests.playbooks_runtime import cli, show, write_program

APPROVAL = EXAMPLES / "approval" / "approval.pb"

GREETER = """# Greeter
Greets whoever answers.

## Main
### Steps
- Ask the user for their name and greet them
"""


def _greeter(folder: Path, question: str = 'Input("Your name?")') -> Path:
    """A program that asks ``question`` and greets whoever answers."""
    response = (
        'await Step("Main:01:QUE")\n'
        f"name = await {question}\n"
        'await Say("user", f"Hello, {name}")\n'
        "await Return(name)\n"
    )
    return write_program(folder, "greeter", GREETER, {"Main": [response]})


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["RESUMABLE_DURABILITY_SYNC"] = "flush"
    return env


# -- without a terminal: wait, answer, resume ----------------------------------------------

FOUR_KINDS = {
    "Main": [
        'item = await Input("What should I buy?")\n'
        'ok = await Approve(f"Spend $20 on {item}?")\n'
        'note = await Review(f"order: {item}", "Any changes?")\n'
        'decision = await Escalate("the budget is spent", to="manager")\n'
        'await Say("user", f"{item} | approved={ok} | {note} | {decision}")\n'
        "await End()\n"
    ]
}


def _answered(result: Result) -> str:
    """The question ``resumable answer`` says it answered."""
    assert result.code == 0, result.stderr
    line = result.stderr.splitlines()[-1]
    return str(ast.literal_eval(line.split("answered ", 1)[1].split("; continue", 1)[0]))


def test_every_kind_of_question_waits_and_an_answer_lets_resume_go_on(tmp_path: Path) -> None:
    program = write_program(tmp_path, "four", GREETER, FOUR_KINDS)
    started = cli(["run", str(program), "--run-id", "r", "--no-input"], tmp_path)
    assert started.code == 3, started.stderr
    assert "is waiting for input" in started.stderr
    view = show(tmp_path, "r")
    assert view["status"] == "waiting"
    assert (view["detail"]["kind"], view["detail"]["prompt"]) == ("input", "What should I buy?")
    said, answered = started.stdout, []
    for answer in ("a lamp", "yes", "gift wrap", "go ahead"):
        answered.append(_answered(cli(["answer", "r", answer], tmp_path)))
        resumed = cli(["resume", "r", "--no-input"], tmp_path)
        said += resumed.stdout
        assert resumed.code == (3 if answer != "go ahead" else 0), resumed.stderr
    # each resume took its answer and went on to a new question: none was asked twice
    assert answered == [
        "What should I buy?",
        "Spend $20 on a lamp?",
        "Any changes?:\norder: a lamp",
        "[escalated to manager] the budget is spent",
    ]
    assert said.splitlines() == ["Greeter → user: a lamp | approved=True | gift wrap | go ahead"]


def test_a_run_killed_at_its_question_waits_for_the_same_question(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    program = _greeter(reference)
    waited = cli(["run", str(program), "--run-id", "r", "--no-input"], reference)
    assert waited.code == 3
    # the question's record, then the status that says the run waits
    ask_record = show(reference, "r")["seq"] - 1

    killed = tmp_path / "killed"
    program = _greeter(killed)
    crashed = cli(
        ["run", str(program), "--run-id", "r", "--no-input"],
        killed,
        env={"RESUMABLE_CRASH_AFTER": str(ask_record)},
    )
    assert crashed.code == -signal.SIGKILL
    before_resume = time.time()
    resumed = cli(["resume", "r", "--no-input"], killed)
    assert resumed.code == 3, resumed.stderr
    question = show(killed, "r")["detail"]
    assert question["prompt"] == "Your name?"
    assert question["at"] < before_resume  # asked by the process that was killed, not again
    assert cli(["answer", "r", "Ann"], killed).code == 0
    done = cli(["resume", "r", "--no-input"], killed)
    assert done.code == 0, done.stderr
    assert (crashed.stdout + resumed.stdout + done.stdout).splitlines() == [
        "Greeter → user: Hello, Ann"
    ]


def test_timeout_counts_from_the_first_ask_across_resumes(tmp_path: Path) -> None:
    timeout = 6.0
    program = _greeter(tmp_path, f'Input("Your name?", timeout={timeout}, default="stranger")')
    assert cli(["run", str(program), "--run-id", "r", "--no-input"], tmp_path).code == 3
    asked_at = show(tmp_path, "r")["detail"]["at"]
    time.sleep(max(0.0, asked_at + timeout / 2 - time.time()))
    # half-way: still waiting, and the question keeps its first time
    still = cli(["resume", "r", "--no-input"], tmp_path)
    assert still.code == 3, still.stderr
    assert time.time() < asked_at + timeout, "the machine is too slow for this timeout"
    assert show(tmp_path, "r")["detail"]["at"] == asked_at
    # past the first ask's deadline (though not a whole timeout after the last resume)
    time.sleep(max(0.0, asked_at + timeout + 0.2 - time.time()))
    done = cli(["resume", "r", "--no-input"], tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == ["Greeter → user: Hello, stranger"]


def test_two_questions_asked_at_once_are_answered_one_by_one(tmp_path: Path) -> None:
    program = write_program(
        tmp_path,
        "pair",
        GREETER,
        {
            "Main": [
                "import asyncio\n"
                'first, second = await asyncio.gather(Input("First?"), Input("Second?"))\n'
                'await Say("user", f"{first} and {second}")\n'
                "await End()\n"
            ]
        },
    )
    assert cli(["run", str(program), "--run-id", "r", "--no-input"], tmp_path).code == 3
    assert _answered(cli(["answer", "r", "salt"], tmp_path)) == "First?"
    assert cli(["resume", "r", "--no-input"], tmp_path).code == 3
    assert _answered(cli(["answer", "r", "pepper"], tmp_path)) == "Second?"
    done = cli(["resume", "r", "--no-input"], tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == ["Greeter → user: salt and pepper"]


# -- on a terminal ---------------------------------------------------------------------------


def _terminal(args: list[str], cwd: Path) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "resumable", *args],
        cwd=str(cwd),
        env=_env(),
        encoding="utf-8",
        timeout=30,
    )


@pytest.mark.parametrize(
    ("approve", "third", "note"),
    [
        ("y", "Any changes to the order?", "approved=True"),
        ("no", "escalated to manager", "approved=False"),
    ],
)
def test_on_a_terminal_the_approval_example_asks_and_takes_typed_answers(
    tmp_path: Path, approve: str, third: str, note: str
) -> None:
    session = _terminal(["run", str(APPROVAL), "--run-id", "r"], tmp_path)
    session.expect_exact("What should I buy?")
    session.sendline("a teapot")
    session.expect_exact("Spend $20 on a teapot?")
    session.sendline(approve)
    session.expect_exact(third)
    session.sendline("fine")
    session.expect(pexpect.EOF)
    session.close()
    assert session.exitstatus == 0
    assert f"Order for a teapot: {note}, note=fine" in session.before


def test_on_a_terminal_a_timed_out_question_takes_its_default_and_the_run_ends(
    tmp_path: Path,
) -> None:
    program = _greeter(tmp_path, 'Input("Your name?", timeout=1.5, default="stranger")')
    session = _terminal(["run", str(program), "--run-id", "r"], tmp_path)
    session.expect_exact("Your name?")
    asked = time.monotonic()
    session.expect_exact("Hello, stranger")
    session.expect(pexpect.EOF, timeout=10)  # nothing typed, and nothing left waiting for it
    ended = time.monotonic() - asked
    session.close()
    assert session.exitstatus == 0
    assert ended < 8


def test_killed_while_asking_on_a_terminal_then_answered_later(tmp_path: Path) -> None:
    program = _greeter(tmp_path)
    session = _terminal(["run", str(program), "--run-id", "r"], tmp_path)
    session.expect_exact("Your name?")
    killed_at = time.time()
    session.kill(signal.SIGKILL)
    session.close(force=True)
    assert session.signalstatus == signal.SIGKILL
    resumed = cli(["resume", "r", "--no-input"], tmp_path)
    assert resumed.code == 3, resumed.stderr
    question = show(tmp_path, "r")["detail"]
    assert question["prompt"] == "Your name?"
    assert question["at"] < killed_at
    assert cli(["answer", "r", "Bo"], tmp_path).code == 0
    done = cli(["resume", "r", "--no-input"], tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == ["Greeter → user: Hello, Bo"]


def test_end_of_input_on_a_terminal_makes_the_run_wait(tmp_path: Path) -> None:
    program = _greeter(tmp_path)
    session = _terminal(["run", str(program), "--run-id", "r"], tmp_path)
    session.expect_exact("Your name?")
    session.sendeof()
    session.expect(pexpect.EOF)
    session.close()
    assert session.exitstatus == 3
    assert show(tmp_path, "r")["detail"]["prompt"] == "Your name?"
