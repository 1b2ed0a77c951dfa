"""`resumable fork --at N --set NAME=LITERAL --edit-code FILE`: the fork goes on with the
changed value and code, names its parent, and the parent is not touched; bad edits are one
line, exit 2, and leave every run as it was."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, resumable
from tests.operating.conftest import look

SCRIPT = """\
import asyncio


async def fetch(n):
    await asyncio.sleep(0)
    return n


limit = 3
first = await fetch(1)
print("first", first, "limit", limit)
total = first * limit
print("total", total)
"""


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _steps(work: Path, run_id: str) -> list[dict[str, object]]:
    listed = look(["steps", run_id, "--json"], work)
    assert listed.code == 0, listed.stderr
    return json.loads(listed.stdout)  # type: ignore[no-any-return]


def _boundary(work: Path, run_id: str, code: str) -> int:
    """The seq of the statement record of the statement that starts with ``code``."""
    return next(
        int(e["seq"])  # type: ignore[call-overload]
        for e in _steps(work, run_id)
        if e["kind"] == "stmt" and str(e["value"]).startswith(code)
    )


def _fork(work: Path, *args: str) -> str:
    forked = look(["fork", *args], work)
    assert forked.code == 0, forked.stderr
    return forked.stdout.strip()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("fork") / "work"
    work.mkdir()
    (work / "script.py").write_text(SCRIPT)
    done = resumable(["exec", "script.py", "--run-id", "p"], work)
    assert done.code == 0, done.stderr
    assert done.stdout == "first 1 limit 3\ntotal 3\n"
    return work


@pytest.fixture
def parent(template: Path, tmp_path: Path) -> Path:
    """A folder holding the finished run `p` of SCRIPT, the test's own copy."""
    work = tmp_path / "work"
    shutil.copytree(template, work)
    return work


def test_fork_with_set_goes_on_with_the_new_value_and_leaves_the_parent(parent: Path) -> None:
    before = _digest(parent / ".resumable" / "runs" / "p")
    at = _boundary(parent, "p", "limit = 3")
    fork = _fork(parent, "p", "--at", str(at), "--set", "limit=10")
    resumed = resumable(["resume", fork], parent)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == "first 1 limit 10\ntotal 10\n"
    shown = look(["show", fork], parent)
    assert f"forked from p at record {at} with limit=10" in shown.stdout
    assert _digest(parent / ".resumable" / "runs" / "p") == before


def test_fork_with_edit_code_runs_the_new_code_from_there(parent: Path) -> None:
    before = _digest(parent / ".resumable" / "runs" / "p")
    (parent / "rest.py").write_text('print("edited", first * 100, limit)\n')
    at = _boundary(parent, "p", "first = await fetch(1)")
    fork = _fork(parent, "p", "--at", str(at), "--edit-code", "rest.py", "--set", "limit=7")
    resumed = resumable(["resume", fork], parent)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == "edited 100 7\n"
    shown = look(["show", fork, "--json"], parent)
    lineage = json.loads(shown.stdout)["lineage"]
    assert lineage == [
        {"run_id": "p", "at": at, "edits": {"set": {"limit": "7"}, "edit_code": "rest.py"}}
    ]
    assert _digest(parent / ".resumable" / "runs" / "p") == before


def test_fork_with_edit_code_of_a_playbook_frame(tmp_path: Path) -> None:
    done = resumable(
        ["run", str(EXAMPLES / "scenario" / "main.pb"), "--run-id", "s"],
        tmp_path,
        env={"SCENARIO_LEDGER": "ledger.txt"},
    )
    assert done.code == 0, done.stderr
    at = _boundary(tmp_path, "s", "data = await FetchData()")
    (tmp_path / "rest.py").write_text(
        'await Say("user", f"Edited: {len(data[\'items\'])} items")\nawait Return(7)\n'
    )
    fork = _fork(tmp_path, "s", "--at", str(at), "--edit-code", "rest.py")
    resumed = resumable(["resume", fork], tmp_path, env={"SCENARIO_LEDGER": "ledger.txt"})
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == "DataAgent → user: Edited: 3 items\n"
    assert (tmp_path / "ledger.txt").read_text().count("FetchData") == 1  # not run again


BAD = [
    ("--at beyond the log", ["--at", "999"], ["999", "--at"]),
    ("--set not a literal", ["--at", "{stmt}", "--set", "limit=open('x')"], ["limit", "literal"]),
    ("--set without =", ["--at", "{stmt}", "--set", "limit"], ["NAME=PYTHON_LITERAL"]),
    ("--set unknown name", ["--at", "{stmt}", "--set", "nosuch=1"], ["nosuch", "limit"]),
    ("--set inside a statement", ["--at", "{inside}", "--set", "limit=1"], ["boundary"]),
    ("--edit-code missing file", ["--at", "{stmt}", "--edit-code", "gone.py"], ["gone.py"]),
    ("--edit-code not parsing", ["--at", "{stmt}", "--edit-code", "bad.py"], ["bad.py", "parse"]),
]


@pytest.mark.parametrize(("args", "words"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_fork_input_is_one_line_exit_2_and_changes_nothing(
    parent: Path, args: list[str], words: list[str]
) -> None:
    (parent / "bad.py").write_text("x = (\n")
    steps = _steps(parent, "p")
    stmt = _boundary(parent, "p", "first = await fetch(1)")
    awaited = next(int(e["seq"]) for e in steps if e["kind"] == "await")  # type: ignore[call-overload]
    args = [a.format(stmt=stmt, inside=awaited) for a in args]
    before = _digest(parent / ".resumable")
    forked = look(["fork", "p", *args], parent)
    assert forked.code == 2
    assert forked.stdout == ""
    lines = forked.stderr.splitlines()
    assert len(lines) == 1, forked.stderr
    assert lines[0].startswith("resumable: error: ")
    for word in words:
        assert word in lines[0]
    assert _digest(parent / ".resumable") == before
