"""Bad input to the inspector: a port in use is one line and exit 2; a store that cannot be
reached is said on the page while the server keeps serving; a corrupted run is shown as
such while the other runs are still listed and shown."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
from tests.crash.harness import resumable
from tests.ui.harness import inspector

SCRIPT = "import asyncio\nanswer = 6 * 7\nawait asyncio.sleep(0)\nprint(answer)\n"


def test_a_port_in_use_is_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = resumable(["ui", "--port", str(port)], tmp_path, timeout=30)
    assert refused.code == 2
    assert refused.stderr.splitlines() == [
        f"resumable: error: port {port} on 127.0.0.1 is in use: stop what listens there or "
        "pick another with --port"
    ]


def test_an_unreachable_store_is_said_on_the_page_and_the_server_keeps_running(
    page: Any, tmp_path: Path
) -> None:
    config = tmp_path / "playbooks.toml"
    config.write_text(
        '[durability]\nstore = "postgres"\nurl = "postgresql://postgres@127.0.0.1:1/test"\n',
        encoding="utf-8",
    )
    with inspector(tmp_path, "--config", str(config)) as url:
        for _ in range(2):  # asked again on each load, and still up after a failure
            assert page.goto(url + "/").status == 503
            said = page.locator("#store-error").inner_text()
            assert said.startswith("The store cannot be read: ")
            assert "127.0.0.1:1" in said
        assert page.goto(url + "/runs/any").status == 503
        assert "cannot be read" in page.locator("#store-error").inner_text()
        api = httpx.get(url + "/api/runs")
        assert api.status_code == 503
        assert "127.0.0.1:1" in api.json()["error"]


def test_a_corrupted_run_is_shown_as_such_and_the_others_still_are(
    page: Any, tmp_path: Path
) -> None:
    (tmp_path / "job.py").write_text(SCRIPT, encoding="utf-8")
    assert resumable(["exec", "job.py", "--run-id", "good"], tmp_path).code == 0
    # sealed with another MAC key: to this store, a forged log
    forged = resumable(
        ["exec", "job.py", "--run-id", "forged"], tmp_path, env={"RESUMABLE_MAC_KEY": "other"}
    )
    assert forged.code == 0
    # a byte of a record in the middle of the log flipped: the log ends before it
    assert resumable(["exec", "job.py", "--run-id", "flipped"], tmp_path).code == 0
    (segment,) = (tmp_path / ".resumable" / "runs" / "flipped" / "log").glob("*.seg")
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    with inspector(tmp_path) as url:
        page.goto(url + "/")
        assert sorted(
            page.locator("#run-list tbody tr").evaluate_all("rows => rows.map(r => r.dataset.run)")
        ) == ["flipped", "forged", "good"]
        page.goto(url + "/runs/forged")
        said = page.locator("#corruption").inner_text()
        assert said.startswith("This run's log cannot be used: record 1 of run forged fails ")
        assert "authentication" in said
        assert page.locator("#corrupted .badge").inner_text() == "corrupted"
        assert httpx.get(url + "/api/runs/forged").json()["corrupted"] is True
        page.goto(url + "/runs/flipped")
        assert "corrupt" in page.locator("#problems").inner_text()
        page.goto(url + "/runs/good")
        assert page.locator("#status").inner_text() == "completed"
        assert page.locator(".frame table.variables").inner_text().count("42") == 1
