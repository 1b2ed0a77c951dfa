"""What a durable script's user is promised about a resume, shown through the real command.

Each test runs a small script with ``resumable exec``, kills it with
``RESUMABLE_CRASH_AFTER`` (or from inside the script) at a chosen record, resumes it
with ``resumable resume`` and compares with a run that was never interrupted.
Records are chosen by reading the reference run's log, never by counting by hand.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest
from tests.crash.harness import Result, resumable

from resumable.durability.log.records import Record, RecordCodec
from resumable.store.filesystem import scan_frames


def _work(tmp_path: Path, name: str, source: str, **files: str) -> Path:
    work = tmp_path / name
    work.mkdir()
    (work / "script.py").write_text(source)
    for file_name, text in files.items():
        (work / file_name).write_text(text)
    return work


def _exec(
    work: Path, run_id: str, *, crash_after: int | None = None, env: dict[str, str] | None = None
) -> Result:
    full_env = dict(env or {})
    if crash_after is not None:
        full_env["RESUMABLE_CRASH_AFTER"] = str(crash_after)
    return resumable(["exec", "script.py", "--run-id", run_id], work, env=full_env)


def _records(work: Path, run_id: str) -> list[Record]:
    """The run's log, decoded (the MAC key is the store's own)."""
    codec = RecordCodec((work / ".resumable" / "key").read_bytes())
    log = work / ".resumable" / "runs" / run_id / "log"
    records = []
    for segment in sorted(log.glob("*.seg")):
        scan = scan_frames(segment.read_bytes())
        assert scan.reason is None
        records += [codec.open(stored.data) for stored in scan.records]
    return records


def _after_statement(records: list[Record], source: str, statement: str) -> int:
    """Seq of the record written when the top-level ``statement`` finished."""
    end = source.index(statement) + len(statement)
    (seq,) = [r.seq for r in records if r.kind == "stmt" and r.body["end"] in (end, end + 1)]
    return seq


def _crash_then_resume(
    work: Path, point: int, *, env: dict[str, str] | None = None
) -> tuple[Result, Result]:
    crashed = _exec(work, "r", crash_after=point, env=env)
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    return crashed, resumable(["resume", "r"], work, env=env)


ALIASES = """\
import asyncio


async def fetch(n):
    await asyncio.sleep(0)
    return n


a = [0]
b = a
x = await fetch(1)
b.append(x)
y = await fetch(2)
b.append(y)
print(a, b, a is b)
"""


def test_aliasing_between_variables_survives_a_resume(tmp_path: Path) -> None:
    reference = _work(tmp_path, "reference", ALIASES)
    done = _exec(reference, "r")
    assert done.code == 0, done.stderr
    assert done.stdout.rstrip().endswith("True")
    records = _records(reference, "r")
    aliased = _after_statement(records, ALIASES, "b = a")
    first_append = _after_statement(records, ALIASES, "b.append(x)")
    awaits = [r.seq for r in records if r.kind == "await" and aliased < r.seq < first_append]
    # killed inside `x = await fetch(1)`, and after the first append
    for point in (awaits[-1], first_append):
        work = _work(tmp_path, f"crash{point}", ALIASES)
        crashed, resumed = _crash_then_resume(work, point)
        assert resumed.code == 0, resumed.stderr
        assert crashed.stdout + resumed.stdout == done.stdout


GLOBALS = """\
import asyncio

count = 0


def bump(by):
    global count
    count += by
    return count


async def fetch(n):
    await asyncio.sleep(0)
    return n


bump(await fetch(1))
bump(await fetch(10))
print("count", count, "bump says", bump(0))
"""


def test_functions_using_global_keep_working_after_a_resume(tmp_path: Path) -> None:
    reference = _work(tmp_path, "reference", GLOBALS)
    done = _exec(reference, "r")
    assert done.code == 0, done.stderr
    records = _records(reference, "r")
    first = _after_statement(records, GLOBALS, "bump(await fetch(1))")
    second = _after_statement(records, GLOBALS, "bump(await fetch(10))")
    in_second = [r.seq for r in records if r.kind == "await" and first < r.seq < second]
    for point in (first, in_second[-1]):
        work = _work(tmp_path, f"crash{point}", GLOBALS)
        crashed, resumed = _crash_then_resume(work, point)
        assert resumed.code == 0, resumed.stderr
        # If bump's globals were a copy, `count` would stay 1 while bump counted to 11.
        assert crashed.stdout + resumed.stdout == done.stdout


LOST = """\
import asyncio
import socket
import threading


async def fetch(n):
    await asyncio.sleep(0)
    return n


{name} = {make}
{setup}
value = await fetch(1)
print("value", value)
print("in use", {use})
"""


@pytest.mark.parametrize(
    ("name", "make", "setup", "use", "kind"),
    [
        ("worker", "threading.Thread(target=int)", "worker.start()", "worker.name", "thread"),
        ("conn", "socket.socket()", "conn.setblocking(False)", "conn.fileno()", "socket"),
    ],
)
def test_a_variable_that_cannot_be_checkpointed_fails_by_name_when_used_after_resume(
    tmp_path: Path, name: str, make: str, setup: str, use: str, kind: str
) -> None:
    source = LOST.format(name=name, make=make, setup=setup, use=use)
    reference = _work(tmp_path, "reference", source)
    done = _exec(reference, "r")
    assert done.code == 0, done.stderr
    assert f"variable {name!r} cannot be checkpointed" in done.stderr
    assert kind in done.stderr
    point = _after_statement(_records(reference, "r"), source, "value = await fetch(1)")

    work = _work(tmp_path, "crash", source)
    crashed, resumed = _crash_then_resume(work, point)
    assert resumed.code == 1
    # everything up to the use of the lost variable, which fails
    assert crashed.stdout + resumed.stdout == done.stdout.split("in use")[0]
    assert "LostVariableError" in resumed.stderr
    assert f"variable {name!r} could not be checkpointed" in resumed.stderr
    assert resumed.stderr.rstrip().endswith("resumable: run r failed")
    runs = resumable(["runs", "--json"], work)
    assert '"status": "failed"' in runs.stdout


NONDETERMINISTIC = """\
import asyncio
import os
import random


def fetch(what):
    return asyncio.sleep(0, what)  # a foreign await: journaled at the site that awaits it


{body}
print("got", first)
"""
DIFFERENT_SITES = """\
if 0.5 < float(os.environ["HEADS"]):  # random.random() would be journaled
    first = await fetch("heads")
else:
    first = await fetch("tails")"""
ONE_BRANCH_ONLY = """\
if True:
    first = await fetch("first")
    if 0.5 < float(os.environ["HEADS"]):  # random.random() would be journaled
        await fetch("bonus")"""


def _sites_of_awaits(records: list[Record]) -> list[str]:
    return [r.body["s"] for r in records if r.kind == "await"]


def test_a_statement_that_awaits_elsewhere_on_replay_names_both_sites(tmp_path: Path) -> None:
    source = NONDETERMINISTIC.format(body=DIFFERENT_SITES)
    reference = _work(tmp_path, "reference", source)
    assert _exec(reference, "r", env={"HEADS": "1"}).code == 0
    records = _records(reference, "r")
    (recorded,) = _sites_of_awaits(records)
    point = [r.seq for r in records if r.kind == "await"][-1]

    work = _work(tmp_path, "flip", source)
    crashed = _exec(work, "r", crash_after=point, env={"HEADS": "1"})
    assert crashed.code == -signal.SIGKILL
    resumed = resumable(["resume", "r"], work, env={"HEADS": "0"})
    assert resumed.code == 1
    assert resumed.stderr.count("resumable: error:") == 1
    status = json.loads(resumable(["runs", "--json"], work).stdout)[0]["status"]
    assert status == "failed"
    found = re.search(
        r"replay reached await site (\S+) where the log recorded site (\S+)", resumed.stderr
    )
    assert found is not None, resumed.stderr
    reached, logged = found.groups()
    assert logged == recorded
    assert reached != recorded
    # the site reached is the `else` branch's await: its line is the line of "tails"
    line = source[: source.index('fetch("tails")')].count("\n") + 1
    assert reached.split(":")[1] == str(line)
    assert "got" not in resumed.stdout


def test_a_statement_that_skips_a_recorded_await_on_replay_is_refused(tmp_path: Path) -> None:
    source = NONDETERMINISTIC.format(body=ONE_BRANCH_ONLY)
    reference = _work(tmp_path, "reference", source)
    assert _exec(reference, "r", env={"HEADS": "1"}).code == 0
    records = _records(reference, "r")
    bonus = _sites_of_awaits(records)[-1]
    point = [r.seq for r in records if r.kind == "await"][-1]

    work = _work(tmp_path, "flip", source)
    assert _exec(work, "r", crash_after=point, env={"HEADS": "1"}).code == -signal.SIGKILL
    resumed = resumable(["resume", "r"], work, env={"HEADS": "0"})
    assert resumed.code == 1
    assert f"without reaching await site {bonus}" in resumed.stderr
    assert "not deterministic" in resumed.stderr
    assert "got" not in resumed.stdout


RECORDED = """\
import asyncio


async def fetch(n):
    await asyncio.sleep(0)
    return n


print("version one starts")
total = await fetch(1)
total += await fetch(2)
print("version one total", total)
"""


def test_resume_runs_the_recorded_source_not_the_file_as_it_is_now(tmp_path: Path) -> None:
    reference = _work(tmp_path, "reference", RECORDED)
    done = _exec(reference, "r")
    assert done.code == 0, done.stderr
    point = _after_statement(_records(reference, "r"), RECORDED, "total = await fetch(1)")

    work = _work(tmp_path, "edited", RECORDED)
    crashed = _exec(work, "r", crash_after=point)
    assert crashed.code == -signal.SIGKILL
    edited = RECORDED.replace("version one", "version two").replace("fetch(2)", "fetch(200)")
    (work / "script.py").write_text(edited)
    shown = resumable(["show", "r", "--json"], work)
    assert shown.code == 0, shown.stderr
    assert "version one total" in shown.stdout
    assert "version two" not in shown.stdout
    resumed = resumable(["resume", "r"], work)
    assert resumed.code == 0, resumed.stderr
    assert crashed.stdout + resumed.stdout == done.stdout


BATCHED = """\
import asyncio
import os
import signal

import resumable


@resumable.step
async def effect(i):
    with open("effects.txt", "a") as log:
        log.write(f"{{i}}\\n")
    if i == {kill_at} and not os.path.exists("killed"):
        open("killed", "w").close()
        os.kill(os.getpid(), signal.SIGKILL)  # dies while this await is in flight
    return i


total = 0
for i in range(10):
    total += await effect(i)
print("total", total)
"""


@pytest.mark.parametrize("every", [1, 3])
def test_awaits_of_an_unflushed_batch_run_again_after_a_crash(tmp_path: Path, every: int) -> None:
    kill_at = 7
    source = BATCHED.format(kill_at=kill_at)
    config = f"[durability]\nevery = {every}\n"
    reference = _work(tmp_path, "reference", source, **{"playbooks.toml": config, "killed": ""})
    done = _exec(reference, "r")
    assert done.code == 0, done.stderr
    work = _work(tmp_path, "crash", source, **{"playbooks.toml": config})
    crashed = _exec(work, "r")
    assert crashed.code == -signal.SIGKILL
    resumed = resumable(["resume", "r"], work)
    assert resumed.code == 0, resumed.stderr
    assert crashed.stdout + resumed.stdout == done.stdout
    effects = [int(line) for line in (work / "effects.txt").read_text().split()]
    first_run, second_run = effects[: kill_at + 1], effects[kill_at + 1 :]
    assert first_run == list(range(kill_at + 1))
    # Made durable: whole batches of `every` awaits. The rest of the batch and the await
    # in flight run again; nothing before them does.
    durable = kill_at // every * every
    assert second_run == list(range(durable, 10))


HOOKS = """\
import os

from resumable.durability.log.checkpoints import CheckpointInfo


def before(info: CheckpointInfo) -> None:
    if os.environ.get("HOOKS_FAIL"):
        raise RuntimeError("before is broken")
    with open("hooks.log", "a") as log:
        log.write(f"before {info.seq} {info.kind} {info.records}\\n")


def after(info: CheckpointInfo) -> None:
    if os.environ.get("HOOKS_FAIL"):
        raise RuntimeError("after is broken")
    with open("hooks.log", "a") as log:
        log.write(f"after {info.seq} {info.kind} {info.records}\\n")
"""
HOOKED = """\
import asyncio

n = await asyncio.sleep(0, 20)
n += await asyncio.sleep(0, 22)
print("n", n)
"""
HOOK_CONFIG = """\
[durability]
before_checkpoint = "ckhooks:before"
after_checkpoint = "ckhooks:after"
"""


def test_checkpoint_hooks_are_called_around_every_checkpoint(tmp_path: Path) -> None:
    work = _work(tmp_path, "hooks", HOOKED, **{"ckhooks.py": HOOKS, "playbooks.toml": HOOK_CONFIG})
    done = _exec(work, "r")
    assert done.code == 0, done.stderr
    records = _records(work, "r")
    calls = [line.split() for line in (work / "hooks.log").read_text().splitlines()]
    # A before and an after around each checkpoint, in order, covering every record once.
    assert [c[0] for c in calls] == ["before", "after"] * (len(calls) // 2)
    befores, afters = calls[0::2], calls[1::2]
    assert [b[1:] for b in befores] == [a[1:] for a in afters]
    assert sum(int(a[3]) for a in afters) == len(records)
    assert [int(a[1]) for a in afters] == sorted({int(a[1]) for a in afters})
    assert int(afters[-1][1]) == records[-1].seq
    assert {a[2] for a in afters} >= {"run", "await", "stmt", "status"}


def test_a_failing_hook_warns_once_and_the_run_goes_on(tmp_path: Path) -> None:
    plain = _work(tmp_path, "plain", HOOKED)
    expected = _exec(plain, "r")
    files = {"ckhooks.py": HOOKS, "playbooks.toml": HOOK_CONFIG}
    work = _work(tmp_path, "failing", HOOKED, **files)
    done = _exec(work, "r", env={"HOOKS_FAIL": "1"})
    assert done.code == 0, done.stderr
    assert done.stdout == expected.stdout
    warnings = [line for line in done.stderr.splitlines() if "hook failed" in line]
    assert len(warnings) == 2
    assert any("before_checkpoint hook failed" in w and "before is broken" in w for w in warnings)
    assert any("after_checkpoint hook failed" in w and "after is broken" in w for w in warnings)
    assert all(w.startswith("resumable: warning: ") for w in warnings)
    # and the checkpoints were written: the run resumes after a crash with failing hooks
    again = _work(tmp_path, "again", HOOKED, **files)
    point = len(_records(work, "r")) - 2
    crashed, resumed = _crash_then_resume(again, point, env={"HOOKS_FAIL": "1"})
    assert resumed.code == 0, resumed.stderr
    assert crashed.stdout + resumed.stdout == expected.stdout


def test_durability_disabled_runs_the_script_without_checkpoints(tmp_path: Path) -> None:
    durable = _work(tmp_path, "durable", ALIASES)
    expected = _exec(durable, "r")
    work = _work(
        tmp_path, "plain", ALIASES, **{"playbooks.toml": "[durability]\nenabled = false\n"}
    )
    done = _exec(work, "r", crash_after=2)  # nothing is checkpointed, so nothing crashes
    assert done.code == 0, done.stderr
    assert done.stdout == expected.stdout
    assert not (work / ".resumable").exists()
    assert "Traceback" not in done.stderr


SWALLOWING = """\
try:
    if 0.5 < float(os.environ["HEADS"]):  # random.random() would be journaled
        first = await fetch("heads")
    else:
        first = await fetch("tails")
except Exception:
    first = "swallowed"
"""


def test_except_exception_in_the_program_cannot_swallow_a_divergence(tmp_path: Path) -> None:
    source = NONDETERMINISTIC.format(body=SWALLOWING)
    reference = _work(tmp_path, "reference", source)
    assert _exec(reference, "r", env={"HEADS": "1"}).code == 0
    point = [r.seq for r in _records(reference, "r") if r.kind == "await"][-1]

    work = _work(tmp_path, "flip", source)
    assert _exec(work, "r", crash_after=point, env={"HEADS": "1"}).code == -signal.SIGKILL
    resumed = resumable(["resume", "r"], work, env={"HEADS": "0"})
    assert resumed.code == 1
    assert "swallowed" not in resumed.stdout
    assert "is not deterministic" in resumed.stderr
    status = json.loads(resumable(["runs", "--json"], work).stdout)[0]["status"]
    assert status == "failed"
