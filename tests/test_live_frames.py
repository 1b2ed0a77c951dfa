"""Values holding a suspended frame stop a checkpoint; finished ones come back finished."""

from __future__ import annotations

import builtins
import pickle
import textwrap
from typing import Any

import pytest

from resumable.durability.capture.live_frames import LiveFrame
from resumable.durability.capture.snapshot import Snapshotter


def program(source: str) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins.__dict__}
    exec(compile(textwrap.dedent(source), "<program>", "exec", dont_inherit=True), ns)
    return ns


def no_blobs(digest: str) -> bytes:
    raise AssertionError(f"blob {digest} was asked for")


DEFINITIONS = """
def numbers():
    yield 1
    yield 2

async def stream():
    yield 1

async def job():
    return 1

class Holder:
    def __init__(self, value):
        self.value = value
"""

HOLDING_A_FRAME = {
    "a generator not started": "x = numbers()",
    "a suspended generator": "x = numbers()\nnext(x)",
    "a generator in a list": "x = [1, numbers()]",
    "a generator in an attribute": "x = Holder(numbers())",
    "a generator under map and zip": "x = zip(map(str, numbers()), 'ab')",
    "a generator under enumerate": "x = enumerate(numbers())",
    "a closure over a generator": "g = numbers()\nx = lambda: next(g)",
    "an async generator": "x = stream()",
    "a coroutine not awaited": "x = job()",
}


@pytest.mark.parametrize("source", HOLDING_A_FRAME.values(), ids=HOLDING_A_FRAME)
def test_a_value_holding_a_suspended_frame_stops_the_capture(source: str) -> None:
    ns = program(DEFINITIONS + source)
    with pytest.raises(LiveFrame, match="suspended"):
        Snapshotter().capture(ns)
    if hasattr(ns["x"], "cr_frame"):
        ns["x"].close()  # never awaited, and says so otherwise


def test_a_live_frame_is_found_behind_a_value_that_cannot_be_pickled() -> None:
    ns = program(DEFINITIONS + "import threading\nt = threading.Thread()\nx = numbers()")
    with pytest.raises(LiveFrame):
        Snapshotter().capture(ns)


def test_an_await_result_holding_a_live_frame_cannot_be_journaled() -> None:
    ns = program(DEFINITIONS + "x = numbers()")
    with pytest.raises(pickle.PicklingError, match="suspended"):
        Snapshotter().dumps_value(ns["x"], ns)


async def test_finished_generators_and_coroutines_come_back_finished() -> None:
    ns = program(DEFINITIONS + "g = numbers()\nlist(g)\na = stream()\nc = job()")
    async for _ in ns["a"]:
        pass
    assert await ns["c"] == 1
    capture = Snapshotter().capture(ns)
    assert capture.lost == {}
    into: dict[str, Any] = {"__builtins__": builtins.__dict__}
    Snapshotter().restore(capture.data, load_blob=no_blobs, into=into)
    assert next(into["g"], "over") == "over"
    assert into["g"].__name__ == "numbers"
    with pytest.raises(StopAsyncIteration):
        await into["a"].__anext__()
    assert into["a"].__qualname__ == "stream"
    with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
        await into["c"]
    assert into["c"].__name__ == "job"
