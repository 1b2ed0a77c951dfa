"""`resumable worker` and `resumable submit` with real processes on one PostgreSQL schema.

Runs are submitted, workers are started, killed (SIGKILL), paused (SIGSTOP) and stopped
(SIGTERM); what the runs print and the effects they book must equal an uninterrupted
run's, with only the await in flight at a crash booked twice, under the same key.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from resumable.config import load_config
from resumable.fleet.worker import queue_run
from resumable.store.postgres import PostgresStore

from .harness import (
    LEDGER_SCRIPT,
    REPO,
    Process,
    Schema,
    env_for,
    read_lines,
    resumable,
    strip_run,
    wait_until,
)

pytestmark = pytest.mark.postgres

Spawn = Callable[..., Process]
Reference = tuple[list[str], list[str]]
DELAY = "0.2"
"""Seconds each booked effect of the ledger script takes: long enough to stop a worker mid-await."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """stdout and ledger (run id stripped) of the ledger script run once, uninterrupted."""
    work = tmp_path_factory.mktemp("reference")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env.update(LEDGER=str(work / "ledger.txt"), RESUMABLE_DURABILITY_SYNC="flush")
    done = resumable(["exec", str(LEDGER_SCRIPT), "--run-id", "ref"], work, env)
    assert done.code == 0, done.stderr
    ledger = strip_run(read_lines(work / "ledger.txt"), "ref")
    assert len(ledger) == len(set(ledger)) == 10
    return done.stdout.splitlines(), ledger


def submit(schema: Schema, tmp_path: Path, program: Path) -> str:
    done = resumable(["submit", str(program)], tmp_path, env_for(schema))
    assert done.code == 0, done.stderr
    return done.stdout.strip()


def ready(*workers: Process) -> None:
    for worker in workers:
        worker.wait_for(r"ready \(concurrency", timeout=20)


def owner_of(run_id: str, workers: tuple[Process, ...], *, timeout: float = 20) -> Process:
    """The worker that started the run."""
    return wait_until(
        lambda: next((w for w in workers if w.matches(f"started run {run_id}")), None),
        timeout=timeout,
        what=f"a worker to start {run_id}",
    )


def booked(ledger: Path, count: int) -> None:
    """Wait until ``count`` effects are booked, then until the next one is under way."""
    wait_until(lambda: len(read_lines(ledger)) >= count, timeout=20, what=f"{count} effects")
    time.sleep(float(DELAY) / 2)


def assert_same_effects(ledger: list[str], run_id: str, reference: Reference) -> None:
    """Every effect of the uninterrupted run, in its order; a repeat only under the same key."""
    lines = strip_run(ledger, run_id)
    assert list(dict.fromkeys(lines)) == reference[1]
    assert max(Counter(lines).values()) <= 2


def test_a_submitted_script_runs_on_a_worker_as_it_runs_alone(
    schema: Schema, spawn: Spawn, tmp_path: Path, reference: Reference
) -> None:
    ledger = tmp_path / "ledger.txt"
    run_id = submit(schema, tmp_path, LEDGER_SCRIPT)
    assert schema.runs()[run_id]["status"] == "pending"

    worker = spawn("worker", LEDGER=str(ledger))
    worker.wait_for(f"completed run {run_id}", timeout=30)
    assert worker.stop() == 0

    assert worker.out == reference[0]
    assert strip_run(read_lines(ledger), run_id) == reference[1]
    row = schema.runs()[run_id]
    assert (row["status"], row["owner"]) == ("completed", None)
    assert worker.matches(f"claimed run {run_id}")
    assert worker.matches(f"started run {run_id}")
    assert worker.matches(r"stopped: 1 claimed, 1 completed")


def test_failover_after_sigkill_finishes_the_run_on_the_other_worker(
    schema: Schema, spawn: Spawn, tmp_path: Path, reference: Reference
) -> None:
    ledger = tmp_path / "ledger.txt"
    workers = tuple(spawn("worker", LEDGER=str(ledger), BOOK_DELAY=DELAY) for _ in range(2))
    ready(*workers)
    run_id = submit(schema, tmp_path, LEDGER_SCRIPT)
    first = owner_of(run_id, workers)
    (second,) = [w for w in workers if w is not first]
    booked(ledger, 3)

    first.signal(signal.SIGKILL)
    assert first.finish() == -signal.SIGKILL
    second.wait_for(f"resumed run {run_id} from record", timeout=20)
    second.wait_for(f"completed run {run_id}", timeout=30)
    assert second.stop() == 0

    assert first.out + second.out == reference[0]
    assert_same_effects(read_lines(ledger), run_id, reference)
    row = schema.runs()[run_id]
    assert (row["status"], row["owner"]) == ("completed", None)


def test_a_paused_worker_is_fenced_and_drops_the_run_but_keeps_running(
    schema: Schema, spawn: Spawn, tmp_path: Path, reference: Reference
) -> None:
    ledger = tmp_path / "ledger.txt"
    workers = tuple(spawn("worker", LEDGER=str(ledger), BOOK_DELAY=DELAY) for _ in range(2))
    ready(*workers)
    run_id = submit(schema, tmp_path, LEDGER_SCRIPT)
    paused = owner_of(run_id, workers)
    (other,) = [w for w in workers if w is not paused]
    booked(ledger, 3)

    paused.signal(signal.SIGSTOP)
    try:
        other.wait_for(f"resumed run {run_id} from record", timeout=20)
    finally:
        paused.signal(signal.SIGCONT)
    paused.wait_for(f"fenced run {run_id}: .*stale", timeout=20)
    other.wait_for(f"completed run {run_id}", timeout=30)

    assert paused.popen.poll() is None, "the fenced worker must keep running"
    assert paused.stop() == 0
    assert other.stop() == 0
    assert len(paused.matches(f"run {run_id}")) == 3  # claimed, started, fenced: nothing more
    assert paused.matches(r"stopped: 1 claimed, 1 fenced")
    assert_same_effects(read_lines(ledger), run_id, reference)
    row = schema.runs()[run_id]
    assert (row["status"], row["owner"]) == ("completed", None)


def test_sigterm_finishes_the_current_await_and_another_worker_claims_the_run_at_once(
    schema: Schema, spawn: Spawn, tmp_path: Path, reference: Reference
) -> None:
    ledger = tmp_path / "ledger.txt"
    first = spawn("worker", LEDGER=str(ledger), BOOK_DELAY=DELAY)
    run_id = submit(schema, tmp_path, LEDGER_SCRIPT)
    first.wait_for(f"started run {run_id}", timeout=20)
    booked(ledger, 3)

    assert first.stop(timeout=10) == 0
    stopped = first.wait_for(f"stopped run {run_id}: after record (\\d+); released", timeout=1)
    assert len(read_lines(ledger)) in (3, 4)  # no effect started after the one in flight
    row = schema.runs()[run_id]
    assert (row["status"], row["owner"]) == ("running", None)  # claimable at once

    second = spawn("worker", LEDGER=str(ledger))
    second.wait_for(f"resumed run {run_id} from record {stopped[1]} ", timeout=5)
    second.wait_for(f"completed run {run_id}", timeout=20)
    assert second.stop() == 0

    assert first.out + second.out == reference[0]
    assert strip_run(read_lines(ledger), run_id) == reference[1]  # nothing booked twice


def test_a_run_waiting_for_input_is_left_alone(
    schema: Schema, spawn: Spawn, tmp_path: Path
) -> None:
    run_id = submit(schema, tmp_path, REPO / "examples" / "approval" / "approval.pb")
    worker = spawn("worker", "--poll", "0.05")
    worker.wait_for(f"waiting run {run_id}: for input \\(What should I buy\\?\\)", timeout=30)
    time.sleep(0.5)  # ten polls
    assert worker.stop() == 0

    assert len(worker.matches(f"claimed run {run_id}")) == 1
    row = schema.runs()[run_id]
    assert (row["status"], row["owner"]) == ("waiting", None)


TINY = """
import asyncio, os
import resumable

async def effect(n):
    await asyncio.sleep(0.02)
    key = resumable.idempotency_key()
    with open(os.environ["LEDGER"], "a") as ledger:
        ledger.write(key + "\\n")
    return key

keys = []
for n in range(3):
    keys.append(await effect(n))
print("done", keys[0].split("/")[0], len(keys))
"""


def test_a_hundred_runs_on_two_workers_each_run_once(
    schema: Schema, spawn: Spawn, tmp_path: Path
) -> None:
    script = tmp_path / "tiny.py"
    script.write_text(TINY, encoding="utf-8")
    ledger = tmp_path / "ledger.txt"
    # Nothing is killed here: a lease long enough that fifty runs on a loaded machine cannot
    # starve its renewal (a lapsed one lets the other worker repeat the step in flight).
    long_lease = {"LEDGER": str(ledger), "RESUMABLE_DURABILITY_LEASE_SECONDS": "20"}
    workers = tuple(spawn("worker", "--concurrency", "50", **long_lease) for _ in range(2))
    ready(*workers)

    async def queue() -> list[str]:
        env = env_for(schema)
        config = load_config(None, cwd=tmp_path, env=env)
        async with PostgresStore.from_url(schema.url, sync="flush") as store:
            return [await queue_run(store, script, config, env=env) for _ in range(100)]

    run_ids = asyncio.run(queue())
    assert len(set(run_ids)) == 100
    wait_until(
        lambda: all(r["status"] == "completed" for r in schema.runs().values()),
        timeout=60,
        what="100 runs to complete",
        every=0.25,
    )
    for worker in workers:
        assert worker.stop() == 0

    printed = Counter(line.split()[1] for w in workers for line in w.out)
    assert printed == Counter(run_ids)  # every run's output once: none lost, none run twice
    assert all(line.endswith(" 3") for w in workers for line in w.out)
    effects = read_lines(ledger)
    assert len(effects) == len(set(effects)) == 300
    completed = Counter(m[1] for w in workers for m in w.matches(r"completed run (\S+)"))
    assert completed == Counter(run_ids)
    assert all(w.matches(r"completed run") for w in workers), "both workers took runs"
    rows = schema.runs()
    assert {(r["status"], r["owner"], r["epoch"]) for r in rows.values()} == {
        ("completed", None, 2)  # epoch 1 wrote the run record, epoch 2 ran it: one claim each
    }


def test_submit_and_worker_refuse_a_store_workers_cannot_share(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    for args in (["submit", str(LEDGER_SCRIPT)], ["worker"]):
        done = resumable(args, tmp_path, env)
        assert done.code == 2
        assert f"`resumable {args[0]}` needs a store that workers claim runs from" in done.stderr
        assert 'store = "postgres"' in done.stderr


def test_submit_refuses_what_it_cannot_run(schema: Schema, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("x = (\n", encoding="utf-8")
    notes = tmp_path / "notes.txt"
    notes.write_text("hello", encoding="utf-8")
    for path, message in (
        (broken, "broken.py:1: the script does not parse"),
        (notes, "takes a .py script or a .pb program"),
        (tmp_path / "missing.py", "missing.py: no such file"),
    ):
        done = resumable(["submit", str(path)], tmp_path, env_for(schema))
        assert done.code == 2, done.stderr
        assert message in done.stderr
        assert done.stdout == ""
    assert schema.runs() == {}


def test_a_worker_that_cannot_open_a_run_parks_it_for_a_lease_instead_of_looping(
    schema: Schema, spawn: Spawn, tmp_path: Path, reference: Reference
) -> None:
    ledger = tmp_path / "ledger.txt"
    run_id = submit(schema, tmp_path, LEDGER_SCRIPT)
    wrong = spawn(
        "worker",
        "--poll",
        "0.05",
        RESUMABLE_MAC_KEY="not the key of this store",
        # a lease long enough that a loaded machine cannot let it lapse while we watch
        RESUMABLE_DURABILITY_LEASE_SECONDS="8",
    )
    wrong.wait_for(
        f"parked run {run_id}: record 1 of run {run_id} fails authentication", timeout=20
    )
    # parked under the lease it was claimed with, renewed: never let go, so no claim (this
    # worker's next poll, another worker's) could take the run between a release and a park
    (claimed,) = wrong.matches(f"claimed run {run_id}: lease epoch (\\d+)")
    (held,) = schema.query(
        f"SELECT owner, epoch, extract(epoch FROM lease_expires_at - now()) AS left "
        f"FROM {schema.name}.runs WHERE run_id = $1",
        run_id,
    )
    assert held["epoch"] == int(claimed[1]), "\n".join(wrong.err)
    assert held["left"] > 4  # a lease of 8 s renewed at the park
    time.sleep(1)  # twenty polls, inside the parked lease
    assert wrong.stop() == 0
    assert len(wrong.matches(f"claimed run {run_id}")) == 1, "\n".join(wrong.err)
    assert schema.runs()[run_id]["status"] == "pending"  # nothing was written to the run

    right = spawn("worker", LEDGER=str(ledger))
    right.wait_for(f"completed run {run_id}", timeout=20)
    assert right.stop() == 0
    assert right.out == reference[0]


POLL_SECONDS = 30.0
"""A poll interval no test waits out: a run claimed sooner was claimed on a notification."""


def queue_tiny(schema: Schema, tmp_path: Path) -> str:
    script = tmp_path / "tiny.py"
    script.write_text(TINY, encoding="utf-8")
    done = resumable(["submit", str(script)], tmp_path, env_for(schema))
    assert done.code == 0, done.stderr
    return done.stdout.strip()


def test_an_idle_worker_claims_a_submitted_run_without_waiting_for_its_poll(
    schema: Schema, spawn: Spawn, tmp_path: Path
) -> None:
    worker = spawn("worker", "--poll", str(POLL_SECONDS), LEDGER=str(tmp_path / "ledger.txt"))
    ready(worker)
    time.sleep(1)  # the worker's first claims found nothing; it now waits for its poll
    started = time.monotonic()
    run_id = queue_tiny(schema, tmp_path)
    worker.wait_for(f"completed run {run_id}", timeout=POLL_SECONDS / 2)
    assert time.monotonic() - started < POLL_SECONDS / 2
    assert worker.stop() == 0
    assert worker.out == [f"done {run_id} 3"]


def test_a_worker_that_lost_its_notifications_listens_again(
    schema: Schema, spawn: Spawn, tmp_path: Path
) -> None:
    worker = spawn("worker", "--poll", str(POLL_SECONDS), LEDGER=str(tmp_path / "ledger.txt"))
    ready(worker)
    time.sleep(1)
    ended = schema.query(
        "SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE query = $1",
        f'LISTEN "resumable:{schema.name}"',
    )
    assert ended == [{"ended": True}]  # the worker's listening connection, and only it
    time.sleep(2)  # the listening connection is replaced a second after it was lost
    run_id = queue_tiny(schema, tmp_path)
    worker.wait_for(f"completed run {run_id}", timeout=POLL_SECONDS / 2)
    assert worker.stop() == 0
    assert worker.out == [f"done {run_id} 3"]
