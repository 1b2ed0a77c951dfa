"""Damaged stores: a resume is exact, or it refuses and says what is gone - on every store.

A run is killed after record 8 (its effects 0 and 1 done), then damaged the way an
operator, a disk or a lost file does it: records deleted from the tail or the middle,
a byte flipped, the metadata torn, SQLite's ``-wal`` lost, Redis's log key deleted.
The only outcomes allowed are "exact" (the resumed run prints and does what an
uninterrupted one does, each effect once) or "refused, said aloud" (exit 2, one error
line naming the run and what to do, no traceback, no effect repeated, the run still
listed: ``damaged`` when records it acknowledged are gone). Never a traceback, never a silent repeat, never a silent disappearance.
"""

from __future__ import annotations

import re
import secrets
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
from tests.crash.damage import FULL_STDOUT, LEDGER, RedisSite, Site, SQLiteSite
from tests.crash.harness import Result, resumable

from resumable.config import load_config
from resumable.durability.runs.repair import repair_run
from resumable.durability.runs.session import codec_for, store_for
from resumable.durability.runs.stored import list_runs

CRASH_AFTER = 8
AT_CRASH: list[str] = []
"""The effects booked when the run was killed after record CRASH_AFTER (the same every time)."""


def _ledger(work: Path) -> list[str]:
    path = work / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


_TEMPLATES: dict[str, tuple[Path, str, Result]] = {}


def _crashed(site: Site, work: Path) -> tuple[str, Result]:
    """A run killed right after record 8; its id and what it printed.

    The embedded stores live in the folder: one killed run per store is copied for
    every test. A server store gets a run of its own.
    """
    template = _TEMPLATES.get(site.kind)
    if template is not None:
        shutil.copytree(template[0], work, dirs_exist_ok=True)
        return template[1], template[2]
    run_id = f"d{secrets.token_hex(3)}"
    work.mkdir(exist_ok=True)
    site.prepare(work)
    crashed = resumable(
        ["exec", "s.py", "--run-id", run_id], work, env={"RESUMABLE_CRASH_AFTER": str(CRASH_AFTER)}
    )
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    booked = _ledger(work)
    assert 0 < len(booked) < len(LEDGER)
    assert booked == LEDGER[: len(booked)]
    assert AT_CRASH in ([], booked)
    AT_CRASH[:] = booked
    time.sleep(site.lease_seconds)  # the killed owner's lease runs out
    if site.lease_seconds == 0:
        keep = Path(tempfile.mkdtemp(prefix=f"resumable-damage-{site.kind}-"))
        shutil.copytree(work, keep, dirs_exist_ok=True)
        _TEMPLATES[site.kind] = (keep, run_id, crashed)
    return run_id, crashed


def _refused(result: Result, work: Path, ledger: list[str]) -> str:
    """Exit 2, one error line and nothing else run: no output, no effect again."""
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("resumable: error:")]
    assert len(errors) == 1, result.stderr
    assert _ledger(work) == ledger
    return errors[0]


async def _status(work: Path, run_id: str) -> str:
    """The run's status as `resumable runs` lists it (read in this process: it is quicker)."""
    config = load_config(cwd=work, env={})
    async with store_for(config.durability, config) as store:
        rows = {row.run_id: row for row in await list_runs(store)}
    assert run_id in rows, f"run {run_id} vanished from `resumable runs`"
    return rows[run_id].status


async def _repair(work: Path, run_id: str) -> str:
    """`resumable repair` in this process; what it would say."""
    config = load_config(cwd=work, env={})
    async with store_for(config.durability, config) as store:
        codec = await codec_for(store, config.durability, {})
        done = await repair_run(store, codec, run_id)
    return f"run {run_id}: metadata rebuilt from its {done.records} verified records"


async def test_a_lost_tail_is_refused_then_continued_aloud_with_accept_loss(
    site: Site, tmp_path: Path
) -> None:
    run_id, _ = _crashed(site, tmp_path)
    await site.delete(tmp_path, run_id, [CRASH_AFTER - 1, CRASH_AFTER])
    error = _refused(resumable(["resume", run_id], tmp_path), tmp_path, AT_CRASH)
    assert f"run {run_id}: records 7-8 are missing from" in error
    assert "--accept-loss" in error
    assert await _status(tmp_path, run_id) == "damaged"  # with the line naming what is gone

    accepted = resumable(["resume", run_id, "--accept-loss"], tmp_path)
    assert accepted.code == 0, accepted.stderr
    assert "Traceback" not in accepted.stderr
    warned = [line for line in accepted.stderr.splitlines() if "records 7-8" in line]
    assert len(warned) == 1
    assert warned[0].startswith("resumable: warning:")
    # Said aloud, and only the effect whose records were lost ran again.
    ledger = _ledger(tmp_path)
    assert sorted(set(ledger)) == LEDGER
    assert len(ledger) <= len(LEDGER) + 1
    assert await _status(tmp_path, run_id) == "completed"


async def test_a_record_lost_from_the_middle_is_refused_with_the_fork_to_take(
    site: Site, tmp_path: Path
) -> None:
    run_id, _ = _crashed(site, tmp_path)
    await site.delete(tmp_path, run_id, [3])
    for flags in ([], ["--accept-loss"]):
        error = _refused(resumable(["resume", run_id, *flags], tmp_path), tmp_path, AT_CRASH)
        assert f"run {run_id}: record 3 is missing from the middle of its log" in error
        assert f"resumable fork {run_id} --at 2" in error
    assert await _status(tmp_path, run_id) == "damaged"  # with the line naming what is gone


async def test_a_flipped_byte_in_a_record_is_refused(site: Site, tmp_path: Path) -> None:
    run_id, _ = _crashed(site, tmp_path)
    await site.flip(tmp_path, run_id, 4)
    error = _refused(resumable(["resume", run_id], tmp_path), tmp_path, AT_CRASH)
    assert f"run {run_id}" in error
    assert re.search(r"records? 4\b", error)
    # The folder's CRC shows the damage to a listing; elsewhere only the MAC, on resume.
    assert await _status(tmp_path, run_id) == ("damaged" if site.kind == "file" else "crashed")


async def test_torn_metadata_is_listed_damaged_repaired_and_resumed_exactly(
    site: Site, tmp_path: Path
) -> None:
    run_id, crashed = _crashed(site, tmp_path)
    await site.tear_meta(tmp_path, run_id)
    if site.kind == "file":  # the command line once; the other stores share its code
        listed = resumable(["runs"], tmp_path)
        assert listed.code == 0
        assert run_id in listed.stdout
        assert "damaged" in listed.stdout
        assert f"`resumable repair {run_id}`" in listed.stderr
    assert await _status(tmp_path, run_id) == "damaged"
    error = _refused(resumable(["resume", run_id], tmp_path), tmp_path, AT_CRASH)
    assert f"resumable repair {run_id}" in error

    if site.kind == "file":
        repaired = resumable(["repair", run_id], tmp_path)
        assert repaired.code == 0, repaired.stderr
        said = repaired.stderr
    else:
        said = await _repair(tmp_path, run_id)
    assert f"run {run_id}: metadata rebuilt from its {CRASH_AFTER} verified records" in said
    assert await _status(tmp_path, run_id) == "crashed"
    resumed = resumable(["resume", run_id], tmp_path)
    assert resumed.code == 0, resumed.stderr
    assert crashed.stdout + resumed.stdout == FULL_STDOUT
    assert _ledger(tmp_path) == LEDGER
    assert await _status(tmp_path, run_id) == "completed"


async def test_sqlite_a_lost_wal_is_said_and_the_run_is_still_listed(tmp_path: Path) -> None:
    site = SQLiteSite()
    run_id, _ = _crashed(site, tmp_path)
    site.lose_wal(tmp_path)
    error = _refused(resumable(["resume", run_id], tmp_path), tmp_path, AT_CRASH)
    assert f"run {run_id}" in error
    assert "-wal" in error
    assert await _status(tmp_path, run_id) == "damaged"


@pytest.mark.redis
async def test_redis_a_deleted_log_key_is_refused_every_time_without_a_traceback(
    tmp_path: Path,
) -> None:
    site = RedisSite()
    try:
        run_id, _ = _crashed(site, tmp_path)
        await site.delete_log(run_id)
        error = _refused(resumable(["resume", run_id], tmp_path), tmp_path, AT_CRASH)
        assert f"records 1-{CRASH_AFTER} are missing" in error
        assert await _status(tmp_path, run_id) == "damaged"
    finally:
        await site.cleanup()
