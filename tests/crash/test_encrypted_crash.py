"""kill -9 during encrypted runs, then resume: the output and the ledger of a run that never
crashed, on the file store and on SQLite.

A spread sample of kill points (not every record: each point is two processes) runs a few
at a time. At the middle point the crashed run is first offered a wrong key and no key:
each is refused in one line without touching the run, which the right key then finishes.
SQLite leases expire (there is no OS lock to die with the process), so there the resume
waits out a short lease first.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, Result, resumable, strip_run

from resumable.durability.log.crypto import generate_key

SCRIPT = EXAMPLES / "ledger.py"
KEY = generate_key()
POINTS = 6
PARALLEL = 3
LEASE_SECONDS = 0.5


@dataclass(frozen=True)
class Reference:
    """An uninterrupted encrypted run: what it printed, booked and wrote."""

    kind: str
    stdout: str
    ledger: list[str]
    records: int
    store: Path


def _setup(root: Path, name: str) -> Path:
    work = root / name
    work.mkdir()
    shutil.copy(SCRIPT, work / "ledger.py")
    return work


def _store(kind: str, work: Path) -> Path:
    return work / ("runs" if kind == "file" else "runs.db")


def _env(kind: str, work: Path, **changes: str) -> dict[str, str]:
    return {
        "RESUMABLE_DURABILITY_STORE": kind,
        "RESUMABLE_DURABILITY_PATH": str(_store(kind, work)),
        "RESUMABLE_DURABILITY_ENCRYPT": "1",
        "RESUMABLE_ENCRYPTION_KEY": KEY,
        "RESUMABLE_DURABILITY_LEASE_SECONDS": str(LEASE_SECONDS),
        "LEDGER": "ledger.txt",
        **changes,
    }


def _ledger(work: Path, run_id: str) -> list[str]:
    path = work / "ledger.txt"
    return strip_run(path.read_text().splitlines() if path.exists() else [], run_id)


@pytest.fixture(scope="module", params=["file", "sqlite"])
def reference(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Reference:
    kind: str = request.param
    work = _setup(tmp_path_factory.mktemp(f"reference-{kind}"), "ref")
    env = _env(kind, work)
    done = resumable(["exec", "ledger.py", "--run-id", "ref"], work, env=env)
    assert done.code == 0, done.stderr
    (row,) = json.loads(resumable(["runs", "--json"], work, env=env).stdout)
    assert row["status"] == "completed"
    return Reference(kind, done.stdout, _ledger(work, "ref"), row["records"], _store(kind, work))


def _stored_bytes(store: Path) -> bytes:
    files = [store] if store.is_file() else sorted(p for p in store.rglob("*") if p.is_file())
    return b"".join(path.read_bytes() for path in files)


def test_an_encrypted_reference_run_books_every_effect_once(reference: Reference) -> None:
    assert "closing balances:" in reference.stdout
    assert len(reference.ledger) == len(set(reference.ledger)) == 10
    assert reference.records > 20
    # the script's text and its values are in the store, but not readably
    stored = _stored_bytes(reference.store)
    for text in (b"transfer:alice->bob", b"closing balances"):
        assert text in SCRIPT.read_bytes()
        assert text not in stored


def _refused(result: Result, *words: str) -> None:
    """One error line naming what is wrong, exit 2, nothing printed by the program."""
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("resumable: error:")]
    assert len(errors) == 1, result.stderr
    assert all(word in errors[0] for word in words), errors[0]
    assert result.stdout == ""


def _crash_and_resume(
    root: Path, kind: str, point: int, *, wrong_keys_first: bool
) -> tuple[str, list[str]]:
    work = _setup(root, f"crash{point}")
    crashed = resumable(
        ["exec", "ledger.py", "--run-id", "r"],
        work,
        env=_env(kind, work, RESUMABLE_CRASH_AFTER=str(point)),
    )
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    if kind != "file":
        time.sleep(LEASE_SECONDS)  # the killed owner's lease runs out
    if wrong_keys_first:
        wrong = _env(kind, work, RESUMABLE_ENCRYPTION_KEY=generate_key())
        _refused(resumable(["resume", "r"], work, env=wrong), "RESUMABLE_ENCRYPTION_KEY")
        plain = _env(kind, work, RESUMABLE_DURABILITY_ENCRYPT="0")
        _refused(resumable(["resume", "r"], work, env=plain), "encrypted", "encrypt = true")
    resumed = resumable(["resume", "r"], work, env=_env(kind, work))
    assert resumed.code == 0, resumed.stderr
    return crashed.stdout + resumed.stdout, _ledger(work, "r")


def _spread(records: int) -> list[int]:
    """About POINTS kill points from the first record to the last but one."""
    last = records - 1
    return sorted({1 + round(i * (last - 1) / (POINTS - 1)) for i in range(POINTS)})


def test_kill_at_spread_records_then_resume_matches_uninterrupted_run(
    tmp_path: Path, reference: Reference
) -> None:
    points = _spread(reference.records)
    middle = points[len(points) // 2]
    with ThreadPoolExecutor(PARALLEL) as pool:
        outcomes = list(
            pool.map(
                lambda point: _crash_and_resume(
                    tmp_path, reference.kind, point, wrong_keys_first=point == middle
                ),
                points,
            )
        )
    assert len(points) >= POINTS - 1
    for point, (output, booked) in zip(points, outcomes, strict=True):
        assert output == reference.stdout, f"killed after record {point}"
        # killed right after a record was durable: no await in flight, each effect once
        assert booked == reference.ledger, f"killed after record {point}"
