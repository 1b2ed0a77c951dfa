"""A run pruned behind a snapshot forks from that snapshot, on every store (real processes).

`fork --at N` copies a log from record 1; once compaction has pruned the start, the fork
starts from the newest snapshot at or before N instead and copies the records after it.
The fork resumes as the parent would have (the same output, each effect once), `--set`
and `--edit-code` apply to it, an N below the oldest snapshot is one line naming the
range, and a hole after the snapshot is refused rather than folded over.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.crash.damage import (
    LEDGER,
    PRUNED,
    SNAPSHOTS,
    Site,
    booked,
    log_seqs,
    printed,
    resumes_to_the_end,
    run_script,
)
from tests.crash.harness import resumable

from resumable.config import load_config
from resumable.durability.runs.session import store_for


def _fork(work: Path, *args: str) -> str:
    forked = resumable(["fork", *args], work)
    assert forked.code == 0, forked.stderr
    return forked.stdout.strip()


async def _oldest_snapshot(work: Path, run_id: str) -> int:
    """The oldest snapshot the kept log follows on from (none kept below it is usable)."""
    seqs = await log_seqs(work, run_id)
    config = load_config(cwd=work, env={})
    oldest, at = None, seqs[-1]
    async with store_for(config.durability, config) as store:
        while (found := await store.get_snapshot(run_id, at)) and found[0] >= seqs[0] - 1:
            oldest, at = found[0], found[0] - 1
    assert oldest is not None
    return oldest


def _listed(work: Path, run_id: str) -> dict[str, object]:
    listed = resumable(["runs", "--json"], work)
    (row,) = [r for r in json.loads(listed.stdout) if r["run_id"] == run_id]
    return row  # type: ignore[no-any-return]


async def test_a_pruned_crashed_run_forks_from_its_snapshot_and_the_fork_finishes_it(
    site: Site, tmp_path: Path
) -> None:
    run_id = run_script(site, tmp_path, PRUNED, 14)
    crashed_out = printed(tmp_path)
    seqs = await log_seqs(tmp_path, run_id)
    assert seqs[0] > 1, "nothing was pruned"
    fork = _fork(tmp_path, run_id, "--at", str(seqs[-1]))
    assert _listed(tmp_path, fork)["status"] == "crashed"
    # nothing the parent booked is booked again
    resumes_to_the_end(tmp_path, fork, PRUNED, crashed_out)
    assert _listed(tmp_path, fork)["status"] == "completed"
    shown = resumable(["show", fork], tmp_path)
    assert f"forked from {run_id} at record {seqs[-1]}" in shown.stdout
    assert "warning" not in shown.stderr
    assert await log_seqs(tmp_path, run_id) == seqs  # the parent is only read


async def test_a_pruned_run_forks_with_set_and_edit_code_at_a_kept_boundary(
    site: Site, tmp_path: Path
) -> None:
    run_id = run_script(site, tmp_path, PRUNED, None)
    # the oldest snapshot kept is the state after the for loop (the last statement is kept)
    loop_done = await _oldest_snapshot(tmp_path, run_id)
    fork = _fork(tmp_path, run_id, "--at", str(loop_done), "--set", "total=100")
    resumed = resumable(["resume", fork], tmp_path, env=PRUNED)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == "total 100\n"
    (tmp_path / "rest.py").write_text('print("edited", total * 2)\n')
    fork = _fork(tmp_path, run_id, "--at", str(loop_done), "--edit-code", "rest.py")
    resumed = resumable(["resume", fork], tmp_path, env=PRUNED)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == "edited 30\n"
    assert booked(tmp_path) == LEDGER  # neither fork booked anything again
    listed = json.loads(resumable(["runs", "--json"], tmp_path).stdout)
    assert [(r["status"], r.get("problem")) for r in listed] == [("completed", None)] * 3


async def test_a_fork_below_the_oldest_snapshot_names_the_range(site: Site, tmp_path: Path) -> None:
    run_id = run_script(site, tmp_path, PRUNED, 14)
    seqs = await log_seqs(tmp_path, run_id)
    oldest = await _oldest_snapshot(tmp_path, run_id)
    refused = resumable(["fork", run_id, "--at", "1"], tmp_path)
    assert refused.code == 2, refused.stderr
    assert refused.stderr == (
        f"resumable: error: run {run_id} has no record 1 to fork from (its log was pruned up "
        f"to record {seqs[0] - 1}, its oldest snapshot is at record {oldest}): choose --at "
        f"between {oldest} and {seqs[-1]}\n"
    )
    assert [r["run_id"] for r in json.loads(resumable(["runs", "--json"], tmp_path).stdout)] == [
        run_id
    ]


async def test_a_hole_after_the_snapshot_is_refused_not_folded_over(
    site: Site, tmp_path: Path
) -> None:
    run_id = run_script(site, tmp_path, PRUNED, 14)
    seqs = await log_seqs(tmp_path, run_id)
    oldest = await _oldest_snapshot(tmp_path, run_id)
    after = [seq for seq in seqs if seq > oldest]
    assert len(after) >= 2, (oldest, seqs)
    await site.delete(tmp_path, run_id, [after[1]])
    refused = resumable(["fork", run_id, "--at", str(seqs[-1])], tmp_path)
    assert refused.code == 2, refused.stderr
    assert f"record {after[1]} is missing from its log" in refused.stderr
    assert f"`resumable fork {run_id} --at {after[0]}`" in refused.stderr
    assert _fork(tmp_path, run_id, "--at", str(after[0]))  # the fork it names works


async def test_a_hole_in_a_whole_log_is_refused_not_renumbered_around(
    site: Site, tmp_path: Path
) -> None:
    """A log that still starts at record 1 is copied from there: a record missing on the
    way was once skipped, and the fork's state silently lacked it."""
    run_id = run_script(site, tmp_path, SNAPSHOTS, 14)
    seqs = await log_seqs(tmp_path, run_id)
    assert seqs[0] == 1
    await site.delete(tmp_path, run_id, [10])
    refused = resumable(["fork", run_id, "--at", str(seqs[-1])], tmp_path)
    assert refused.code == 2, refused.stderr
    assert refused.stderr == (
        f"resumable: error: run {run_id}: record 10 is missing from its log, so its state at "
        f"record {seqs[-1]} cannot be rebuilt: fork it before the gap "
        f"(`resumable fork {run_id} --at 9`)\n"
    )
    assert _fork(tmp_path, run_id, "--at", "9")


async def test_a_hole_in_a_pruned_log_suggests_the_fork_before_it(
    site: Site, tmp_path: Path
) -> None:
    """Every store prunes up to the oldest snapshot it keeps, so the records its log starts
    with have a snapshot at or before them: a hole among them is told with the fork to
    take from the record before it, and that fork works."""
    run_id = run_script(site, tmp_path, PRUNED, 14)
    seqs = await log_seqs(tmp_path, run_id)
    oldest = await _oldest_snapshot(tmp_path, run_id)
    if site.kind != "file":  # record by record; the folder store drops whole segments
        assert seqs[0] == oldest + 1
    hole = seqs[1]
    await site.delete(tmp_path, run_id, [hole])
    problem = str(_listed(tmp_path, run_id)["problem"])
    assert f"record {hole} is missing from the middle of its log" in problem
    assert f"`resumable fork {run_id} --at {hole - 1}`" in problem
    forked = resumable(["fork", run_id, "--at", str(hole - 1)], tmp_path)
    assert forked.code == 0, forked.stderr
