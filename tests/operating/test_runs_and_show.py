"""`resumable runs` filters and sorting, and what `show` says first: the question a waiting
run asked, the error a failed run died of (with the line it came from), `show --latest`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, resumable
from tests.operating.conftest import look

FAILS = 'print("about to fail")\nvalue = 1\nraise ValueError(f"no luck with {value}")\n'


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("runs")
    (work / "ok.py").write_text('print("ok")\n')
    (work / "fails.py").write_text(FAILS)
    assert resumable(["exec", "ok.py", "--run-id", "a-ok"], work).code == 0
    time.sleep(0.05)
    assert resumable(["exec", "fails.py", "--run-id", "b-fails"], work).code == 1
    time.sleep(0.05)
    program = EXAMPLES / "approval" / "approval.pb"
    assert resumable(["run", str(program), "--run-id", "c-waits", "--no-input"], work).code == 3
    return work


def _ids(work: Path, *args: str) -> list[str]:
    listed = look(["runs", "--json", *args], work)
    assert listed.code == 0, listed.stderr
    return [row["run_id"] for row in json.loads(listed.stdout)]


def test_runs_filters_and_sorts(work: Path) -> None:
    assert _ids(work) == ["c-waits", "b-fails", "a-ok"]
    assert _ids(work, "--status", "failed") == ["b-fails"]
    assert _ids(work, "--status", "failed", "--status", "waiting") == ["c-waits", "b-fails"]
    assert _ids(work, "--program", "approval") == ["c-waits"]
    assert _ids(work, "--limit", "2") == ["c-waits", "b-fails"]
    # by program path: the approval example's absolute path sorts before fails.py and ok.py
    assert _ids(work, "--sort", "program") == ["c-waits", "b-fails", "a-ok"]
    assert _ids(work, "--sort", "records")[0] == "c-waits"
    assert _ids(work, "--since", "1h") == ["c-waits", "b-fails", "a-ok"]
    assert _ids(work, "--since", "2999-01-01") == []
    table = look(["runs", "--status", "waiting"], work)
    assert "c-waits" in table.stdout
    assert "a-ok" not in table.stdout


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["--status", "asleep"], "asleep"),
        (["--sort", "size"], "size"),
        (["--since", "soon"], "soon"),
    ],
)
def test_runs_with_a_bad_filter_is_one_line_exit_2(work: Path, args: list[str], word: str) -> None:
    listed = look(["runs", *args], work)
    assert listed.code == 2
    assert len(listed.stderr.splitlines()) == 1
    assert word in listed.stderr


def test_show_of_a_waiting_run_gives_its_question(work: Path) -> None:
    shown = look(["show", "c-waits"], work)
    assert shown.code == 0, shown.stderr
    assert "waiting for an answer (input): What should I buy?" in shown.stdout
    assert "answer with: resumable answer c-waits TEXT" in shown.stdout
    question = json.loads(look(["show", "c-waits", "--json"], work).stdout)["question"]
    assert question["kind"] == "input"
    assert question["text"] == "What should I buy?"
    assert question["timeout"] is None


def test_show_of_a_failed_run_gives_its_error_and_line(work: Path) -> None:
    shown = look(["show", "b-fails"], work)
    assert shown.code == 0, shown.stderr
    assert "failed: ValueError: no luck with 1" in shown.stdout
    assert "last error in the code: line 3 of the script: raise ValueError" in shown.stdout
    assert "traceback:" in shown.stdout
    error = json.loads(look(["show", "b-fails", "--json"], work).stdout)["error"]
    assert error["line"] == 3
    assert "ValueError" in error["traceback"]


def test_show_latest_is_the_newest_run(work: Path) -> None:
    shown = look(["show", "--latest"], work)
    assert shown.code == 0, shown.stderr
    assert shown.stdout.startswith("run c-waits ")
    both = look(["show", "c-waits", "--latest"], work)
    assert both.code == 2
