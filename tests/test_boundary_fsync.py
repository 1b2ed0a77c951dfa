"""A statement's boundary is made durable while the next statement starts, and nothing the
run does outside the process happens before it is durable (docs/durability.md, "One fsync
per statement of one await").

The runs here are in-process on a file store with ``sync = "fsync"`` whose fsyncs take
30 ms (inline, and in the fsync helper process), so that the next statement is well under way while a boundary's fsync runs,
and every effect notes how many fsyncs were running when it started.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from tests.fsync_helper import in_flight, own_helper

import resumable
from resumable.config import Config, DurabilitySettings
from resumable.durability.log.store_faults import StoreFailed
from resumable.durability.replay.journal import FrameRecorder
from resumable.durability.runs.session import RunSession, store_for
from resumable.exec.executor import StreamingPythonExecutor
from resumable.exec.output import ProgramOutput
from resumable.store.base import RunMeta
from resumable.store.filesystem import sync_choice
from resumable.store.filesystem.background_fsync import _Helper
from resumable.store.heads import read_head


class SlowDisk:
    """Fsyncs taking 30 ms: those inline through ``os.fsync``, those in the background in
    an fsync helper of the test's own. ``running`` counts the fsyncs in progress (one in
    the helper until its answer was read), ``calls`` all of them.

    ``fail_in_background``: the first fsync in the helper (a boundary's) fails with EIO.
    """

    def __init__(self, *, fail_in_background: bool = False) -> None:
        self.fail_in_background = fail_in_background
        self.helper: _Helper | None = None
        self._inline = 0
        self._inline_calls = 0
        self._real = os.fsync

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "helper": None}  # checkpointed with the program's functions

    @property
    def running(self) -> int:
        return self._inline + (in_flight(self.helper) if self.helper else 0)

    @property
    def calls(self) -> int:
        return self._inline_calls + (self.helper.sent if self.helper else 0)

    def fsync(self, fd: int) -> None:
        self._inline += 1
        self._inline_calls += 1
        try:
            time.sleep(0.03)
            self._real(fd)
        finally:
            self._inline -= 1


class Effects:
    """What the program calls, each noting the fsyncs in progress when it started."""

    def __init__(self, disk: SlowDisk) -> None:
        self.disk = disk
        self.seen: list[tuple[str, int]] = []

    def namespace(self) -> dict[str, Any]:
        seen, disk = self.seen, self.disk

        async def tool(n: int) -> int:
            seen.append((f"tool {n}", disk.running))
            return n * 10

        @resumable.step
        def charge(n: int) -> int:
            seen.append((f"charge {n}", disk.running))
            return n

        @resumable.step
        async def ship(n: int) -> int:
            seen.append((f"ship {n}", disk.running))
            return n

        def look() -> None:
            seen.append(("program code", disk.running))

        def work(n: int) -> int:
            seen.append(("program code", disk.running))
            time.sleep(0.02)  # program code that takes a while
            return n

        return {"tool": tool, "charge": charge, "ship": ship, "look": look, "work": work}


async def run_program(
    folder: Path, source: str, effects: Effects, monkeypatch: pytest.MonkeyPatch
) -> RunSession:
    config = Config(durability=DurabilitySettings(store="file", path=str(folder), sync="fsync"))
    store = store_for(config.durability, config)
    await store.__aenter__()
    meta = RunMeta("r", program="<program>", kind="script")
    session = await RunSession.create(
        store, config, meta, {"program": "<program>", "kind": "script", "source": ""}, env={}
    )
    namespace = effects.namespace()
    recorder = FrameRecorder(session.manager, "main", namespace, session.snapshotter)
    executor = StreamingPythonExecutor(
        namespace, hook=recorder, observer=recorder, filename="<program>"
    )
    disk = effects.disk
    with (
        own_helper(monkeypatch, delay=0.03, fail_first=disk.fail_in_background) as helper,
        pytest.MonkeyPatch.context() as inline,
    ):
        disk.helper = helper
        inline.setattr(os, "fsync", disk.fsync)
        inline.setattr(os, "fdatasync", disk.fsync)
        try:
            with ProgramOutput(hold=True).installed():
                result = await executor.run(source)
            assert result.error is None, result.error.message
        finally:
            try:
                await session.close()
            finally:
                inline.undo()
                await store.__aexit__(None, None, None)
    return session


PROGRAM = """\
a = await tool(1)
look()
b = await tool(2)
look()
c = charge(3)
look()
d = await ship(4)
look()
"""


async def test_every_effect_starts_once_the_boundary_before_it_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    effects = Effects(SlowDisk())
    session = await run_program(tmp_path / "store", PROGRAM, effects, monkeypatch)
    started = [name for name, _ in effects.seen]
    assert started == [
        "tool 1",
        "program code",
        "tool 2",
        "program code",
        "charge 3",
        "program code",
        "ship 4",
        "program code",
    ]
    effect_saw = [running for name, running in effects.seen if name != "program code"]
    assert effect_saw == [0, 0, 0, 0]  # no fsync in progress: all before them is durable
    # ... while program code went on during the fsync of the boundary before it
    assert any(running for name, running in effects.seen if name == "program code")
    # and the run ended with every record acknowledged
    assert effects.disk.running == 0
    head = read_head(tmp_path / "store" / "runs" / "r" / "head")
    assert head == session.manager.state.seq


FAILING = """\
a = await tool(1)
for n in (2, 3):
    try:
        await tool(n)
    except Exception as exc:
        print("swallowed", type(exc).__name__)
look()
"""


async def test_a_failed_background_fsync_stops_the_run_even_if_the_program_catches_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    effects = Effects(SlowDisk(fail_in_background=True))  # tool 1's statement
    with pytest.raises(StoreFailed, match="Input/output error"):
        await run_program(tmp_path / "store", FAILING, effects, monkeypatch)
    # neither tool 2 nor tool 3 started: each stopped at its barrier, and the program's
    # `except Exception` could not make the run go on past the failed record
    assert [name for name, _ in effects.seen] == ["tool 1"]
    assert "swallowed" not in capsys.readouterr().out


async def test_a_statement_repeated_is_one_append_and_one_fsync_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # from its third time on, a statement's code is moved from a template (exec/compiled.py)
    # and its tree is left as parsed: its await still goes with its boundary
    effects = Effects(SlowDisk())
    program = "n = 0\n" + "n = await tool(n)\n" * 6
    await run_program(tmp_path / "store", program, effects, monkeypatch)
    assert [name for name, _ in effects.seen] == ["tool 0"] * 6
    # the run's first record, then one for each of the seven statements, and the run's end
    assert effects.disk.calls == 1 + 7 + 1


async def test_a_slow_disk_keeps_the_fsync_beside_the_next_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # measured both ways (store/filesystem/sync_choice.py): a statement after an inline
    # fsync takes its 30 ms plus the program's 20 ms, after a background one about 30 ms
    monkeypatch.setattr(sync_choice, "PROBE", 2)
    effects = Effects(SlowDisk())
    program = "".join(f"a = await tool(work({n}))\n" for n in range(10))
    await run_program(tmp_path / "store", program, effects, monkeypatch)
    assert [running for name, running in effects.seen if name != "program code"] == [0] * 10
    program_code = [running for name, running in effects.seen if name == "program code"]
    assert program_code[-4:] == [1, 1, 1, 1]  # after the measuring: beside the fsync
