"""A record lost from below a snapshot, and snapshots lost, on every store (real processes).

A resume folds only what follows the newest snapshot, so a record deleted from under
it (an SQL DELETE, a Redis sorted-set entry removed, a frame cut out of a segment) was
once unseen. Now `runs` lists the run ``damaged`` naming the missing seq and the fork
to take, `show` warns the same, and `resume` (with or without ``--force``) refuses with
that one line and exit 2, the store unchanged. Every store keeps the highest seq
pruned, so the first records deleted (or the first one a prune left) are reported
too, while a log pruned behind a snapshot is whole and resumes. Snapshots deleted: a
log that still starts at record 1 is folded again from the start (the same output,
each effect once); one pruned behind them is refused, never replayed from where it
starts.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tests.crash.damage import (
    PRUNED,
    SITES,
    SNAPSHOTS,
    Site,
    across_stores,
    booked,
    log_seqs,
    printed,
    resumes_to_the_end,
    run_script,
)
from tests.crash.harness import Result, resumable

from resumable.config import load_config
from resumable.durability.runs.session import store_for

TRIALS = 2
"""Random records deleted per store in the sampled matrix (scripts/damage_holes.py: all)."""


async def _rebuildable(work: Path, run_id: str, at: int) -> bool:
    """Whether the run's state at record ``at`` can be rebuilt: from record 1, or from a
    snapshot its log was pruned behind, the records up to ``at`` all there."""
    seqs = await log_seqs(work, run_id)
    base = 0
    if seqs[0] > 1:
        config = load_config(cwd=work, env={})
        async with store_for(config.durability, config) as store:
            newest = await store.get_snapshot(run_id, at)
        if newest is None or newest[0] < seqs[0] - 1:
            return False
        base = newest[0]
    after = [seq for seq in seqs if base < seq <= at]
    return after == list(range(base + 1, base + 1 + len(after)))


def _refused(result: Result, line: str) -> None:
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    errors = [e for e in result.stderr.splitlines() if e.startswith("resumable: error:")]
    assert errors == [f"resumable: error: {line}"], result.stderr


async def _check_reported(
    site: Site, work: Path, run_id: str, seq: int, last: int | None = None
) -> None:
    """`runs` and `show` name the hole, `resume` and `resume --force` refuse, nothing changes."""
    ledger, seqs = booked(work), await log_seqs(work, run_id)
    listed = resumable(["runs", "--json"], work)
    assert listed.code == 0, listed.stderr
    (row,) = [r for r in json.loads(listed.stdout) if r["run_id"] == run_id]
    assert row["status"] == "damaged"
    span = f"record {seq} is" if last in (None, seq) else f"records {seq}-{last} are"
    assert f"run {run_id}: {span} missing from the middle of its log" in row["problem"]
    if seq > 1 and seqs[0] == 1:
        assert f"resumable fork {run_id} --at {seq - 1}" in row["problem"]
        assert resumable(["fork", run_id, "--at", str(seq - 1)], work).code == 0
    else:  # the log's first records lost: no fork is suggested
        assert "resumable fork" not in row["problem"]
        assert "restore them from a backup of the store" in row["problem"]
        # a fork still works where a kept snapshot stands for what was lost
        forked = resumable(["fork", run_id, "--at", str(max(seqs))], work)
        assert forked.code == (0 if await _rebuildable(work, run_id, max(seqs)) else 2)
        assert "Traceback" not in forked.stderr
    shown = resumable(["show", run_id], work)
    assert shown.code == 0, shown.stderr
    assert f"resumable: warning: {row['problem']}" in shown.stderr
    for flags in ([], ["--force"]):
        _refused(resumable(["resume", run_id, *flags], work, env=SNAPSHOTS), row["problem"])
    assert booked(work) == ledger
    assert await log_seqs(work, run_id) == seqs


@pytest.mark.parametrize(
    ("site", "crash_after", "seq"),
    across_stores(  # each store sees a run finished and one crashed, each kind of record
        [
            pytest.param(None, 4, id="finished-under-a-snapshot"),
            pytest.param(14, 4, id="crashed-under-a-snapshot"),
            pytest.param(14, 6, id="crashed-a-snapshot's-own"),
            pytest.param(None, 6, id="finished-a-snapshot's-own"),
        ]
    ),
    indirect=["site"],
)
async def test_a_record_lost_below_the_snapshot_is_listed_shown_and_refused(
    site: Site, tmp_path: Path, crash_after: int | None, seq: int
) -> None:
    run_id = run_script(site, tmp_path, SNAPSHOTS, crash_after)
    await site.delete(tmp_path, run_id, [seq])  # snapshots at 6 and later fold over it
    await _check_reported(site, tmp_path, run_id, seq)


async def test_a_record_lost_above_the_newest_snapshot_suggests_the_same_fork(
    site: Site, tmp_path: Path
) -> None:
    """`resume` and `show` fold from the newest snapshot, `runs` reads the whole log: a hole
    after that snapshot in a log that starts at record 1 is told the same by all three."""
    run_id = run_script(site, tmp_path, SNAPSHOTS, None)
    seqs = await log_seqs(tmp_path, run_id)
    config = load_config(cwd=tmp_path, env={})
    async with store_for(config.durability, config) as store:
        snapshot = await store.get_snapshot(run_id)
    assert snapshot is not None
    assert snapshot[0] + 1 < seqs[-1], (snapshot[0], seqs)
    seq = snapshot[0] + 1
    await site.delete(tmp_path, run_id, [seq])
    await _check_reported(site, tmp_path, run_id, seq)


@pytest.mark.parametrize(
    ("site", "crash_after", "seqs"),
    across_stores(
        [
            pytest.param(None, [1], id="finished-record-1"),
            pytest.param(14, [1], id="crashed-record-1"),
            pytest.param(14, [1, 2, 3], id="crashed-records-1-3"),
            pytest.param(None, [1, 2, 3], id="finished-records-1-3"),
        ]
    ),
    indirect=["site"],
)
async def test_the_first_records_lost_are_told_from_a_pruned_start(
    site: Site, tmp_path: Path, crash_after: int | None, seqs: list[int]
) -> None:
    """Every store keeps the highest seq pruned: a log starting at 2 (or 4) lost its start."""
    run_id = run_script(site, tmp_path, SNAPSHOTS, crash_after)
    await site.delete(tmp_path, run_id, seqs)
    await _check_reported(site, tmp_path, run_id, seqs[0], seqs[-1])


async def test_a_pruned_run_is_whole_and_resumes(site: Site, tmp_path: Path) -> None:
    """Records pruned behind a snapshot are no loss: listed, shown and resumed as usual."""
    run_id = run_script(site, tmp_path, PRUNED, 14)
    crashed_out = printed(tmp_path)
    assert (await log_seqs(tmp_path, run_id))[0] > 1, "nothing was pruned"
    listed = resumable(["runs", "--json"], tmp_path)
    (row,) = [r for r in json.loads(listed.stdout) if r["run_id"] == run_id]
    assert row["status"] == "crashed", row
    shown = resumable(["show", run_id], tmp_path)
    assert shown.code == 0, shown.stderr
    assert "warning" not in shown.stderr
    resumes_to_the_end(tmp_path, run_id, PRUNED, crashed_out)
    listed = resumable(["runs", "--json"], tmp_path)
    (row,) = [r for r in json.loads(listed.stdout) if r["run_id"] == run_id]
    assert row["status"] == "completed", row


@pytest.mark.parametrize(
    ("site", "crash_after"),
    across_stores([pytest.param(None, id="finished"), pytest.param(14, id="crashed")]),
    indirect=["site"],
)
async def test_the_first_record_left_by_pruning_lost_is_reported(
    site: Site, tmp_path: Path, crash_after: int | None
) -> None:
    run_id = run_script(site, tmp_path, PRUNED, crash_after)
    first = (await log_seqs(tmp_path, run_id))[0]
    assert first > 1, "nothing was pruned"
    await site.delete(tmp_path, run_id, [first])
    await _check_reported(site, tmp_path, run_id, first)


async def test_a_random_record_lost_is_always_reported(site: Site, tmp_path: Path) -> None:
    """The sampled damage matrix: any record of a finished run deleted is said aloud."""
    template = tmp_path / "template"
    run_id = run_script(site, template, SNAPSHOTS, None)
    last = max(await log_seqs(template, run_id))
    picks = random.Random(run_id).sample(range(2, last), TRIALS)
    for trial, seq in enumerate(picks):
        other = SITES[site.kind]()
        try:
            work = tmp_path / f"t{trial}"
            trial_id = run_script(other, work, SNAPSHOTS, None)
            await other.delete(work, trial_id, [seq])
            await _check_reported(other, work, trial_id, seq)
        finally:
            await other.cleanup()


async def test_deleted_snapshots_are_folded_again_from_the_start(
    site: Site, tmp_path: Path
) -> None:
    run_id = run_script(site, tmp_path, SNAPSHOTS, 14)
    crashed_out = printed(tmp_path)
    await site.delete_snaps(tmp_path, run_id)
    resumes_to_the_end(tmp_path, run_id, SNAPSHOTS, crashed_out)


async def test_deleted_snapshots_a_log_was_pruned_behind_are_refused(
    site: Site, tmp_path: Path
) -> None:
    run_id = run_script(site, tmp_path, PRUNED, 14)
    ledger, seqs = booked(tmp_path), await log_seqs(tmp_path, run_id)
    assert seqs[0] > 1, "nothing was pruned"
    await site.delete_snaps(tmp_path, run_id)
    refused = resumable(["resume", run_id], tmp_path, env=PRUNED)
    assert refused.code == 2, refused.stderr
    assert f"run {run_id}: records 1-{seqs[0] - 1} are not in its log" in refused.stderr
    assert "no snapshot stands for them" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert booked(tmp_path) == ledger
    assert await log_seqs(tmp_path, run_id) == seqs
