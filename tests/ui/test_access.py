"""Who may look: loopback by default; with --token, every request carries the token or
gets 401; a non-loopback --host without a token is refused before anything listens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.crash.harness import resumable
from tests.ui.harness import inspector

from resumable.ui.access import is_loopback

TOKEN = "s3cret-token"
SCRIPT = "import asyncio\nanswer = 6 * 7\nawait asyncio.sleep(0)\n"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An inspector started with --token over a store holding one completed run."""
    work = tmp_path_factory.mktemp("guarded")
    (work / "job.py").write_text(SCRIPT, encoding="utf-8")
    assert resumable(["exec", "job.py", "--run-id", "job"], work).code == 0
    with inspector(work, "--token", TOKEN) as url:
        yield url


def test_without_the_token_every_request_gets_401(page: Any, guarded: str) -> None:
    for path in ("/", "/runs/job", "/api/runs", "/api/runs/job", "/static/ui.css", "/nowhere"):
        assert page.goto(guarded + path).status == 401, path
    assert "needs its token" in page.locator("body").inner_text()
    assert page.goto(guarded + "/?token=wrong").status == 401
    wrong = httpx.get(guarded + "/api/runs", headers={"Authorization": "Bearer wrong"})
    assert wrong.status_code == 401


def test_the_token_in_the_address_opens_every_page(page: Any, guarded: str) -> None:
    assert page.goto(f"{guarded}/?token={TOKEN}").status == 200
    # links carry the token along: the run page and its stylesheet load too
    with page.expect_response(lambda r: "/static/ui.css" in r.url) as sheet:
        page.locator('#run-list a[href*="/runs/job"]').click()
    page.wait_for_url(f"{guarded}/runs/job?token={TOKEN}")
    assert sheet.value.status == 200
    assert page.locator("#status").inner_text() == "completed"
    assert page.locator(".frame table.variables").inner_text().count("42") == 1


def test_the_token_as_a_bearer_header_opens_every_page(browser: Any, guarded: str) -> None:
    context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        page = context.new_page()
        assert page.goto(guarded + "/").status == 200
        assert page.locator("#run-list tbody tr").count() == 1
        assert page.goto(guarded + "/runs/job").status == 200
    finally:
        context.close()
    api = httpx.get(guarded + "/api/runs/job", headers={"Authorization": f"Bearer {TOKEN}"})
    assert api.status_code == 200
    assert api.json()["status"] == "completed"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("192.168.1.20", False),
        ("inspector.example.com", False),
    ],
)
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_without_a_token_only_requests_to_this_machine_are_answered(tmp_path: Path) -> None:
    """A page elsewhere that rebinds its domain to 127.0.0.1 does not get the runs."""
    (tmp_path / ".resumable" / "runs").mkdir(parents=True)  # an empty store (ui makes none)
    with inspector(tmp_path) as url:
        assert httpx.get(url + "/api/runs").status_code == 200
        port = url.rsplit(":", 1)[1]
        assert httpx.get(f"http://localhost:{port}/api/runs").status_code == 200
        headers = httpx.get(url + "/").headers
        assert headers["content-security-policy"].startswith("default-src 'self'")
        assert headers["referrer-policy"] == "no-referrer"
        rebound = httpx.get(url + "/api/runs", headers={"Host": f"evil.example:{port}"})
        assert rebound.status_code == 400
        assert "not to 'evil.example'" in rebound.text


def test_a_non_loopback_host_needs_a_token(tmp_path: Path) -> None:
    refused = resumable(["ui", "--host", "0.0.0.0", "--port", "0"], tmp_path, timeout=30)
    assert refused.code == 2
    assert refused.stderr.splitlines() == [
        "resumable: error: --host 0.0.0.0 is not a loopback address: anyone who can reach it "
        "would see every run's variables; add --token T (then every request needs it) or use "
        "--host 127.0.0.1"
    ]
    (tmp_path / ".resumable" / "runs").mkdir(parents=True)  # an empty store (ui makes none)
    with inspector(tmp_path, "--host", "0.0.0.0", "--token", TOKEN) as url:
        port = url.rsplit(":", 1)[1]
        assert httpx.get(f"http://127.0.0.1:{port}/").status_code == 401
        assert httpx.get(f"http://127.0.0.1:{port}/?token={TOKEN}").status_code == 200
