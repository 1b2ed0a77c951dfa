"""Kill every corpus program after every record, resume it, and compare with plain CPython.

    PYTHONPATH=src python scripts/replay_sweep.py [PROGRAM.py ...] [--spread N]
    PYTHONPATH=src python scripts/replay_sweep.py --random-kills 50
    PYTHONPATH=src python scripts/replay_sweep.py printing_agent.py --random-kills 200 --sync fsync

For each program of tests/replay/corpus: the reference run under CPython, a clean run
under ``resumable exec``, then for every record N of the clean run (or an even spread of
``--spread`` records, first and last included, when there are more) a run killed with
``RESUMABLE_CRASH_AFTER=N`` and resumed. Prints one line per program and the totals;
exits 1 if any run differs from CPython in stdout, exit code, ledger or the files the
program wrote.

``--random-kills K`` instead kills K runs (programs taken in turn) with SIGKILL from
outside at a random moment, then kills the resume too half of the time, and resumes to
the end: stdout and exit code must equal CPython's, and an effect may repeat only as the
call in flight, under the same idempotency key. ``--max-delay`` bounds the random moment
(seconds after the process started); ``--sync fsync`` runs with the default setting of
``resumable`` instead of the quicker ``flush`` the tests use.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.replay import harness


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", default=harness.PROGRAMS)
    parser.add_argument("--spread", type=int, default=0, help="at most this many N per program")
    parser.add_argument("--random-kills", type=int, default=0, help="random SIGKILL trials")
    parser.add_argument("--max-delay", type=float, default=0.5, help="latest random kill (s)")
    parser.add_argument("--sync", choices=("flush", "fsync"), default="flush")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ["RESUMABLE_TEST_SYNC"] = args.sync
    if args.random_kills:
        return random_kills(args.programs, args.random_kills, args.seed, args.max_delay)
    started = time.monotonic()
    trials = failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for program in args.programs:
            expected = harness.reference(root, program)
            got, records = harness.clean(root, program)
            bad = [] if _same(expected, got) else ["clean"]
            points = harness.spread(records, args.spread) if args.spread else range(1, records + 1)
            for point in points:
                trials += 1
                if not _same(expected, harness.crashed(root, program, point)):
                    bad.append(str(point))
            failures += len(bad)
            status = "exact" if not bad else "DIFFERS at N=" + ",".join(bad)
            print(f"{program:28} records={records:4}  trials={len(points):4}  {status}", flush=True)
    elapsed = time.monotonic() - started
    print(f"{trials} crash-and-resume trials, {failures} differing, {elapsed:.0f} s")
    return 1 if failures else 0


def random_kills(programs: list[str], count: int, seed: int, max_delay: float) -> int:
    from tests.replay.test_random_kills import check_effects, check_output, kill_and_resume

    rng = random.Random(seed)
    started = time.monotonic()
    failures = repeats = kills_landed = batches_lost = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        expected = {}
        for number in range(count):
            program = programs[number % len(programs)]
            if program not in expected:
                expected[program] = harness.reference(root, program)
            kills = [rng.uniform(0.02, max_delay) for _ in range(rng.choice((1, 2)))]
            got, landed = kill_and_resume(root, program, kills, f"kill{number}")
            kills_landed += landed
            work = root / f"{Path(program).stem}-kill{number}"
            keyed = harness.ledger(work, keys=True)
            repeats += len(keyed) - len(set(keyed))
            problem = note = ""
            want = expected[program]
            try:
                check_output(got.stdout, want.stdout, landed)  # one batch per kill at most
            except AssertionError:
                output_ok = False
            else:
                output_ok = True
                if got.stdout != want.stdout:
                    batches_lost += 1
                    note = "  (a batch's lines lost at a kill: the window durability.md names)"
            if got.code != want.code or not output_ok:
                lost = Counter(want.stdout.splitlines()) - Counter(got.stdout.splitlines())
                extra = Counter(got.stdout.splitlines()) - Counter(want.stdout.splitlines())
                problem = (
                    f"exit code {got.code}, lines lost {sorted(lost.elements())}, "
                    f"repeated {sorted(extra.elements())}"
                )
            else:
                try:
                    check_effects(keyed, landed, expected[program].ledger)
                except AssertionError as exc:
                    problem = f"effects: {exc}"
            failures += bool(problem)
            print(f"{number:3} {program:28} kills={landed}  {problem or 'exact'}{note}", flush=True)
    elapsed = time.monotonic() - started
    print(
        f"{count} random-kill trials ({kills_landed} kills landed), {failures} failing, "
        f"{batches_lost} with a batch's lines lost at a kill, "
        f"{repeats} effects repeated in flight (same key), {elapsed:.0f} s"
    )
    return 1 if failures else 0


def _same(expected: harness.Observed, got: harness.Observed) -> bool:
    want = (expected.code, expected.stdout, expected.ledger, expected.files)
    return want == (got.code, got.stdout, got.ledger, got.files)


if __name__ == "__main__":
    sys.exit(main())
