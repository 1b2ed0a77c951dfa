"""Torn, corrupted and forged checkpoint logs: resume falls back, or refuses, and says so.

A crash can leave the last record of a log half written: resume then continues from
the record before, with one warning, and prints what a run that crashed at that record
would have printed. A record the store had acknowledged (its head counts it) that a disk
then damaged is a lost record: resume refuses it, and goes on like the torn case only
with ``--accept-loss``. A record whose CRC is right but
whose MAC is not was forged or sealed with another key: it is refused before anything
in it is unpickled. Every offset and every byte is tried in-process (a subprocess each
would take minutes); a sample goes through the real command line.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import pickle
import shutil
import signal
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.crash.harness import Result, resumable

from resumable import RecoveryCoordinator  # the public one loads the drivers it resumes with
from resumable.config import load_config
from resumable.durability.log.records import Record, RecordCodec
from resumable.durability.runs.session import codec_for, store_for
from resumable.errors import LostRecordsError
from resumable.store.base import StoredRecord
from resumable.store.filesystem import HEADER_BYTES, encode_frames, scan_frames
from resumable.store.heads import store_head

SCRIPT = """\
import asyncio


async def square(n):
    await asyncio.sleep(0)
    return n * n


squares = []
for n in range(1, 5):
    squares.append(await square(n))
    print("square", n, squares[-1])
total = sum(squares)
print("total", total)
"""
ENV = {"RESUMABLE_DURABILITY_SYNC": "flush"}


@dataclass(frozen=True)
class Crashed:
    """A run killed right after record ``seq``, and what resuming it after ``seq - 1`` prints."""

    template: Path
    seq: int
    kind: str
    frame_start: int
    """Offset in the last segment where the frame of record ``seq`` begins."""
    frame_bytes: bytes
    expected: str
    """stdout of a resume of the same run killed one record earlier."""


@dataclass(frozen=True)
class Reference:
    stdout: str
    kinds: dict[int, str]
    crashes: dict[str, Crashed]


def _segment(work: Path, run_id: str = "r") -> Path:
    return sorted((work / ".resumable" / "runs" / run_id / "log").glob("*.seg"))[-1]


def _codec(work: Path) -> RecordCodec:
    return RecordCodec((work / ".resumable" / "key").read_bytes())


def _exec(work: Path, run_id: str, crash_after: int | None = None) -> Result:
    env = {} if crash_after is None else {"RESUMABLE_CRASH_AFTER": str(crash_after)}
    return resumable(["exec", "s.py", "--run-id", run_id], work, env=env)


def _crash(root: Path, seq: int, kinds: dict[int, str], full: str) -> Crashed:
    """Kill runs after ``seq`` and after ``seq - 1``; resume the second for the expected output."""
    before = root / f"before{seq}"
    before.mkdir()
    (before / "s.py").write_text(SCRIPT)
    early = _exec(before, "r", seq - 1)
    assert early.code == -signal.SIGKILL, early.stderr
    resumed = resumable(["resume", "r"], before)
    assert resumed.code == 0, resumed.stderr
    assert early.stdout + resumed.stdout == full
    template = root / f"crash{seq}"
    template.mkdir()
    (template / "s.py").write_text(SCRIPT)
    crashed = _exec(template, "r", seq)
    assert crashed.code == -signal.SIGKILL, crashed.stderr
    data = _segment(template).read_bytes()
    scan = scan_frames(data)
    assert scan.reason is None
    assert scan.records[-1].seq == seq
    size = HEADER_BYTES + len(scan.records[-1].data)
    assert scan.end == scan.written  # the rest is the segment's preallocated zeros
    assert not any(data[scan.end :])
    return Crashed(
        template,
        seq,
        kinds[seq],
        scan.end - size,
        data[scan.end - size : scan.end],
        expected=resumed.stdout,
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """An uninterrupted run, and runs killed after an await record and after a statement record."""
    root = tmp_path_factory.mktemp("torn")
    full = root / "full"
    full.mkdir()
    (full / "s.py").write_text(SCRIPT)
    done = _exec(full, "r")
    assert done.code == 0, done.stderr
    codec = _codec(full)
    kinds = {
        r.seq: codec.open(r.data).kind for r in scan_frames(_segment(full).read_bytes()).records
    }
    awaits = [seq for seq, kind in kinds.items() if kind == "await"]
    after_loop = [seq for seq, kind in kinds.items() if kind == "stmt" and seq > awaits[-1]]
    crashes = {
        # an await in the middle of the loop: its statement is replayed from the journal
        "await": _crash(root, awaits[len(awaits) // 2 + 1], kinds, done.stdout),
        # the statement after the loop: it holds the namespace pickle
        "stmt": _crash(root, after_loop[0], kinds, done.stdout),
    }
    assert crashes["await"].kind == "await"
    assert crashes["stmt"].kind == "stmt"
    return Reference(done.stdout, kinds, crashes)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A folder for many copies of a run: in memory where the system has one (fsync is free)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        with tempfile.TemporaryDirectory(dir=shm, prefix="resumable-test-") as folder:
            yield Path(folder)
    else:
        yield tmp_path


def _copy(
    crashed: Crashed, scratch: Path, name: str, tail: bytes, *, acknowledged: bool = False
) -> Path:
    """The crashed run with the frame of its last record replaced by ``tail``.

    Unless ``acknowledged``, the run's head says the append of that record never
    returned: the process died while writing it, as a real torn write leaves it.
    """
    work = scratch / name
    shutil.copytree(crashed.template, work)
    segment = _segment(work)
    with segment.open("r+b") as file:
        file.truncate(crashed.frame_start)
        file.seek(crashed.frame_start)
        file.write(tail)
    if not acknowledged:
        store_head(work / ".resumable" / "runs" / "r" / "head", crashed.seq - 1)
    return work


async def _resume_in_process(
    work: Path, *, accept_loss: bool = False
) -> tuple[int, str, list[str]]:
    """Resume run ``r`` in this process: exit code, what the program printed, warnings."""
    config = load_config(cwd=work, env=ENV)
    out = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out):
        warnings.simplefilter("always")
        async with store_for(config.durability, config) as store:
            codec = await codec_for(store, config.durability, ENV)
            outcome = await RecoveryCoordinator(store, codec).resume(
                "r", config, env=ENV, accept_loss=accept_loss
            )
    said = [str(w.message) for w in caught]
    # The run was started by another process, with another hash seed: said, but not the point.
    return outcome.exit_code, out.getvalue(), [s for s in said if "PYTHONHASHSEED" not in s]


async def _check_falls_back(
    crashed: Crashed, work: Path, tail: bytes, *, accept_loss: bool = False
) -> None:
    code, printed, said = await _resume_in_process(work, accept_loss=accept_loss)
    assert code == 0
    assert printed == crashed.expected
    if accept_loss:
        lost, *said = said
        assert f"record {crashed.seq} is damaged" in lost
        assert "--accept-loss" in lost
    (warning,) = said
    assert f"resuming from the last valid record ({crashed.seq - 1})" in warning
    assert "torn or corrupt" in warning
    # The bad bytes were moved aside, not deleted, and the log now ends at the last good record.
    (aside,) = (work / ".resumable" / "runs" / "r" / "quarantine").iterdir()
    assert aside.read_bytes() == tail
    healed = scan_frames(_segment(work).read_bytes())
    assert healed.reason is None


@pytest.mark.parametrize("zeros", [0, 4096], ids=["cut", "preallocated"])
@pytest.mark.parametrize("kind", ["await", "stmt"])
async def test_torn_last_record_at_every_offset_folds_to_the_record_before(
    reference: Reference, scratch: Path, kind: str, zeros: int
) -> None:
    """Cut at every byte; in a preallocated segment the rest of the frame reads as zeros."""
    crashed = reference.crashes[kind]
    work = _copy(crashed, scratch, "fold", crashed.frame_bytes)
    segment = _segment(work)
    good = segment.read_bytes()[: crashed.frame_start]
    store_head(segment.parent.parent / "head", crashed.seq - 1)  # the write never returned
    codec = _codec(work)
    config = load_config(cwd=work, env=ENV)
    async with store_for(config.durability, config) as store:
        coordinator = RecoveryCoordinator(store, codec)
        for cut in range(1, len(crashed.frame_bytes)):
            segment.write_bytes(good + crashed.frame_bytes[:cut] + bytes(zeros))
            loaded = await coordinator.load("r")
            assert loaded.state.seq == crashed.seq - 1, cut
            if zeros and not any(crashed.frame_bytes[:cut]):
                assert not loaded.problems  # zeros only: the segment's end
                continue
            (problem,) = loaded.problems
            assert segment.name in problem
            assert f"resuming from the last valid record ({crashed.seq - 1})" in problem


async def test_torn_await_record_at_every_offset_resumes_with_the_remaining_output(
    reference: Reference, scratch: Path
) -> None:
    crashed = reference.crashes["await"]
    for cut in range(1, len(crashed.frame_bytes)):
        tail = crashed.frame_bytes[:cut]
        await _check_falls_back(crashed, _copy(crashed, scratch, f"cut{cut}", tail), tail)


async def test_torn_statement_record_resumes_with_the_remaining_output(
    reference: Reference, scratch: Path
) -> None:
    crashed = reference.crashes["stmt"]
    size = len(crashed.frame_bytes)
    # Every offset of the frame header and of the envelope's start, then a spread over the pickle.
    cuts = sorted({*range(1, 64), *range(64, size, 37), size - 1})
    for cut in cuts:
        tail = crashed.frame_bytes[:cut]
        await _check_falls_back(crashed, _copy(crashed, scratch, f"cut{cut}", tail), tail)


async def test_a_flipped_bit_anywhere_in_the_last_record_is_refused_then_accepted(
    reference: Reference, scratch: Path
) -> None:
    crashed = reference.crashes["await"]
    for at in range(len(crashed.frame_bytes)):
        flipped = bytearray(crashed.frame_bytes)
        flipped[at] ^= 1 << (at % 8)
        tail = bytes(flipped)
        work = _copy(crashed, scratch, f"flip{at}", tail, acknowledged=True)
        with pytest.raises(LostRecordsError, match=f"record {crashed.seq} is damaged"):
            await _resume_in_process(work)
        await _check_falls_back(crashed, work, tail, accept_loss=True)


def _one_error_line(result: Result) -> str:
    """The stderr line of a refusal; anything else there is the runtime's own one-liners."""
    lines = result.stderr.splitlines()
    assert all(line.startswith("resumable: ") for line in lines), result.stderr
    (error,) = [line for line in lines if line.startswith("resumable: error:")]
    return error


def test_torn_and_flipped_logs_through_the_command_line(
    reference: Reference, tmp_path: Path
) -> None:
    crashed = reference.crashes["await"]
    cut = crashed.frame_bytes[: len(crashed.frame_bytes) // 2]
    flipped = bytearray(crashed.frame_bytes)
    flipped[HEADER_BYTES + 40] ^= 0x10
    for name, tail in (("cut", cut), ("flip", bytes(flipped))):
        work = _copy(crashed, tmp_path, name, tail, acknowledged=name == "flip")
        if name == "flip":  # acknowledged, then damaged: refused, nothing changed
            before = _tree_digest(work / ".resumable")
            refused = resumable(["resume", "r"], work)
            assert refused.code == 2
            assert refused.stdout == ""
            error = _one_error_line(refused)
            assert f"record {crashed.seq} is damaged" in error
            assert "--accept-loss" in error
            assert _tree_digest(work / ".resumable") == before
        resumed = resumable(["resume", "r", *(["--accept-loss"] if name == "flip" else [])], work)
        assert resumed.code == 0, resumed.stderr
        assert resumed.stdout == crashed.expected
        assert "Traceback" not in resumed.stderr
        warning = [line for line in resumed.stderr.splitlines() if "warning" in line]
        assert len(warning) == (2 if name == "flip" else 1)
        assert warning[-1].startswith("resumable: warning: run r: log segment")
        assert f"resuming from the last valid record ({crashed.seq - 1})" in warning[-1]
        shown = resumable(["runs", "--json"], work)
        assert '"status": "completed"' in shown.stdout


class _Plant:
    """Unpickling this creates ``marker``: proof that a pickle was loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        # A namespace pickle loads to (values, lost): make the forged one well formed too.
        return eval, (f"(open({str(self.marker)!r}, 'w').close(), ({{}}, {{}}))[1]",)


def _planted_record(work: Path, codec: RecordCodec, marker: Path) -> bytes:
    """A statement record after the last one, its namespace a pickle that creates ``marker``."""
    records = scan_frames(_segment(work).read_bytes()).records
    last = records[-1]
    real = _codec(work)
    statements = [real.open(r.data) for r in records if real.open(r.data).kind == "stmt"]
    body = dict(statements[-1].body)
    body["ns"] = b"N" + pickle.dumps(_Plant(marker), protocol=pickle.HIGHEST_PROTOCOL)
    body.pop("b", None)
    record = Record("r", last.seq + 1, "stmt", "main", 0.0, last.epoch, body)
    return encode_frames([StoredRecord(record.seq, last.epoch, codec.seal(record))])


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def test_a_record_sealed_with_another_key_is_refused_and_never_unpickled(
    reference: Reference, tmp_path: Path
) -> None:
    crashed = reference.crashes["await"]
    # The control: sealed with the run's own key, the planted pickle does run on resume.
    control = _copy(crashed, tmp_path, "control", crashed.frame_bytes)
    marker = tmp_path / "control-ran"
    with _segment(control).open("ab") as log:
        log.write(_planted_record(control, _codec(control), marker))
    resumable(["resume", "r"], control)
    assert marker.exists()

    work = _copy(crashed, tmp_path, "forged", crashed.frame_bytes)
    marker = tmp_path / "forged-ran"
    with _segment(work).open("ab") as log:
        log.write(_planted_record(work, RecordCodec(os.urandom(32)), marker))
    assert scan_frames(_segment(work).read_bytes()).reason is None  # the CRC is fine
    before = _tree_digest(work / ".resumable")
    refused = resumable(["resume", "r"], work)
    assert refused.code == 2
    error = _one_error_line(refused)
    assert f"record {crashed.seq + 1} of run r fails authentication" in error
    assert not marker.exists()
    assert _tree_digest(work / ".resumable") == before
    assert resumable(["show", "r"], work).code == 2
    assert not marker.exists()


def test_a_record_edited_with_its_crc_recomputed_is_refused(
    reference: Reference, tmp_path: Path
) -> None:
    crashed = reference.crashes["stmt"]
    (record,) = scan_frames(crashed.frame_bytes).records
    data = bytearray(record.data)
    data[-5] ^= 0x01  # inside the namespace pickle, the part that gets unpickled
    edited = encode_frames([StoredRecord(record.seq, record.epoch, bytes(data))])
    work = _copy(crashed, tmp_path, "edited", edited)
    assert scan_frames(_segment(work).read_bytes()).reason is None
    before = _tree_digest(work / ".resumable")
    refused = resumable(["resume", "r"], work)
    assert refused.code == 2
    assert refused.stdout == ""
    error = _one_error_line(refused)
    assert f"record {crashed.seq} of run r fails authentication" in error
    assert "MAC key" in error
    assert _tree_digest(work / ".resumable") == before
