"""The run's status on stderr: live on a terminal, never on a line of the program's output."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.crash.harness import EXAMPLES, _env, resumable
from tests.playbooks_runtime import SCENARIO_TRANSCRIPT

SCENARIO = EXAMPLES / "scenario" / "main.pb"
SLOW = {"RESUMABLE_LLM_CHUNK_DELAY_SECONDS": "0.004", "SCENARIO_LEDGER": "ledger.txt"}
_CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_a_terminal(
    args: list[str], cwd: Path, env: dict[str, str], answers: tuple[str, ...] = ()
) -> tuple[int, str]:
    """Run ``resumable ARGS`` with stdin, stdout and stderr on one pseudo-terminal.

    Each time a question's ``> `` appears, the next of ``answers`` is typed.
    """
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "resumable", *args],
        cwd=cwd,
        env=_env(env | {"COLUMNS": "100", "TERM": "xterm"}),
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    seen = bytearray()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process is gone
                break
            if not data:
                break
            seen += data
            asked = seen.count(b"\n> ")
            if 0 < asked <= len(answers) and seen.rstrip().endswith(b"\n>"):
                os.write(leader, answers[asked - 1].encode() + b"\n")
        elif process.poll() is not None:
            break
    os.close(leader)
    return process.wait(10), seen.decode("utf-8")


def screen(raw: str) -> list[str]:
    """The lines a terminal shows for ``raw``: carriage returns and line erases applied."""
    lines, line, col = [], [], 0
    for token in re.split(r"(\x1b\[[0-9;?]*[A-Za-z]|\r|\n)", raw):
        if token == "\n":
            lines.append("".join(line).rstrip())
            line, col = [], 0
        elif token == "\r":
            col = 0
        elif token == "\x1b[2K":
            line = [" "] * len(line)
        elif token.startswith("\x1b["):
            continue  # colours
        else:
            for char in token:
                if col < len(line):
                    line[col] = char
                else:
                    line.append(char)
                col += 1  # noqa: SIM113 - a cursor, moved by \r too
    lines.append("".join(line).rstrip())
    return [x for x in lines if x]


def test_on_a_terminal_the_status_line_and_the_output_never_share_a_line(tmp_path: Path) -> None:
    code, raw = on_a_terminal(["run", str(SCENARIO), "--run-id", "r"], tmp_path, SLOW)
    assert code == 0, raw
    plain = _CSI.sub("", raw)
    assert "statements" in plain
    assert "checkpoints" in plain
    assert "tokens" in plain
    assert "Main (main) turn" in plain
    shown = screen(raw)
    program = [line for line in shown if not line.startswith(("resumable", "run: "))]
    assert program == SCENARIO_TRANSCRIPT  # every program line whole, nothing else on it
    for line in SCENARIO_TRANSCRIPT:  # and written in one piece, no status inside it
        assert line + "\r\n" in raw
    assert shown[-1] == "resumable: run r completed"
    assert re.fullmatch(
        r"resumable: completed in [\d.]+ s: \d+ statements, \d+ checkpoints, 6 LLM turns, "
        r"\d+ tokens, 0 retries",
        shown[-2],
    )


def test_off_a_terminal_stdout_is_the_program_output_alone(tmp_path: Path) -> None:
    done = resumable(["run", str(SCENARIO), "--run-id", "r"], tmp_path, env=SLOW)
    assert done.code == 0, done.stderr
    assert done.stdout == "".join(line + "\n" for line in SCENARIO_TRANSCRIPT)
    assert "\r" not in done.stderr
    assert "\x1b" not in done.stderr
    assert done.stderr.splitlines()[0] == "run: r"
    assert done.stderr.splitlines()[-2].startswith("resumable: completed in ")
    assert len(done.stderr.splitlines()) == 3


def test_events_json_are_lines_on_stderr(tmp_path: Path) -> None:
    done = resumable(
        ["run", str(SCENARIO), "--run-id", "r", "--events", "json"], tmp_path, env=SLOW
    )
    assert done.code == 0, done.stderr
    assert done.stdout == "".join(line + "\n" for line in SCENARIO_TRANSCRIPT)
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run"
    assert kinds[-1] == "summary"
    assert kinds.count("turn") == 6
    assert {"frame", "statement", "tokens", "turn_end"} <= set(kinds)
    assert events[-1]["status"] == "completed"
    assert events[-1]["turns"] == 6
    assert [e["playbook"] for e in events if e["event"] == "frame"][:2] == ["Main", "SomePlaybook"]


def test_quiet_says_only_the_summary_and_a_bad_events_value_is_refused(tmp_path: Path) -> None:
    quiet = resumable(["exec", str(EXAMPLES / "ledger.py"), "--quiet"], tmp_path, env=SLOW)
    assert quiet.code == 0, quiet.stderr
    assert [line for line in quiet.stderr.splitlines() if "completed in" in line]
    bad = resumable(["run", str(SCENARIO), "--events", "xml"], tmp_path)
    assert bad.code == 2
    assert bad.stderr.strip() == "resumable: error: --events 'xml' is not known: use --events json"


def test_questions_on_a_terminal_get_their_own_lines(tmp_path: Path) -> None:
    program = EXAMPLES / "approval" / "approval.pb"
    answers = ("tea", "yes", "none")
    code, raw = on_a_terminal(["run", str(program), "--run-id", "r"], tmp_path, SLOW, answers)
    assert code == 0, raw
    shown = screen(raw)
    for question in ("What should I buy?", "Spend $20 on tea?", "Any changes to the order?:"):
        assert question in shown  # each on a line of its own
    assert [line for line in shown if line.startswith("> ")] == [f"> {a}" for a in answers]
    said = [line for line in shown if "→ user" in line]
    assert said == [
        "Purchaser → user: Preparing an order for tea.",
        "Purchaser → user: Order for tea: approved=True, note=none",
    ]
