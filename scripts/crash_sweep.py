"""The kill -9 sweep the integration crash scripts share.

An example is run with ``RESUMABLE_CRASH_AFTER=N``, which kills the first process with
SIGKILL right after record N is durable; a fresh process with the same run id finishes
the run. What the finished run printed and what its tools wrote (a ledger of effects and
the model calls made, in files the example is told about) are then compared with runs
that never crashed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Result:
    """A finished run: its answer line, its ledger, the model calls, the first exit code."""

    answer: str
    ledger: str
    calls: int
    returncode: int


def run_example(
    main: Path,
    folder: Path,
    args: Sequence[str],
    files: dict[str, str],
    crash_after: int | None = None,
) -> Result:
    """Run ``main`` once (a crashed first process, if ``crash_after``, then a resume).

    ``files`` are the environment variables that tell the example where to write its
    ledger and its calls (``folder/ledger``, ``folder/calls``) and anything else it keeps.
    """
    env = dict(os.environ)
    env.update(
        files,
        RESUMABLE_DURABILITY_SYNC="flush",
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]),
    )
    env.pop("RESUMABLE_CRASH_AFTER", None)
    command = [sys.executable, str(main), *args]
    first_rc = 0
    if crash_after is not None:
        crashed = subprocess.run(
            command,
            env={**env, "RESUMABLE_CRASH_AFTER": str(crash_after)},
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        first_rc = crashed.returncode
        if first_rc not in (0, -9):
            raise RuntimeError(
                f"crash run {crash_after} exited {first_rc}: {crashed.stderr[-2000:]}"
            )
    done = subprocess.run(
        command, env=env, cwd=folder, capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"run exited {done.returncode}: {done.stderr[-3000:]}")
    answer = [line for line in done.stdout.splitlines() if line.startswith("answer: ")]
    calls = (folder / "calls").read_text().split() if (folder / "calls").exists() else []
    return Result(
        answer[-1] if answer else "",
        (folder / "ledger").read_text() if (folder / "ledger").exists() else "",
        len(calls),
        first_rc,
    )


def differences(got: Result, reference: Result, durable: Result) -> list[str]:
    """How a crashed and resumed run differs from the reference and the uninterrupted run."""
    found = []
    if got.answer != reference.answer:
        found.append(f"answer {got.answer!r} != {reference.answer!r}")
    if got.ledger != reference.ledger:
        found.append(f"ledger {got.ledger!r} != {reference.ledger!r}")
    if got.calls > durable.calls:
        found.append(f"model called {got.calls} times, {durable.calls} without a crash")
    return found


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """The command line every sweep takes: the crash points to try (none: every one)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "points", nargs="*", type=int, metavar="N", help="crash after these records only"
    )
    return parser


def sweep(wanted: list[int], problems_at: Callable[[int], tuple[list[str], int]]) -> int:
    """Crash at each N in ``wanted`` (or at every N until the run completes first).

    ``problems_at(n)`` gives what differs after a crash at record n and the first
    process's exit code. Returns the exit code of the sweep: 1 if any N differed.
    """
    n, tried, failures = 0, 0, 0
    while True:
        n += 1
        if wanted and n not in wanted:
            if n > max(wanted):
                break
            continue
        found, rc = problems_at(n)
        tried += 1
        print(f"N={n}: {'ok' if not found else '; '.join(found)}", flush=True)
        failures += bool(found)
        if rc == 0:  # the run completed before record N: every N was tried
            break
    print(f"{tried} crash points, {failures} failed")
    return 1 if failures else 0
