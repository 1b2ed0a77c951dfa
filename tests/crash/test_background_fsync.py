"""A statement's boundary whose fsync runs while the next statement starts, killed in that
window: the resume is the uninterrupted run, every effect once and every line once.

``sync = "fsync"`` throughout (the background fsync is the file store's, with fsync). The
kill comes from the program itself, in program code that is no step: nothing in it waits
for the boundary before it, so it lands while that boundary may still be on its way.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from tests.crash.harness import resumable, start
from tests.crash.test_joint_fsync import TOOLS as JOINT_TOOLS

from resumable.durability.log.records import RecordCodec
from resumable.store.base import StoredRecord
from resumable.store.filesystem import scan_frames
from resumable.store.heads import read_head

TOOLS = (
    JOINT_TOOLS
    + """

def note(text):
    with open("notes.txt", "a") as notes:
        notes.write(text + "\\n")


def die_once():
    if not os.path.exists("died"):
        open("died", "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
"""
)

QUIET = """\
from tools import book, die_once
a = await book(1)
die_once()
b = await book(2)
print("a", a, "b", b)
"""

PRINTING = """\
from tools import book, die_once
print("booked", await book(1))
die_once()
b = await book(2)
print("b", b)
"""


def _work(tmp_path: Path, name: str, script: str, *, died: bool = False) -> Path:
    work = tmp_path / name
    work.mkdir()
    (work / "tools.py").write_text(TOOLS)
    (work / "shape.py").write_text(script)
    if died:
        (work / "died").touch()  # the reference run: die_once() does nothing
    return work


def _env(work: Path) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH", "")]))
    return {"PYTHONPATH": path, "RESUMABLE_DURABILITY_SYNC": "fsync"}


def _ledger(work: Path) -> list[str]:
    return (work / "ledger.txt").read_text().splitlines()


@pytest.mark.parametrize("script", [QUIET, PRINTING], ids=["quiet", "printing"])
def test_a_kill_while_the_boundary_is_synced_resumes_exactly(tmp_path: Path, script: str) -> None:
    ref = _work(tmp_path, "ref", script, died=True)
    reference = resumable(["exec", "shape.py", "--run-id", "r"], ref, env=_env(ref))
    assert reference.code == 0, reference.stderr

    work = _work(tmp_path, "crash", script)
    crashed = resumable(["exec", "shape.py", "--run-id", "r"], work, env=_env(work))
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    resumed = resumable(["resume", "r"], work, env=_env(work))
    assert resumed.code == 0, resumed.stderr
    assert crashed.stdout + resumed.stdout == reference.stdout
    assert _ledger(work) == _ledger(ref)  # book(1) once: its statement had ended


def test_a_boundary_that_covers_printed_output_is_durable_before_the_next_statement(
    tmp_path: Path,
) -> None:
    """Held output is printed once its record is durable: a boundary covering some is not
    left to the background, or a kill in the next statement would lose the line."""
    work = _work(tmp_path, "crash", PRINTING)
    crashed = resumable(["exec", "shape.py", "--run-id", "r"], work, env=_env(work))
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    assert crashed.stdout == "booked 10\n"


NOTING = """\
from tools import book, note
a = await book(1)
note("a")
b = await book(2)
note("b")
"""


def test_crash_after_lands_exactly_on_a_boundary_that_could_be_synced_later(
    tmp_path: Path,
) -> None:
    """``RESUMABLE_CRASH_AFTER=N`` on the boundary of ``a = await book(1)``: the process dies
    once that record is durable, before the next statement writes its note."""
    ref = _work(tmp_path, "ref", NOTING)
    assert resumable(["exec", "shape.py", "--run-id", "r"], ref, env=_env(ref)).code == 0
    codec = RecordCodec((ref / ".resumable" / "key").read_bytes())
    end = NOTING.index("a = await book(1)") + len("a = await book(1)")
    (point,) = [
        record.seq
        for record in (codec.open(stored.data) for stored in _records(ref))
        if record.kind == "stmt" and record.body["end"] in (end, end + 1)
    ]
    work = _work(tmp_path, "crash", NOTING)
    env = {**_env(work), "RESUMABLE_CRASH_AFTER": str(point)}
    crashed = resumable(["exec", "shape.py", "--run-id", "r"], work, env=env)
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    assert [stored.seq for stored in _records(work)][-1] == point
    assert read_head(work / ".resumable" / "runs" / "r" / "head") == point
    assert not (work / "notes.txt").exists()  # note("a") never ran
    resumed = resumable(["resume", "r"], work, env=_env(work))
    assert resumed.code == 0, resumed.stderr
    assert (work / "notes.txt").read_text() == (ref / "notes.txt").read_text()
    assert _ledger(work) == _ledger(ref)


def _records(work: Path) -> list[StoredRecord]:
    log = work / ".resumable" / "runs" / "r" / "log"
    found: list[StoredRecord] = []
    for segment in sorted(log.glob("*.seg")):
        scan = scan_frames(segment.read_bytes())
        assert scan.reason is None
        found += scan.records
    return found


# Long enough for the fsync helper: it starts once 16 boundaries asked for it, and
# `pause()` waits until it is up; the store then measures both ways in an order drawn
# from its boundary count, so some of the later boundaries go to the helper.
HELPER_TOOLS = (
    JOINT_TOOLS
    + """
import time

from resumable.store.filesystem import background_fsync


def pause():
    # the helper was started by the 16th boundary: wait until it says it is up
    deadline = time.monotonic() + 60
    while not background_fsync._helper.ready() and time.monotonic() < deadline:
        time.sleep(0.01)


def die_in_flight():
    # the boundary of the statement before was handed to the helper and not answered yet
    if background_fsync._helper._pending and not os.path.exists("died"):
        open("died", "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
"""
)
LONG = (
    "from tools import book, die_in_flight, pause\ntotal = 0\n"
    + "".join(f"total += await book({n})\n" for n in range(1, 21))
    + "pause()\n"
    + "".join(f"total += await book({n})\ndie_in_flight()\n" for n in range(21, 81))
    + 'print("total", total)\n'
)


def _helper_work(tmp_path: Path, name: str, *, died: bool = False) -> Path:
    work = _work(tmp_path, name, LONG, died=died)
    (work / "tools.py").write_text(HELPER_TOOLS)
    return work


def _once_but_in_flight(booked: list[str], reference: list[str]) -> None:
    """Every booking of the reference, in its order; only one may come twice (the one in
    flight at the kill), with the same key."""
    assert set(booked) == set(reference)
    assert len(booked) - len(reference) <= 1
    assert [line for n, line in enumerate(booked) if line not in booked[:n]] == reference


def test_a_kill_while_the_helper_syncs_a_boundary_resumes_exactly(tmp_path: Path) -> None:
    ref = _helper_work(tmp_path, "ref", died=True)
    reference = resumable(["exec", "shape.py", "--run-id", "r"], ref, env=_env(ref))
    assert reference.code == 0, reference.stderr
    assert reference.stdout == f"total {sum(range(1, 81)) * 10}\n"

    work = _helper_work(tmp_path, "crash")
    crashed = resumable(["exec", "shape.py", "--run-id", "r"], work, env=_env(work))
    assert crashed.code == -signal.SIGKILL, "no boundary went to the helper"
    resumed = resumable(["resume", "r"], work, env=_env(work))
    assert resumed.code == 0, resumed.stderr
    assert crashed.stdout + resumed.stdout == reference.stdout
    assert _ledger(work) == _ledger(ref)  # the boundary in the helper was written: no repeat


@pytest.mark.parametrize("seed", range(3))
def test_kills_from_outside_while_the_helper_serves_resume_exactly(
    tmp_path: Path, seed: int
) -> None:
    ref = _helper_work(tmp_path, "ref", died=True)
    reference = resumable(["exec", "shape.py", "--run-id", "r"], ref, env=_env(ref))
    assert reference.code == 0, reference.stderr

    work = _helper_work(tmp_path, "crash", died=True)
    process = start(["exec", "shape.py", "--run-id", "r"], work, env=_env(work))
    # past the pause, the helper up: once a number of bookings drawn from the seed is in
    # the ledger, wherever the run is then
    booked = random.Random(seed).randint(22, 70)
    while len(_ledger_or_none(work)) < booked and process.poll() is None:
        time.sleep(0.0005)
    process.kill()
    crashed_out, _ = process.communicate()
    assert process.returncode == -signal.SIGKILL, "the run ended before the kill"
    resumed = resumable(["resume", "r"], work, env=_env(work))
    assert resumed.code == 0, resumed.stderr
    assert crashed_out + resumed.stdout == reference.stdout
    _once_but_in_flight(_ledger(work), _ledger(ref))


def _ledger_or_none(work: Path) -> list[str]:
    try:
        return _ledger(work)
    except FileNotFoundError:
        return []
