"""Read commands and the inspector read a store without writing it, and never create one.

Real processes on the folder and SQLite stores: with the store made unwritable (``chattr
+i``: root ignores permission bits) `runs`, `show`, `steps` and `resumable ui` work, and
the store is byte-for-byte what it was; pointed at a path that holds no store, each says
so with the path (exit 2, or a 500 naming it) and creates nothing there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.crash.damage import POSTGRES_URL, REDIS_URL, SITES, Site
from tests.crash.harness import EXAMPLES, resumable
from tests.ui.harness import inspector

STORES = {
    "file": {"RESUMABLE_DURABILITY_PATH": ".resumable"},
    "sqlite": {"RESUMABLE_DURABILITY_STORE": "sqlite", "RESUMABLE_DURABILITY_PATH": "runs.db"},
}


def _contents(work: Path, kind: str) -> dict[str, bytes | None]:
    """Every file of the store and its bytes (folders: None); SQLite's shared-memory index
    (``-shm``, rebuilt by every reader) is left out."""
    root = work / (".resumable" if kind == "file" else "")
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(work))
        if (kind == "sqlite" and not name.startswith("runs.db")) or name.endswith("-shm"):
            continue
        found[name] = None if path.is_dir() else path.read_bytes()
    return found


def _chattr(work: Path, kind: str, flag: str) -> None:
    paths = [".resumable"] if kind == "file" else ["runs.db", "runs.db-wal", "runs.db-heads", "."]
    args = ["chattr", *(["-R"] if kind == "file" else []), flag, *paths]
    done = subprocess.run(args, cwd=work, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot make the store unwritable with chattr: {done.stderr.strip()}")


@pytest.mark.parametrize("kind", list(STORES))
def test_read_commands_and_the_inspector_leave_an_unwritable_store_unchanged(
    tmp_path: Path, kind: str
) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    env = {**STORES[kind], "LEDGER": "ledger.txt"}
    shutil.copy(EXAMPLES / "ledger.py", tmp_path / "ledger.py")
    assert resumable(["exec", "ledger.py", "--run-id", "done"], tmp_path, env=env).code == 0
    crash = {**env, "RESUMABLE_CRASH_AFTER": "7"}
    assert resumable(["exec", "ledger.py", "--run-id", "cut"], tmp_path, env=crash).code == -9
    before = _contents(tmp_path, kind)
    _chattr(tmp_path, kind, "+i")
    try:
        listed = resumable(["runs", "--json"], tmp_path, env=env)
        assert listed.code == 0, listed.stderr
        statuses = {row["run_id"]: row["status"] for row in json.loads(listed.stdout)}
        assert statuses == {"done": "completed", "cut": "crashed"}
        shown = resumable(["show", "cut", "--json"], tmp_path, env=env)
        assert shown.code == 0, shown.stderr
        assert json.loads(shown.stdout)["seq"] == 7
        steps = resumable(["steps", "done", "--json"], tmp_path, env=env)
        assert steps.code == 0, steps.stderr
        assert len(json.loads(steps.stdout)) > 20
        with inspector(tmp_path, env=env) as url:
            runs = httpx.get(url + "/api/runs", timeout=30)
            assert runs.status_code == 200, runs.text
            assert {row["run_id"] for row in runs.json()} == {"done", "cut"}
            for run_id in ("done", "cut"):
                page = httpx.get(f"{url}/runs/{run_id}", timeout=30)
                assert page.status_code == 200, page.text
    finally:
        _chattr(tmp_path, kind, "-i")
    assert _contents(tmp_path, kind) == before


@pytest.mark.parametrize("kind", list(STORES))
def test_a_path_with_no_store_is_named_and_nothing_is_created(tmp_path: Path, kind: str) -> None:
    typo = "no-such-store" if kind == "file" else "no-such.db"
    env = {**STORES[kind], "RESUMABLE_DURABILITY_PATH": typo}
    for args in (["runs"], ["show", "r"], ["steps", "r"]):
        refused = resumable(args, tmp_path, env=env)
        assert refused.code == 2, (args, refused.stderr)
        assert str(tmp_path / typo) in refused.stderr
        assert refused.stderr.count("\n") == 1
    with inspector(tmp_path, env=env) as url:
        answer = httpx.get(url + "/api/runs", timeout=30)
        assert str(tmp_path / typo) in answer.text
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_inspector_answers_exactly_the_names_it_listens_on(tmp_path: Path) -> None:
    (tmp_path / ".resumable" / "runs").mkdir(parents=True)  # an empty store
    with inspector(tmp_path) as url:  # listens on 127.0.0.1
        port = url.rsplit(":", 1)[1]
        for name, code in [
            ("127.0.0.1", 200),
            ("localhost", 200),
            ("LOCALHOST", 200),
            ("LocalHost.", 200),
            ("127.0.0.2", 400),  # a loopback address it does not listen on
            ("[::1]", 400),
            ("localhost.example", 400),
        ]:
            answer = httpx.get(url + "/api/runs", headers={"Host": f"{name}:{port}"}, timeout=30)
            assert answer.status_code == code, (name, answer.text)


def _run_apart(coro: Any) -> Any:
    """``asyncio.run`` on a thread of its own: the browser tests' sync API keeps a loop
    running on this one."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _server_dump(site: Site) -> dict[str, Any]:
    """Every row of the site's PostgreSQL schema, or every key (dumped) under its Redis prefix."""

    async def postgres() -> dict[str, Any]:
        import asyncpg

        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            schema = site.schema  # type: ignore[attr-defined]
            tables = await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
            )
            return {
                t["table_name"]: [
                    tuple(r)
                    for r in await conn.fetch(f'SELECT * FROM "{schema}"."{t["table_name"]}"')
                ]
                for t in tables
            }
        finally:
            await conn.close()

    async def redis() -> dict[str, Any]:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(REDIS_URL)
        async with client:
            prefix = site.prefix  # type: ignore[attr-defined]
            keys = [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
            return {k: await client.dump(k) for k in keys}

    found = _run_apart(postgres() if site.kind == "postgres" else redis())
    return {k: sorted(v) if isinstance(v, list) else v for k, v in found.items()}


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_read_commands_and_the_inspector_leave_a_server_store_unchanged(
    tmp_path: Path, kind: str
) -> None:
    site = SITES[kind]()
    empty = SITES[kind]()
    try:
        (tmp_path / "playbooks.toml").write_text(empty.config())
        refused = resumable(["runs", "--json"], tmp_path)
        if kind == "postgres":  # a schema that holds no store is named, and not made
            assert refused.code == 2, refused.stderr
            assert f"no resumable store in schema {empty.schema!r}" in refused.stderr  # type: ignore[attr-defined]
        else:  # a Redis prefix with no runs is an empty store
            assert (refused.code, json.loads(refused.stdout)) == (0, [])
        assert _server_dump(empty) == {}

        (tmp_path / "playbooks.toml").write_text(site.config())
        shutil.copy(EXAMPLES / "ledger.py", tmp_path / "ledger.py")
        env = {"LEDGER": "ledger.txt"}
        assert resumable(["exec", "ledger.py", "--run-id", "done"], tmp_path, env=env).code == 0
        crash = {**env, "RESUMABLE_CRASH_AFTER": "7"}
        assert resumable(["exec", "ledger.py", "--run-id", "cut"], tmp_path, env=crash).code == -9
        time.sleep(site.lease_seconds)  # the killed owner's lease lapses (no write needed)
        before = _server_dump(site)
        listed = resumable(["runs", "--json"], tmp_path)
        assert listed.code == 0, listed.stderr
        assert {r["run_id"]: r["status"] for r in json.loads(listed.stdout)} == {
            "done": "completed",
            "cut": "crashed",
        }
        assert resumable(["show", "cut", "--json"], tmp_path).code == 0
        assert resumable(["steps", "done", "--json"], tmp_path).code == 0
        with inspector(tmp_path) as url:
            assert httpx.get(url + "/api/runs", timeout=30).status_code == 200
            for run_id in ("done", "cut"):
                assert httpx.get(f"{url}/runs/{run_id}", timeout=30).status_code == 200
        assert _server_dump(site) == before
    finally:
        _run_apart(site.cleanup())
        _run_apart(empty.cleanup())
