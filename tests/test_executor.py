"""StreamingPythonExecutor: statements run as soon as they are complete, errors name the response line."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from resumable import CodeError, StreamingPythonExecutor
from resumable.exec.hooks import HookBase
from resumable.exec.streaming import Statement


class Events:
    """An observer that records what the executor tells it."""

    def __init__(self) -> None:
        self.log: list[tuple[str, int, str]] = []

    async def statement_started(self, statement: Statement, index: int) -> None:
        self.log.append(("start", index, statement.source))

    async def statement_finished(
        self, statement: Statement, index: int, error: CodeError | None
    ) -> None:
        self.log.append(("finish", index, "error" if error else "ok"))


class CountingHook(HookBase):
    def __init__(self) -> None:
        self.sites: list[str] = []

    async def await_(self, site: str, awaitable: Any) -> Any:
        self.sites.append(site)
        return await awaitable


async def feed(executor: StreamingPythonExecutor, text: str, size: int) -> None:
    executor.start_response()
    for start in range(0, len(text), size):
        await executor.add_chunk(text[start : start + size])


async def test_statements_run_as_soon_as_they_are_complete() -> None:
    events = Events()
    executor = StreamingPythonExecutor(observer=events)
    executor.start_response()
    await executor.add_chunk("x = 1\ny = x + ")
    assert executor.namespace["x"] == 1
    assert "y" not in executor.namespace
    await executor.add_chunk("1\nif y:\n    z = 3\n")
    assert executor.namespace["y"] == 2
    assert "z" not in executor.namespace  # the if may still get an else
    await executor.add_chunk("w = 4\n")
    assert executor.namespace["z"] == 3
    assert executor.namespace["w"] == 4
    result = await executor.finalize()
    assert result.error is None
    assert result.statements == 4
    assert [e[0] for e in events.log] == ["start", "finish"] * 4


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
async def test_any_chunking_gives_the_same_namespace_and_output(
    size: int, capsys: pytest.CaptureFixture[str]
) -> None:
    source = (
        "import asyncio\n"
        "async def double(n):\n"
        "    await asyncio.sleep(0)\n"
        "    return 2 * n\n"
        "values = [await double(i) for i in range(4)]\n"
        "total = 0\n"
        "for v in values:\n"
        "    total += await double(v)\n"
        "else:\n"
        "    print('sum', total)\n"
        's = f"{await double(21)}"; print(s)\n'
    )
    hook = CountingHook()
    executor = StreamingPythonExecutor(hook=hook)
    await feed(executor, source, size)
    result = await executor.finalize()
    assert result.error is None
    assert executor.namespace["values"] == [0, 2, 4, 6]
    assert executor.namespace["total"] == 24
    assert capsys.readouterr().out == "sum 24\n42\n"
    # every await went through the hook: 4 comprehension awaits + their 4 inner sleeps,
    # 4 loop awaits + 4 sleeps, the f-string await + its sleep
    assert len(hook.sites) == 18


async def test_an_exception_stops_the_response_and_names_its_line() -> None:
    executor = StreamingPythonExecutor()
    await feed(executor, "a = 1\n\nb = 1 / 0\nc = 3\n", 2)
    result = await executor.finalize()
    assert executor.failed
    assert result.error is not None
    assert result.error.fields["line"] == 3
    assert result.error.fields["exc_type"] == "ZeroDivisionError"
    assert "line 3 of the response" in result.error.message
    assert "c" not in executor.namespace  # later statements do not run
    # the executor is usable for the next response, with the same namespace
    await feed(executor, "d = a + 1\n", 1)
    assert (await executor.finalize()).error is None
    assert executor.namespace["d"] == 2


async def test_an_error_inside_a_function_reports_the_line_of_the_function_body() -> None:
    executor = StreamingPythonExecutor()
    source = "def f():\n    return missing\n\nx = 1\nf()\n"
    await feed(executor, source, 5)
    error = (await executor.finalize()).error
    assert error is not None
    assert error.fields["line"] == 2
    assert "NameError" in error.message
    assert "missing" in error.fields["traceback"]


async def test_a_syntax_error_is_reported_as_soon_as_it_is_certain() -> None:
    executor = StreamingPythonExecutor()
    executor.start_response()
    await executor.add_chunk("x = 1\ny = = 2\n")
    await executor.add_chunk("z = 3\n")
    assert executor.failed  # before the end of the stream
    error = (await executor.finalize()).error
    assert error is not None
    assert error.fields["kind"] == "syntax"
    assert error.fields["line"] == 2
    assert executor.namespace["x"] == 1
    assert "z" not in executor.namespace


async def test_control_signals_are_not_swallowed_by_the_executor() -> None:
    class Stop(BaseException):
        pass

    executor = StreamingPythonExecutor({"Stop": Stop})
    executor.start_response()
    await executor.add_chunk("try:\n    raise Stop()\nexcept Exception:\n    pass\n")
    with pytest.raises(Stop):
        await executor.finalize()


async def test_a_resumed_response_keeps_the_stream_line_numbers() -> None:
    text = "a = 1\nb = 2\nc = undefined\n"
    executor = StreamingPythonExecutor()
    offset = text.index("b")
    executor.start_response(offset=offset, line=2, index=1)
    await executor.add_chunk(text[offset:])
    error = (await executor.finalize()).error
    assert error is not None
    assert error.fields["line"] == 3
    assert executor.namespace["b"] == 2


async def test_spawned_tasks_and_gather_work_with_top_level_await() -> None:
    executor = StreamingPythonExecutor({"asyncio": asyncio, "random": random})
    source = (
        "async def job(n):\n"
        "    await asyncio.sleep(0)\n"
        "    return n * n\n"
        "results = await asyncio.gather(*(job(i) for i in range(5)))\n"
        "task = asyncio.create_task(job(7))\n"
        "seven = await task\n"
    )
    await feed(executor, source, 4)
    assert (await executor.finalize()).error is None
    assert executor.namespace["results"] == [0, 1, 4, 9, 16]
    assert executor.namespace["seven"] == 49


async def test_run_executes_a_whole_source_as_one_response() -> None:
    executor = StreamingPythonExecutor()
    result = await executor.run("import asyncio\nawait asyncio.sleep(0)\nx = 5\n")
    assert result.error is None
    assert result.statements == 3
    assert executor.namespace["x"] == 5
