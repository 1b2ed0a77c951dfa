"""`resumable migrate`: a laptop's run folder copied into PostgreSQL, then finished by a worker."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from .harness import LEDGER_SCRIPT, Process, Schema, read_lines, resumable, strip_run

pytestmark = pytest.mark.postgres


def _local_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env.update(RESUMABLE_DURABILITY_SYNC="flush", **extra)
    return env


def test_a_crashed_local_run_is_migrated_and_finished_by_a_worker(
    schema: Schema, spawn: Callable[..., Process], tmp_path: Path
) -> None:
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    ledger = tmp_path / "ledger.txt"
    alone = resumable(
        ["exec", str(LEDGER_SCRIPT), "--run-id", "alone"],
        laptop,
        _local_env(LEDGER=str(tmp_path / "alone.txt")),
    )
    assert alone.code == 0, alone.stderr
    crashed = resumable(
        ["exec", str(LEDGER_SCRIPT), "--run-id", "trip"],
        laptop,
        _local_env(LEDGER=str(ledger), RESUMABLE_CRASH_AFTER="12"),
    )
    assert crashed.code == -signal.SIGKILL, crashed.stderr

    moved = resumable(
        ["migrate", "--from", str(laptop / ".resumable"), "--to", schema.url, "--run", "trip"],
        tmp_path,
        _local_env(),
    )
    assert moved.code == 0, moved.stderr
    assert "trip: 12/12 records copied" in moved.stderr
    assert "copied 1 run (12 records" in moved.stderr
    assert set(schema.runs()) == {"trip"}

    worker = spawn("worker", LEDGER=str(ledger))
    worker.wait_for("resumed run trip from record 12", timeout=20)
    worker.wait_for("completed run trip", timeout=20)
    assert worker.stop() == 0

    assert crashed.stdout + "\n".join(worker.out) + "\n" == alone.stdout
    effects = strip_run(read_lines(ledger), "trip")
    assert list(dict.fromkeys(effects)) == strip_run(read_lines(tmp_path / "alone.txt"), "alone")
    assert max(Counter(effects).values()) <= 2


def test_migrate_reports_in_json_and_never_overwrites(schema: Schema, tmp_path: Path) -> None:
    env = _local_env(LEDGER=str(tmp_path / "ledger.txt"))
    for run_id in ("one", "two"):
        assert resumable(["exec", str(LEDGER_SCRIPT), "--run-id", run_id], tmp_path, env).code == 0
    args = ["migrate", "--from", str(tmp_path / ".resumable"), "--to", schema.url, "--json"]

    first = resumable(args, tmp_path, env)
    assert first.code == 0, first.stderr
    report = json.loads(first.stdout)
    assert sorted(report["runs"]) == ["one", "two"]
    assert report["records"] > 40
    assert report["skipped"] == []
    assert {row["status"] for row in schema.runs().values()} == {"completed"}

    again = resumable(args, tmp_path, env)
    assert again.code == 0, again.stderr
    skipped = json.loads(again.stdout)["skipped"]
    assert sorted(item["run_id"] for item in skipped) == ["one", "two"]
    assert all("not overwritten" in item["reason"] for item in skipped)


def test_migrate_names_a_run_that_is_not_there(schema: Schema, tmp_path: Path) -> None:
    done = resumable(
        ["migrate", "--from", str(tmp_path / "empty"), "--to", schema.url, "--run", "nope"],
        tmp_path,
        _local_env(),
    )
    assert done.code == 2
    assert "no run nope in" in done.stderr
    assert done.stdout == ""
