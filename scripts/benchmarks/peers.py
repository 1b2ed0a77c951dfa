"""`bench.py peers`: the same job on resumable, LangGraph and DBOS, side by side.

    python scripts/bench.py peers            # 500 steps, every store (a few minutes)
    python scripts/bench.py peers --quick    # 20 steps, one store each
    python scripts/bench.py peers --only postgres --steps 2000   # some rows, longer
    python scripts/bench.py peers --prepare  # only make the peers' venv (exit 3: cannot)

The job (``peers_programs.py``): ``--steps`` steps, each adding one to a counter beside a
value of ``--big`` characters that never changes; each step appends one line to an effects
file. Every system runs it twice, each time in processes of its own on a fresh store: once
to the end (per-step latency from the effects' timestamps, bytes stored per step), and once
killed with SIGKILL from outside when half the effects are there, then resumed: the resume
time is from the resuming process's start to its exit, and the result is right when the
counter is ``--steps`` and every step's effect is there, made twice at most for the step
the kill interrupted (counted, not hidden).

resumable runs from this checkout (``src``), with the folder store, the SQLite store and the
PostgreSQL store (``sync = "fsync"``, the default); the peers run with the Python of their venv
(``peers_env.py``). PostgreSQL stores get a throwaway database each on ``--pg-url``'s
server, dropped after. Each row is one run (``--repeat`` is not used): compare rows of the
same run, and run it again to see how much they move.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.peers_env import (
    NoPeers,
    Postgres,
    default_venv,
    folder_bytes,
    sqlite_bytes,
    venv_python,
    versions,
)
from benchmarks.peers_programs import PROGRAMS
from benchmarks.report import Report

SRC = Path(__file__).resolve().parents[2] / "src"
TIMEOUT = 900
KILL_TRIES = 3
"""Runs started again when the job finished before its kill landed."""


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    program: str  # a key of PROGRAMS
    store: str  # "folder", "sqlite" or "postgres"


CASES = (
    Case("resumable exec, folder (fsync)", "resumable", "folder"),
    Case("resumable exec, SQLite", "resumable", "sqlite"),
    Case("resumable exec, PostgreSQL", "resumable", "postgres"),
    Case("LangGraph, SqliteSaver", "langgraph", "sqlite"),
    Case("LangGraph, PostgresSaver", "langgraph", "postgres"),
    Case("DBOS, SQLite", "dbos", "sqlite"),
    Case("DBOS, PostgreSQL", "dbos", "postgres"),
)


def peers_options(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(repeat=1)
    parser.add_argument("--steps", type=int, default=500, help="steps of the job")
    parser.add_argument("--big", type=int, default=100_000, help="characters of the big value")
    parser.add_argument("--quick", action="store_true", help="20 steps, one store each")
    parser.add_argument(
        "--only", default="", help="comma-separated words: only the rows whose name has one"
    )
    parser.add_argument("--prepare", action="store_true", help="only make the peers' venv")
    parser.add_argument("--venv", type=Path, default=None, help="the peers' venv folder")
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (a temp dir)")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("PEERS_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
        help="a PostgreSQL database to connect to for making the stores' databases",
    )


class Runner:
    """Runs one case's programs in a folder of its own."""

    def __init__(self, case: Case, folder: Path, python: Path, args: argparse.Namespace) -> None:
        self.case = case
        self.folder = folder
        self.python = python
        self.steps = args.steps
        self.big = args.big
        self.program = folder / f"{case.program}_job.py"
        self.program.write_text(PROGRAMS[case.program], encoding="utf-8")
        self.effects = folder / "effects.txt"

    def env(self, store: str, mode: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PEERS_STEPS=str(self.steps),
            PEERS_BIG=str(self.big),
            PEERS_EFFECTS=str(self.effects),
            PEERS_STORE=store,
            PEERS_MODE=mode,
        )
        if self.case.program == "resumable":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
            postgres = store.startswith("postgresql://")
            kind = {"folder": "file", "sqlite": "sqlite", "postgres": "postgres"}
            env["RESUMABLE_DURABILITY_STORE"] = kind[self.case.store]
            env["RESUMABLE_DURABILITY_" + ("URL" if postgres else "PATH")] = store
            env["RESUMABLE_DURABILITY_SYNC"] = "fsync"
        return env

    def argv(self, mode: str) -> list[str]:
        if self.case.program != "resumable":
            return [str(self.python), str(self.program)]
        if mode == "start":
            return [sys.executable, "-m", "resumable", "exec", str(self.program), "-q"]
        return [sys.executable, "-m", "resumable", "resume", "--latest", "-q", "--no-input"]

    def run(self, store: str, mode: str) -> tuple[int, float]:
        """Run to the end: the counter printed last, and the seconds from start to exit."""
        began = time.perf_counter()
        done = subprocess.run(
            self.argv(mode),
            cwd=self.folder,
            env=self.env(store, mode),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        took = time.perf_counter() - began
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines or not lines[-1].strip().isdigit():
            raise RuntimeError(
                f"{self.case.name} ({mode}) exited {done.returncode}:\n"
                f"{done.stdout[-1500:]}{done.stderr[-3000:]}"
            )
        return int(lines[-1]), took

    def kill_halfway(self, store: str) -> None:
        """Start the job and SIGKILL its process group once half the effects are written."""
        process = subprocess.Popen(
            self.argv("start"),
            cwd=self.folder,
            env=self.env(store, "start"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + TIMEOUT
        while self.effect_count() < self.steps // 2:
            if process.poll() is not None:
                stderr = process.stderr.read().decode() if process.stderr else ""
                raise RuntimeError(f"{self.case.name} ended before the kill:\n{stderr[-3000:]}")
            if time.monotonic() > deadline:
                break
            time.sleep(0.0005)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stderr:
            process.stderr.close()

    def effect_count(self) -> int:
        try:
            with self.effects.open("rb") as effects:
                return effects.read().count(b"\n")
        except FileNotFoundError:
            return 0

    def effects_read(self) -> list[tuple[int, float]]:
        lines = self.effects.read_text(encoding="utf-8").splitlines()
        return [(int(a), float(b)) for a, b in (line.split() for line in lines)]


def _store(case: Case, folder: Path, pg: Postgres | None, tag: str) -> tuple[str, str]:
    """The store's location for the programs, and its PostgreSQL database name (or "")."""
    if case.store == "postgres":
        assert pg is not None
        name = f"peers_bench_{case.program}_{tag}_{os.getpid()}"
        return pg.create(name), name
    return str(folder / ("store" if case.store == "folder" else "store.db")), ""


def _size(case: Case, store: str, database: str, pg: Postgres | None) -> int:
    if database:
        assert pg is not None
        return pg.size(database)
    return folder_bytes(Path(store)) if case.store == "folder" else sqlite_bytes(Path(store))


def measure(
    case: Case, scratch: Path, python: Path, pg: Postgres | None, args: argparse.Namespace
) -> tuple[object, ...]:
    """One row: the run to the end, then the killed run and its resume."""
    steps = args.steps
    full = Runner(case, Path(tempfile.mkdtemp(dir=scratch)), python, args)
    store, database = _store(case, full.folder, pg, "full")
    try:
        counter, took = full.run(store, "start")
        stored = _size(case, store, database, pg)
    finally:
        if database and pg:
            pg.drop(database)
    stamps = [t for _, t in full.effects_read()]
    gaps = sorted((b - a) * 1000 for a, b in itertools.pairwise(stamps))
    p99 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))]
    if counter != steps or len(stamps) != steps:
        raise RuntimeError(f"{case.name}: the full run ended at {counter}, {len(stamps)} effects")

    for _ in range(KILL_TRIES):
        crashed = Runner(case, Path(tempfile.mkdtemp(dir=scratch)), python, args)
        store, database = _store(case, crashed.folder, pg, "kill")
        try:
            crashed.kill_halfway(store)
            at_kill = crashed.effect_count()
            if at_kill < steps:  # on a loaded machine the job can finish before the kill lands
                resumed, resume_seconds = crashed.run(store, "resume")
                break
        finally:
            if database and pg:
                pg.drop(database)
    else:
        raise RuntimeError(f"{case.name}: the job ended before the kill {KILL_TRIES} times")
    counters = [c for c, _ in crashed.effects_read()]
    twice = len(counters) - len(set(counters))
    right = resumed == steps and set(counters) == set(range(steps)) and twice <= 1
    return (
        case.name,
        statistics.median(gaps),
        p99,
        took,
        stored / steps / 1024,
        at_kill,
        resume_seconds,
        resumed,
        twice,
        "yes" if right else "NO",
    )


def _resumable_version() -> str:
    """The version of the resumable this checkout holds (the one the rows ran)."""
    done = subprocess.run(
        [sys.executable, "-c", "import resumable; print(resumable.__version__)"],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        check=False,
    )
    return f"{done.stdout.strip() or '?'} (this checkout)"


def bench_peers(args: argparse.Namespace) -> Report:
    if args.quick:
        args.steps = 20
    try:
        python = venv_python(args.venv or default_venv())
    except NoPeers as error:
        print(f"peers: no venv for the peers: {error}", file=sys.stderr)
        raise SystemExit(3) from error
    if args.prepare:
        raise SystemExit(0)
    pg = Postgres(python, args.pg_url)
    server = pg.version()
    cases = [c for c in CASES if server or c.store != "postgres"]
    if args.quick:
        firsts = {c.program: c for c in reversed(CASES) if c.store != "postgres"}
        cases = [c for c in cases if c in firsts.values()]  # one store each, no server
    if args.only:
        words = [word.strip().lower() for word in args.only.split(",") if word.strip()]
        cases = [c for c in cases if any(word in c.name.lower() for word in words)]
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        for case in cases:
            print(f"peers: {case.name}", file=sys.stderr)
            rows.append(measure(case, Path(folder), python, pg if server else None, args))
    load_after = os.getloadavg()
    found = versions(python)
    return Report(
        title=f"The same job on each system: {args.steps} steps beside a {args.big:,}-character "
        "value, SIGKILL at half, resume (one process each, this disk, this server)",
        columns=(
            "system, store",
            "median ms/step",
            "p99 ms/step",
            "run s",
            "KB stored/step",
            "effects at kill",
            "resume s",
            "counter",
            "effects twice",
            "right",
        ),
        rows=rows,
        summary={
            "steps": args.steps,
            "big": args.big,
            "resumable": _resumable_version(),
            "versions": found,
            "postgresql": server or "not reachable: its rows are left out",
            "python": sys.version.split()[0],
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in load_after],
        },
        ok=all(row[-1] == "yes" for row in rows),
    )
