"""The await a statement ends with goes with its boundary: which statements have one."""

from __future__ import annotations

import ast

import pytest

from resumable.durability.log.tail import tail_await_site
from resumable.exec.rewrite import rewrite_statement
from resumable.exec.statement import Statement
from resumable.exec.streaming import StatementSplitter


def _statement(source: str, line: int) -> Statement:
    splitter = StatementSplitter(line=line)
    (statement,) = splitter.feed(source) + splitter.close()
    return statement


@pytest.mark.parametrize(
    ("source", "column"),
    [
        ("x = await tool(1)\n", 4),
        ("await tool(1)\n", 0),
        ("x = await asyncio.sleep(0, x + 1)\n", 4),  # "asyncio" is not the word async
        ("results = await asyncio.gather(a(), b())\n", 10),
        ("x = y = await inspect_awaitable(awaitable)\n", 8),
        ("x = await tool(\n    1,\n)\n", 4),
    ],
)
def test_a_statement_that_ends_with_its_one_await_names_that_await(
    source: str, column: int
) -> None:
    parsed = _statement(source, line=5)
    assert tail_await_site(parsed, 3) == f"3:5:{column}"
    # the same site from the tree the executor rewrote in place as from the tree as parsed
    rewritten = _statement(source, line=5)
    assert rewritten.tree is not None
    rewrite_statement(ast.Module(body=rewritten.tree, type_ignores=[]), 3, line_offset=4)
    assert tail_await_site(rewritten, 3) == f"3:5:{column}"


@pytest.mark.parametrize(
    "source",
    [
        "x = await f(await g())\n",  # two awaits
        "x = await f('await')\n",  # the word in a string: the usual records
        "x = [y async for y in g()]\n",
        "async with lock():\n    pass\n",
        "x.y = await f()\n",  # program code runs after the await
        "x[0] = await f()\n",
        "x: int = await f()\n",
        "x = await f\n",  # not a call
        "x = 1 + await f()\n",
        "print(await f())\n",
    ],
)
def test_other_shapes_have_no_tail_await(source: str) -> None:
    assert tail_await_site(_statement(source, line=1), 0) is None
