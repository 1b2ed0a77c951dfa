#!/usr/bin/env python
"""Kill the smolagents example after every record N, resume it, compare with no crash.

    python scripts/smolagents_crash.py            # every N until the run completes
    python scripts/smolagents_crash.py 5 17 40    # only these N

For each N: ``RESUMABLE_CRASH_AFTER=N`` kills the first process with SIGKILL right after
record N is durable; a fresh process with the same run id finishes the run. Its answer
must equal the answer of the same agent on smolagents' LocalPythonExecutor, the ledger
its tools wrote must equal that run's ledger (each effect once), the agent's memory must
equal an uninterrupted durable run's, and the model must not have been called more
times in all than in the uninterrupted run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIN = ROOT / "examples" / "smolagents" / "run_agent.py"


@dataclass(frozen=True)
class Result:
    answer: str
    ledger: str
    memory: list[dict[str, object]]
    calls: int
    returncode: int


def run_example(folder: Path, *args: str, crash_after: int | None = None) -> Result:
    """Run the example once (a crashed first process, if ``crash_after``, then a resume)."""
    env = dict(os.environ)
    env.update(
        SHOP_LEDGER=str(folder / "ledger"),
        SHOP_CALLS=str(folder / "calls"),
        SHOP_MEMORY=str(folder / "memory.json"),
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
        json.loads((folder / "memory.json").read_text()),
        len(calls),
        first_rc,
    )


def baselines(folder: Path) -> tuple[Result, Result]:
    """(smolagents' own executor, resumable's executor without a crash)."""
    (folder / "local").mkdir()
    (folder / "durable").mkdir()
    local = run_example(folder / "local", "--local")
    durable = run_example(folder / "durable", "r1", str(folder / "durable" / "store"))
    return local, durable


def problems(n: int, folder: Path, local: Result, durable: Result) -> tuple[list[str], int]:
    """What differs after a crash at record ``n`` (empty: exact), and the first exit code."""
    work = folder / f"crash-{n}"
    work.mkdir()
    got = run_example(work, "r1", str(work / "store"), crash_after=n)
    found = []
    if got.answer != local.answer:
        found.append(f"answer {got.answer!r} != {local.answer!r}")
    if got.ledger != local.ledger:
        found.append(f"ledger {got.ledger!r} != {local.ledger!r}")
    if got.memory != durable.memory:
        found.append("memory steps differ from the uninterrupted run")
    if got.calls > durable.calls:
        found.append(f"model called {got.calls} times, {durable.calls} without a crash")
    return found, got.returncode


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        local, durable = baselines(folder)
        print(f"local answer: {local.answer}; durable: {durable.answer}; calls {durable.calls}")
        wanted = [int(a) for a in argv] or None
        n, failures = 0, 0
        while True:
            n += 1
            if wanted is not None and n not in wanted:
                if n > max(wanted):
                    break
                continue
            found, rc = problems(n, folder, local, durable)
            print(f"N={n}: {'ok' if not found else '; '.join(found)}", flush=True)
            failures += bool(found)
            if rc == 0:  # the run completed before record N: every N was tried
                break
        print(f"{n} crash points, {failures} failed")
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
