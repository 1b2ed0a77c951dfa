"""Runs opened with resumable.open_run: crash and resume, stores, bad input."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.embedded import ROOT, run_program

import resumable
from resumable.errors import UsageError

PROGRAM = Path(__file__).with_name("program.py")
POSTGRES_URL = os.environ.get(
    "RESUMABLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("RESUMABLE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def test_a_killed_program_resumes_with_every_effect_once(tmp_path: Path) -> None:
    (tmp_path / "clean").mkdir()
    clean = run_program(PROGRAM, tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    ledger = (tmp_path / "clean" / "ledger").read_text()
    n, tried = 1, 0
    while True:  # records 1 and 2, then every 8th, until the run completes
        folder = tmp_path / f"crash-{n}"
        folder.mkdir()
        crashed = run_program(PROGRAM, folder, crash_after=n)
        resumed = run_program(PROGRAM, folder)
        assert resumed.returncode == 0, resumed.stderr
        if resumed.stdout.count("\n") == 1:  # killed after its last record: only reported
            assert resumed.stdout == clean.stdout.splitlines(keepends=True)[-1]
        else:
            assert resumed.stdout == clean.stdout, f"crash after record {n}"
        assert (folder / "ledger").read_text() == ledger, f"crash after record {n}"
        tried += 1
        if crashed.returncode == 0:
            break
        assert crashed.returncode == -9, crashed.stderr
        n += 1 if n < 2 else 8
    assert tried >= 6


def test_a_finished_run_is_reported_and_never_run_again(tmp_path: Path) -> None:
    first = run_program(PROGRAM, tmp_path)
    assert first.returncode == 0
    assert first.stderr == ""  # nothing left running behind the closed run
    again = run_program(PROGRAM, tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout == "completed 'dear customer, your total is 70'\n"
    assert (tmp_path / "ledger").read_text().count("pay ada") == 2
    with (
        resumable.open_run("order-1", store=tmp_path / "store", program="shop") as run,
        pytest.raises(UsageError, match="run order-1 is completed: nothing of it runs again"),
    ):
        run.complete("again")


def _store_url(kind: str, tmp_path: Path) -> str:
    suffix = secrets.token_hex(6)
    if kind == "sqlite":
        return f"sqlite://{tmp_path / 'runs.db'}"
    if kind == "postgres":
        return f"{POSTGRES_URL}?schema=resumable_test_{suffix}"
    return f"{REDIS_URL}?prefix=resumable_test_{suffix}"


@pytest.mark.parametrize(
    "kind",
    [
        "file",
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_every_store_url_starts_resumes_and_reports(kind: str, tmp_path: Path) -> None:
    store = str(tmp_path / "runs") if kind == "file" else _store_url(kind, tmp_path)
    try:
        with resumable.open_run("r1", store=store, program="p") as run:
            code = run.executor(tools={"double": lambda x: 2 * x})
            assert code.run_code("x = double(21)\nx").value == 42
        with resumable.open_run("r1", store=store, program="p") as run:
            assert run.resumed
            assert not run.finished
            code = run.executor(tools={"double": lambda x: -1})
            assert code.run_code("x = double(21)\nx").value == 42  # recorded, not run
            assert code.run_code("x + 1").value == 43
            run.complete(code.namespace["x"])
        with resumable.open_run("r1", store=store, program="p") as run:
            assert run.info().status == "completed"
        if kind == "sqlite":
            assert (tmp_path / "runs.db").is_file()
            assert run.result == 42
    finally:
        _drop(kind, store)


def _drop(kind: str, store: str) -> None:
    if kind == "postgres":
        import asyncio

        import asyncpg

        async def drop() -> None:
            conn = await asyncpg.connect(POSTGRES_URL)
            schema = store.rsplit("schema=", 1)[1]
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            await conn.close()

        asyncio.run(drop())
    elif kind == "redis":
        import redis

        client = redis.Redis.from_url(REDIS_URL)
        prefix = store.rsplit("prefix=", 1)[1]
        for key in client.scan_iter(f"{prefix}*"):
            client.delete(key)
        client.close()


def test_other_code_for_a_recorded_turn_is_refused(tmp_path: Path) -> None:
    with resumable.open_run("r", store=tmp_path, program="p") as run:
        run.executor().run_code("x = 1")
    with (
        resumable.open_run("r", store=tmp_path, program="p") as run,
        pytest.raises(resumable.NonDeterminismError, match="recorded with other code"),
    ):
        run.executor().run_code("x = 2")


def test_unknown_store_and_other_program_are_refused_naming_both(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="'mysql://db' uses scheme 'mysql', which is not a store"):
        resumable.open_run("r", store="mysql://db")
    with resumable.open_run("r", store=tmp_path, program="billing") as run:
        run.executor()
        with pytest.raises(UsageError, match="run r has its executor already"):
            run.executor()
    with pytest.raises(UsageError, match="belongs to embedded program 'billing', not to 'shop'"):
        resumable.open_run("r", store=tmp_path, program="shop")


def test_resumable_resume_says_which_program_continues_the_run(tmp_path: Path) -> None:
    with resumable.open_run("r", store=tmp_path / "st", program="billing") as run:
        run.executor().run_code("x = 1")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env["RESUMABLE_DURABILITY_PATH"] = str(tmp_path / "st")
    done = subprocess.run(
        [sys.executable, "-m", "resumable", "resume", "r"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "belongs to program 'billing'" in done.stderr
    with resumable.open_run("r", store=tmp_path / "st", program="billing") as run:
        code = run.executor()
        code.run_code("x = 1")
        assert code.run_code("x + 1").value == 2  # still resumable, from where it stood


def test_a_tool_that_raises_is_journaled_and_not_run_again(tmp_path: Path) -> None:
    calls = []

    def refuse() -> None:
        calls.append(1)
        raise ValueError("no")

    code_text = "try:\n    refuse()\nexcept ValueError as exc:\n    seen = str(exc)\nseen"
    with resumable.open_run("r", store=tmp_path, program="p") as run:
        code = run.executor(tools={"refuse": refuse})
        code.feed(code_text[: code_text.rindex("\nseen") + 3])  # the try statement is complete

        assert calls == [1]
    with resumable.open_run("r", store=tmp_path, program="p") as run:
        code = run.executor(tools={"refuse": refuse})
        code.feed(code_text)
        assert code.finish().value == "no"
    assert calls == [1]


class _Died(BaseException):
    """The process dies inside a tool (nothing of the call is journaled)."""


def test_the_call_in_flight_runs_again_with_the_same_idempotency_key(tmp_path: Path) -> None:
    keys: list[str] = []

    def charge(cents: int) -> str:
        keys.append(resumable.idempotency_key())
        if len(keys) == 2:
            raise _Died
        return f"charged {cents}"

    code_text = "a = charge(1)\nb = charge(2)\n(a, b)"
    with resumable.open_run("r", store=tmp_path, program="p") as run, pytest.raises(_Died):
        run.executor(tools={"charge": charge}).run_code(code_text)
    with resumable.open_run("r", store=tmp_path, program="p") as run:
        outcome = run.executor(tools={"charge": charge}).run_code(code_text)
    assert outcome.value == ("charged 1", "charged 2")
    assert len(keys) == 3  # charge(1) once; charge(2) in flight, then again
    assert keys[1] == keys[2]
    assert keys[0] != keys[1]


def test_resumable_step_functions_of_the_code_are_journaled(tmp_path: Path) -> None:
    code_text = (
        "import resumable\n\n@resumable.step\ndef roll():\n    global rolls\n"
        "    rolls = rolls + 1\n    return rolls * 7\n\nrolls = 0\nfirst = roll()\nfirst"
    )
    with resumable.open_run("r", store=tmp_path, program="p") as run:
        code = run.executor()
        code.feed(code_text[: code_text.index("first = roll()") + 15])  # runs up to the roll
        assert code.namespace["rolls"] == 1
    with resumable.open_run("r", store=tmp_path, program="p") as run:
        code = run.executor()
        code.feed(code_text)
        outcome = code.finish()
    assert outcome.value == 7
    assert code.namespace["rolls"] == 0  # answered from the log: the body did not run again


def test_a_stream_cut_by_a_crash_is_continued_from_its_prefix(tmp_path: Path) -> None:
    asked: list[str] = []

    def client(question: str, *, prefix: str) -> Iterator[str]:
        asked.append(prefix)
        answer = f"the answer to {question} is forty-two"
        words = answer[len(prefix) :].split(" ")
        for number, word in enumerate(words):
            if len(asked) == 1 and number == 3:
                raise _Died  # the process dies mid-stream
            yield word if number == len(words) - 1 else word + " "

    with resumable.open_run("r", store=tmp_path, program="p") as run:
        stream = run.llm_stream(client, name="chat")
        with pytest.raises(_Died):
            list(stream("life"))
    with resumable.open_run("r", store=tmp_path, program="p") as run:
        assert "".join(run.llm_stream(client, name="chat")("life")) == (
            "the answer to life is forty-two"
        )
    assert asked == ["", "the answer to "]
    with resumable.open_run("r", store=tmp_path, program="p") as run:
        assert "".join(run.llm_stream(client, name="chat")("life")).endswith("forty-two")
    assert len(asked) == 2  # received whole: never requested again


def test_a_turn_whose_value_cannot_be_pickled_comes_back_as_its_repr(tmp_path: Path) -> None:
    code_text = "(n * n for n in range(3))"
    with resumable.open_run("r", store=tmp_path, program="p") as run:
        live = run.executor().run_code(code_text)
    assert list(live.value) == [0, 1, 4]
    with resumable.open_run("r", store=tmp_path, program="p") as run:
        replayed = run.executor().run_code(code_text)
    assert replayed.value.startswith("<not checkpointed: <generator object <genexpr>")
