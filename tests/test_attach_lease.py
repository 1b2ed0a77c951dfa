"""A worker that hands ``RunSession.attach`` its lease keeps it when the store fails.

A worker claims a run, then attaches under the lease it claimed with; if the store fails
while the run is admitted (its metadata read again), the worker parks the run under that
lease for a lease's time. Were the lease given back first, the run would be free between
the release and the park, for this worker's next poll or another's to claim at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.crash.harness import resumable

from resumable import load_config
from resumable.durability.runs import control
from resumable.durability.runs.session import RunSession, codec_for, store_for
from resumable.errors import RunBusyError, StoreError
from resumable.store.base import CheckpointStore

PROGRAM = "import asyncio\nfor i in range(5):\n    await asyncio.sleep(0)\n    print(i)\n"


class FailingMeta:
    """The store, but its ``n``-th metadata read on fails."""

    def __init__(self, store: CheckpointStore, n: int) -> None:
        self._store, self._n, self.reads = store, n, 0

    async def get_meta(self, run_id: str) -> Any:
        self.reads += 1
        if self.reads >= self._n:
            raise StoreError("the store went away while the run was admitted")
        return await self._store.get_meta(run_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _crashed_run(tmp_path: Path) -> str:
    (tmp_path / "p.py").write_text(PROGRAM, encoding="utf-8")
    done = resumable(
        ["exec", "p.py", "--run-id", "r1", "-q"], tmp_path, env={"RESUMABLE_CRASH_AFTER": "4"}
    )
    assert done.code != 0, done.stderr
    return "r1"


@pytest.mark.parametrize("failing_read", [2, 3], ids=["loading the log", "admitting the run"])
async def test_a_store_failing_in_attach_leaves_the_callers_lease_held(
    tmp_path: Path, failing_read: int
) -> None:
    run_id = _crashed_run(tmp_path)
    config = load_config(None, cwd=tmp_path, env={})
    async with store_for(config.durability, config) as store:
        lease = await store.acquire(run_id, "worker-1")
        # the metadata is read by attach, by the log's loader, then by the admission
        failing = FailingMeta(store, n=failing_read)
        with pytest.raises(StoreError):
            await RunSession.attach(failing, config, run_id, env={}, lease=lease)  # type: ignore[arg-type]
        assert failing.reads == failing_read
        with pytest.raises(RunBusyError):  # nobody else can claim it: still held
            await store.acquire(run_id, "worker-2")
        renewed = await store.renew(lease, 30)  # the worker parks it under the same lease
        assert renewed.epoch == lease.epoch


async def test_a_run_marked_at_admission_is_let_go_even_under_the_callers_lease(
    tmp_path: Path,
) -> None:
    run_id = _crashed_run(tmp_path)
    config = load_config(None, cwd=tmp_path, env={})
    async with store_for(config.durability, config) as store:
        live = await store.acquire(run_id, "worker-0")
        codec = await codec_for(store, config.durability, {})
        said = await control.cancel_run(store, codec, run_id, "not needed", owner="cli")
        assert said == "requested"  # worker-0 was live: it would have stopped the run
        await store.release(live)  # it died before it saw the request
        lease = await store.acquire(run_id, "worker-1")
        with pytest.raises(control.RunCancelled):
            await RunSession.attach(store, config, run_id, env={}, lease=lease)
        other = await store.acquire(run_id, "worker-2")  # free: nobody holds a cancelled run
        assert other.owner == "worker-2"
