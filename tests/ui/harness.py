"""The inspector in a real process, and a real headless Chromium to look at it.

``resumable ui --port 0`` picks a free port and says where it listens on stderr; the
browser is Debian's ``chromium`` driven by Playwright (``scripts/test.sh`` installs
both). Nothing here is faked: the runs are made by ``resumable`` processes too.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.crash.harness import start

from resumable.durability.log.records import RecordCodec
from resumable.store.filesystem import scan_frames

CRASHES = """\
import asyncio
import socket


async def fetch(n):
    await asyncio.sleep(0)
    return n * 10


conn = socket.socket()
orders = ["lamp", "desk"]
first = await fetch(1)
second = await fetch(2)
print("total", first + second)
"""
ORDERS, FIRST = 4, 5
"""Indexes of the statements ``orders = ...`` and ``first = ...`` in CRASHES."""

CHROMIUM = os.environ.get("RESUMABLE_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _lines(stream: Any, into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


@contextmanager
def inspector(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``resumable ui --port 0 ARGS`` running in ``cwd``; yields its base URL."""
    process = start(["ui", "--port", "0", *args], cwd, env=env)
    said: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(process.stderr, said), daemon=True)
    reader.start()
    try:
        try:
            line = said.get(timeout=30)
        except queue.Empty:
            raise AssertionError("resumable ui said nothing in 30 s") from None
        assert "inspector at http://" in line, line + "".join(said.queue)
        yield line.split("inspector at ", 1)[1].split()[0].rstrip("/")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(timeout=10)
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        process.stderr.close()


def launch_chromium(playwright: Any) -> Any:
    """Debian's chromium under Playwright (never a downloaded browser)."""
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test.sh does)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def statement_records(work: Path, run_id: str) -> dict[int, int]:
    """Statement index -> seq of the record that says it finished, from the run's log."""
    codec = RecordCodec((work / ".resumable" / "key").read_bytes())
    seqs = {}
    for segment in sorted((work / ".resumable" / "runs" / run_id / "log").glob("*.seg")):
        for stored in scan_frames(segment.read_bytes()).records:
            record = codec.open(stored.data)
            if record.kind == "stmt":
                seqs[record.body["i"]] = record.seq
    return seqs
