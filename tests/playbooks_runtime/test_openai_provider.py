"""``resumable run`` with the ``openai`` provider against a real SSE server on 127.0.0.1.

The server plays the LLM: it answers each chat-completions request with the response
the scenario's responses file holds for that playbook and call (the rest of it, for a
request to continue a cut-off response), unless a test scripted a fault for that call.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tomllib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, Result
from tests.llm.sse_server import Reply, SSEServer, Status, Stream
from tests.playbooks_runtime import SCENARIO_TRANSCRIPT

from resumable.llm.base import CONTINUE_INSTRUCTION

SCENARIO = EXAMPLES / "scenario" / "main.pb"


@dataclass
class PlayedLLM:
    """Stands in for ``SSEServer.replies``: computes each reply from the request it answers."""

    server: SSEServer
    responses: dict[str, list[str]]
    faults: list[tuple[str, int, Callable[[str], Reply]]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return True

    def popleft(self) -> Reply:
        messages = self.server.requests[-1].messages
        playbook = re.match(r"Execute playbook (\w+)\(", messages[1]["content"])
        assert playbook is not None, messages[1]
        continuing = messages[-1]["content"] == CONTINUE_INSTRUCTION
        answers = [m["content"] for m in messages if m["role"] == "assistant"]
        call = len(answers) + (0 if continuing else 1)
        rest = self.responses[playbook[1]][call - 1][len(answers[-1]) if continuing else 0 :]
        for fault in self.faults:
            if fault[:2] == (playbook[1], call):
                self.faults.remove(fault)
                return fault[2](rest)
        return Stream(rest, piece=5)

    def calls(self) -> list[tuple[str, int, bool]]:
        """(playbook, call, continuing) of every request the server received, in order."""
        seen = []
        for request in self.server.requests:
            messages = request.messages
            name = re.match(r"Execute playbook (\w+)\(", messages[1]["content"])
            continuing = messages[-1]["content"] == CONTINUE_INSTRUCTION
            answered = sum(m["role"] == "assistant" for m in messages)
            seen.append((name[1] if name else "?", answered + (0 if continuing else 1), continuing))
        return seen


class _SamePortServer(SSEServer):
    """The test server, started on a port chosen before (where a run found nothing)."""

    async def __aenter__(self) -> _SamePortServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        return self


@pytest.fixture
async def llm() -> AsyncIterator[PlayedLLM]:
    table = tomllib.loads(SCENARIO.with_name("main.responses.toml").read_text())
    responses = {name: [e["response"] for e in entries] for name, entries in table.items()}
    async with SSEServer() as server:
        played = PlayedLLM(server, responses)
        server.replies = played  # type: ignore[assignment]
        yield played


async def run_cli(args: list[str], cwd: Path, base_url: str, **extra: str) -> Result:
    """``resumable ARGS`` in a fresh process, its LLM the endpoint at ``base_url``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RESUMABLE_") and k != "OPENAI_API_KEY"
    }
    env.update(
        RESUMABLE_DURABILITY_SYNC="flush",
        RESUMABLE_LLM_PROVIDER="openai",
        RESUMABLE_LLM_BASE_URL=base_url,
        SCENARIO_LEDGER=str(cwd / "ledger.txt"),
        **extra,
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "resumable",
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())


def _error_lines(result: Result) -> list[str]:
    assert "Traceback" not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith("resumable: error:")]


def _ledger(folder: Path) -> list[str]:
    return (folder / "ledger.txt").read_text().splitlines()


ORDER = [
    ("Main", 1, False),
    ("Main", 2, False),
    ("SomePlaybook", 1, False),
    ("SomePlaybook", 2, False),
    ("Main", 3, False),
    ("Main", 4, False),
]


async def test_the_scenario_runs_against_a_streaming_http_endpoint(
    llm: PlayedLLM, tmp_path: Path
) -> None:
    done = await run_cli(["run", str(SCENARIO)], tmp_path, llm.server.base_url)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == SCENARIO_TRANSCRIPT
    assert llm.calls() == ORDER
    first = llm.server.requests[0]
    assert first.path == "/v1/chat/completions"
    assert first.body["stream"] is True
    assert first.headers["accept"] == "text/event-stream"
    assert "authorization" not in first.headers  # a local server needs no key
    assert len(_ledger(tmp_path)) == 1


async def test_a_stream_cut_off_mid_response_is_continued_from_where_it_stopped(
    llm: PlayedLLM, tmp_path: Path
) -> None:
    cut = 30
    llm.faults.append(("Main", 3, lambda rest: Stream(rest, piece=5, cut_after=cut)))
    done = await run_cli(["run", str(SCENARIO)], tmp_path, llm.server.base_url)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == SCENARIO_TRANSCRIPT
    assert llm.calls() == [*ORDER[:5], ("Main", 3, True), ORDER[5]]
    continued = llm.server.requests[5].messages
    assert continued[-2] == {"role": "assistant", "content": llm.responses["Main"][2][:cut]}
    assert len(_ledger(tmp_path)) == 1  # FetchData ran once, before or after the cut


async def test_a_429_is_retried_and_the_run_goes_on(llm: PlayedLLM, tmp_path: Path) -> None:
    llm.faults.append(("Main", 1, lambda rest: Status(429, "slow down", retry_after="0")))
    done = await run_cli(["run", str(SCENARIO)], tmp_path, llm.server.base_url)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == SCENARIO_TRANSCRIPT
    assert llm.calls() == [ORDER[0], *ORDER]
    assert llm.server.requests[0].body == llm.server.requests[1].body


async def test_an_outage_inside_a_called_playbook_stops_the_run_and_resume_finishes_it(
    llm: PlayedLLM, tmp_path: Path
) -> None:
    url = llm.server.base_url
    llm.faults.append(("SomePlaybook", 1, lambda rest: Status(503, "overloaded")))
    failed = await run_cli(
        ["run", str(SCENARIO), "--run-id", "r"], tmp_path, url, RESUMABLE_LLM_MAX_RETRIES="0"
    )
    assert failed.code == 2
    (line,) = _error_lines(failed)
    assert "503" in line
    resumed = await run_cli(["resume", "r"], tmp_path, url)
    assert resumed.code == 0, resumed.stderr
    assert (failed.stdout + resumed.stdout).splitlines() == SCENARIO_TRANSCRIPT
    # Main's LLM was never told about the outage: it is not its code's error
    assert not any("503" in json.dumps(r.messages) for r in llm.server.requests)
    # SomePlaybook's first call again, then Main's second response from where it stood
    assert llm.calls() == [*ORDER[:3], *ORDER[2:4], ("Main", 2, True), *ORDER[4:]]
    assert len(_ledger(tmp_path)) == 1


async def test_an_unreachable_endpoint_is_one_line_and_the_run_resumes_once_it_is_up(
    tmp_path: Path,
) -> None:
    table = tomllib.loads(SCENARIO.with_name("main.responses.toml").read_text())
    responses = {name: [e["response"] for e in entries] for name, entries in table.items()}
    async with SSEServer() as probe:
        url, port = probe.base_url, probe.port
    down = await run_cli(
        ["run", str(SCENARIO), "--run-id", "r"], tmp_path, url, RESUMABLE_LLM_MAX_RETRIES="2"
    )
    assert down.code == 2
    retries = [x for x in down.stderr.splitlines() if x.startswith("resumable: retrying in ")]
    assert len(retries) == 2  # each retry said, then one line once the budget is spent
    assert all(f"cannot reach http://127.0.0.1:{port}/v1" in x for x in retries)
    (line,) = _error_lines(down)
    assert f"cannot reach http://127.0.0.1:{port}/v1/chat/completions" in line
    assert "gave up after 3 attempts ([llm] max_retries)" in line
    async with _SamePortServer(port=port) as server:
        server.replies = PlayedLLM(server, responses)  # type: ignore[assignment]
        up = await run_cli(["resume", "r"], tmp_path, url)
    assert up.code == 0, up.stderr
    assert (down.stdout + up.stdout).splitlines() == SCENARIO_TRANSCRIPT


async def test_the_api_key_is_sent_but_never_written_to_the_run_or_shown(
    llm: PlayedLLM, tmp_path: Path
) -> None:
    secret = "sk-test-5ecret-never-stored"
    done = await run_cli(
        ["run", str(SCENARIO), "--run-id", "r"],
        tmp_path,
        llm.server.base_url,
        OPENAI_API_KEY=secret,
    )
    assert done.code == 0, done.stderr
    assert llm.server.requests[0].headers["authorization"] == f"Bearer {secret}"
    stored = [p.read_bytes() for p in (tmp_path / ".resumable").rglob("*") if p.is_file()]
    assert stored
    assert not any(secret.encode() in data for data in stored)
    shown = await run_cli(["show", "r", "--json"], tmp_path, llm.server.base_url)
    assert secret not in shown.stdout + shown.stderr + done.stderr


async def test_a_missing_api_key_is_one_line_and_nothing_is_lost(
    llm: PlayedLLM, tmp_path: Path
) -> None:
    remote = "https://llm.example.com/v1"
    refused = await run_cli(["run", str(SCENARIO), "--run-id", "fresh"], tmp_path, remote)
    assert refused.code == 2
    (line,) = _error_lines(refused)
    assert "OPENAI_API_KEY" in line
    assert "[llm] api_key_env" in line
    local = llm.server.base_url
    crashed = await run_cli(
        ["run", str(SCENARIO), "--run-id", "r"], tmp_path, local, RESUMABLE_CRASH_AFTER="30"
    )
    assert crashed.code < 0
    again = await run_cli(["resume", "r"], tmp_path, remote)
    assert again.code == 2
    assert "OPENAI_API_KEY" in _error_lines(again)[0]
    runs = await run_cli(["runs", "--json"], tmp_path, local)
    assert [(row["run_id"], row["records"]) for row in json.loads(runs.stdout)] == [("r", 30)]
    done = await run_cli(["resume", "r"], tmp_path, local)
    assert done.code == 0, done.stderr
    assert (crashed.stdout + done.stdout).splitlines() == SCENARIO_TRANSCRIPT


class LengthCapped(PlayedLLM):
    """A server whose output limit is ``cap`` characters: every longer reply ends there with
    ``finish_reason: "length"``, and so does each continuation of it."""

    cap = 40

    def popleft(self) -> Reply:
        reply = super().popleft()
        assert isinstance(reply, Stream)
        return Stream(reply.text, piece=5, length_after=self.cap)


@pytest.fixture
async def capped() -> AsyncIterator[LengthCapped]:
    table = tomllib.loads(SCENARIO.with_name("main.responses.toml").read_text())
    responses = {name: [e["response"] for e in entries] for name, entries in table.items()}
    async with SSEServer() as server:
        played = LengthCapped(server, responses)
        server.replies = played  # type: ignore[assignment]
        yield played


async def test_replies_cut_at_the_length_limit_are_continued_to_the_uncut_transcript(
    capped: LengthCapped, tmp_path: Path
) -> None:
    longest = max(len(r) for replies in capped.responses.values() for r in replies)
    needed = -(-longest // capped.cap) - 1  # continuations the longest reply takes
    assert needed >= 3
    done = await run_cli(
        ["run", str(SCENARIO)],
        tmp_path,
        capped.server.base_url,
        RESUMABLE_LLM_MAX_CONTINUATIONS=str(needed),
    )
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == SCENARIO_TRANSCRIPT
    assert [call for call in capped.calls() if not call[2]] == ORDER
    assert sum(call[2] for call in capped.calls()) >= needed
    assert len(_ledger(tmp_path)) == 1


async def test_one_cut_more_than_max_continuations_fails_naming_it_and_resume_finishes(
    capped: LengthCapped, tmp_path: Path
) -> None:
    url = capped.server.base_url
    failed = await run_cli(
        ["run", str(SCENARIO), "--run-id", "r"], tmp_path, url, RESUMABLE_LLM_MAX_CONTINUATIONS="1"
    )
    assert failed.code == 2
    (line,) = _error_lines(failed)
    assert 'finish_reason "length"' in line
    assert "raise [llm] max_continuations (now 1)" in line
    resumed = await run_cli(["resume", "r"], tmp_path, url, RESUMABLE_LLM_MAX_CONTINUATIONS="20")
    assert resumed.code == 0, resumed.stderr
    assert (failed.stdout + resumed.stdout).splitlines() == SCENARIO_TRANSCRIPT
    assert len(_ledger(tmp_path)) == 1
