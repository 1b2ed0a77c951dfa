"""kill -9 a playbook run at every record, resume it, compare with a run that never crashed.

For a record N of the uninterrupted run (every one of the scenario, every other one
of the nested example), one process runs the program with RESUMABLE_CRASH_AFTER=N
(it SIGKILLs itself right after record N is durable), ``resumable show --json`` says
where it stopped, and a third process runs ``resumable resume``. The two runs must
print together exactly what the uninterrupted run printed, book FetchData's effect
once, and never ask the LLM again for a response that was complete; a crash inside a
called playbook must stand in that playbook's frame and resume there.

Every command is its own process, forked from a warm interpreter that has already
imported resumable and then running the CLI's ``main`` as the console script does:
starting Python afresh for some 250 commands would dominate the test. The reference
runs use ``python -m resumable`` itself.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.crash.harness import EXAMPLES, Result, resumable

SCENARIO = EXAMPLES / "scenario" / "main.pb"
NESTED = EXAMPLES / "nested" / "nested.pb"
WORKERS = 2

_FORK_SERVER = r"""
import json, os, sys, traceback
import resumable.cli.commands, resumable.playbooks.runtime, resumable.llm.scripted, resumable.durability.runs.stored
replies = os.fdopen(os.dup(1), "w")
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(job["cwd"])
            os.environ.clear()
            os.environ.update(job["env"])
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            for fd, name in ((1, "stdout"), (2, "stderr")):
                os.dup2(os.open(job[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            sys.argv = ["resumable", *job["args"]]
            try:
                resumable.cli.commands.main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    replies.write(json.dumps(code) + "\n")
    replies.flush()
"""


class ForkServer:
    """Runs ``resumable ARGS`` in a fresh process forked from an interpreter kept warm."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _FORK_SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.runs = 0

    def run(self, args: list[str], cwd: Path, env: dict[str, str]) -> Result:
        self.runs += 1
        out, err = cwd / f".out{self.runs}", cwd / f".err{self.runs}"
        job = {"args": args, "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, "the fork server died"
        return Result(json.loads(answer), out.read_text(), err.read_text())

    def close(self) -> None:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


@pytest.fixture(scope="module")
def servers() -> Iterator[queue.Queue[ForkServer]]:
    pool: queue.Queue[ForkServer] = queue.Queue()
    started = [ForkServer() for _ in range(WORKERS)]
    for server in started:
        pool.put(server)
    yield pool
    for server in started:
        server.close()


def _env(folder: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")}
    env.update(
        RESUMABLE_DURABILITY_SYNC="flush",
        SCENARIO_LEDGER=str(folder / "ledger.txt"),
        **extra,
    )
    return env


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _calls(path: Path) -> list[dict[str, Any]]:
    """The scripted provider's call log: one dict per LLM call a process made."""
    return [json.loads(line) for line in _lines(path)]


def _responses(program: Path) -> dict[str, list[str]]:
    data = tomllib.loads(program.with_name(f"{program.stem}.responses.toml").read_text())
    return {name: [entry["response"] for entry in entries] for name, entries in data.items()}


@dataclass(frozen=True)
class Reference:
    stdout: str
    ledger: list[str]
    records: int
    calls: list[dict[str, Any]]


@dataclass(frozen=True)
class Crash:
    """One run killed after record ``point`` and resumed."""

    point: int
    crashed: Result
    shown: Result  # `resumable show --json` between the two processes
    resumed: Result
    crash_calls: list[dict[str, Any]]
    resume_calls: list[dict[str, Any]]
    crash_ledger: list[str]  # FetchData's effects when the first process died
    ledger: list[str]

    @property
    def stack(self) -> list[dict[str, Any]]:
        """The call stack ``show`` printed, outermost frame first."""
        frames: list[dict[str, Any]] = json.loads(self.shown.stdout)["frames"]
        return frames


def _reference(folder: Path, program: Path) -> Reference:
    folder.mkdir()
    env = _env(folder, RESUMABLE_SCRIPTED_LOG=str(folder / "calls.log"))
    done = resumable(["run", str(program), "--run-id", "r"], folder, env=env)
    assert done.code == 0, done.stderr
    (row,) = json.loads(resumable(["runs", "--json"], folder).stdout)
    assert row["status"] == "completed"
    return Reference(
        done.stdout,
        _lines(folder / "ledger.txt"),
        row["records"],
        _calls(folder / "calls.log"),
    )


def _crash_and_resume(
    servers: queue.Queue[ForkServer], root: Path, program: Path, point: int
) -> Crash:
    folder = root / f"crash{point}"
    folder.mkdir()
    crash_log, resume_log = folder / "crash.log", folder / "resume.log"
    server = servers.get()
    try:
        crashed = server.run(
            ["run", str(program), "--run-id", "r"],
            folder,
            _env(folder, RESUMABLE_CRASH_AFTER=str(point), RESUMABLE_SCRIPTED_LOG=str(crash_log)),
        )
        crash_ledger = _lines(folder / "ledger.txt")
        shown = server.run(["show", "r", "--json"], folder, _env(folder))
        resumed = server.run(
            ["resume", "r"], folder, _env(folder, RESUMABLE_SCRIPTED_LOG=str(resume_log))
        )
    finally:
        servers.put(server)
    return Crash(
        point,
        crashed,
        shown,
        resumed,
        _calls(crash_log),
        _calls(resume_log),
        crash_ledger,
        _lines(folder / "ledger.txt"),
    )


def _sweep(
    servers: queue.Queue[ForkServer], root: Path, program: Path, points: range
) -> list[Crash]:
    root.mkdir()

    def one(point: int) -> Crash:
        return _crash_and_resume(servers, root, program, point)

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(one, points))


def _check_processes(crashes: list[Crash]) -> None:
    for crash in crashes:
        assert crash.crashed.code == -signal.SIGKILL, (crash.point, crash.crashed.stderr)
        assert crash.shown.code == 0, (crash.point, crash.shown.stderr)
        assert crash.resumed.code == 0, (crash.point, crash.resumed.stderr)


def _repeated_requests(crash: Crash, responses: dict[str, list[str]]) -> list[str]:
    """Calls of the resumed process that ask again for text the crashed one already had."""
    asked = {(c["frame_id"], c["call_index"]) for c in crash.crash_calls}
    wrong = []
    for call in crash.resume_calls:
        key = (call["frame_id"], call["call_index"])
        full = len(responses[call["playbook"]][call["call_index"] - 1])
        if call["prefix_len"] == 0 and key in asked:
            wrong.append(f"{key} asked again from the start")
        elif call["prefix_len"] > 0 and (key not in asked or call["prefix_len"] > full):
            wrong.append(f"{key} continued from {call['prefix_len']} of {full} characters")
    return wrong


def _continued_when_whole(crash: Crash, responses: dict[str, list[str]]) -> list[str]:
    """Continuations asked for a response whose whole text the log already held."""
    return [
        f"{(c['frame_id'], c['call_index'])} continued after all {c['prefix_len']} characters"
        for c in crash.resume_calls
        if c["prefix_len"] == len(responses[c["playbook"]][c["call_index"] - 1])
    ]


# -- the reference scenario ------------------------------------------------------------


@pytest.fixture(scope="module")
def scenario(
    servers: queue.Queue[ForkServer], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Reference, list[Crash]]:
    root = tmp_path_factory.mktemp("scenario")
    reference = _reference(root / "reference", SCENARIO)
    # the last record is the final status: a crash after it leaves nothing to resume
    return reference, _sweep(servers, root / "crashes", SCENARIO, range(1, reference.records))


def test_scenario_reference_run(scenario: tuple[Reference, list[Crash]]) -> None:
    reference, _ = scenario
    said = reference.stdout.splitlines()
    assert said[0] == "DataAgent → user: Hello!"
    assert said[-1] == "DataAgent → user: Done: 42, 32"
    assert len(reference.ledger) == 1
    assert [(c["playbook"], c["prefix_len"]) for c in reference.calls] == [
        ("Main", 0),
        ("Main", 0),
        ("SomePlaybook", 0),
        ("SomePlaybook", 0),
        ("Main", 0),
        ("Main", 0),
    ]
    assert reference.records >= 60


def test_scenario_killed_at_every_record_prints_the_uninterrupted_transcript(
    scenario: tuple[Reference, list[Crash]],
) -> None:
    reference, crashes = scenario
    _check_processes(crashes)
    wrong = [c.point for c in crashes if c.crashed.stdout + c.resumed.stdout != reference.stdout]
    assert not wrong, f"transcript differs when killed after records {wrong}"


def test_scenario_fetchdata_effect_happens_once_under_the_same_key(
    scenario: tuple[Reference, list[Crash]],
) -> None:
    reference, crashes = scenario
    _check_processes(crashes)
    for crash in crashes:
        assert crash.ledger == reference.ledger, f"killed after record {crash.point}"


def test_scenario_resume_never_asks_again_for_a_complete_response(
    scenario: tuple[Reference, list[Crash]],
) -> None:
    _, crashes = scenario
    responses = _responses(SCENARIO)
    wrong = {c.point: _repeated_requests(c, responses) for c in crashes}
    assert not {point: w for point, w in wrong.items() if w}
    # and between them the two processes asked for every response of the run
    for crash in crashes:
        asked = {(c["frame_id"], c["call_index"]) for c in crash.crash_calls + crash.resume_calls}
        assert len(asked) == 6, f"killed after record {crash.point}"


def _resumes_in_innermost_frame(crash: Crash) -> None:
    """The innermost frame goes on first: unless the rest of its recorded response finishes
    it, the resumed process's first LLM call is for that frame (continuing a cut-off
    response exactly where the log ends) or for a playbook it calls."""
    innermost = crash.stack[-1]
    if "Return(" in innermost["remaining"] or "End()" in innermost["remaining"]:
        return
    assert crash.resume_calls, f"killed after record {crash.point}"
    first, frame = crash.resume_calls[0], innermost["frame_id"]
    assert first["frame_id"] == frame or first["frame_id"].startswith(frame + "/"), (
        f"killed after record {crash.point}: resumed with {first} instead of frame {frame}"
    )
    current = innermost["llm_calls"][-1] if innermost["llm_calls"] else None
    if first["frame_id"] == frame and current is not None and not current["complete"]:
        assert first["prefix_len"] == current["chars"], f"killed after record {crash.point}"


def test_scenario_resume_does_not_continue_a_response_received_whole(
    scenario: tuple[Reference, list[Crash]],
) -> None:
    _, crashes = scenario
    responses = _responses(SCENARIO)
    wrong = {c.point: _continued_when_whole(c, responses) for c in crashes}
    assert not {point: w for point, w in wrong.items() if w}


def test_scenario_crash_inside_someplaybook_resumes_in_its_frame(
    scenario: tuple[Reference, list[Crash]],
) -> None:
    _, crashes = scenario
    _check_processes(crashes)
    inside = [c for c in crashes if c.stack and c.stack[-1]["frame_id"] != "main"]
    assert len(inside) >= 10, "few crash points stood inside SomePlaybook"
    points = [c.point for c in inside]
    assert points == list(range(points[0], points[-1] + 1))  # one stretch of the log
    for crash in inside:
        main, nested = crash.stack
        assert (main["frame_id"], main["playbook"], main["step"]) == ("main", "Main", "Main:02:CND")
        assert (nested["frame_id"], nested["playbook"]) == ("main/1.1.0", "SomePlaybook")
        assert nested["parent"] == "main"
        _resumes_in_innermost_frame(crash)
    # the crash the scenario is about: right after `data = await FetchData()` completed
    after_fetch = [c for c in crashes if c.crash_ledger and "Got data" not in c.crashed.stdout]
    assert after_fetch
    for crash in after_fetch:
        (main,) = crash.stack
        assert main["step"] == "Main:03:ACT"
        assert main["variables"]["x"] == "42"
        # FetchData's result is in the namespace, or in the journal of the statement
        assert "data" in main["variables"] or main["completed_awaits"]
        # only call 3's cut-off rest and call 4 are asked for
        assert {(c["call_index"], c["prefix_len"] > 0) for c in crash.resume_calls} <= {
            (3, True),
            (4, False),
        }


# -- two levels of called playbooks ------------------------------------------------------


@pytest.fixture(scope="module")
def nested(
    servers: queue.Queue[ForkServer], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Reference, list[Crash]]:
    root = tmp_path_factory.mktemp("nested")
    reference = _reference(root / "reference", NESTED)
    # a spread sample: every other record, at every depth of the call stack
    return reference, _sweep(servers, root / "crashes", NESTED, range(1, reference.records, 2))


def test_nested_killed_at_many_records_prints_the_uninterrupted_transcript(
    nested: tuple[Reference, list[Crash]],
) -> None:
    reference, crashes = nested
    assert reference.stdout.splitlines()[-1].startswith("Planner → user: Plan: 3 days in Lisbon")
    _check_processes(crashes)
    wrong = [c.point for c in crashes if c.crashed.stdout + c.resumed.stdout != reference.stdout]
    assert not wrong, f"transcript differs when killed after records {wrong}"
    responses = _responses(NESTED)
    repeated = {c.point: _repeated_requests(c, responses) for c in crashes}
    assert not {point: w for point, w in repeated.items() if w}


def test_nested_crash_two_levels_down_resumes_in_the_innermost_frame(
    nested: tuple[Reference, list[Crash]],
) -> None:
    _, crashes = nested
    _check_processes(crashes)
    assert {len(c.stack) for c in crashes} >= {1, 2, 3}
    for crash in crashes:
        playbooks = [frame["playbook"] for frame in crash.stack]
        assert playbooks == ["Main", "PlanTrip", "PickDays"][: len(playbooks)]
        for parent, child in zip(crash.stack, crash.stack[1:], strict=False):
            assert child["parent"] == parent["frame_id"]
            assert child["frame_id"].startswith(parent["frame_id"] + "/")
        if crash.stack:
            _resumes_in_innermost_frame(crash)
