"""Real processes for crash tests: run, kill, resume, compare with an uninterrupted run.

Runs use ``sync = "flush"`` unless a test says otherwise; ``RESUMABLE_TEST_SYNC=fsync``
in the environment of pytest runs the suite with fsync instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SETS = """\
import asyncio


async def main():
    words = {f"word{i}" for i in range(40)}
    await asyncio.sleep(0)
    print(list(words))


await main()
"""
"""A program whose output depends on the hash seed: a set of strings, built in a statement
that awaits, printed after the await (a resume runs the statement again)."""


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


def _env(env: dict[str, str] | None) -> dict[str, str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    full_env.update(env or {})
    full_env.setdefault("RESUMABLE_DURABILITY_SYNC", os.environ.get("RESUMABLE_TEST_SYNC", "flush"))
    return full_env


def start(
    args: list[str], cwd: Path, *, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start `resumable` in the background (to be killed from outside)."""
    return subprocess.Popen(
        [sys.executable, "-m", "resumable", *args],
        cwd=cwd,
        env=_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def wait_for_file(path: Path, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.01)


def resumable(
    args: list[str],
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    stdin: str | None = None,
) -> Result:
    """Run the `resumable` command in a fresh Python process.

    One still running after ``timeout`` is stopped with SIGABRT, which makes Python's
    fault handler print every thread's stack: the failure shows where it hung.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "resumable", *args],
        cwd=cwd,
        env={**_env(env), "PYTHONFAULTHANDLER": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(stdin or "", timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        stdout, stderr = process.communicate()
        raise AssertionError(
            f"`resumable {' '.join(args)}` still ran after {timeout} s; stopped with SIGABRT. "
            f"stdout ends:\n{stdout[-2000:]}\nstderr ends:\n{stderr[-6000:]}"
        ) from None
    return Result(process.returncode, stdout, stderr)


def strip_run(lines: list[str], run_id: str) -> list[str]:
    """Ledger lines without the run id, so two runs' ledgers compare."""
    return [line.replace(run_id, "RUN", 1) for line in lines]
