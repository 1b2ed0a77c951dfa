"""Every record of a run deleted in turn, on every store: the matrix CI only samples.

    PYTHONPATH=src python scripts/damage_holes.py                 # file sqlite postgres redis
    PYTHONPATH=src python scripts/damage_holes.py postgres redis

For each store, a finished run and a run killed after record 14 (snapshots every 3
records), then for every record in the middle of the log a fresh copy with that record
deleted, record 1 included (every store keeps the highest seq pruned, so a log starting
at 2 is not taken as pruned behind a snapshot): `runs` must list it damaged naming the
seq, `show` warn, `resume` and `resume --force` refuse with exit 2 and change nothing
(tests/crash/test_damage_holes.py).
Prints one line per store and run: records tried, and those that were not reported.
PostgreSQL and Redis are the servers tests/crash/damage.py names.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.crash.damage import SITES, SNAPSHOTS, log_seqs, run_script
from tests.crash.test_damage_holes import _check_reported


async def sweep(kind: str, crash_after: int | None) -> tuple[int, list[int]]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        probe = SITES[kind]()
        try:
            run_id = run_script(probe, base / "probe", SNAPSHOTS, crash_after)
            last = max(await log_seqs(base / "probe", run_id))
        finally:
            await probe.cleanup()
        missed = []
        for seq in range(1, last):
            site = SITES[kind]()
            work = base / f"seq{seq}"
            try:
                trial = run_script(site, work, SNAPSHOTS, crash_after)
                await site.delete(work, trial, [seq])
                await _check_reported(site, work, trial, seq)
            except AssertionError:
                missed.append(seq)
            finally:
                await site.cleanup()
        return last - 1, missed


def main(kinds: list[str]) -> int:
    unknown = [kind for kind in kinds if kind not in SITES]
    if unknown:
        print(
            f"damage_holes.py: error: no store {unknown[0]!r}; name some of {', '.join(SITES)}"
            " (none: all)",
            file=sys.stderr,
        )
        return 2
    failed = False
    for kind in kinds or list(SITES):
        for crash_after in (None, 14):
            tried, missed = asyncio.run(sweep(kind, crash_after))
            name = "finished" if crash_after is None else f"crashed after {crash_after}"
            print(f"{kind:9} {name:18} {tried} records deleted, not reported: {missed or 'none'}")
            failed = failed or bool(missed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
