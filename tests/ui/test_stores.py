"""The inspector reads whatever store the config names (an SQLite file, Redis); and it
shows the lineage of forked runs."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.crash.harness import resumable
from tests.ui.harness import inspector

REDIS_URL = os.environ.get("RESUMABLE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
SCRIPT = "import asyncio\ncity = 'Lyon'\nawait asyncio.sleep(0)\nnights = 3\n"


def test_the_runs_of_an_sqlite_store(page: Any, tmp_path: Path) -> None:
    config = tmp_path / "playbooks.toml"
    config.write_text('[durability]\nstore = "sqlite"\npath = "runs.db"\n', encoding="utf-8")
    (tmp_path / "trip.py").write_text(SCRIPT, encoding="utf-8")
    assert resumable(["exec", "trip.py", "--run-id", "trip"], tmp_path).code == 0
    crashed = resumable(
        ["exec", "trip.py", "--run-id", "cut"], tmp_path, env={"RESUMABLE_CRASH_AFTER": "4"}
    )
    assert crashed.code == -9
    forked = resumable(["fork", "cut", "--at", "3"], tmp_path)
    assert forked.code == 0, forked.stderr
    fork_id = forked.stdout.strip()
    with inspector(tmp_path, "--config", str(config)) as url:
        page.goto(url + "/")
        assert "sqlite store" in page.locator("nav .store").inner_text()
        rows = page.locator("#run-list tbody tr").evaluate_all(
            "rows => rows.map(r => [r.dataset.run, r.querySelector('.badge').textContent])"
        )
        assert rows == [[fork_id, "crashed"], ["cut", "crashed"], ["trip", "completed"]]
        page.goto(url + "/runs/cut")
        assert page.locator(".frame table.variables th").all_inner_texts() == ["asyncio", "city"]
        assert page.locator("pre.remaining").inner_text().endswith("nights = 3\n")
        assert (
            page.locator("#lineage")
            .inner_text()
            .startswith(f"Not a fork. Forks of this run: {fork_id}.")
        )
        page.locator(f'#lineage a[href="/runs/{fork_id}"]').click()
        page.wait_for_url(f"{url}/runs/{fork_id}")
        assert page.locator("#lineage").inner_text().startswith("Forked from cut at record 3.")


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A key prefix of its own on the Redis of the store tests; its keys removed afterwards."""
    import redis

    prefix = f"resumable-test-ui-{secrets.token_hex(4)}"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.RedisError as err:
        pytest.fail(f"this test needs Redis at {REDIS_URL} ({err}); scripts/test.sh starts it")
    try:
        yield f"{REDIS_URL}?prefix={prefix}"
    finally:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


@pytest.mark.redis
def test_the_runs_of_a_redis_store(page: Any, tmp_path: Path, redis_url: str) -> None:
    config = tmp_path / "playbooks.toml"
    config.write_text(f'[durability]\nstore = "redis"\nurl = "{redis_url}"\n', encoding="utf-8")
    (tmp_path / "trip.py").write_text(SCRIPT, encoding="utf-8")
    # a server store knows a run crashed when its owner's lease expires: make that soon
    env = {"RESUMABLE_CRASH_AFTER": "4", "RESUMABLE_DURABILITY_LEASE_SECONDS": "1"}
    crashed = resumable(["exec", "trip.py", "--run-id", "cut"], tmp_path, env=env)
    assert crashed.code == -9
    with inspector(tmp_path, "--config", str(config)) as url:
        page.goto(url + "/")
        assert "redis store" in page.locator("nav .store").inner_text()
        deadline = time.monotonic() + 15
        while page.locator("#run-list .badge").all_inner_texts() != ["crashed"]:
            assert time.monotonic() < deadline, "the killed run's lease never expired"
            page.wait_for_timeout(250)
            page.reload()
        page.locator('#run-list a[href="/runs/cut"]').click()
        page.wait_for_url(url + "/runs/cut")
        assert page.locator(".frame table.variables th").all_inner_texts() == ["asyncio", "city"]
