"""Real `resumable` processes against one PostgreSQL schema: start, watch, signal, query."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

REPO = Path(__file__).resolve().parents[2]
LEDGER_SCRIPT = REPO / "examples" / "ledger.py"
POSTGRES_URL = os.environ.get(
    "RESUMABLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
LEASE_SECONDS = 2
T = TypeVar("T")


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


@dataclass
class Schema:
    """A fresh schema of the test database; ``url`` is the store URL that names it."""

    name: str = field(default_factory=lambda: f"t_{secrets.token_hex(6)}")

    @property
    def url(self) -> str:
        return f"{POSTGRES_URL}?schema={self.name}"

    def query(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """Rows of one query (``{s}`` is the quoted schema)."""

        async def go() -> list[dict[str, Any]]:
            conn = await asyncpg.connect(POSTGRES_URL, timeout=10)
            try:
                rows = await conn.fetch(sql.format(s=f'"{self.name}"'), *args)
            finally:
                await conn.close()
            return [dict(row) for row in rows]

        return asyncio.run(go())

    def runs(self) -> dict[str, dict[str, Any]]:
        rows = self.query("SELECT run_id, status, owner, epoch FROM {s}.runs")
        return {row["run_id"]: row for row in rows}

    def drop(self) -> None:
        self.query("DROP SCHEMA IF EXISTS {s} CASCADE")


def env_for(schema: Schema, **extra: str) -> dict[str, str]:
    """The environment of a process using the schema's store with short leases."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env.update(
        RESUMABLE_DURABILITY_STORE="postgres",
        RESUMABLE_DURABILITY_URL=schema.url,
        RESUMABLE_DURABILITY_LEASE_SECONDS=str(LEASE_SECONDS),
        RESUMABLE_DURABILITY_SYNC="flush",
    )
    env.update(extra)
    return env


def resumable(args: list[str], cwd: Path, env: dict[str, str], *, timeout: float = 60) -> Result:
    """Run one `resumable` command to its end."""
    done = subprocess.run(
        [sys.executable, "-m", "resumable", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Result(done.returncode, done.stdout, done.stderr)


class Process:
    """A background `resumable` process whose stdout and stderr lines are collected as they come."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "resumable", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._changed = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, args=(self.popen.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.popen.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _read(self, stream: Any, lines: list[str]) -> None:
        for line in stream:
            with self._changed:
                lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, pattern: str, *, timeout: float) -> re.Match[str]:
        """The first stderr line matching ``pattern``, waiting for it up to ``timeout``."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.err:
                    found = regex.search(line)
                    if found:
                        return found
                left = deadline - time.monotonic()
                if left <= 0 or (self.popen.poll() is not None and not self._reading()):
                    raise AssertionError(
                        f"no line matching {pattern!r} within {timeout}s; stderr:\n"
                        + "\n".join(self.err)
                    )
                self._changed.wait(min(left, 0.1))

    def _reading(self) -> bool:
        return any(reader.is_alive() for reader in self._readers)

    def matches(self, pattern: str) -> list[re.Match[str]]:
        regex = re.compile(pattern)
        with self._changed:
            return [m for m in (regex.search(line) for line in self.err) if m]

    def signal(self, signum: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signum)

    def finish(self, *, timeout: float = 20) -> int:
        """Wait for the process to exit and for its output to be read; its exit code."""
        code = self.popen.wait(timeout=timeout)
        self._close(timeout)
        return code

    def _close(self, timeout: float) -> None:
        for reader in self._readers:
            reader.join(timeout=timeout)
        for stream in (self.popen.stdout, self.popen.stderr):
            if stream is not None:
                stream.close()

    def stop(self, *, timeout: float = 20) -> int:
        """SIGTERM (a graceful stop), then wait."""
        self.signal(signal.SIGTERM)
        return self.finish(timeout=timeout)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=10)
        self._close(10)


def wait_until(
    check: Callable[[], T | None], *, timeout: float, what: str, every: float = 0.1
) -> T:
    """Poll ``check()`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def strip_run(lines: list[str], run_id: str) -> list[str]:
    """Lines without the run id that starts their key, so the ledgers of two runs compare."""
    return ["RUN" + line[len(run_id) :] if line.startswith(run_id) else line for line in lines]


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []
