"""The ``resumable`` command as a user meets it: listing, showing, forking, cleaning up, and
bad input answered with one line, exit code 2 and every checkpoint left as it was."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import time
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, SETS, Result, resumable, start, wait_for_file

from resumable.durability.log.records import Record, RecordCodec
from resumable.store.filesystem import scan_frames

SCRIPT = """\
import asyncio


async def fetch(n):
    await asyncio.sleep(0)
    return n


first = await fetch(1)
print("first", first)
pair = [await fetch(2), await fetch(3)]
print("pair", pair)
label = "total"
print(label, first + sum(pair))
"""


def _work(root: Path, name: str, source: str = SCRIPT) -> Path:
    work = root / name
    work.mkdir()
    (work / "script.py").write_text(source)
    return work


def _records(work: Path, run_id: str) -> list[Record]:
    codec = RecordCodec((work / ".resumable" / "key").read_bytes())
    records = []
    for segment in sorted((work / ".resumable" / "runs" / run_id / "log").glob("*.seg")):
        records += [codec.open(s.data) for s in scan_frames(segment.read_bytes()).records]
    return records


def _tree_digest(folder: Path) -> str:
    """Names and contents of everything under ``folder``."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _runs(work: Path) -> dict[str, dict[str, object]]:
    listed = resumable(["runs", "--json"], work)
    assert listed.code == 0, listed.stderr
    return {row["run_id"]: row for row in json.loads(listed.stdout)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    """A finished run of SCRIPT, to compare with and to read the log of."""
    work = _work(tmp_path_factory.mktemp("cli"), "reference")
    done = resumable(["exec", "script.py", "--run-id", "r"], work)
    assert done.code == 0, done.stderr
    return work, done


def _await_in_statement(records: list[Record], statement: str) -> int:
    """Seq of the last await record of the statement that starts with ``statement``."""
    start = SCRIPT.index(statement)
    done = [r for r in records if r.kind == "stmt" and r.body["end"] <= start]
    index = done[-1].body["i"] + 1
    return [r.seq for r in records if r.kind == "await" and r.body["i"] == index][-1]


# -- bad input ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def crashed_template(
    tmp_path_factory: pytest.TempPathFactory, reference: tuple[Path, Result]
) -> Path:
    """A folder holding run `r`, killed in the middle of its statements, and run `done`."""
    work = _work(tmp_path_factory.mktemp("bad"), "template")
    point = _await_in_statement(_records(reference[0], "r"), "pair =")
    crashed = resumable(
        ["exec", "script.py", "--run-id", "r"], work, env={"RESUMABLE_CRASH_AFTER": str(point)}
    )
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    assert resumable(["exec", "script.py", "--run-id", "done"], work).code == 0
    (work / "broken.py").write_text("x = (1,\nprint(x)\n")
    (work / "blocker").write_text("a file where the store would need a folder\n")
    return work


BAD_INPUT = [
    # (name, arguments, files to write, environment, words the error must name)
    ("resume unknown run", ["resume", "nope"], {}, {}, ["nope"]),
    ("show unknown run", ["show", "nope"], {}, {}, ["nope"]),
    ("fork unknown run", ["fork", "nope", "--at", "2"], {}, {}, ["nope"]),
    ("answer unknown run", ["answer", "nope", "yes"], {}, {}, ["nope"]),
    ("invalid run id", ["resume", "../r"], {}, {}, ["../r"]),
    ("resume finished run", ["resume", "done"], {}, {}, ["done", "completed"]),
    ("answer run not waiting", ["answer", "r", "yes"], {}, {}, ["r", "not waiting"]),
    ("fork --at past the end", ["fork", "r", "--at", "999"], {}, {}, ["999", "--at"]),
    ("fork --at zero", ["fork", "r", "--at", "0"], {}, {}, ["--at", "between 1"]),
    ("show --at past the end", ["show", "r", "--at", "999"], {}, {}, ["999", "--at"]),
    (
        "unknown config key",
        ["resume", "r"],
        {"playbooks.toml": "[durability]\nevry = 3\n"},
        {},
        ["evry", "playbooks.toml"],
    ),
    (
        "config value of the wrong type",
        ["resume", "r"],
        {"playbooks.toml": '[durability]\nevery = "three"\n'},
        {},
        ["every", "three"],
    ),
    (
        "environment value of the wrong type",
        ["resume", "r"],
        {},
        {"RESUMABLE_DURABILITY_EVERY": "often"},
        ["RESUMABLE_DURABILITY_EVERY", "often"],
    ),
    (
        "store path not writable",
        ["resume", "r"],
        {"playbooks.toml": '[durability]\npath = "blocker/store"\n'},
        {},
        ["blocker"],
    ),
    ("script that does not exist", ["exec", "missing.py"], {}, {}, ["missing.py"]),
    ("script that does not parse", ["exec", "broken.py"], {}, {}, ["broken.py", "parse"]),
]


@pytest.mark.parametrize(
    ("args", "files", "env", "named"),
    [case[1:] for case in BAD_INPUT],
    ids=[c[0] for c in BAD_INPUT],
)
def test_bad_input_is_one_line_exit_2_and_changes_no_checkpoint(
    tmp_path: Path,
    crashed_template: Path,
    args: list[str],
    files: dict[str, str],
    env: dict[str, str],
    named: list[str],
) -> None:
    work = tmp_path / "work"
    shutil.copytree(crashed_template, work)
    for name, text in files.items():
        (work / name).write_text(text)
    before = _tree_digest(work)
    result = resumable(args, work, env=env)
    assert result.code == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("resumable: error: ")
    for word in named:
        assert word in lines[0]
    assert _tree_digest(work) == before


# -- runs -----------------------------------------------------------------------------------
WAITS_FOR_GO = """\
import asyncio
import os
import time


def wait_for_go():
    while not os.path.exists("go"):
        time.sleep(0.01)


open("started", "w").close()
await asyncio.to_thread(wait_for_go)
print("went")
"""


def test_runs_lists_every_status_with_records_and_last_checkpoint(
    tmp_path: Path, reference: tuple[Path, Result]
) -> None:
    work = _work(tmp_path, "runs")
    (work / "fails.py").write_text('print("about to fail")\nraise ValueError("no luck")\n')
    (work / "waits.py").write_text(WAITS_FOR_GO)
    for name in ("approval.pb", "approval.responses.toml"):
        shutil.copy(EXAMPLES / "approval" / name, work / name)
    began = time.time()
    assert resumable(["exec", "script.py", "--run-id", "completed"], work).code == 0
    failed = resumable(["exec", "fails.py", "--run-id", "failed"], work)
    assert failed.code == 1
    assert "ValueError: no luck" in failed.stderr
    point = _await_in_statement(_records(reference[0], "r"), "pair =")
    crash = {"RESUMABLE_CRASH_AFTER": str(point)}
    crashed = resumable(["exec", "script.py", "--run-id", "crashed"], work, env=crash)
    assert crashed.code == -signal.SIGKILL
    waiting = resumable(["run", "approval.pb", "--no-input", "--run-id", "waiting"], work)
    assert waiting.code == 3, waiting.stderr
    running = start(["exec", "waits.py", "--run-id", "running"], work)
    try:
        wait_for_file(work / "started", timeout=30)
        rows = _runs(work)
        table = resumable(["runs"], work)
        logged = {run_id: len(_records(work, run_id)) for run_id in rows}
    finally:
        (work / "go").touch()
        out, _ = running.communicate(timeout=30)
    assert running.returncode == 0
    assert out == "went\n"

    assert {run_id: row["status"] for run_id, row in rows.items()} == {
        "completed": "completed",
        "failed": "failed",
        "crashed": "crashed",
        "waiting": "waiting",
        "running": "running",
    }
    for run_id, row in rows.items():
        assert row["records"] == logged[run_id], run_id
        assert isinstance(row["last_checkpoint"], float)
        assert began - 1 <= row["last_checkpoint"] <= time.time() + 1
    assert rows["crashed"]["records"] == point
    assert rows["waiting"]["program"] == "approval.pb"
    assert table.code == 0
    for run_id, row in rows.items():
        (line,) = [line for line in table.stdout.splitlines() if line.split()[:1] == [run_id]]
        assert str(row["status"]) in line.split()
        assert str(row["records"]) in line.split()
    assert _runs(work)["running"]["status"] == "completed"


# -- show -------------------------------------------------------------------------------------
def test_show_tells_where_a_crashed_run_stopped(
    tmp_path: Path, reference: tuple[Path, Result]
) -> None:
    records = _records(reference[0], "r")
    point = _await_in_statement(records, "pair =")
    work = _work(tmp_path, "show")
    crashed = resumable(
        ["exec", "script.py", "--run-id", "r"], work, env={"RESUMABLE_CRASH_AFTER": str(point)}
    )
    assert crashed.code == -signal.SIGKILL
    before = _tree_digest(work / ".resumable")
    shown = resumable(["show", "r", "--json"], work)
    assert shown.code == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert (view["run_id"], view["status"], view["seq"]) == ("r", "crashed", point)
    (frame,) = view["frames"]
    assert frame["executed"] + frame["remaining"] == SCRIPT
    # stopped in `pair = [...]`: it is the statement in progress, first of the remaining code
    assert frame["remaining"].startswith("pair = [await fetch(2), await fetch(3)]")
    assert frame["marker_line"] == SCRIPT[: SCRIPT.index("pair =")].count("\n") + 1
    statement = next(r for r in records if r.seq == point).body["i"]
    in_progress = [r.body["s"] for r in records if r.kind == "await" and r.body["i"] == statement]
    assert sorted(frame["completed_awaits"]) == sorted(
        in_progress[: len(frame["completed_awaits"])]
    )
    assert len(frame["completed_awaits"]) >= 1
    assert frame["variables"]["first"] == "1"
    assert "pair" not in frame["variables"]
    assert "label" not in frame["variables"]

    earlier = _await_in_statement(records, "first =")
    at = json.loads(resumable(["show", "r", "--at", str(earlier), "--json"], work).stdout)
    assert at["seq"] == earlier
    assert at["frames"][0]["remaining"].lstrip().startswith("first = await fetch(1)")
    assert "first" not in at["frames"][0]["variables"]

    text = resumable(["show", "r"], work)
    assert text.code == 0
    lines = text.stdout.splitlines()
    marker = next(i for i, line in enumerate(lines) if "stopped here" in line)
    assert f"(line {frame['marker_line']})" in lines[marker]
    assert lines[marker - 1].strip() == 'print("first", first)'
    assert lines[marker + 2].strip() == "pair = [await fetch(2), await fetch(3)]"
    assert any(line.strip() == "first = 1" for line in lines[:marker])
    assert _tree_digest(work / ".resumable") == before


# -- fork ---------------------------------------------------------------------------------------
def test_fork_at_a_record_then_resume_prints_the_rest_of_the_program(
    tmp_path: Path, reference: tuple[Path, Result]
) -> None:
    source, done = reference
    records = _records(source, "r")
    mid_statement = _await_in_statement(records, "pair =")
    boundary = [r.seq for r in records if r.kind == "stmt"][-2]
    work = tmp_path / "fork"
    shutil.copytree(source, work)
    original = _tree_digest(work / ".resumable" / "runs" / "r")
    for point in (mid_statement, boundary):
        forked = resumable(["fork", "r", "--at", str(point)], work)
        assert forked.code == 0, forked.stderr
        (fork_id,) = forked.stdout.split()
        # what a run killed right after that record printed, and what remained to print
        killed = _work(tmp_path, f"killed{point}")
        env = {"RESUMABLE_CRASH_AFTER": str(point)}
        printed = resumable(["exec", "script.py", "--run-id", "k"], killed, env=env).stdout
        assert done.stdout.startswith(printed)
        resumed = resumable(["resume", fork_id], work)
        assert resumed.code == 0, resumed.stderr
        assert resumed.stdout == done.stdout[len(printed) :]
    statuses = {run_id: row["status"] for run_id, row in _runs(work).items()}
    assert statuses == dict.fromkeys(statuses, "completed")
    assert len(statuses) == 3
    assert _tree_digest(work / ".resumable" / "runs" / "r") == original


def test_a_fork_iterates_sets_as_its_parent_did(tmp_path: Path) -> None:
    """The fork replays the parent's statement in progress, so it needs the parent's hash seed."""
    work = _work(tmp_path, "sets", SETS)
    done = resumable(["exec", "script.py", "--run-id", "p"], work, env={"PYTHONHASHSEED": "7"})
    assert done.code == 0, done.stderr
    (point,) = [r.seq for r in _records(work, "p") if r.kind == "await"]
    forked = resumable(["fork", "p", "--at", str(point)], work)
    assert forked.code == 0, forked.stderr
    resumed = resumable(["resume", forked.stdout.strip()], work, env={"PYTHONHASHSEED": "1"})
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == done.stdout


# -- gc -----------------------------------------------------------------------------------------
def _age(work: Path, run_id: str, days: float) -> None:
    """Make a run look last updated ``days`` ago."""
    path = work / ".resumable" / "runs" / run_id / "meta.json"
    meta = json.loads(path.read_text())
    meta["updated_at"] = meta["created_at"] = time.time() - days * 86400
    path.write_text(json.dumps(meta))


def test_gc_deletes_finished_runs_older_than_the_cutoff_and_keeps_the_rest(
    tmp_path: Path, reference: tuple[Path, Result]
) -> None:
    work = _work(tmp_path, "gc")
    (work / "fails.py").write_text('raise ValueError("no luck")\n')
    point = _await_in_statement(_records(reference[0], "r"), "pair =")
    assert resumable(["exec", "script.py", "--run-id", "old-done"], work).code == 0
    assert resumable(["exec", "fails.py", "--run-id", "old-failed"], work).code == 1
    crash = {"RESUMABLE_CRASH_AFTER": str(point)}
    assert resumable(["exec", "script.py", "--run-id", "old-crashed"], work, env=crash).code < 0
    assert resumable(["exec", "script.py", "--run-id", "new-done"], work).code == 0
    for run_id in ("old-done", "old-failed", "old-crashed"):
        _age(work, run_id, 10)
    before = _tree_digest(work / ".resumable")

    dry = resumable(["gc", "--older-than-days", "7", "--dry-run", "--json"], work)
    assert dry.code == 0, dry.stderr
    assert sorted(json.loads(dry.stdout)["deleted_runs"]) == ["old-done", "old-failed"]
    assert _tree_digest(work / ".resumable") == before

    swept = resumable(["gc", "--older-than-days", "7", "--json"], work)
    assert swept.code == 0, swept.stderr
    assert sorted(json.loads(swept.stdout)["deleted_runs"]) == ["old-done", "old-failed"]
    assert sorted(_runs(work)) == ["new-done", "old-crashed"]
    # what gc kept still works: the crashed run resumes to the end
    resumed = resumable(["resume", "old-crashed"], work)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout.splitlines()[-1] == reference[1].stdout.splitlines()[-1]


# -- output -------------------------------------------------------------------------------------
CHATTY = """\
import asyncio
import sys
import threading

worker = threading.Thread(target=int)  # cannot be checkpointed: the runtime warns about it
for i in range(3):
    print("line", await asyncio.sleep(0, i))
    print("progress", i, file=sys.stderr)
print("done")
"""


def test_exec_stdout_is_exactly_what_the_program_prints(tmp_path: Path) -> None:
    expected = "".join(f"line {i}\n" for i in range(3)) + "done\n"
    work = _work(tmp_path, "chatty", CHATTY)
    env = {"RESUMABLE_RUNTIME_PROGRESS": "on"}
    done = resumable(["exec", "script.py", "--run-id", "c"], work, env=env)
    assert done.code == 0, done.stderr
    assert done.stdout == expected
    assert "cannot be checkpointed" in done.stderr
    assert "progress 2" in done.stderr
    # and across a crash: the part printed before plus the part printed after
    again = _work(tmp_path, "again", CHATTY)
    records = _records(work, "c")
    point = [r.seq for r in records if r.kind == "await"][1]
    crash = {**env, "RESUMABLE_CRASH_AFTER": str(point)}
    crashed = resumable(["exec", "script.py", "--run-id", "c"], again, env=crash)
    assert crashed.code == -signal.SIGKILL
    resumed = resumable(["resume", "c"], again, env=env)
    assert resumed.code == 0, resumed.stderr
    assert crashed.stdout + resumed.stdout == expected
