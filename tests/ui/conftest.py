"""A store holding one run of every kind, an inspector serving it, a headless browser."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.crash.harness import resumable, start
from tests.playbooks_runtime import write_program
from tests.ui.harness import CRASHES, FIRST, inspector, launch_chromium, statement_records

FINISHES = """\
import asyncio
total = 0
for i in range(3):
    await asyncio.sleep(0)
    total += i
print("total", total)
"""

FAILS = """\
import asyncio
x = 1
await asyncio.sleep(0)
y = x / 0
print("never")
"""


KEEPS_RUNNING = """\
import asyncio
ticks = []
for i in range(3000):
    await asyncio.sleep(0.2)
    ticks.append(i)
"""

ASKS = {
    "Main": [
        'await Step("Main:01:QUE")\n'
        'name = await Input("Which city should I book?")\n'
        'await Say("user", f"Booked {name}")\n'
        "await Return(name)\n"
    ]
}
GREETER = """# Booker
Books a trip.

## Main
### Steps
- Ask the user where to go and book it
"""


def _exec(work: Path, name: str, source: str, **env: str) -> int:
    (work / f"{name}.py").write_text(source, encoding="utf-8")
    return resumable(["exec", f"{name}.py", "--run-id", name], work, env=env).code


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder whose file store holds a completed, a failed, a crashed, a waiting and a
    running run (the last one goes on in the background until the module is done)."""
    work = tmp_path_factory.mktemp("inspected")
    assert _exec(work, "finished", FINISHES) == 0
    assert _exec(work, "broken", FAILS) == 1
    # where to crash: right after `first = ...` finished, as an uninterrupted run records it
    whole = tmp_path_factory.mktemp("whole")
    assert _exec(whole, "crashes", CRASHES) == 0
    crash_after = statement_records(whole, "crashes")[FIRST]
    assert _exec(work, "crashed", CRASHES, RESUMABLE_CRASH_AFTER=str(crash_after)) == -9
    program = write_program(work, "booker", GREETER, ASKS)
    waiting = resumable(["run", program.name, "--run-id", "asking", "--no-input"], work)
    assert waiting.code == 3, waiting.stderr
    (work / "live.py").write_text(KEEPS_RUNNING, encoding="utf-8")
    live = start(["exec", "live.py", "--run-id", "live"], work)
    deadline = time.monotonic() + 30
    while not list((work / ".resumable" / "runs" / "live").glob("log/*.seg")):
        assert live.poll() is None, live.communicate()
        assert time.monotonic() < deadline, "the live run never began"
        time.sleep(0.05)
    try:
        yield work
    finally:
        live.kill()
        live.communicate()


@pytest.fixture(scope="module")
def base_url(work: Path) -> Iterator[str]:
    with inspector(work) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one module: Playwright's sync API marks an event loop running in this
    thread while it is open, so it must close before another module's async tests run."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing: pip install playwright (scripts/test.sh does)")
    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    try:
        yield page
    finally:
        context.close()
