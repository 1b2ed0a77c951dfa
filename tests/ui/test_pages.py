"""What a person sees in the inspector, in a real headless Chromium: the runs of a store,
the filter, a crashed run's variables and remaining code, a waiting run's question, a
failed run's error, a running run that updates itself, and the 404 of an unknown run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect
from tests.crash.harness import resumable
from tests.ui.harness import FIRST, ORDERS, statement_records

from resumable.store.base import STATUSES

KINDS = {
    "finished": "completed",
    "broken": "failed",
    "crashed": "crashed",
    "asking": "waiting",
    "live": "running",
}


def _rows(page: Any) -> dict[str, str]:
    """Run id -> status, as the table on the page shows them."""
    rows = {}
    for row in page.locator("#run-list tbody tr").all():
        rows[row.locator("td").nth(0).inner_text()] = row.locator(".badge").inner_text()
    return rows


def _variables(page: Any) -> dict[str, str]:
    table = page.locator(".frame table.variables tr").all()
    return {row.locator("th").inner_text(): row.locator("td").inner_text() for row in table}


def _code(page: Any, which: str) -> str:
    """The code of ``pre.executed`` or ``pre.remaining``, without its line numbers."""
    return str(
        page.locator(f"pre.{which}").evaluate(
            "pre => Array.from(pre.childNodes)"
            ".filter(n => !(n.classList && n.classList.contains('lineno')))"
            ".map(n => n.textContent).join('')"
        )
    )


def _count(page: Any) -> int:
    match = re.fullmatch(r"(\d+) records", page.locator("#record-count").inner_text())
    assert match, page.locator("#record-count").inner_text()
    return int(match.group(1))


def test_the_list_shows_every_run_with_its_status(page: Any, base_url: str) -> None:
    page.goto(base_url + "/")
    assert _rows(page) == KINDS
    page.get_by_role("link", name="crashed", exact=True).last.click()
    page.wait_for_url(base_url + "/runs/crashed")
    assert page.locator("#status").inner_text() == "crashed"


def test_the_list_follows_a_running_run_without_a_reload(page: Any, base_url: str) -> None:
    page.goto(base_url + "/?status=running")
    page.evaluate("window.sameDocument = true")
    records = page.locator('#run-list tr[data-run="live"] td.num').first
    before = records.inner_text()
    expect(records).not_to_have_text(before, timeout=5_000)
    assert page.evaluate("window.sameDocument") is True
    assert int(records.inner_text()) > int(before)


def test_the_status_filter_keeps_only_runs_of_that_status(page: Any, base_url: str) -> None:
    page.goto(base_url + "/?status=crashed")
    assert _rows(page) == {"crashed": "crashed"}
    page.locator("#filters a.badge.waiting").click()
    page.wait_for_url(base_url + "/?status=waiting")
    assert _rows(page) == {"asking": "waiting"}
    page.goto(base_url + "/?status=pending")
    assert _rows(page) == {}
    assert page.locator("#no-runs").inner_text() == "No pending runs in this store."
    assert page.goto(base_url + "/?status=lost").status == 400
    assert page.locator("#problem .alert").inner_text() == (
        f"status='lost' is not a status; use one of "
        f"{', '.join([*STATUSES, 'crashed', 'interrupted', 'unfinished'])}"
    )


def test_a_crashed_run_shows_its_variables_and_the_code_it_has_left(
    page: Any, base_url: str, work: Path
) -> None:
    page.goto(base_url + "/runs/crashed")
    records = statement_records(work, "crashed")
    assert max(records) == FIRST  # killed right after `first = ...` finished
    assert _count(page) == records[FIRST]
    variables = _variables(page)
    assert variables["first"] == "10"
    assert variables["orders"] == "['lamp', 'desk']"
    assert "second" not in variables
    assert variables["conn"] == "lost: socket.socket objects cannot be checkpointed"
    executed, remaining = _code(page, "executed"), _code(page, "remaining")
    assert executed.endswith('orders = ["lamp", "desk"]\nfirst = await fetch(1)\n')
    assert remaining == 'second = await fetch(2)\nprint("total", first + second)\n'
    # numbered as lines of the script: the remaining code goes on from line 13
    assert page.locator("pre.remaining .lineno").all_inner_texts() == ["13", "14"]
    assert page.locator(".marker").inner_text() == "▶ stopped here (line 13)"
    assert page.locator("#timeline li").count() == records[FIRST]
    awaits = page.locator("#timeline li.await .title").all_inner_texts()
    # the foreign await inside fetch (line 6) completed; its result is in the log
    assert any(re.fullmatch(r"await at line 6 \(key \S+\) returned", t) for t in awaits), awaits
    # the variables as of an earlier record: before `first` was assigned
    orders_done = records[ORDERS]
    page.locator(f'#timeline li[data-seq="{orders_done}"] a.seq').click()
    page.wait_for_url(f"{base_url}/runs/crashed?at={orders_done}")
    assert page.locator("#as-of").inner_text().startswith(f"As of record {orders_done}.")
    earlier = _variables(page)
    assert earlier["orders"] == "['lamp', 'desk']"
    assert "first" not in earlier
    assert _code(page, "remaining").startswith("first = await fetch(1)\n")


def test_a_waiting_run_shows_the_question_it_asked(page: Any, base_url: str) -> None:
    page.goto(base_url + "/runs/asking")
    assert page.locator("#status").inner_text() == "waiting"
    question = page.locator("#question")
    assert question.locator("blockquote").inner_text() == "Which city should I book?"
    assert "resumable answer asking TEXT" in question.inner_text()
    asked = page.locator("#timeline li.ask")
    assert asked.locator(".title").inner_text() == "asked (input)"
    assert asked.locator("pre").inner_text() == "Which city should I book?"


def test_a_failed_run_shows_its_error_and_the_line_it_came_from(page: Any, base_url: str) -> None:
    page.goto(base_url + "/runs/broken")
    error = page.locator("#error")
    assert "ZeroDivisionError: division by zero" in error.locator(".message").inner_text()
    assert error.locator(".error-line").inner_text() == "4y = x / 0"
    assert "At line 4 of the script:" in error.inner_text()
    (failed,) = page.locator("#timeline li.stmt.failed .title").all_inner_texts()
    # statements count from 0, as in `show` and the keys of `steps`: `y = x / 0` is the fourth
    assert failed.startswith("statement 3 failed: ZeroDivisionError: division by zero")


def _addresses_out(data: Any) -> Any:
    """The JSON without memory addresses (``<function fetch at 0x7f...>`` differs by process)."""
    return json.loads(re.sub(r" at 0x[0-9a-f]+", " at 0x", json.dumps(data)))


def test_a_running_run_shows_new_records_without_a_reload(page: Any, base_url: str) -> None:
    page.goto(base_url + "/runs/live")
    assert page.locator("#status").inner_text() == "running"
    assert page.locator("#live").is_visible()
    page.evaluate("window.sameDocument = true")
    before = _count(page)
    # new records of the live run reach the page within ~2 s (polled every second)
    expect(page.locator("#record-count")).not_to_have_text(f"{before} records", timeout=5_000)
    assert page.evaluate("window.sameDocument") is True
    assert _count(page) > before
    assert page.locator("#timeline li").count() == _count(page)


def test_an_unknown_run_is_a_404_page(page: Any, base_url: str) -> None:
    response = page.goto(base_url + "/runs/no-such-run")
    assert response.status == 404
    assert page.locator("#not-found .alert").inner_text() == (
        "run no-such-run: not found in this store."
    )
    assert page.goto(base_url + "/nowhere").status == 404
    assert page.goto(base_url + "/runs/crashed?at=999").status == 400
    assert page.locator("#problem .alert").inner_text() == (
        "run crashed has no record 999: pick one on its timeline"
    )
    assert httpx.get(base_url + "/api/runs/no-such-run").status_code == 404


def test_the_json_is_what_runs_and_show_print(work: Path, base_url: str) -> None:
    listed = json.loads(resumable(["runs", "--json"], work).stdout)
    served = httpx.get(base_url + "/api/runs").json()
    # the live run's last checkpoint moves between the two reads
    settled = [{**row, "last_checkpoint": None, "records": None} for row in listed]
    assert [{**r, "last_checkpoint": None, "records": None} for r in served] == settled
    for run_id in ("crashed", "asking"):
        shown = resumable(["show", run_id, "--json"], work).stdout
        served_run = httpx.get(f"{base_url}/api/runs/{run_id}").json()
        assert _addresses_out(served_run) == _addresses_out(json.loads(shown))
    assert httpx.get(base_url + "/api/runs?status=waiting").json() == [
        row for row in listed if row["status"] == "waiting"
    ]
