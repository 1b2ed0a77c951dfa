"""Clock, random, uuid, urandom and secrets calls of program code go through the journal."""

from __future__ import annotations

import asyncio
import datetime
import os
import random
import secrets
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from resumable.durability.effects import nondeterminism
from resumable.exec.hooks import register_program_file

PROGRAM_FILE = "<nondeterminism-program>"

PROGRAM = """
import datetime, os, random, secrets, time, uuid
from time import monotonic
from random import randint

async def main():
    items = ["a", "b", "c", "d", "e"]
    deck = list(items)
    random.shuffle(deck)
    return [
        time.time(), time.time_ns(), monotonic(), time.perf_counter(),
        random.random(), randint(1, 10**9), random.uniform(0, 1), random.getrandbits(64),
        random.choice(items), random.choices(items, k=3), random.sample(items, 2), deck,
        uuid.uuid4(), uuid.uuid1(), os.urandom(8),
        secrets.token_hex(8), secrets.token_bytes(4), secrets.randbelow(10**9),
        secrets.choice(items),
        datetime.datetime.now(), datetime.datetime.utcnow(), datetime.date.today(),
    ]
"""
NAMES = [
    *("random.shuffle", "time.time", "time.time_ns", "time.monotonic", "time.perf_counter"),
    *("random.random", "random.randint", "random.uniform", "random.getrandbits"),
    *("random.choice", "random.choices", "random.sample"),
    *("uuid.uuid4", "uuid.uuid1", "os.urandom"),
    *("secrets.token_hex", "secrets.token_bytes", "secrets.randbelow", "secrets.choice"),
    *("datetime.now", "datetime.utcnow", "time.time"),  # date.today reads time.time from C
]


class FakeJournal:
    """Records ``thunk()`` under ``name``; with ``answers``, answers them in order instead."""

    def __init__(self, answers: list[tuple[str, Any]] | None = None) -> None:
        self.answers = answers
        self.calls: list[tuple[str, Any]] = []

    def __call__(self, name: str, thunk: Callable[[], Any]) -> Any:
        if self.answers is not None:
            recorded_name, value = self.answers[len(self.calls)]
            assert recorded_name == name
        else:
            value = thunk()
        self.calls.append((name, value))
        return value


@pytest.fixture
def journal() -> Iterator[Callable[[FakeJournal], None]]:
    installed: list[FakeJournal] = []

    def install(fake: FakeJournal) -> None:
        nondeterminism.install(fake)
        installed.append(fake)

    yield install
    for _ in installed:
        nondeterminism.uninstall()
    assert not nondeterminism.installed()


def run_program() -> list[Any]:
    register_program_file(PROGRAM_FILE)
    ns: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(textwrap.dedent(PROGRAM), PROGRAM_FILE, "exec"), ns)
    result: list[Any] = asyncio.run(ns["main"]())
    return result


def test_program_calls_are_journaled_and_answered_on_replay(
    journal: Callable[[FakeJournal], None],
) -> None:
    first = FakeJournal()
    journal(first)
    values = run_program()
    assert [name for name, _ in first.calls] == NAMES
    nondeterminism.uninstall()

    random.seed(12345)  # a different generator state: the real draws differ now
    again = FakeJournal(list(first.calls))
    journal(again)
    time.sleep(0.002)
    assert run_program() == values
    assert isinstance(values[12], uuid.UUID)
    assert isinstance(values[19], datetime.datetime)
    assert values[5] == first.calls[6][1]


def test_choices_keep_the_identity_of_the_items(journal: Callable[[FakeJournal], None]) -> None:
    journal(FakeJournal())
    values = run_program()
    assert values[8] in ["a", "b", "c", "d", "e"]
    assert sorted(values[11]) == ["a", "b", "c", "d", "e"]
    first = FakeJournal()
    nondeterminism.uninstall()
    journal(first)
    run_program()
    deck_order = first.calls[0][1]
    assert sorted(deck_order) == [0, 1, 2, 3, 4]  # positions, not the items


def test_a_seeded_program_draws_what_it_draws_without_resumable(
    journal: Callable[[FakeJournal], None],
) -> None:
    random.seed(3)
    plain = [random.random(), random.randint(0, 100), random.choice("abcdef")]
    journal(FakeJournal())
    register_program_file(PROGRAM_FILE)
    ns: dict[str, Any] = {}
    source = "import random\nasync def f():\n    random.seed(3)\n"
    source += "    return [random.random(), random.randint(0, 100), random.choice('abcdef')]\n"
    exec(compile(source, PROGRAM_FILE, "exec"), ns)
    assert asyncio.run(ns["f"]()) == plain


def test_library_code_and_code_outside_the_loop_are_not_journaled(
    journal: Callable[[FakeJournal], None],
) -> None:
    fake = FakeJournal()
    journal(fake)

    async def library() -> None:
        await asyncio.sleep(0.001)  # the loop reads time.monotonic
        time.time()
        random.random()
        uuid.uuid4()  # reads os.urandom from uuid.py

    asyncio.run(library())
    register_program_file(PROGRAM_FILE)
    ns: dict[str, Any] = {}
    exec(compile("import time\nstamp = time.time()\n", PROGRAM_FILE, "exec"), ns)  # no loop
    assert fake.calls == []


def test_uninstall_puts_the_originals_back() -> None:
    originals = (time.time, random.random, os.urandom, secrets.token_hex, uuid.uuid4)
    now = datetime.datetime.__dict__["now"]
    nondeterminism.install(FakeJournal())
    nondeterminism.install(FakeJournal())  # nested: counted
    assert time.time is not originals[0]
    assert datetime.datetime.__dict__["now"] is not now
    nondeterminism.uninstall()
    assert time.time is not originals[0]
    nondeterminism.uninstall()
    assert (time.time, random.random, os.urandom, secrets.token_hex, uuid.uuid4) == originals
    assert datetime.datetime.__dict__["now"] is now
    assert isinstance(datetime.datetime.now(), datetime.datetime)


def test_where_datetime_cannot_be_patched_the_rest_is_journaled_and_it_is_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert nondeterminism.DATETIME_UNSUPPORTED is None  # the interpreter the suite runs on
    monkeypatch.setattr(sys, "version_info", (3, 14, 0))
    reason = nondeterminism._datetime_unsupported()
    assert reason is not None
    assert "checked on CPython 3.11-3.13 only" in reason
    monkeypatch.undo()
    monkeypatch.setattr(nondeterminism, "DATETIME_UNSUPPORTED", reason)
    monkeypatch.setattr(nondeterminism, "_datetime_warned", False)
    now = datetime.datetime.__dict__["now"]
    with pytest.warns(RuntimeWarning, match=r"datetime.datetime.now\(\) and utcnow\(\) are not"):
        nondeterminism.install(lambda name, thunk: thunk())
    try:
        assert datetime.datetime.__dict__["now"] is now  # left alone
        assert getattr(time.time, "__wrapped__", None) is not None
    finally:
        nondeterminism.uninstall()
    nondeterminism.install(lambda name, thunk: thunk())  # said once a process
    nondeterminism.uninstall()
