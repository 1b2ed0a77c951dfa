"""RecoveryCoordinator from Python: find a crashed run, resume it, see it finished."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, resumable

from resumable import RecoveryCoordinator, load_config
from resumable.durability.runs.session import codec_for, store_for


async def test_a_crashed_run_is_recovered_from_python(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "ledger.py", tmp_path / "ledger.py")
    env = {"LEDGER": str(tmp_path / "ledger.txt"), "RESUMABLE_DURABILITY_SYNC": "flush"}
    reference = resumable(["exec", "ledger.py", "--run-id", "ref"], tmp_path, env=env)
    assert reference.code == 0
    crashed = resumable(
        ["exec", "ledger.py", "--run-id", "r"],
        tmp_path,
        env={**env, "RESUMABLE_CRASH_AFTER": "17"},
    )
    assert crashed.code == -signal.SIGKILL

    config = load_config(cwd=tmp_path, env=env)
    async with store_for(config.durability, config) as store:
        coordinator = RecoveryCoordinator(store, await codec_for(store, config.durability, env))
        assert await coordinator.can_recover("r")
        assert not await coordinator.can_recover("ref")  # completed: nothing to recover
        loaded = await coordinator.load("r")
        assert loaded.state.seq == 17
        assert loaded.problems == []
        # this test process does not hash with the run's pinned seed: said, not fatal
        with pytest.warns(RuntimeWarning, match="PYTHONHASHSEED"):
            outcome = await coordinator.resume("r", config, env=env)
        assert outcome.status == "completed"
        assert outcome.exit_code == 0
        assert not await coordinator.can_recover("r")
    ledger = (tmp_path / "ledger.txt").read_text().splitlines()
    assert sorted(
        line.replace("r/", "X/", 1) for line in ledger if line.startswith("r/")
    ) == sorted(line.replace("ref/", "X/", 1) for line in ledger if line.startswith("ref/"))
