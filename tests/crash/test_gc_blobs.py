"""`resumable gc` sweeps the blobs nothing kept refers to, on every store (real processes).

A program replaces a 100 kB string five times, one statement each (a blob each), then
awaits a 100 kB result, and is killed in its last loop. With a snapshot every 4 records
and only the newest kept, the records that referred to the first five strings are pruned:
their blobs are superseded. `gc` deletes them and a blob put there by hand, keeps the
current string's and the awaited result's, and the run still resumes to the end and
shows its variables. A run that was never pruned keeps every blob its records name,
and forks and resumes after `gc`. The superseded pieces of a large namespace go the same
way. A run whose log does not verify keeps all its blobs.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from pathlib import Path

from tests.crash.damage import Site
from tests.crash.harness import resumable

from resumable.config.loading import load_config
from resumable.durability.capture.pickling import STR_BLOB
from resumable.durability.runs.session import codec_for, store_for

LETTERS = "abcdef"
BIG = "\n".join(
    [
        "import asyncio",
        "",
        *(f'text = "{c}" * 100_000\nawait asyncio.sleep(0)' for c in LETTERS),
        'reply = await asyncio.sleep(0, "r" * 100_000)',
        'print("lengths", len(text), len(reply))',
        "for n in range(3):",
        "    await asyncio.sleep(0)",
        '    print("after", n)',
        "",
    ]
)
PIECES = "\n".join(
    [
        "import asyncio",
        "",
        "table = {n: str(n) * 3 for n in range(8000)}",
        "await asyncio.sleep(0)",
        *(f'table[0] = "changed {k}"\nawait asyncio.sleep(0)' for k in range(1, 7)),
        'print("entries", len(table), table[0])',
        "for n in range(3):",
        "    await asyncio.sleep(0)",
        '    print("after", n)',
        "",
    ]
)
"""A namespace large enough to be stored in pieces, its first piece changed six times."""
CRASH_AFTER = 24
"""The first await of the last loop: the run prints its three ``after`` lines on resume."""
PRUNED = {"RESUMABLE_DURABILITY_SNAPSHOT_EVERY": "4", "RESUMABLE_DURABILITY_KEEP": "1"}


def _digest(text: str) -> str:
    """The digest a string held as a blob is stored under."""
    return hashlib.sha256(STR_BLOB + text.encode()).hexdigest()


def _exec(site: Site, work: Path, env: dict[str, str], crash: bool, program: str = "big.py") -> str:
    run_id = f"b{secrets.token_hex(3)}"
    if crash:
        env = {**env, "RESUMABLE_CRASH_AFTER": str(CRASH_AFTER)}
    done = resumable(["exec", program, "--run-id", run_id], work, env=env)
    assert done.code == (-9 if crash else 0), done.stderr
    time.sleep(site.lease_seconds)
    return run_id


def _prepare(site: Site, work: Path) -> None:
    site.prepare(work)
    (work / "big.py").write_text(BIG)
    (work / "pieces.py").write_text(PIECES)


async def _epoch(work: Path, run_id: str) -> int:
    config = load_config(cwd=work, env={})
    async with store_for(config.durability, config) as store:
        return (await store.get_meta(run_id)).epoch


async def _blobs(work: Path, run_id: str, junk: bytes | None = None) -> dict[str, int]:
    """The run's blobs, after putting ``junk`` among them (sealed like any blob)."""
    config = load_config(cwd=work, env={})
    async with store_for(config.durability, config) as store:
        if junk is not None:
            codec = await codec_for(store, config.durability, os.environ)
            digest = hashlib.sha256(junk).hexdigest()
            await store.put_blob(run_id, digest, codec.seal_blob(run_id, digest, junk))
        return await store.list_blobs(run_id)


def _gc(work: Path) -> dict[str, object]:
    collected = resumable(["gc", "--older-than-days", "30", "--json"], work)
    assert collected.code == 0, collected.stderr
    report: dict[str, object] = json.loads(collected.stdout)
    return report


async def test_gc_sweeps_superseded_blobs_and_the_runs_still_work(
    site: Site, tmp_path: Path
) -> None:
    _prepare(site, tmp_path)
    pruned = _exec(site, tmp_path, PRUNED, crash=True)
    whole = _exec(site, tmp_path, {}, crash=False)
    junk = b"a blob no record names"
    current, reply = _digest("f" * 100_000), _digest("r" * 100_000)
    superseded = {_digest(c * 100_000) for c in LETTERS[:-1]}
    before = await _blobs(tmp_path, pruned, junk)
    assert set(before) == superseded | {current, reply, hashlib.sha256(junk).hexdigest()}
    whole_before = await _blobs(tmp_path, whole, junk)
    dry = resumable(["gc", "--older-than-days", "30", "--dry-run", "--json"], tmp_path)
    assert dry.code == 0, dry.stderr
    assert json.loads(dry.stdout)["swept_blobs"] == len(superseded) + 2
    assert await _blobs(tmp_path, pruned) == before  # a dry run deletes nothing

    report = _gc(tmp_path)

    assert report["deleted_runs"] == [], report
    assert report["unswept"] == {}, report
    assert report["swept_blobs"] == len(superseded) + 2  # and the junk of both runs
    gone = [size for digest, size in before.items() if digest not in {current, reply}]
    assert report["swept_bytes"] == sum(gone) + whole_before[hashlib.sha256(junk).hexdigest()]
    assert set(await _blobs(tmp_path, pruned)) == {current, reply}
    assert set(await _blobs(tmp_path, whole)) == superseded | {current, reply}
    assert _gc(tmp_path)["swept_blobs"] == 0  # nothing left to sweep

    shown = resumable(["show", pruned, "--json"], tmp_path)
    assert shown.code == 0, shown.stderr
    variables = json.loads(shown.stdout)["frames"][0]["variables"]
    assert variables["text"].startswith("'ffff")
    assert variables["reply"].startswith("'rrrr")
    resumed = resumable(["resume", pruned], tmp_path)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == "after 0\nafter 1\nafter 2\n"

    forked = resumable(["fork", whole, "--at", str(CRASH_AFTER)], tmp_path)
    assert forked.code == 0, forked.stderr
    fork_id = forked.stdout.strip()
    again = resumable(["resume", fork_id], tmp_path)
    assert again.code == 0, again.stderr
    assert again.stdout.splitlines()[-1] == "after 2"


async def test_gc_sweeps_the_superseded_pieces_of_a_large_namespace(
    site: Site, tmp_path: Path
) -> None:
    _prepare(site, tmp_path)
    run_id = _exec(site, tmp_path, PRUNED, crash=True, program="pieces.py")
    before = await _blobs(tmp_path, run_id)
    assert len(before) == 7  # the first piece of the table, as it was at each statement

    report = _gc(tmp_path)

    assert report["swept_blobs"] == 6, report
    assert len(await _blobs(tmp_path, run_id)) == 1
    resumed = resumable(["resume", run_id], tmp_path)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout == "after 0\nafter 1\nafter 2\n"
    shown = resumable(["show", run_id, "--json"], tmp_path)
    assert shown.code == 0, shown.stderr
    table = json.loads(shown.stdout)["frames"][0]["variables"]["table"]
    assert table.startswith("{0: 'changed 6', 1: '111'")


async def test_gc_deletes_no_blob_of_a_run_whose_log_does_not_verify(
    site: Site, tmp_path: Path
) -> None:
    _prepare(site, tmp_path)
    damaged = _exec(site, tmp_path, {}, crash=True)
    before = await _blobs(tmp_path, damaged, b"a blob no record names")
    await site.flip(tmp_path, damaged, 20)
    epoch = await _epoch(tmp_path, damaged)

    report = _gc(tmp_path)

    assert report["swept_blobs"] == 0, report
    unswept = report["unswept"]
    assert isinstance(unswept, dict)
    assert "no blob of it was deleted" in unswept[damaged]
    assert await _blobs(tmp_path, damaged) == before
    assert await _epoch(tmp_path, damaged) == epoch  # not even owned: nothing was written
    said = resumable(["gc", "--older-than-days", "30"], tmp_path)
    assert said.code == 0, said.stderr
    assert f"resumable: run {damaged}: " in said.stderr, said.stderr
