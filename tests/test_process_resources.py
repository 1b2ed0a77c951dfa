"""Process resources held in variables, and process-wide state, across a capture and restore."""

from __future__ import annotations

import asyncio
import contextvars
import io
import logging
import queue
import random
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resumable.durability.capture.lost import LostVariable
from resumable.durability.capture.snapshot import Snapshotter
from resumable.exec.output import ProgramOutput


def no_blobs(digest: str) -> bytes:
    raise LookupError(digest)


def round_trip(values: dict[str, Any], *, process_state: bool = False) -> dict[str, Any]:
    """What a resumed process sees: captured by one snapshotter, restored by a new one."""
    capture = Snapshotter(process_state=process_state).capture(values)
    assert capture.lost == {}
    into: dict[str, Any] = {}
    Snapshotter(process_state=process_state).restore(capture.data, load_blob=no_blobs, into=into)
    return into


def program(source: str) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(textwrap.dedent(source), "<program>", "exec", dont_inherit=True), ns)
    return ns


# -- files -----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["w", "a", "x", "w+"])
def test_a_file_written_by_the_program_is_reopened_where_it_was_and_never_truncated_again(
    tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "out.txt"
    if mode == "a":
        path.write_text("old\n")
    with open(path, mode) as f:
        f.write("one\n")
        capture = Snapshotter().capture({"f": f})
        f.write("two (written by the statement that was in progress)\n")
    into: dict[str, Any] = {}
    Snapshotter().restore(capture.data, load_blob=no_blobs, into=into)
    with into["f"] as again:
        assert again.name == str(path)
        assert again.mode == mode
        again.write("two\n")
    assert path.read_text() == ("old\n" if mode == "a" else "") + "one\ntwo\n"


def test_a_binary_file_being_read_goes_on_from_its_position(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(10)))
    with open(path, "rb") as f:
        assert f.read(4) == bytes(range(4))
        into = round_trip({"f": f})
    with into["f"] as again:
        assert isinstance(again, io.BufferedReader)
        assert again.read() == bytes(range(4, 10))


def test_a_text_file_keeps_its_position_and_encoding(tmp_path: Path) -> None:
    path = tmp_path / "words.txt"
    path.write_text("héllo\nwörld\n", encoding="latin-1")
    with open(path, encoding="latin-1") as f:
        assert f.readline() == "héllo\n"
        into = round_trip({"f": f})
    with into["f"] as again:
        assert again.encoding == "latin-1"
        assert again.readline() == "wörld\n"


def test_a_file_opened_for_update_is_not_cut_back(tmp_path: Path) -> None:
    path = tmp_path / "db.txt"
    path.write_text("0123456789")
    with open(path, "r+") as f:
        f.seek(2)
        capture = Snapshotter().capture({"f": f})
    into: dict[str, Any] = {}
    Snapshotter().restore(capture.data, load_blob=no_blobs, into=into)
    with into["f"] as again:
        assert again.read() == "23456789"


def test_a_file_that_is_gone_comes_back_as_a_lost_variable_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "gone.txt"
    path.write_text("x")
    with open(path) as f:
        capture = Snapshotter().capture({"f": f})
    path.unlink()
    into: dict[str, Any] = {}
    Snapshotter().restore(capture.data, load_blob=no_blobs, into=into)
    assert type(into["f"]) is LostVariable
    assert "gone.txt" in repr(into["f"])


def test_a_closed_file_stays_closed(tmp_path: Path) -> None:
    with open(tmp_path / "x.txt", "w") as f:
        pass
    assert round_trip({"f": f})["f"].closed


def test_sys_stdout_in_a_variable_is_this_process_stdout_after_a_restore() -> None:
    with ProgramOutput().installed():
        into = round_trip({"out": sys.stdout, "err": sys.stderr})
        assert into["out"] is sys.stdout
        assert into["err"] is sys.stderr


# -- locks, events, queues -------------------------------------------------------------------
def test_threading_primitives_come_back_in_their_state() -> None:
    lock, rlock, idle = threading.Lock(), threading.RLock(), threading.Lock()
    lock.acquire()
    rlock.acquire()
    rlock.acquire()
    event, sem = threading.Event(), threading.BoundedSemaphore(3)
    event.set()
    sem.acquire()
    jobs: queue.Queue[int] = queue.Queue()
    for i in range(3):
        jobs.put(i)
    simple: queue.SimpleQueue[str] = queue.SimpleQueue()
    simple.put("a")
    cond = threading.Condition(threading.RLock())
    into = round_trip(
        {"lock": lock, "rlock": rlock, "idle": idle, "event": event, "sem": sem}
        | {"jobs": jobs, "simple": simple, "cond": cond}
    )
    assert into["lock"].locked()
    assert not into["idle"].locked()
    into["rlock"].release()
    into["rlock"].release()
    assert into["rlock"].acquire(blocking=False)  # count was 2: now free
    assert into["event"].is_set()
    assert [into["sem"].acquire(blocking=False) for _ in range(3)] == [True, True, False]
    assert [into["jobs"].get_nowait() for _ in range(3)] == [0, 1, 2]
    assert simple.get_nowait() == "a"  # capturing did not consume it
    assert into["simple"].get_nowait() == "a"
    with into["cond"]:
        into["cond"].notify_all()


def test_asyncio_primitives_come_back_in_a_new_event_loop() -> None:
    async def first() -> dict[str, Any]:
        lock, event, sem = asyncio.Lock(), asyncio.Event(), asyncio.Semaphore(2)
        jobs: asyncio.Queue[int] = asyncio.Queue()
        prio: asyncio.PriorityQueue[int] = asyncio.PriorityQueue()
        for i in (3, 1, 2):
            await jobs.put(i)
            await prio.put(i)
        await lock.acquire()
        await sem.acquire()
        event.set()
        cond = asyncio.Condition()
        async with cond:
            cond.notify_all()
        return round_trip(
            {"lock": lock, "event": event, "sem": sem, "jobs": jobs, "prio": prio, "cond": cond}
        )

    into = asyncio.run(first())

    async def second() -> None:
        assert into["lock"].locked()
        into["lock"].release()
        async with into["lock"]:
            pass
        assert into["event"].is_set()
        await asyncio.wait_for(into["event"].wait(), 1)
        assert [into["sem"].locked(), await into["sem"].acquire(), into["sem"].locked()] == [
            False,
            True,
            True,
        ]
        assert [await into["jobs"].get() for _ in range(3)] == [3, 1, 2]
        assert [await into["prio"].get() for _ in range(3)] == [1, 2, 3]
        into["jobs"].task_done()
        async with into["cond"]:
            into["cond"].notify_all()

    asyncio.run(second())


def test_a_queue_subclass_the_program_defined_comes_back_with_its_items() -> None:
    ns = program(
        """
        import asyncio
        class Jobs(asyncio.Queue):
            pass
        async def fill():
            jobs = Jobs()
            await jobs.put("a")
            return jobs
        jobs = asyncio.run(fill())
        """
    )
    into = round_trip({"jobs": ns["jobs"]})
    assert type(into["jobs"]).__name__ == "Jobs"
    assert into["jobs"].get_nowait() == "a"


def test_a_class_with_a_cached_property_pickles() -> None:
    ns = program(
        """
        import functools
        class Agent:
            @functools.cached_property
            def tools(self):
                return ["search"]
        agent = Agent()
        agent.tools
        """
    )
    into = round_trip({"Agent": ns["Agent"], "agent": ns["agent"]})
    assert into["agent"].tools == ["search"]
    assert into["Agent"]().tools == ["search"]


# -- context variables -----------------------------------------------------------------------
def test_a_context_variable_comes_back_with_the_value_the_program_set() -> None:
    request = contextvars.ContextVar[str]("request", default="none")
    unset = contextvars.ContextVar[int]("unset")

    def first() -> bytes:
        request.set("r-42")
        return Snapshotter().capture({"request": request, "unset": unset}).data

    data = contextvars.Context().run(first)

    def second() -> tuple[str, str, bool]:
        into: dict[str, Any] = {}
        Snapshotter().restore(data, load_blob=no_blobs, into=into)
        with pytest.raises(LookupError):
            into["unset"].get()
        fresh = contextvars.Context().run(into["request"].get)
        return into["request"].get(), fresh, into["request"].name == "request"

    assert contextvars.Context().run(second) == ("r-42", "none", True)


# -- process state: random, logging ----------------------------------------------------------
@pytest.fixture
def clean_process() -> Iterator[None]:
    state = random.getstate()
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    random.setstate(state)
    for handler in list(root.handlers):
        root.removeHandler(handler)
        if handler not in handlers:
            handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("app").handlers.clear()
    logging.getLogger("app").setLevel(logging.NOTSET)


@pytest.mark.usefixtures("clean_process")
def test_the_random_state_is_checkpointed_and_restored() -> None:
    snapshotter = Snapshotter(process_state=True)
    random.seed(7)
    random.random()
    capture = snapshotter.capture({})
    expected = [random.random() for _ in range(3)]
    random.seed(99)
    Snapshotter(process_state=True).restore(capture.data, load_blob=no_blobs, into={})
    assert [random.random() for _ in range(3)] == expected


@pytest.mark.usefixtures("clean_process")
def test_untouched_process_state_adds_nothing_to_a_capture() -> None:
    plain = Snapshotter().capture({"x": 1}).data
    assert Snapshotter(process_state=True).capture({"x": 1}).data == plain


@pytest.mark.usefixtures("clean_process")
def test_logging_configuration_the_program_set_is_restored(tmp_path: Path) -> None:
    snapshotter = Snapshotter(process_state=True)
    log_file = tmp_path / "app.log"
    with ProgramOutput().installed():
        console = logging.StreamHandler()  # to sys.stderr, as basicConfig does
        console.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        logging.getLogger().addHandler(console)
        logging.getLogger().setLevel(logging.INFO)
        file_handler = logging.FileHandler(log_file)
        file_handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        app = logging.getLogger("app")
        app.addHandler(file_handler)
        app.setLevel(logging.DEBUG)
        app.debug("before")
        capture = snapshotter.capture({"handler": file_handler})
        app.debug("in the statement that was in progress")
        # a new process: nothing configured
        root = logging.getLogger()
        for handler in [*root.handlers, *app.handlers]:
            handler.close()
        root.handlers.clear()
        app.handlers.clear()
        root.setLevel(logging.WARNING)
        app.setLevel(logging.NOTSET)
        into: dict[str, Any] = {}
        Snapshotter(process_state=True).restore(capture.data, load_blob=no_blobs, into=into)
        assert root.level == logging.INFO
        assert app.level == logging.DEBUG
        assert app.handlers == [into["handler"]]  # one object: the variable and the handler
        restored = root.handlers[-1]
        assert isinstance(restored, logging.StreamHandler)
        assert restored.stream is sys.stderr
        assert restored.formatter is not None
        assert restored.formatter._fmt == "%(levelname)s %(message)s"
        app.debug("again")
        into["handler"].close()
    assert log_file.read_text() == "[app] before\n[app] again\n"


def test_a_restore_only_looked_at_never_opens_or_cuts_back_a_file(tmp_path: Path) -> None:
    path = tmp_path / "live.txt"
    with open(path, "w") as f:
        f.write("one\n")
        capture = Snapshotter().capture({"f": f})
        f.write("two\n")  # the live run goes on writing
    into: dict[str, Any] = {}
    Snapshotter(reopen_files=False).restore(capture.data, load_blob=no_blobs, into=into)
    assert type(into["f"]) is LostVariable
    assert "reopened when the run resumes" in repr(into["f"])
    assert path.read_text() == "one\ntwo\n"


def test_a_context_variable_token_resets_after_a_restore() -> None:
    request = contextvars.ContextVar[str]("request", default="none")
    unset = contextvars.ContextVar[int]("unset")
    gone = contextvars.ContextVar[int]("gone", default=0)

    def first() -> bytes:
        outer = request.set("outer")
        spent = request.set("spent")
        request.reset(spent)
        inner = request.set("inner")
        only = unset.set(1)
        gone.reset(gone_token := gone.set(5))
        ns = {"inner": inner, "request": request, "outer": outer, "only": only, "unset": unset}
        ns.update(spent=spent, gone=gone, gone_token=gone_token)
        return Snapshotter().capture(ns).data

    data = contextvars.Context().run(first)

    def second() -> list[Any]:
        into: dict[str, Any] = {}
        Snapshotter().restore(data, load_blob=no_blobs, into=into)
        var, seen = into["request"], [into["request"].get(), into["unset"].get()]
        for used in ("spent", "gone_token"):
            with pytest.raises(RuntimeError, match="has already been used once"):
                into[used].var.reset(into[used])
        seen += [var.get(), into["gone"].get(), into["gone"] in contextvars.copy_context()]
        var.reset(into["inner"])
        seen.append(var.get())
        var.reset(into["outer"])
        seen.append(var.get())
        into["unset"].reset(into["only"])
        seen.append(into["unset"] in contextvars.copy_context())
        return seen

    assert contextvars.Context().run(second) == [
        *("inner", 1, "inner", 0, False),
        *("outer", "none", False),
    ]
