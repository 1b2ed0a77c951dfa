"""Replies as real models write them, from a real OpenAI-compatible server on 127.0.0.1.

Each call of the scenario arrives differently: wrapped in a fence, after prose, after a
reasoning block, with a garbled event, cut mid-line and continued by repeating the cut
line, after a 500 and a 429. The run must print what clean replies print, run FetchData
once, and ask for each response once; after a kill -9 too.
"""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from tests.llm.sse_server import Raw, Reply, SSEServer, Status, Stream, wire_bytes
from tests.playbooks_runtime import SCENARIO_TRANSCRIPT
from tests.playbooks_runtime.test_openai_provider import ORDER, SCENARIO, PlayedLLM, run_cli

from resumable.config import load_config
from resumable.durability.log.run_state import RunState
from resumable.durability.runs.coordinator import RecoveryCoordinator
from resumable.durability.runs.session import codec_for, store_for


def _responses() -> dict[str, list[str]]:
    table = tomllib.loads(SCENARIO.with_name("main.responses.toml").read_text())
    return {name: [e["response"] for e in entries] for name, entries in table.items()}


@pytest.fixture
async def llm() -> AsyncIterator[PlayedLLM]:
    async with SSEServer() as server:
        played = PlayedLLM(server, _responses())
        server.replies = played  # type: ignore[assignment]
        yield played


def _repeat_the_cut_line(llm: PlayedLLM) -> Callable[[str], Reply]:
    def reply(rest: str) -> Reply:
        prefix = llm.server.requests[-1].messages[-2]["content"]
        return Stream(prefix[prefix.rfind("\n") + 1 :] + rest, piece=4)

    return reply


def _faults(llm: PlayedLLM) -> dict[tuple[str, int], list[Callable[[str], Reply]]]:
    """One way a real model or a real network misbehaves, on each call of the scenario."""
    return {
        ("Main", 1): [lambda rest: Stream(f"```python\n{rest}```\n", piece=4)],
        ("Main", 2): [lambda rest: Stream(f"Sure! Step 2 asks SomePlaybook.\n{rest}", piece=4)],
        ("SomePlaybook", 1): [
            lambda rest: Stream(f"<think>\nWhat is 6 * 7?\n</think>\n{rest}\nDone.", piece=3)
        ],
        ("SomePlaybook", 2): [  # a garbled event after 29 characters, then the rest
            lambda rest: Raw(
                wire_bytes(Stream(rest[:29], piece=5, finish=False, done=False))
                + b'data: {"choices": [\xff]}\n\n'
            )
        ],
        ("Main", 3): [  # cut mid-line, then a continuation that repeats the cut line
            lambda rest: Stream(rest, piece=5, cut_after=37),
            _repeat_the_cut_line(llm),
        ],
        ("Main", 4): [
            lambda rest: Status(500, "internal"),
            lambda rest: Status(429, "slow down", retry_after="0.3"),
        ],
    }


def _ledger(folder: Path) -> list[str]:
    return (folder / "ledger.txt").read_text().splitlines()


async def test_every_misbehaviour_leaves_the_run_as_a_clean_one(
    llm: PlayedLLM, tmp_path: Path
) -> None:
    for (playbook, call), replies in _faults(llm).items():
        llm.faults += [(playbook, call, reply) for reply in replies]
    done = await run_cli(["run", str(SCENARIO), "--run-id", "r"], tmp_path, llm.server.base_url)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == SCENARIO_TRANSCRIPT
    assert len(_ledger(tmp_path)) == 1  # FetchData ran once
    assert not llm.faults  # every fault was served
    calls = llm.calls()
    # each response asked for once (Main's fourth three times: 500, 429, then answered)
    assert [c for c in calls if not c[2]] == [*ORDER, ORDER[5], ORDER[5]]
    assert [c for c in calls if c[2]] == [("SomePlaybook", 2, True), ("Main", 3, True)]
    # the prompts hold the replies as the model wrote them: prose and reasoning included
    main_last = llm.server.requests[-1].messages
    said = [m["content"] for m in main_last if m["role"] == "assistant"]
    assert said[0].startswith("```python\n")
    assert said[1].startswith("Sure! Step 2")
    assert said[2] == _responses()["Main"][2]  # the repeated cut line was dropped
    some_last = [
        r.messages for r in llm.server.requests if "SomePlaybook(" in r.messages[1]["content"]
    ]
    assert some_last[-1][2]["content"].startswith("<think>")
    assert "retrying in 0.3 s: 429 from" in done.stderr
    state = await _folded(tmp_path)
    # every request made again is recorded with its turn: the cut, the 500 and the 429
    assert [turn.retries for turn in state.frames["main"].turns] == [0, 0, 1, 2]
    (some,) = [f for f in state.frames.values() if f.playbook == "SomePlaybook"]
    assert [turn.retries for turn in some.turns] == [0, 1]  # the garbled event


async def _log(folder: Path) -> list[tuple[int, str, dict[str, Any]]]:
    """(seq, kind, body) of every record of run ``r``."""
    env = {"RESUMABLE_DURABILITY_SYNC": "flush"}
    config = load_config(cwd=folder, env=env)
    async with store_for(config.durability, config) as store:
        codec = await codec_for(store, config.durability, env)
        read = await store.read("r", 0)
        opened = [codec.open(r.data, run_id="r", seq=r.seq) for r in read.records]
    return [(record.seq, record.kind, record.body) for record in opened]


async def _folded(folder: Path) -> RunState:
    """Run ``r`` of ``folder``'s store as its log says."""
    env = {"RESUMABLE_DURABILITY_SYNC": "flush"}
    config = load_config(cwd=folder, env=env)
    async with store_for(config.durability, config) as store:
        codec = await codec_for(store, config.durability, env)
        return (await RecoveryCoordinator(store, codec).load("r")).state


def _wrapped(text: str) -> str:
    return f"<think>\nWhich step is next?\n</think>\nHere is the code.\n```python\n{text}```\nDone."


async def test_after_a_kill_no_completed_response_is_requested_again(tmp_path: Path) -> None:
    responses = {name: [_wrapped(r) for r in rs] for name, rs in _responses().items()}
    async with SSEServer() as server:
        llm = PlayedLLM(server, responses)
        server.replies = llm  # type: ignore[assignment]
        url = server.base_url
        for name in ("clean", "crash-1", "crash-2"):
            (tmp_path / name).mkdir()
        clean = await run_cli(["run", str(SCENARIO), "--run-id", "r"], tmp_path / "clean", url)
        assert clean.code == 0, clean.stderr
        assert clean.stdout.splitlines() == SCENARIO_TRANSCRIPT
        log = await _log(tmp_path / "clean")
        # mid-reply: Main's third reply partly recorded (its prose and the fence's start);
        # and later: inside SomePlaybook's frame or after it
        mid_reply = next(seq for seq, kind, body in log if kind == "chunk" and body["t"] == 2)
        for n, crash_after in enumerate((mid_reply, 2 * len(log) // 3), 1):
            folder = tmp_path / f"crash-{n}"
            server.requests.clear()
            crashed = await run_cli(
                ["run", str(SCENARIO), "--run-id", "r"],
                folder,
                url,
                RESUMABLE_CRASH_AFTER=str(crash_after),
            )
            assert crashed.code < 0, crashed.stderr
            at_crash = await _folded(folder)
            before = len(server.requests)
            resumed = await run_cli(["resume", "r"], folder, url)
            assert resumed.code == 0, resumed.stderr
            assert (crashed.stdout + resumed.stdout).splitlines() == SCENARIO_TRANSCRIPT
            assert len(_ledger(folder)) == 1
            calls = llm.calls()
            assert [c for c in calls if not c[2]] == ORDER  # each response asked for once
            # the resumed process asked only to continue a response the crash cut off
            cut = {
                (frame.playbook, turn.index + 1)
                for frame in at_crash.frames.values()
                if not frame.returned
                for turn in frame.turns
                if turn.prompt is not None and not turn.complete
            }
            assert {(p, n) for p, n, going_on in calls[before:] if going_on} <= cut
            if crash_after == mid_reply:  # the cut reply was continued, not asked again
                assert cut == {("Main", 3)}
                assert ("Main", 3, True) in calls[before:]
