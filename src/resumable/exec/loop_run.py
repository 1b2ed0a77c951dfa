"""``asyncio.run(main())`` in a script becomes ``await main()`` on the run's own loop.

A script run by ``resumable exec`` already runs in an event loop (every statement may
await), where ``asyncio.run`` would refuse to start a second one. So, before the await
rewrite, each call of ``asyncio.run`` in the script's top-level code (not in a function or
class body, where an ``await`` would not compile or would mean something else) is replaced
by an ``await`` of its argument::

    asyncio.run(main())                     ->  await main()
    if __name__ == "__main__":              ->  if __name__ == "__main__":
        sys.exit(asyncio.run(main()))               sys.exit(await main())

so every await inside ``main()`` goes through the hook and is durable, and the same file
runs under ``python``. The names that mean ``asyncio.run`` are read from the whole script's
imports (``import asyncio [as a]``, ``from asyncio import run [as r]``), a from-import name
the script binds again is left alone. ``debug=False`` and ``debug=None`` are accepted (they
change nothing); any other argument has no meaning on a loop already running and is
refused by :func:`refused_loop_run` before the run starts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

__all__ = ["await_loop_runs", "loop_run_names", "refused_loop_run"]

_NESTED_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
# A generator expression with an await in it would become an async generator.
_NO_AWAIT = (*_NESTED_SCOPES, ast.GeneratorExp)


def loop_run_names(tree: ast.Module) -> frozenset[str]:
    """The dotted names under which ``tree`` (a whole script) calls ``asyncio.run``."""
    names: set[str] = set()
    bare: set[str] = set()
    for node in _statements(tree.body):  # imports are statements: no need to see expressions
        if isinstance(node, ast.Import):
            names.update(f"{a.asname or a.name}.run" for a in node.names if a.name == "asyncio")
        elif isinstance(node, ast.ImportFrom) and node.module == "asyncio" and not node.level:
            bare.update(a.asname or a.name for a in node.names if a.name == "run")
    if not bare:
        return frozenset(names)
    rebound: set[str] = set()  # a bare name the script binds again is not asyncio.run
    for part in ast.walk(tree):
        if isinstance(part, ast.ImportFrom) and not (part.module == "asyncio" and not part.level):
            rebound.update(a.asname or a.name for a in part.names)
        elif isinstance(part, ast.Name) and isinstance(part.ctx, ast.Store | ast.Del):
            rebound.add(part.id)
        elif isinstance(part, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            rebound.add(part.name)
    return frozenset(names | (bare - rebound))


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body``, at any depth (in blocks, handlers, cases, functions)."""
    for statement in body:
        yield statement
        for value in statement.__dict__.values():
            if not isinstance(value, list) or not value:
                continue
            first = value[0]
            if isinstance(first, ast.stmt):
                yield from _statements(value)
            elif isinstance(first, ast.excepthandler | ast.match_case):
                for part in value:
                    yield from _statements(part.body)


def await_loop_runs(tree: ast.Module, names: frozenset[str]) -> ast.Module:
    """Replace each top-level-code call of one of ``names`` by an await of its argument.

    ``tree`` is changed in place and returned; the calls must have passed
    :func:`refused_loop_run` (one positional argument, ``debug`` at most).
    """
    if names:
        _replace(tree, names)
    return tree


def refused_loop_run(
    tree: ast.Module, names: frozenset[str], source: str | None = None
) -> tuple[int, str] | None:
    """The line and the reason of the first ``asyncio.run`` call that cannot become an await.

    ``source``: the text of ``tree``; an ASCII text without the word a call must spell
    (``run`` of ``asyncio.run``, a bare name) has no such call, and is not walked.
    """
    if not names:
        return None
    if source is not None and source.isascii():
        words = "|".join(re.escape(name.rpartition(".")[2]) for name in names)
        if re.search(rf"\b(?:{words})\b", source) is None:
            return None
    for call in _calls(tree, names):
        shown = ast.unparse(call.func)
        if len(call.args) != 1 or isinstance(call.args[0], ast.Starred):
            return call.lineno, f"{shown}() takes one coroutine here; pass `{shown}(main())`"
        for keyword in call.keywords:
            value = keyword.value
            harmless = isinstance(value, ast.Constant) and value.value in (None, False)
            if keyword.arg == "debug" and harmless:
                continue
            what = f"{keyword.arg}=" if keyword.arg else "**"
            fix = (
                "set PYTHONASYNCIODEBUG=1 for the run's loop instead"
                if keyword.arg == "debug"
                else "remove it"
            )
            return call.lineno, (
                f"{shown}(..., {what}...) cannot apply: resumable runs the coroutine on the "
                f"run's own loop, already running; {fix}"
            )
    return None


def _calls(node: ast.AST, names: frozenset[str]) -> Iterator[ast.Call]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _NO_AWAIT):
            continue
        yield from _calls(child, names)
        if isinstance(child, ast.Call) and _dotted(child.func) in names:
            yield child


def _replace(node: ast.AST, names: frozenset[str]) -> None:
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, ast.AST) and not isinstance(item, _NO_AWAIT):
                    value[i] = _replaced(item, names)
        elif isinstance(value, ast.AST) and not isinstance(value, _NO_AWAIT):
            setattr(node, field, _replaced(value, names))


def _replaced(node: ast.AST, names: frozenset[str]) -> ast.AST:
    _replace(node, names)
    if isinstance(node, ast.Call) and node.args and _dotted(node.func) in names:
        return ast.copy_location(ast.Await(value=node.args[0]), node)
    return node


def _dotted(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return None
