"""Route every await of a statement through the hook, so the durability layer sees each one.

The transform wraps expressions in place and does nothing else::

    await EXPR                 ->  await __resumable__.await_(SITE, EXPR)
    async for T in ITER        ->  async for T in __resumable__.aiter(SITE, ITER)
    async with A as a          ->  async with __resumable__.with_(SITE, A) as a

``async for`` in comprehensions is wrapped the same way, and each item of a multi-item
``async with`` gets its own ``with_`` and site. A tree is meant to be rewritten once.
No await is added or removed and no scope, temporary name or thunk is introduced, so evaluation
order, scoping (walrus, class bodies, comprehensions) and the compiler's own errors (``'await'
outside async function``) are those of the original. Each new node takes the position the
interpreter reports for the construct it wraps, so tracebacks show the same lines and columns.

A site is ``"S:L:C"``: S the statement index given by the caller; L and C the line and column
of the ``await``, of the ``async for`` statement (of the iterable, in a comprehension) or of
each ``async with`` item's expression, as positioned in the tree passed in. Positions from the
parser are unique per construct; should a tree carry duplicates (nodes built without positions),
later ones get a ``#n`` suffix in traversal order, so sites stay unique and stable.
"""

from __future__ import annotations

import ast
from typing import Any, TypeVar

from resumable.exec.hooks import ENTER, HOOK_NAME, NEXT

__all__ = ["rewrite_source", "rewrite_statement"]

_Comprehension = TypeVar(
    "_Comprehension", ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp
)


def rewrite_statement(tree: ast.Module, index: int) -> ast.Module:
    """Rewrite every await in ``tree`` (changed in place and returned) for statement ``index``."""
    _AwaitRouter(index).visit(tree)
    return ast.fix_missing_locations(tree)


def rewrite_source(source: str, index: int = 0, *, filename: str = "<response>") -> ast.Module:
    """Parse ``source`` and rewrite it; a syntax error is raised as the parser raises it."""
    return rewrite_statement(ast.parse(source, filename, "exec"), index)


class _AwaitRouter(ast.NodeTransformer):
    def __init__(self, index: int) -> None:
        self._index = index
        self._taken: set[str] = set()

    def visit_Await(self, node: ast.Await) -> ast.Await:
        site = self._site(node, "")
        self.generic_visit(node)
        node.value = _hook_call("await_", site, node.value, node)
        return node

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AsyncFor:
        site = self._site(node, f"/{NEXT}")
        self.generic_visit(node)
        node.iter = _hook_call("aiter", site, node.iter, node)
        return node

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AsyncWith:
        sites = [self._site(item.context_expr, f"/{ENTER}") for item in node.items]
        self.generic_visit(node)
        for item, site in zip(node.items, sites, strict=True):
            item.context_expr = _hook_call("with_", site, item.context_expr, node)
        return node

    def visit_ListComp(self, node: ast.ListComp) -> ast.ListComp:
        return self._comprehension(node)

    def visit_SetComp(self, node: ast.SetComp) -> ast.SetComp:
        return self._comprehension(node)

    def visit_DictComp(self, node: ast.DictComp) -> ast.DictComp:
        return self._comprehension(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.GeneratorExp:
        return self._comprehension(node)

    def _comprehension(self, node: _Comprehension) -> _Comprehension:
        sites = [
            self._site(generator.iter, f"/{NEXT}") if generator.is_async else ""
            for generator in node.generators
        ]
        self.generic_visit(node)
        for generator, site in zip(node.generators, sites, strict=True):
            if generator.is_async:
                iterable = _folded_literal(generator.iter)
                generator.iter = _hook_call("aiter", site, iterable, node)
        return node

    def _site(self, node: ast.AST, derived: str) -> str:
        """``S:L:C`` of ``node``, unique among the hook sites (``derived`` appended) taken so far."""
        base = f"{self._index}:{getattr(node, 'lineno', 0)}:{getattr(node, 'col_offset', 0)}"
        site, n = base, 1
        while site + derived in self._taken:
            n += 1
            site = f"{base}#{n}"
        self._taken.add(site + derived)
        return site


def _folded_literal(iterable: ast.expr) -> ast.expr:
    """The iterable as CPython's optimizer leaves it in a comprehension: a list display becomes
    a tuple, a set of constants a frozenset. Wrapped in a call it would not be folded, and
    ``[x async for x in [1, 2]]`` would name another type in its ``TypeError``."""
    elements = getattr(iterable, "elts", [])
    if isinstance(iterable, ast.List) and not any(isinstance(e, ast.Starred) for e in elements):
        folded: ast.expr = ast.Tuple(elts=elements, ctx=ast.Load())
    elif isinstance(iterable, ast.Set) and all(isinstance(e, ast.Constant) for e in elements):
        values: Any = frozenset(e.value for e in elements)
        folded = ast.Constant(value=values)
    else:
        return iterable
    return ast.copy_location(folded, iterable)


def _hook_call(
    method: str, site: str, argument: ast.expr, position: ast.expr | ast.stmt
) -> ast.Call:
    """``__resumable__.method(site, argument)``, placed where the interpreter reports ``position``."""
    hook = ast.Name(id=HOOK_NAME, ctx=ast.Load())
    func = ast.Attribute(value=hook, attr=method, ctx=ast.Load())
    call = ast.Call(func=func, args=[ast.Constant(value=site), argument], keywords=[])
    ast.copy_location(call, position)
    # The parts the user did not write get an empty span at the start: CPython 3.11 reports a
    # method call at the line where its attribute ends, which must stay the construct's line.
    line: int | None = getattr(position, "lineno", None)  # absent in hand-built trees
    if line is not None:
        column = position.col_offset
        for part in (hook, func, call.args[0]):
            part.lineno, part.col_offset = line, column
            part.end_lineno, part.end_col_offset = line, column
    return call
