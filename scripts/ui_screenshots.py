"""Screenshots of ``resumable ui`` for docs/ui.md, taken in headless Chromium.

Makes a store with the reference scenario crashed right after ``data = await FetchData()``,
the same scenario completed, the approval example waiting for an answer and a script
that failed; serves it with ``resumable ui --port 0``; saves the runs list and the
crashed run's page::

    python scripts/ui_screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
FETCH_DATA_DONE = 45
"""The record of the scenario's ``data = await FetchData()`` result (call 3)."""

FAILING = """\
import asyncio

prices = {"lamp": 20, "desk": 120}
await asyncio.sleep(0)
total = prices["lamp"] + prices["chair"]
print(total)
"""


def _resumable(args: list[str], cwd: Path, **env: str) -> int:
    full = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    full.update(env, RESUMABLE_DURABILITY_SYNC="flush")
    return subprocess.run(
        [sys.executable, "-m", "resumable", *args], cwd=cwd, env=full, capture_output=True
    ).returncode


def make_store(work: Path) -> None:
    for example in ("scenario", "approval"):
        shutil.copytree(REPO / "examples" / example, work / example)
    (work / "prices.py").write_text(FAILING, encoding="utf-8")
    assert _resumable(["run", "scenario/main.pb"], work) == 0
    assert _resumable(["exec", "prices.py"], work) == 1
    assert _resumable(["run", "approval/approval.pb", "--no-input"], work) == 3
    crashed = _resumable(
        ["run", "scenario/main.pb"], work, RESUMABLE_CRASH_AFTER=str(FETCH_DATA_DONE)
    )
    assert crashed == -signal.SIGKILL


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        make_store(work)
        server = subprocess.Popen(
            [sys.executable, "-m", "resumable", "ui", "--port", "0"],
            cwd=work,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        assert server.stderr is not None
        threading.Thread(
            target=lambda: [lines.put(line) for line in server.stderr or ()], daemon=True
        ).start()
        try:
            url = lines.get(timeout=30).split("inspector at ", 1)[1].split()[0]
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
                )
                page = browser.new_page(viewport={"width": 1280, "height": 720})
                page.goto(url)
                page.screenshot(path=args.out / "ui-runs.png")
                crashed = page.locator("#run-list tr:has(.badge.crashed) a").first
                crashed.click()
                page.wait_for_selector("#run")
                page.set_viewport_size({"width": 1280, "height": 1000})
                page.screenshot(path=args.out / "ui-run.png")
                browser.close()
        finally:
            server.terminate()
            server.wait()
    print(f"wrote {args.out / 'ui-runs.png'} and {args.out / 'ui-run.png'}")


if __name__ == "__main__":
    main()
