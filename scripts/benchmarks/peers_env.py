"""Where `bench.py peers` runs the peers: their venv, the PostgreSQL server, store sizes.

The peers (LangGraph, DBOS, psycopg) are installed from ``peers-requirements.txt`` into a
venv under the user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``, then
``resumable-bench/venv-peers``), made on first use and made again when the requirements
change; resumable's own environment never gets them. PostgreSQL is reached with that
venv's psycopg, one throwaway database per store.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

REQUIREMENTS = Path(__file__).with_name("peers-requirements.txt")
PACKAGES = (
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "dbos",
    "psycopg",
    "SQLAlchemy",
)


class NoPeers(Exception):
    """The peers' venv could not be made: the message says why."""


def default_venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "resumable-bench" / "venv-peers"


def venv_python(folder: Path) -> Path:
    """The venv's Python, made with ``python -m venv`` and the pinned peers if not yet there."""
    python = folder / "bin" / "python"
    stamp = folder / "requirements.sha256"
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if python.is_file() and stamp.is_file() and stamp.read_text().strip() == wanted:
        return python
    print(f"peers: installing {REQUIREMENTS.name} into {folder}", file=sys.stderr)
    try:
        venv.create(folder, with_pip=True, clear=True)
    except Exception as error:  # any failure means: no peers here
        raise NoPeers(f"python -m venv {folder} failed: {error}") from error
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise NoPeers(f"pip install -r {REQUIREMENTS.name} failed:\n{done.stderr[-2000:]}")
    stamp.write_text(wanted + "\n")
    return python


def versions(python: Path) -> dict[str, str]:
    """The installed version of each peer package in the venv."""
    code = (
        "import importlib.metadata as m, json, sqlite3\n"
        f"names = {list(PACKAGES)!r}\n"
        "found = {n: m.version(n) for n in names}\n"
        "found['sqlite (library)'] = sqlite3.sqlite_version\n"
        "print(json.dumps(found))\n"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    found: dict[str, str] = json.loads(done.stdout)
    return found


_ADMIN = """\
import sys, psycopg
with psycopg.connect(sys.argv[1], autocommit=True, connect_timeout=5) as connection:
    rows = connection.execute(sys.argv[2]).fetchall() if sys.argv[3] == "rows" else None
    if sys.argv[3] != "rows":
        connection.execute(sys.argv[2])
    print(rows[0][0] if rows else "")
"""

_SIZE = """\
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
AND n.nspname NOT LIKE 'pg_toast%'"""


class Postgres:
    """The server behind ``url`` (its database is only the one connected to for admin)."""

    def __init__(self, python: Path, url: str) -> None:
        self.python = python
        self.url = url

    def _run(self, url: str, sql: str, kind: str = "rows") -> str:
        done = subprocess.run(
            [str(self.python), "-c", _ADMIN, url, sql, kind],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else sql)
        return done.stdout.strip()

    def version(self) -> str | None:
        """The server's version, or None when it cannot be reached."""
        try:
            return self._run(self.url, "SHOW server_version")
        except RuntimeError:
            return None

    def database_url(self, name: str) -> str:
        base, _, _ = self.url.rpartition("/")
        return f"{base}/{name}"

    def create(self, name: str) -> str:
        self.drop(name)
        self._run(self.url, f'CREATE DATABASE "{name}"', "do")
        return self.database_url(name)

    def drop(self, name: str) -> None:
        self._run(self.url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', "do")

    def size(self, name: str) -> int:
        """Bytes of every table of the database, with its indexes and TOAST."""
        return int(self._run(self.database_url(name), _SIZE))


def folder_bytes(path: Path) -> int:
    """The size of a file, or the files under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def sqlite_bytes(path: Path) -> int:
    """A SQLite database: its file and the files beside it named after it (its write-ahead
    log, resumable's ``-heads``), but not the ``-shm`` index of the log."""
    return sum(
        p.stat().st_size
        for p in path.parent.glob(path.name + "*")
        if p.is_file() and not p.name.endswith("-shm")
    )
