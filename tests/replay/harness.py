"""Run corpus programs under CPython and under resumable, killed or not, cheaply and for real.

Every run is a real process: forked from this one (which has imported everything
already, so a run costs what the program costs, not an interpreter start), with its own
working folder, environment, stdout and stderr files. ``RESUMABLE_CRASH_AFTER`` kills it
with SIGKILL exactly as in production. What is compared: exit code, stdout, the effects
ledger and the other files the program wrote in its working folder. Runs use ``sync = "flush"``;
``RESUMABLE_TEST_SYNC=fsync`` in the environment of pytest runs them with fsync.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import resumable.cli.commands
import resumable.drivers

_DEFAULT_WARNINGS: list[tuple[Literal["ignore"], type[Warning]]] = [
    ("ignore", DeprecationWarning),
    ("ignore", PendingDeprecationWarning),
    ("ignore", ImportWarning),
    ("ignore", ResourceWarning),
]
CORPUS = Path(__file__).resolve().parent / "corpus"
PROGRAMS = sorted(p.name for p in CORPUS.glob("*.py"))


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env["RESUMABLE_DURABILITY_SYNC"] = os.environ.get("RESUMABLE_TEST_SYNC", "flush")
    env.update(extra or {})
    return env


def run_forked(
    body: Callable[[], int],
    cwd: Path,
    *,
    env: dict[str, str] | None = None,
    name: str = "run",
    kill_after: float | None = None,
    timeout: float = 60,
) -> Outcome:
    """Run ``body`` in a forked child in ``cwd``; its exit code, or -signal if killed."""
    out, err = cwd / f".{name}.out", cwd / f".{name}.err"
    out.write_text("")  # there even if the child is killed before it opens them
    err.write_text("")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 70
        try:
            os.chdir(cwd)
            environment = _env(env)  # read before clearing: it starts from this environment
            os.environ.clear()
            os.environ.update(environment)
            for fd, path in ((1, out), (2, err)):
                target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(target, fd)
                os.close(target)
            # as in a fresh interpreter: real streams, the default warning filters
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            warnings.resetwarnings()
            for action, category in _DEFAULT_WARNINGS:
                warnings.simplefilter(action, category)
            code = body()
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)
    deadline = time.monotonic() + timeout
    killed_at = None if kill_after is None else time.monotonic() + kill_after
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        now = time.monotonic()
        if killed_at is not None and now >= killed_at:
            os.kill(pid, signal.SIGKILL)
            killed_at = None
        if now > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"{name} in {cwd} did not finish in {timeout} s")
        time.sleep(0.002)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    return Outcome(code, out.read_text(), err.read_text())


_REFERENCE = """\
import ast, asyncio, sys, traceback
program = sys.argv[1]
code = compile(open(program).read(), program, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
try:
    result = eval(code, {"__name__": "__main__", "__builtins__": __builtins__})
    if result is not None:
        asyncio.run(result)
except Exception:
    traceback.print_exc()
    sys.exit(1)
"""


def _reference_body(program: str) -> Callable[[], int]:
    """Plain CPython in a fresh interpreter (a forked one would carry this process's task
    counter, so its tasks would not be named Task-1, Task-2, ... as in a real run)."""

    def body() -> int:
        os.execv(sys.executable, [sys.executable, "-c", _REFERENCE, program])
        return 70  # pragma: no cover - execv does not return

    return body


def _cli_body(args: list[str]) -> Callable[[], int]:
    def body() -> int:
        sys.argv = ["resumable", *args]
        resumable.cli.commands.main()
        return 0

    return body


def workdir(root: Path, program: str, name: str) -> Path:
    work = root / f"{Path(program).stem}-{name}"
    work.mkdir(parents=True)
    shutil.copy(CORPUS / program, work / program)
    return work


UNORDERED = "# ledger order: any"
"""First line of a program whose concurrent tasks book in whatever order they run."""


def ledger(work: Path, *, keys: bool = False) -> list[str]:
    path = work / "ledger.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    if not keys:
        lines = [line.split("\t")[0] for line in lines]
        (program,) = list(work.glob("*.py"))
        if program.read_text().startswith(UNORDERED):
            lines.sort()
    return lines


def written(work: Path) -> dict[str, bytes]:
    """The files the program wrote in its working folder (not the ledger, nor the run's)."""
    return {
        path.name: path.read_bytes()
        for path in sorted(work.iterdir())
        if path.is_file()
        and not path.name.startswith(".")
        and path.suffix != ".py"
        and path.name != "ledger.txt"
    }


@dataclass(frozen=True)
class Observed:
    code: int
    stdout: str
    ledger: list[str]
    stderr: str = ""
    files: dict[str, bytes] = field(default_factory=dict)


def reference(root: Path, program: str) -> Observed:
    """The program under plain CPython."""
    work = workdir(root, program, "cpython")
    done = run_forked(_reference_body(program), work, name="cpython")
    return Observed(done.code, done.stdout, ledger(work), done.stderr, written(work))


def clean(root: Path, program: str) -> tuple[Observed, int]:
    """The program under ``resumable exec``, and how many records its run wrote."""
    work = workdir(root, program, "clean")
    done = run_forked(_cli_body(["exec", program, "--run-id", "r"]), work, name="exec")
    observed = Observed(done.code, done.stdout, ledger(work), done.stderr, written(work))
    return observed, records_of(work)


def records_of(work: Path) -> int:
    done = run_forked(_cli_body(["runs", "--json"]), work, name="runs")
    import json

    (row,) = json.loads(done.stdout)
    return int(row["records"])


def crashed(root: Path, program: str, point: int) -> Observed:
    """Killed right after record ``point``, then resumed (until it finishes)."""
    work = workdir(root, program, f"crash{point}")
    first = run_forked(
        _cli_body(["exec", program, "--run-id", "r"]),
        work,
        env={"RESUMABLE_CRASH_AFTER": str(point)},
        name="exec",
    )
    if first.code != -signal.SIGKILL:  # the run ended before record `point`
        return Observed(first.code, first.stdout, ledger(work), first.stderr, written(work))
    second = run_forked(_cli_body(["resume", "r"]), work, name="resume")
    stdout, stderr = first.stdout + second.stdout, first.stderr + second.stderr
    return Observed(second.code, stdout, ledger(work), stderr, written(work))


def spread(records: int, count: int) -> list[int]:
    """``count`` crash points from 1 to ``records`` (first and last included), evenly."""
    if records <= count:
        return list(range(1, records + 1))
    step = (records - 1) / (count - 1)
    return sorted({1 + round(i * step) for i in range(count)})


def run_cli(args: list[str], work: Path, **kwargs: object) -> Outcome:
    return run_forked(_cli_body(args), work, **kwargs)  # type: ignore[arg-type]
