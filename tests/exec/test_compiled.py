"""A statement compiled before is its template moved: the very code the compiler makes there."""

from __future__ import annotations

import ast
import asyncio
import warnings
from pathlib import Path
from types import CodeType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.exec.compiled import (
    TEMPLATE_INDEX,
    TEMPLATE_LINE,
    CompiledStatements,
    _Template,
)
from resumable.exec.executor import _FLAGS, StreamingPythonExecutor
from resumable.exec.hooks import DirectHook
from resumable.exec.rewrite import rewrite_statement
from resumable.exec.streaming import StatementSplitter

ROOT = Path(__file__).resolve().parents[1]
CORPUS = sorted((ROOT / "replay" / "corpus").glob("*.py"))

# lines and columns that make CPython pick each form of a line-table entry
OFFSETS = [0, 1, 2, 3, 7, 31, 32, 63, 64, 127, 128, 4095, 4096, 262143, 262144, 5_000_000]

WIDE = "x = " + " + ".join(["await f(1)"] * 30) + "\n"  # columns past 80 and 128
SHAPES = [
    "counter = await tick(counter)\n",
    WIDE,
    "async for item in stream():\n    total += item\n",
    "async with lock() as held, other() as more:\n    await held.use(more)\n",
    "values = [await g(v) async for v in items() if await keep(v)]\n",
    "class A:\n    '''doc'''\n    async def m(self, x=lambda: 1):\n        return [y for y in x]\n",
    "@decorate(await setting())\nasync def f(\n    a,\n    b,\n):\n    return await a(\n        b\n    )\n",
    "try:\n    await risky()\nexcept (\n    ValueError\n) as exc:\n    raise RuntimeError from exc\nfinally:\n    done = True\n",
    "result = (\n    await first()\n    +\n    await second()\n)\n",
    "if await check():\n    pass\nelif other:\n    await g()\nelse:\n    ...\n",
    "while (n := await next_n()) < 10:\n    await asyncio.sleep(0)\n",
    "match await command():\n    case {'go': where}:\n        await go(where)\n    case _:\n        pass\n",
    'text = """\nmany\nlines\n""" + await tail()\n',
]


def _statements() -> list[str]:
    found = list(SHAPES)
    for path in CORPUS:
        splitter = StatementSplitter()
        statements = splitter.feed(path.read_text()) + splitter.close()
        found += [statement.source for statement in statements]
    return found


STATEMENTS = _statements()


def _compiled(source: str, index: int, line_offset: int) -> CodeType:
    tree = rewrite_statement(ast.parse(source), index, line_offset=line_offset)
    code: CodeType = compile(tree, "<response>", "exec", flags=_FLAGS, dont_inherit=True)
    return code


def _template(source: str) -> _Template:
    return _Template(_compiled(source, TEMPLATE_INDEX, TEMPLATE_LINE - 1))


def _every_code(code: CodeType) -> list[tuple[Any, ...]]:
    """What each code object of a tree is, positions of every instruction included."""
    found = [
        (
            code.co_name,
            code.co_firstlineno,
            code.co_code,
            code.co_linetable,
            list(code.co_positions()),
            [c for c in code.co_consts if not isinstance(c, CodeType)],
        )
    ]
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found += _every_code(const)
    return found


def test_the_corpus_gives_the_test_something_to_move() -> None:
    assert len(STATEMENTS) > 200


@pytest.mark.parametrize("offset", OFFSETS)
def test_a_moved_template_is_the_compilers_code_at_that_place(offset: int) -> None:
    for n, source in enumerate(STATEMENTS):
        template = _template(source)
        for index in (0, 7, 10**6 + n):
            moved, compiled = template.at(index, offset), _compiled(source, index, offset)
            assert moved == compiled, (source, offset, index)
            assert _every_code(moved) == _every_code(compiled), (source, offset, index)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(STATEMENTS), st.integers(0, 10**7), st.integers(0, 10**7))
def test_any_place_gives_the_compilers_code(source: str, offset: int, index: int) -> None:
    moved, compiled = _template(source).at(index, offset), _compiled(source, index, offset)
    assert _every_code(moved) == _every_code(compiled)


def _run(source: str, cache: CompiledStatements | None = None) -> tuple[list[str], Any, str]:
    """The sites the hook saw, the namespace's ``out`` and the error's traceback."""
    sites: list[str] = []

    class Recording(DirectHook):
        def await_(self, site: str, awaitable: Any) -> Any:
            sites.append(site)
            return awaitable

    async def tick(n: int) -> int:
        return n + 1

    executor = StreamingPythonExecutor({"tick": tick, "out": []}, hook=Recording())
    if cache is not None:
        executor._compiled = cache
    result = asyncio.run(executor.run(source))
    error = result.error.traceback if result.error is not None else ""
    return sites, executor.namespace["out"], error


PROGRAM = (
    "n = 0\n"
    + "n = await tick(n); out.append(n)\n" * 5
    + "def f(x):\n    return [await_free for await_free in range(x)]\n" * 3
    + "out.append(f(n))\n" * 3
    + "n = await tick(n); out.append(n / 2)\n" * 4
)


def test_a_program_that_repeats_statements_runs_as_when_each_is_compiled() -> None:
    compiled_each_time = _run(PROGRAM, CompiledStatements(limit=0))
    moved = _run(PROGRAM)
    assert moved == compiled_each_time
    sites, out, error = moved
    assert sites[:2] == ["1:2:4", "3:3:4"]  # a statement each side of ";"
    assert len(set(sites)) == len(sites) == 9
    assert out[:5] == [1, 2, 3, 4, 5]
    assert out[5:8] == [[0, 1, 2, 3, 4]] * 3
    assert out[8:] == [3.0, 3.5, 4.0, 4.5]
    assert error == ""


def test_a_traceback_from_a_moved_statement_names_its_own_line() -> None:
    program = "x = 0\n" + "x = await tick(x); y = 1 / (3 - x)\n" * 4
    sites, _, error = _run(program)
    assert sites == ["1:2:4", "3:3:4", "5:4:4"]
    assert 'File "<response>", line 4' in error
    assert "ZeroDivisionError: division by zero" in error
    assert error == _run(program, CompiledStatements(limit=0))[2]


def test_a_statement_is_compiled_twice_then_moved() -> None:
    cache = CompiledStatements()
    compiles = 0

    def template() -> CodeType:
        nonlocal compiles
        compiles += 1
        return _compiled("x = await f()\n", TEMPLATE_INDEX, TEMPLATE_LINE - 1)

    for index in range(5):
        code = cache.take("x = await f()\n", "<r>", index, index)
        if code is None:
            code = _compiled("x = await f()\n", index, index)
            cache.note("x = await f()\n", "<r>", index, index, code, template)
        assert code == _compiled("x = await f()\n", index, index)
        assert cache.take("x = await f()\n", "<other file>", index, index) is None
    assert compiles == 1


def test_a_constant_that_looks_like_a_template_site_keeps_the_source_compiled() -> None:
    source = f'x = await f("{TEMPLATE_INDEX}:{TEMPLATE_LINE}:9")\n'
    cache = CompiledStatements()
    for index in range(4):
        assert cache.take(source, "<r>", index, 3) is None
        code = _compiled(source, index, 3)
        cache.note(source, "<r>", index, 3, code, lambda: _template(source).code)


def test_the_oldest_source_goes_past_the_limit() -> None:
    cache = CompiledStatements(limit=2)
    sources = [f"x{n} = await f()\n" for n in range(3)]
    for source in sources * 2:
        cache.note(source, "<r>", 0, 0, _compiled(source, 0, 0), lambda s=source: _template(s).code)  # type: ignore[misc]
    assert len(cache._sources) == 2


def test_a_statement_the_compiler_warns_about_warns_at_each_place() -> None:
    program = "y = 1\n" + "x = await tick(0) is 1\n" * 4

    def warned(cache: CompiledStatements | None) -> list[tuple[str, int | None]]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _run(program, cache)
        return [(str(w.message), w.lineno) for w in caught]

    every_time = warned(CompiledStatements(limit=0))
    assert [line for _, line in every_time] == [2, 3, 4, 5]
    assert warned(None) == every_time
