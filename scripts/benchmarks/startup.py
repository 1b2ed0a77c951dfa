"""`bench.py startup`: what a user waits for before a line of their program runs.

    python scripts/bench.py startup              # a table (about half a minute)
    python scripts/bench.py startup --repeat 3   # a smoke test, not figures

Five commands, each in a new process, taking turns in every round so that a load change on a
shared machine affects them alike: ``python -c pass``, ``resumable --version``, ``python hi.py``,
``resumable exec hi.py`` and ``resumable resume RUN_ID`` of a run of ``hi.py`` killed before
its statement ran (a new one each round, made before the rounds) (``hi.py`` is
``print("hi")``; the store already has its key, as it has after a first run; bytecode is
cached, as ``pip install`` leaves it, in a folder of the benchmark's own). ``resumable`` is the console script next to this Python if there is
one, else ``python -m resumable``. The ratios compare medians of the same run. Below the table,
``python -X importtime`` says what each command imports: the total, and the largest packages.

    python scripts/bench.py startup --instructions   # CPU instructions, counted (valgrind)

A shared machine's load moves those medians by more than a few milliseconds; the number of
instructions a start executes does not move with it. ``--instructions`` counts them with
valgrind's ``callgrind``, once per command. ``exec`` is two processes (the first computes the
store's hash seed and starts the second with it, ``os.execve``, which callgrind cannot follow
and still count the first): the first is counted up to its ``execve`` (replaced by an exit),
the second with the seed it would have been given, and the row is their sum.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.instructions import callgrind
from benchmarks.report import Report, median_seconds

_UNSET = ("PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE")
"""Not passed on: the seed is the command's to choose, and a user's Python keeps bytecode."""
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def startup_options(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(repeat=15)
    parser.add_argument("--max-exec-ratio", type=float, help="fail (exit 1) above this ratio")
    parser.add_argument("--max-version-ratio", type=float, help="fail (exit 1) above this ratio")
    parser.add_argument(
        "--instructions", action="store_true", help="count CPU instructions (valgrind), not ms"
    )


def command() -> list[str]:
    """The ``resumable`` a user runs: the console script of this Python, else ``-m``."""
    script = Path(sys.executable).with_name("resumable")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "resumable"]


def imports(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Milliseconds of imports (``-X importtime``) in the process that runs ``argv``'s
    program, and its five largest packages by their modules' own time."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    own: collections.Counter[str] = collections.Counter()
    for line in done.stderr.splitlines():
        found = _LINE.match(line)
        if found:
            name = found[4]
            parts = name.split(".")
            own[".".join(parts[:2]) if parts[0] == "resumable" else parts[0]] += int(found[1])
    largest = ", ".join(f"{name} {us / 1000:.0f}" for name, us in own.most_common(5))
    return sum(own.values()) / 1000, largest


def killed_run(resumable: list[str], cwd: Path, env: dict[str, str], run_id: str) -> str:
    """``run_id``, a new run of ``hi.py`` killed after its first record, before it printed."""
    done = subprocess.run(
        [*resumable, "exec", "hi.py", "-q", "--run-id", run_id],
        cwd=cwd,
        env={**env, "RESUMABLE_CRASH_AFTER": "1"},
        capture_output=True,
        text=True,
    )
    if done.returncode != -9 or done.stdout:
        raise SystemExit(f"a run of hi.py killed at its first record did not stop there:\n{done}")
    return run_id


_FIRST_PROCESS = """\
import os, runpy, sys
def _execve(path, argv, env):
    print(env["PYTHONHASHSEED"], flush=True)
    os._exit(0)
os.execve = _execve
sys.argv = ["resumable", "exec", "hi.py", "-q"]
runpy.run_module("resumable", run_name="__main__", alter_sys=True)
"""
"""``resumable exec``'s first process, which ends where it would start the second."""


def count_startup(args: argparse.Namespace) -> Report:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    resumable = command()
    if len(resumable) == 1:  # the console script is a Python file: run by this Python
        resumable = [sys.executable, *resumable]
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        env = {k: v for k, v in os.environ.items() if k not in _UNSET}
        env["PYTHONPYCACHEPREFIX"] = str(cwd / "pycache")
        (cwd / "hi.py").write_text('print("hi")\n', encoding="utf-8")
        for argv in ([*resumable, "exec", "hi.py", "-q"], [sys.executable, "hi.py"]):
            subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=True)
        plain, _ = callgrind([sys.executable, "-c", "pass"], cwd, env)
        hi, _ = callgrind([sys.executable, "hi.py"], cwd, env)
        version, _ = callgrind([*resumable, "--version"], cwd, env)
        first, seed = callgrind([sys.executable, "-c", _FIRST_PROCESS], cwd, env)
        seeded = {**env, "PYTHONHASHSEED": seed.strip()}
        second, said = callgrind([*resumable, "exec", "hi.py", "-q"], cwd, seeded)
        if said.strip() != "hi":
            raise SystemExit(f"resumable exec hi.py printed {said!r}")
    rows = [
        ("python -c pass", plain / 1e6, 1.0),
        ("resumable --version", version / 1e6, version / plain),
        ("python hi.py", hi / 1e6, 1.0),
        ("resumable exec hi.py: the first process", first / 1e6, first / hi),
        ("resumable exec hi.py: the run's process", second / 1e6, second / hi),
        ("resumable exec hi.py", (first + second) / 1e6, (first + second) / hi),
    ]
    exec_ratio, version_ratio = (first + second) / hi, version / plain
    return Report(
        title=f"Start-up, CPU instructions (callgrind, Python {sys.version.split()[0]})",
        columns=("command", "million instructions", "ratio"),
        rows=[(name, round(value, 1), round(ratio, 2)) for name, value, ratio in rows],
        summary={"exec_ratio": round(exec_ratio, 2), "version_ratio": round(version_ratio, 2)},
        ok=(args.max_exec_ratio is None or exec_ratio <= args.max_exec_ratio)
        and (args.max_version_ratio is None or version_ratio <= args.max_version_ratio),
    )


def bench_startup(args: argparse.Namespace) -> Report:
    if args.instructions:
        return count_startup(args)
    resumable = command()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        env = {k: v for k, v in os.environ.items() if k not in _UNSET}
        env["PYTHONPYCACHEPREFIX"] = str(cwd / "pycache")  # bytecode, as pip install leaves it
        (cwd / "hi.py").write_text('print("hi")\n', encoding="utf-8")

        def run(argv: list[str], expected: str) -> None:
            done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
            if done.returncode != 0 or done.stdout.split("\n")[0] != expected:
                raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}")

        version = subprocess.run(
            [*resumable, "--version"], env=env, capture_output=True, text=True, check=True
        ).stdout.split("\n")[0]
        run([*resumable, "exec", "hi.py", "-q"], "hi")  # makes the store and its key
        run([sys.executable, "hi.py"], "hi")  # and the bytecode of both
        crashed = [killed_run(resumable, cwd, env, f"killed-{i}") for i in range(args.repeat + 1)]
        run([*resumable, "resume", crashed.pop(), "-q"], "hi")  # its bytecode
        median = median_seconds(
            {
                "pass": lambda: run([sys.executable, "-c", "pass"], ""),
                "version": lambda: run([*resumable, "--version"], version),
                "hi": lambda: run([sys.executable, "hi.py"], "hi"),
                "exec": lambda: run([*resumable, "exec", "hi.py", "-q"], "hi"),
                "resume": lambda: run([*resumable, "resume", crashed.pop(), "-q"], "hi"),
            },
            args.repeat,
        )
        seeded = {**env, "PYTHONHASHSEED": "0"}  # the process that runs the program
        exec_imports = imports(["-m", "resumable", "exec", "hi.py", "-q"], cwd, seeded)
        version_imports = imports(["-m", "resumable", "--version"], cwd, env)
        plain_imports = imports(["hi.py"], cwd, env)
    load_after = os.getloadavg()[0]
    shown = " ".join(Path(part).name if part == sys.executable else part for part in resumable)
    exec_ratio = median["exec"] / median["hi"]
    resume_ratio = median["resume"] / median["hi"]
    version_ratio = median["version"] / median["pass"]
    rows = [
        ("python -c pass", median["pass"] * 1000, 1.0),
        (f"{shown} --version", median["version"] * 1000, version_ratio),
        ("python hi.py", median["hi"] * 1000, 1.0),
        (f"{shown} exec hi.py", median["exec"] * 1000, exec_ratio),
        (f"{shown} resume (hi.py killed)", median["resume"] * 1000, resume_ratio),
    ]
    return Report(
        title=f"Start-up, {args.repeat} alternating rounds (Python {sys.version.split()[0]}, "
        f"load average {load_before:.2f} before, {load_after:.2f} after)",
        columns=("command", "ms (median)", "ratio"),
        rows=rows,
        summary={
            "repeat": args.repeat,
            "exec_ratio": round(exec_ratio, 2),
            "resume_ratio": round(resume_ratio, 2),
            "version_ratio": round(version_ratio, 2),
            "load_average": [round(load_before, 2), round(load_after, 2)],
            "imports_ms python hi.py": f"{plain_imports[0]:.0f} ({plain_imports[1]})",
            "imports_ms --version": f"{version_imports[0]:.0f} ({version_imports[1]})",
            "imports_ms exec, the run's process": f"{exec_imports[0]:.0f} ({exec_imports[1]})",
            "resumable": shutil.which(resumable[0]) or resumable[0],
        },
        ok=(args.max_exec_ratio is None or exec_ratio <= args.max_exec_ratio)
        and (args.max_version_ratio is None or version_ratio <= args.max_version_ratio),
    )
