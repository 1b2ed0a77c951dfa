"""The audit's reproductions of bad input, each now one line and exit 2 with nothing lost.

1. ``resumable resume ""`` (an unset shell variable) must not resume some other run.
2. A setting, environment override or hook that is refused must be refused before a run
   exists: no ghost run, nothing for ``resume --latest`` to pick, nothing ``completed``.
8. Malformed store URLs and paths: one line, never a traceback.
9. Every store refuses the run ids the file store refuses (long, newlines, tabs).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from tests.crash.damage import LEDGER, SCRIPT, SITES, Site
from tests.crash.harness import Result, resumable

from resumable.config import load_config
from resumable.durability.runs.session import store_for
from resumable.durability.runs.stored import latest_resumable, list_runs
from resumable.errors import RunNotFoundError


def _one_error(result: Result) -> str:
    assert result.code == 2, (result.code, result.stderr)
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("resumable: error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def _ledger(work: Path) -> list[str]:
    path = work / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def test_1_an_empty_run_id_is_an_error_and_the_crashed_run_stays_untouched(
    tmp_path: Path,
) -> None:
    (tmp_path / "s.py").write_text(SCRIPT)
    crashed = resumable(
        ["exec", "s.py", "--run-id", "other"], tmp_path, env={"RESUMABLE_CRASH_AFTER": "8"}
    )
    assert crashed.code == -signal.SIGKILL
    before = _ledger(tmp_path)
    assert before == LEDGER[: len(before)]
    assert len(before) < len(LEDGER)
    for args in (["resume", ""], ["answer", "", "yes"]):
        error = _one_error(resumable(args, tmp_path))
        assert "run id '': it is empty" in error
    assert _ledger(tmp_path) == before
    resumed = resumable(["resume", "other"], tmp_path)
    assert resumed.code == 0, resumed.stderr
    assert _ledger(tmp_path) == LEDGER


@pytest.mark.parametrize(
    ("setting", "env", "said"),
    [
        ("", {"RESUMABLE_CRASH_AFTER": "soon"}, "RESUMABLE_CRASH_AFTER must be a whole number"),
        ("max_record_bytes = 1", {}, "over the limit of 1"),
        ('before_checkpoint = "no_such_module:hook"', {}, "before_checkpoint"),
    ],
)
@pytest.mark.parametrize("kind", ["file", "sqlite"])
async def test_2_a_refused_setting_leaves_no_ghost_run(
    tmp_path: Path, kind: str, setting: str, env: dict[str, str], said: str
) -> None:
    site: Site = SITES[kind]()
    site.prepare(tmp_path)
    config = site.config() or "[durability]\n"
    (tmp_path / "playbooks.toml").write_text(f"{config}{setting}\n")
    error = _one_error(resumable(["exec", "s.py", "--run-id", "ghost"], tmp_path, env=env))
    assert said in error
    assert _ledger(tmp_path) == []
    (tmp_path / "playbooks.toml").write_text(config)
    assert await _run_ids(tmp_path) == []
    with pytest.raises(RunNotFoundError, match="no run can be resumed"):
        await _latest(tmp_path)


@pytest.mark.parametrize(
    ("store", "url", "said"),
    [
        ("postgres", "postgresql://[::1", "Invalid IPv6 URL"),
        ("postgres", "postgresql://localhost:99999/db", "Port out of range"),
        ("postgres", "postgresql://localhost:port/db", "Port could not be cast"),
        ("redis", "redis://[::1", "Invalid IPv6 URL"),
        ("redis", "redis://localhost:70000/0", "Port out of range"),
        ("sqlite", "sqlite:////", "names a folder, not a file"),
    ],
)
def test_8_a_malformed_store_url_is_one_line(
    tmp_path: Path, store: str, url: str, said: str
) -> None:
    (tmp_path / "playbooks.toml").write_text(f'[durability]\nstore = "{store}"\nurl = "{url}"\n')
    error = _one_error(resumable(["runs"], tmp_path))
    assert said in error
    assert "[durability] url" in error or "SQLite store" in error


def test_8_init_with_a_directory_for_path_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    error = _one_error(resumable(["init", "--path", "conf", "--force"], tmp_path))
    assert "conf is a directory" in error
    assert list((tmp_path / "conf").iterdir()) == []


@pytest.mark.parametrize(
    "kind",
    [
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
async def test_9_every_store_refuses_the_ids_the_file_store_refuses(
    tmp_path: Path, kind: str
) -> None:
    site: Site = SITES[kind]()
    site.prepare(tmp_path)
    try:
        for bad in ("x" * 10_000, "two\nlines\tand a tab"):
            error = _one_error(resumable(["exec", "s.py", "--run-id", bad], tmp_path))
            assert "invalid run id" in error
            assert len(error) < 300
        assert _ledger(tmp_path) == []
        assert await _run_ids(tmp_path) == []
    finally:
        await site.cleanup()


async def _run_ids(work: Path) -> list[str]:
    config = load_config(cwd=work, env={})
    async with store_for(config.durability, config) as store:
        return [row.run_id for row in await list_runs(store)]


async def _latest(work: Path) -> str:
    config = load_config(cwd=work, env={})
    async with store_for(config.durability, config) as store:
        return await latest_resumable(store)
