"""What the checkpoint, store and statement-shape benchmarks share: durable runs and floors.

A program's await ``tick()`` timed from return to next call, the raw-append floor run
inside it, the scratch folder, progress lines, and a durable run on a file store.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resumable.config import Config, DurabilitySettings
from resumable.durability.replay.journal import FrameRecorder
from resumable.durability.runs.session import RunSession
from resumable.exec.executor import StreamingPythonExecutor
from resumable.exec.output import ProgramOutput
from resumable.script import drive_script
from resumable.store.base import CheckpointStore, RunMeta
from resumable.store.filesystem.segments import scan_frames

NEVER = 10**9  # as snapshot_every: no snapshots; as keep: nothing pruned
SYNCS = ("flush", "fsync")


class Floor:
    """A baseline operation that :func:`tick` times at every await, beside the checkpoint.

    Timing the baseline inside the same loop, one operation per await, means both see
    the same state of the machine: this disk's fsync latency swings between 0.2 and
    4 ms within seconds, so floors timed in a separate phase compare badly.
    """

    def __init__(self) -> None:
        self.samples: list[float] = []

    async def run(self) -> None:
        raise NotImplementedError


class RawAppend(Floor):
    """``os.write`` of a record-sized buffer to an O_APPEND file, then ``os.fsync`` if asked."""

    def __init__(self, fd: int, data: bytes, *, fsync: bool) -> None:
        super().__init__()
        self.fd = fd
        self.data = data
        self.fsync = fsync

    async def run(self) -> None:
        os.write(self.fd, self.data)
        if self.fsync:
            os.fsync(self.fd)


class AwaitClock:
    """When each await of the program reached :func:`tick`, and when tick gave control back."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.floor: Floor | None = None

    def reset(self, floor: Floor | None) -> None:
        self.starts, self.ends, self.floor = [], [], floor

    def gaps(self) -> list[float]:
        """Microseconds from each await's return to the next await (the floor left out)."""
        ends = self.ends or self.starts
        return [(b - a) / 1000 for a, b in zip(ends, self.starts[1:], strict=False)]


CLOCK = AwaitClock()


async def tick(value: int) -> int:
    """The call every per-await benchmark awaits: it notes the time, runs the floor if any."""
    clock = time.perf_counter_ns
    began = clock()
    CLOCK.starts.append(began)
    floor = CLOCK.floor
    if floor is not None:
        await floor.run()
        ended = clock()
        floor.samples.append((ended - began) / 1000)
        CLOCK.ends.append(ended)
    return value + 1


# -- shared by the checkpoint and store benchmarks -------------------------------------


class Progress:
    """One line on stderr naming the phase that runs (rewritten in place on a terminal)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tty = sys.stderr.isatty()

    def __call__(self, text: str) -> None:
        line = f"{self.name}: {text}"
        sys.stderr.write("\r\033[K" + line if self.tty else line + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


@dataclass(frozen=True, slots=True)
class Stats:
    """Microseconds per await over the pooled gaps of every round."""

    median: float
    p99: float
    mean: float
    count: int

    @classmethod
    def of(cls, samples: list[float]) -> Stats:
        if not samples:
            return cls(float("nan"), float("nan"), float("nan"), 0)
        ordered = sorted(samples)
        p99 = ordered[round(0.99 * (len(ordered) - 1))]
        return cls(statistics.median(ordered), p99, statistics.fmean(ordered), len(ordered))


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b > 0 else float("nan")


def folder_bytes(path: Path) -> int:
    """Apparent size of every file under ``path`` (of a log segment, without its zero tail)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += stored_size(Path(root, name))
    return total


def stored_size(path: Path) -> int:
    """A file's size; a log segment's written part (preallocated: the frames, then zeros)."""
    if path.suffix == ".seg":
        return scan_frames(path.read_bytes()).written
    return path.stat().st_size


@contextlib.contextmanager
def scratch_folder(parent: Path | None, keep: bool) -> Iterator[Path]:
    """A fresh folder for the stores, removed afterwards unless ``keep``."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="resumable-bench-", dir=parent))
    try:
        yield folder
    finally:
        if keep:
            print(f"stores kept in {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)


def loop_program(awaits: int) -> str:
    """Many awaits inside one top-level statement."""
    return f"for i in range({awaits}):\n    counter = await tick(counter)\n"


def statements_program(awaits: int) -> str:
    """One await per top-level statement: each statement also writes a boundary record."""
    return "counter = await tick(counter)\n" * awaits


PROGRAMS: dict[str, Callable[[int], str]] = {"loop": loop_program, "stmt": statements_program}


class Harness:
    """One executor fed response after response; ``session`` is its run when durable."""

    def __init__(self, executor: StreamingPythonExecutor, session: RunSession | None = None):
        self.executor = executor
        self.session = session

    async def feed(self, text: str, floor: Floor | None = None) -> list[float]:
        """Run ``text`` as the next response; the gaps between its awaits, in microseconds."""
        CLOCK.reset(floor)
        executor = self.executor
        executor.start_response(index=executor.next_index)
        with ProgramOutput().installed():  # as in a real run: print() goes through a router
            await executor.add_chunk(text)
            result = await executor.finalize()
        CLOCK.floor = None
        if result.error is not None:
            raise SystemExit(f"the benchmark program failed: {result.error.message}")
        return CLOCK.gaps()

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


def file_config(folder: Path, sync: str, **durability: Any) -> Config:
    settings = DurabilitySettings(store="file", path=str(folder), sync=sync, **durability)  # type: ignore[arg-type]
    return Config(durability=settings)


async def durable_harness(
    store: CheckpointStore,
    config: Config,
    label: str,
    namespace: dict[str, Any],
) -> Harness:
    """A new run on ``store`` whose executor journals every await through a FrameRecorder."""
    program = f"<bench {label}>"
    meta = RunMeta(f"{label}-{secrets.token_hex(4)}", program=program, kind="script")
    first = {"program": program, "kind": "script", "source": ""}
    session = await RunSession.create(store, config, meta, first, env={})
    recorder = FrameRecorder(session.manager, "main", namespace, session.snapshotter)
    executor = StreamingPythonExecutor(
        namespace, hook=recorder, observer=recorder, filename=program
    )
    return Harness(executor, session)


async def written_script_run(
    store: CheckpointStore, config: Config, size: int, source: str
) -> RunSession:
    """A script run of ``source`` driven to its end on ``store``: what the resume benchmarks
    load (its session closed, its codec and record count still there)."""
    meta = RunMeta(f"resume-{size}-{secrets.token_hex(4)}", program="<bench>", kind="script")
    first = {"program": "<bench resume>", "kind": "script", "source": source}
    session = await RunSession.create(store, config, meta, first, env={})
    try:
        outcome = await drive_script(session, config, env={})
    finally:
        await session.close()
    if outcome.exit_code != 0:
        raise SystemExit(f"the resume benchmark's run failed: {outcome.message}")
    return session
