"""An owner paused past its lease, woken after another took its run, runs nothing more of it.

Real processes on PostgreSQL and Redis with a 1 s lease: the first owner is SIGSTOPped
mid-run, a `resume` takes the run over and finishes it, then the first owner is woken.
Its program wraps every await in ``try/except Exception``, yet it books no further effect:
it stops (exit 75, "another process owns it now") at its next record or effect.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from tests.crash.damage import SITES
from tests.crash.harness import resumable, start

STEPS = 10
PROGRAM = f"""\
import asyncio, os
import resumable

@resumable.step
async def book(i):
    await asyncio.sleep(0.3)
    with open("ledger.txt", "a") as ledger:
        ledger.write(f"{{resumable.idempotency_key()}} {{i}} {{os.getpid()}}\\n")
    return i

done = []
for i in range({STEPS}):
    try:
        done.append(await book(i))
    except Exception as exc:
        print("the program caught", type(exc).__name__, exc)
print("done", sum(done))
"""


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_a_paused_owner_woken_after_a_takeover_books_nothing_more(
    tmp_path: Path, kind: str
) -> None:
    site = SITES[kind]()
    site.lease_seconds = 1  # type: ignore[misc]
    (tmp_path / "playbooks.toml").write_text(site.config())
    (tmp_path / "p.py").write_text(PROGRAM)
    ledger = tmp_path / "ledger.txt"
    first = start(["exec", "p.py", "--run-id", "paused"], tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not ledger.exists() or len(ledger.read_text().splitlines()) < 3:
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the run never booked 3 effects"
            time.sleep(0.02)
        first.send_signal(signal.SIGSTOP)
        time.sleep(2.5)  # past its 1 s lease (not an assertion: the takeover needs it)
        taken = resumable(["resume", "paused"], tmp_path, timeout=120)
        assert taken.code == 0, taken.stderr
        assert f"done {sum(range(STEPS))}" in taken.stdout
        booked_before_waking = ledger.read_text().splitlines()
        first.send_signal(signal.SIGCONT)
        stdout, stderr = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGCONT)
            first.kill()
            first.wait()
        asyncio.run(site.cleanup())
    assert first.returncode == 75, stderr
    assert "another process owns it now" in stderr
    assert "the program caught" not in stdout
    woken = [line for line in ledger.read_text().splitlines() if line not in booked_before_waking]
    assert len(woken) <= 1, woken  # at most the step it was in when paused, nothing after
    effects = {line.split()[0]: int(line.split()[1]) for line in ledger.read_text().splitlines()}
    assert sorted(effects.values()) == list(range(STEPS))
