"""What `show`, `steps`, the inspector and `init` say matches what happened: a completed run
has no stopping point, statements count from 0 everywhere, journaled calls are named by
kind, hidden records are said, counts are in the right number, a script has no "response",
and a new encryption key goes to a file only its owner reads, never to the terminal."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from tests.crash.harness import EXAMPLES, resumable
from tests.operating.conftest import look

from resumable.config import load_config
from resumable.ui.app import create_app

SCRIPT = """\
import asyncio
import random

import resumable


@resumable.step
def book(x):
    return x * 2


a = random.randint(1, 6)
b = book(a)
c = [await asyncio.sleep(0, i) for i in range(3)]
print(a, b, c)
"""
IN_PROGRESS = 6
"""`c = ...` is statement 6 (from 0); killed after record 11, its second await's."""


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("states")
    (work / "calls.py").write_text(SCRIPT)
    (work / "fails.py").write_text("x = 1\ny = 2\nz = x / 0\n")
    (work / "one.py").write_text('print("one")\n')
    assert resumable(["exec", "calls.py", "--run-id", "done"], work).code == 0
    crash = {"RESUMABLE_CRASH_AFTER": "11"}
    assert resumable(["exec", "calls.py", "--run-id", "killed"], work, env=crash).code == -9
    assert resumable(["exec", "fails.py", "--run-id", "fails"], work).code == 1
    one = resumable(["exec", "one.py", "--run-id", "one"], work)
    assert one.code == 0
    assert re.search(
        r"completed in [\d.]+ s: 1 statement, 2 checkpoints, 0 retries$", one.stderr, re.M
    )
    program = str(EXAMPLES / "scenario" / "main.pb")
    assert resumable(["run", program, "--run-id", "pb"], work).code == 0
    return work


@pytest.fixture(scope="module")
def inspector(work: Path) -> TestClient:
    config = load_config(cwd=work, env={"RESUMABLE_DURABILITY_SYNC": "flush"})
    return TestClient(create_app(config, {}), base_url="http://127.0.0.1")


def test_a_completed_run_shows_no_stopping_point(work: Path, inspector: TestClient) -> None:
    shown = look(["show", "done"], work)
    assert shown.code == 0, shown.stderr
    assert "stopped here" not in shown.stdout
    assert "remaining" not in shown.stdout
    assert "main: script, all 8 statements done" in shown.stdout
    page = inspector.get("/runs/done").text
    assert "stopped here" not in page
    assert 'class="marker"' not in page
    assert 'class="code remaining"' not in page
    assert "all 8 statements done" in page


def test_statements_count_from_zero_in_show_json_steps_and_the_inspector(
    work: Path, inspector: TestClient
) -> None:
    shown = look(["show", "killed"], work).stdout
    assert f"main: script, statement {IN_PROGRESS}\n" in shown
    assert "response" not in shown
    view = json.loads(look(["show", "killed", "--json"], work).stdout)
    assert view["frames"][0]["statement"] == IN_PROGRESS
    steps = look(["steps", "killed", "--kind", "await"], work).stdout
    assert f"main/0.{IN_PROGRESS}.1 " in steps
    page = inspector.get("/runs/killed").text
    assert f'<p class="where">statement {IN_PROGRESS}</p>' in page
    # the timeline's statement records: "statement 4 done" is the one `steps` keys main/0.4
    titles = re.findall(r'<span class="title">([^<]*)</span>', page)
    assert "statement 4 done" in titles
    assert f"statement {IN_PROGRESS - 1} done" in titles
    assert f"statement {IN_PROGRESS} done" not in titles


def test_journaled_calls_are_named_by_kind(work: Path, inspector: TestClient) -> None:
    page = inspector.get("/runs/killed").text
    kinds = re.findall(
        r'<li class="entry await[^"]*"[^>]*>.*?<span class="kind">([^<]*)</span>.*?'
        r'<span class="title">([^<]*)</span>',
        page,
        re.S,
    )
    labels = [(kind, title.split(" (key")[0]) for kind, title in kinds]
    assert labels == [
        ("clock/random", "clock/random random.randint"),
        ("step", "step book"),
        ("await", "await at line 14"),
        ("await", "await at line 14"),
    ]
    # the completed calls of the statement in progress: one per line, by kind and line
    in_flight = page[page.index('class="in-flight"') :]
    in_flight = in_flight[: in_flight.index("</div>")]
    assert re.findall(r"<li>([^<]*)</li>", in_flight) == ["await at line 14"] * 2
    shown = look(["show", "killed"], work).stdout.splitlines()
    at = shown.index("  completed calls of the statement in progress:")
    assert shown[at + 1 : at + 3] == ["    await at line 14"] * 2


def test_steps_says_which_records_it_does_not_list(work: Path) -> None:
    listed = look(["steps", "pb"], work)
    seqs = [int(line.split()[0]) for line in listed.stdout.splitlines()[1:]]
    skipped = max(seqs) - len(seqs)
    assert skipped > 0
    assert f"resumable: {skipped} chunk records of streamed LLM text not listed" in listed.stderr
    chunks = look(["steps", "pb", "--kind", "chunk"], work)
    assert len(chunks.stdout.splitlines()) - 1 == skipped
    assert "not listed" not in chunks.stderr
    assert "not listed" not in look(["steps", "done"], work).stderr


def test_a_failed_script_names_the_line_of_the_script(work: Path, inspector: TestClient) -> None:
    shown = look(["show", "fails"], work).stdout
    assert "last error in the code: line 3 of the script: z = x / 0" in shown
    assert "response" not in shown
    page = inspector.get("/runs/fails").text
    assert "At line 3 of the script:" in page
    assert "response" not in page.split('id="timeline"')[0]


def test_init_writes_the_key_to_a_file_only_you_read_and_never_prints_it(tmp_path: Path) -> None:
    made = resumable(["init"], tmp_path)
    assert made.code == 0, made.stderr
    key_file = tmp_path / "resumable.key"
    key = key_file.read_text().strip()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key not in made.stdout + made.stderr
    assert f"wrote a new encryption key to {key_file.name} (mode 0600" in made.stderr
    # the key works as the export the message gives, and a second init keeps it
    (tmp_path / "job.py").write_text("import asyncio\nawait asyncio.sleep(0)\n")
    config = (tmp_path / "playbooks.toml").read_text()
    (tmp_path / "playbooks.toml").write_text(config.replace("encrypt = false", "encrypt = true"))
    ran = resumable(["exec", "job.py"], tmp_path, env={"RESUMABLE_ENCRYPTION_KEY": key})
    assert ran.code == 0, ran.stderr
    again = resumable(["init", "--force"], tmp_path)
    assert again.code == 0, again.stderr
    assert key_file.read_text().strip() == key
    assert "kept the encryption key already in" in again.stderr
