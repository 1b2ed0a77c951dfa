"""Run a corpus program three ways and compare: plain CPython, ``resumable exec``, crash + resume.

A program is a plain ``.py`` file with top-level awaits that prints and writes files in its
working folder. Under plain CPython it runs with ``ast.PyCF_ALLOW_TOP_LEVEL_AWAIT`` inside
``asyncio.run``. What is compared, byte for byte: stdout, the exit code, and every file the
program left in its folder (its ledger).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.crash.harness import _env, resumable

from resumable.durability.log.records import RecordCodec
from resumable.store.filesystem import scan_frames

PROGRAMS = Path(__file__).parent / "programs"
SEED = "4242"
"""The hash seed every run of a comparison starts with (set order is part of the output)."""

_PLAIN = """\
import ast, asyncio, sys
path = sys.argv[1]
code = compile(open(path).read(), path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
async def main():
    result = eval(code, {"__name__": "__main__"})
    if result is not None:
        await result
asyncio.run(main())
"""


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    files: dict[str, bytes]


def _folder(tmp: Path, program: Path, name: str) -> Path:
    work = tmp / name
    work.mkdir()
    shutil.copy(program, work / "program.py")
    return work


def _files(work: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(work.iterdir())
        if p.is_file() and p.name != "program.py"
    }


def plain(program: Path, tmp: Path, *, seed: str = SEED) -> Outcome:
    work = _folder(tmp, program, "plain")
    done = subprocess.run(
        [sys.executable, "-c", _PLAIN, "program.py"],
        cwd=work,
        env=_env({"PYTHONHASHSEED": seed}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 or "Traceback" in done.stderr, done.stderr
    return Outcome(done.returncode, done.stdout, _files(work))


def clean(program: Path, tmp: Path) -> tuple[Outcome, list[str]]:
    """An uninterrupted ``resumable exec``, and the kinds of the records its run wrote."""
    work = _folder(tmp, program, "clean")
    done = resumable(["exec", "program.py", "--run-id", "r"], work, env={"PYTHONHASHSEED": SEED})
    return Outcome(done.code, done.stdout, _files(work)), record_kinds(work, "r")


def crashed_and_resumed(program: Path, tmp: Path, after: int, *, resume_seed: str) -> Outcome:
    """Killed right after record ``after``, then resumed in a process with another hash seed."""
    work = _folder(tmp, program, f"crash-{after}")
    env = {"PYTHONHASHSEED": SEED}
    crashed = resumable(
        ["exec", "program.py", "--run-id", "r"],
        work,
        env={**env, "RESUMABLE_CRASH_AFTER": str(after)},
    )
    if crashed.code != -signal.SIGKILL:  # the run ended before that record
        return Outcome(crashed.code, crashed.stdout, _files(work))
    resumed = resumable(["resume", "r"], work, env={"PYTHONHASHSEED": resume_seed})
    assert "Traceback" not in resumed.stderr or resumed.code == 1, resumed.stderr
    return Outcome(resumed.code, crashed.stdout + resumed.stdout, _files(work))


def record_kinds(work: Path, run_id: str) -> list[str]:
    """The kind of each record of the run's log, in order (record N is at index N - 1)."""
    codec = RecordCodec((work / ".resumable" / "key").read_bytes())
    kinds: list[str] = []
    for segment in sorted((work / ".resumable" / "runs" / run_id / "log").glob("*.seg")):
        scan = scan_frames(segment.read_bytes())
        kinds += [codec.open(stored.data).kind for stored in scan.records]
    return kinds


def record_count(work: Path, run_id: str) -> int:
    return len(record_kinds(work, run_id))


def spread(total: int, points: int) -> list[int]:
    """``points`` crash points spread over records 1..total-1 (the last is the status record)."""
    last = max(total - 1, 1)
    if points >= last:
        return list(range(1, last + 1))
    return sorted({1 + round(i * (last - 1) / (points - 1)) for i in range(points)})
