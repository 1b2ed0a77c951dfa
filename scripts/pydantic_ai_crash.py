#!/usr/bin/env python
"""Kill the pydantic-ai example after every record N, resume it, compare with no crash.

    python scripts/pydantic_ai_crash.py                   # every N until the run completes
    python scripts/pydantic_ai_crash.py 5 17 30           # only these N
    python scripts/pydantic_ai_crash.py --script packer   # the msgpack-and-a-class script

For each N: ``RESUMABLE_CRASH_AFTER=N`` kills the first process with SIGKILL right after
record N is durable; a fresh process with the same run id finishes the run. Its answer
must equal the answer of the same agent on pydantic-ai-harness's own ``CodeMode`` (for
``packer``, which Monty cannot run, an uninterrupted resumable run), the ledger its tools
wrote must equal that run's ledger (each effect once), and the model must not have been
called more times in all than in the uninterrupted run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIN = ROOT / "examples" / "pydantic_ai" / "main.py"


@dataclass(frozen=True)
class Result:
    answer: str
    ledger: str
    calls: int
    returncode: int


def run_example(folder: Path, *args: str, crash_after: int | None = None) -> Result:
    """Run the example once (a crashed first process, if ``crash_after``, then a resume)."""
    env = dict(os.environ)
    env.update(
        TRIP_LEDGER=str(folder / "ledger"),
        TRIP_CALLS=str(folder / "calls"),
        RESUMABLE_DURABILITY_SYNC="flush",
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]),
    )
    env.pop("RESUMABLE_CRASH_AFTER", None)
    command = [sys.executable, str(MAIN), *args]
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


def baselines(folder: Path, script: str = "trip") -> tuple[Result, Result]:
    """(the reference run - harness CodeMode for ``trip`` - and resumable without a crash)."""
    (folder / "reference").mkdir()
    (folder / "durable").mkdir()
    durable = run_example(folder / "durable", "r1", "store", "--script", script)
    if script != "trip":  # Monty runs no third-party library and no class
        return durable, durable
    for attempt in range(3):
        try:
            reference = run_example(folder / "reference", "--harness", "--script", script)
            break
        except RuntimeError as exc:
            # The harness's Monty interpreter has been seen to abort (SIGABRT, no output) on
            # a loaded machine; that is the reference failing, not the run under test.
            if "exited -6" not in str(exc) or attempt == 2:
                raise
            shutil.rmtree(folder / "reference")
            (folder / "reference").mkdir()
    return reference, durable


def problems(
    n: int, folder: Path, reference: Result, durable: Result, script: str = "trip"
) -> tuple[list[str], int]:
    """What differs after a crash at record ``n`` (empty: exact), and the first exit code."""
    work = folder / f"crash-{n}"
    work.mkdir()
    got = run_example(work, "r1", "store", "--script", script, crash_after=n)
    found = []
    if got.answer != reference.answer:
        found.append(f"answer {got.answer!r} != {reference.answer!r}")
    if got.ledger != reference.ledger:
        found.append(f"ledger {got.ledger!r} != {reference.ledger!r}")
    if got.calls > durable.calls:
        found.append(f"model called {got.calls} times, {durable.calls} without a crash")
    return found, got.returncode


def main(argv: list[str]) -> int:
    script = "trip"
    if "--script" in argv:
        at = argv.index("--script")
        script = argv[at + 1]
        argv = argv[:at] + argv[at + 2 :]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        reference, durable = baselines(folder, script)
        print(f"reference: {reference.answer}; resumable: {durable.answer}; calls {durable.calls}")
        wanted = [int(a) for a in argv] or None
        n, failures = 0, 0
        while True:
            n += 1
            if wanted is not None and n not in wanted:
                if n > max(wanted):
                    break
                continue
            found, rc = problems(n, folder, reference, durable, script)
            print(f"N={n}: {'ok' if not found else '; '.join(found)}", flush=True)
            failures += bool(found)
            if rc == 0:  # the run completed before record N: every N was tried
                break
        print(f"{n} crash points, {failures} failed")
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
