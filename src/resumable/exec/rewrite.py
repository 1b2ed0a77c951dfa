"""Route every await of a statement through the hook, so the durability layer sees each one.

The transform wraps expressions in place and does nothing else (but move every line by
``line_offset``, in the same walk: a statement parsed alone takes its place in the stream)::

    await EXPR                 ->  await __resumable__.await_(SITE, EXPR)
    async for T in ITER        ->  async for T in __resumable__.aiter(SITE, ITER)
    async with A as a          ->  async with __resumable__.with_(SITE, A) as a

``async for`` in comprehensions is wrapped the same way, and each item of a multi-item
``async with`` gets its own ``with_`` and site. A tree is meant to be rewritten once.

Every function the statement defines says when it starts running (``mark_entries``), so the
journal can tell a library await that ran program code from one that did not::

    def f(...): BODY           ->  def f(...): __resumable__.entered(); BODY   (after a docstring)
    lambda ...: EXPR           ->  lambda ...: __resumable__.entered() or EXPR

and a generator says when it runs again without starting (a library may resume it): after
each statement that holds a ``yield``, and first in every handler and ``finally`` of a ``try``
that holds one (see ``_AwaitRouter._resumed``); a generator expression marks its element
and the first condition of each ``for`` (``entered() or EXPR``).

No await is added or removed and no scope, temporary name or thunk is introduced, so evaluation
order, scoping (walrus, class bodies, comprehensions) and the compiler's own errors (``'await'
outside async function``) are those of the original. Each new node takes the position the
interpreter reports for the construct it wraps, so tracebacks show the same lines and columns.

A site is ``"S:L:C"``: S the statement index given by the caller; L and C the line and column
of the ``await``, of the ``async for`` statement (of the iterable, in a comprehension) or of
each ``async with`` item's expression, as positioned in the tree passed in (moved by
``line_offset``). Positions from the
parser are unique per construct; should a tree carry duplicates (nodes built without positions),
later ones get a ``#n`` suffix in traversal order, so sites stay unique and stable.
"""

from __future__ import annotations

import ast
from typing import Any

from resumable.exec.hooks import ENTER, HOOK_NAME, NEXT

__all__ = ["rewrite_source", "rewrite_statement", "site_of"]


def rewrite_statement(
    tree: ast.Module, index: int, *, line_offset: int = 0, mark_entries: bool = True
) -> ast.Module:
    """Rewrite every await in ``tree`` (changed in place and returned) for statement ``index``.

    ``line_offset``: the statement was parsed on its own; every line of the result is moved
    by it, as ``ast.increment_lineno`` before the rewrite would (in the same walk).
    ``mark_entries``: start each function with ``__resumable__.entered()`` (the hook has it).
    """
    router = _AwaitRouter(index, line_offset, mark_entries)
    router.walk(tree)
    if router.unplaced:  # a tree built by hand: place what lacks a position, as compile needs
        ast.fix_missing_locations(tree)
    return tree


def rewrite_source(
    source: str, index: int = 0, *, filename: str = "<response>", mark_entries: bool = True
) -> ast.Module:
    """Parse ``source`` and rewrite it; a syntax error is raised as the parser raises it."""
    tree = ast.parse(source, filename, "exec")
    return rewrite_statement(tree, index, mark_entries=mark_entries)


def site_of(node: ast.AST, index: int, line_offset: int = 0) -> str:
    """The site the rewrite names the construct ``node`` of statement ``index`` by (a tree not
    rewritten yet; its lines to be moved by ``line_offset``), before any ``#n`` suffix."""
    return f"{index}:{getattr(node, 'lineno', 0) + line_offset}:{getattr(node, 'col_offset', 0)}"


class _AwaitRouter:
    """One walk over the tree: each node's own rewrite, then its lines moved (post-order).

    A construct's site and the hook call wrapping it are taken from the construct before its
    lines move (the offset added), so they name its line in the stream, and the new nodes,
    which the walk does not visit, are placed there directly.
    """

    def __init__(self, index: int, line_offset: int, mark_entries: bool = True) -> None:
        self._index = index
        self._offset = line_offset
        self._taken: set[str] = set()
        self.unplaced = False
        """Some node lacked a position (fix_missing_locations must run)."""
        self._rewrites: dict[type[ast.AST], Any] = {
            ast.Await: self._await,
            ast.AsyncFor: self._async_for,
            ast.AsyncWith: self._async_with,
            ast.ListComp: self._comprehension,
            ast.SetComp: self._comprehension,
            ast.DictComp: self._comprehension,
            ast.GeneratorExp: self._comprehension,
        }
        self._yields = 0
        """The yields walked so far: where a generator resumes (see :meth:`_resumed`)."""
        self._mark = mark_entries
        if mark_entries:
            self._rewrites[ast.FunctionDef] = self._function
            self._rewrites[ast.AsyncFunctionDef] = self._function
            self._rewrites[ast.Lambda] = self._lambda
            self._rewrites[ast.Yield] = self._yield
            self._rewrites[ast.YieldFrom] = self._yield

    def walk(self, node: ast.AST) -> None:
        rewrite = self._rewrites.get(type(node))
        if rewrite is None:
            self.children(node)
        else:
            rewrite(node)
        if "lineno" in node._attributes:
            self._place(node)

    def children(self, node: ast.AST) -> None:
        yielding: list[str] | None = None  # the fields a yield was walked in (rarely any)
        holding: list[ast.AST] | None = None  # the items of those fields that hold one
        for name in node._fields:
            value = getattr(node, name, None)
            before = self._yields
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        count = self._yields
                        self.walk(item)
                        if self._yields != count:
                            holding = [*(holding or ()), item]
            elif isinstance(value, ast.AST):
                self.walk(value)
            if self._yields != before:
                yielding = [*(yielding or ()), name]
        if yielding is not None:
            self._resumed(node, yielding, holding or [])

    def _place(self, node: ast.AST) -> None:
        """Move the node's lines by the offset, exactly as ``ast.increment_lineno`` does."""
        if not self.unplaced:
            place = node.__dict__.get  # where an AST node keeps its position
            self.unplaced = (
                place("lineno") is None
                or place("col_offset") is None
                or place("end_lineno") is None
                or place("end_col_offset") is None
            )
        offset = self._offset
        if offset:
            node.lineno = getattr(node, "lineno", 0) + offset  # type: ignore[attr-defined]
            end = getattr(node, "end_lineno", 0)
            if end is not None:
                node.end_lineno = end + offset  # type: ignore[attr-defined]

    def _await(self, node: ast.Await) -> None:
        site = self._site(node, "")
        self.children(node)
        node.value = self._hook_call("await_", site, node.value, node)

    def _async_for(self, node: ast.AsyncFor) -> None:
        site = self._site(node, f"/{NEXT}")
        self.children(node)
        node.iter = self._hook_call("aiter", site, node.iter, node)

    def _async_with(self, node: ast.AsyncWith) -> None:
        sites = [self._site(item.context_expr, f"/{ENTER}") for item in node.items]
        self.children(node)
        for item, site in zip(node.items, sites, strict=True):
            item.context_expr = self._hook_call("with_", site, item.context_expr, node)

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp
    ) -> None:
        sites = [
            self._site(generator.iter, f"/{NEXT}") if generator.is_async else ""
            for generator in node.generators
        ]
        self.children(node)
        for generator, site in zip(node.generators, sites, strict=True):
            if generator.is_async:
                iterable = _folded_literal(generator.iter)  # placed as the walked iterable
                generator.iter = self._hook_call("aiter", site, iterable, node)
        if self._mark and isinstance(node, ast.GeneratorExp):
            # Run lazily, maybe by a library inside a foreign await: each item it makes (and
            # each it tests) says so, as a function does when it starts.
            node.elt = _marked(node.elt)
            for generator in node.generators:
                if generator.ifs:
                    generator.ifs[0] = _marked(generator.ifs[0])

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.children(node)
        body = node.body
        first = body[0]
        documented = (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        )
        at = 1 if documented else 0
        place = body[at] if at < len(body) else first  # its lines moved already
        mark = ast.Expr(value=_entered_call(place))
        _at_start(mark, place)
        body.insert(at, mark)

    def _yield(self, node: ast.Yield | ast.YieldFrom) -> None:
        self._yields += 1
        self.children(node)

    def _resumed(self, node: ast.AST, yielding: list[str], holding: list[ast.AST]) -> None:
        """Mark where program code runs again after ``node``'s yields (in ``yielding``, its
        fields): a generator started before a foreign await began may be resumed by the
        library inside it (``aclosing``'s ``aclose()``, a consumer's ``__anext__``), and the
        await must then be made again on replay, not answered (its ``entered()`` at the start
        of the function ran long before). So ``entered()`` follows each statement that holds
        a yield, starts each block of a compound statement whose header holds one, and starts
        every handler and ``finally`` of a ``try`` that holds one (an exception thrown in at
        the yield, ``GeneratorExit`` from ``aclose()`` among them, runs them). ``holding``:
        the items of ``node``'s list fields that hold a yield."""
        for name in yielding:
            body = getattr(node, name)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                body[:] = _marked_after_yields(body, holding)
        if isinstance(node, ast.Try | ast.TryStar):
            for handler in node.handlers:
                _mark_start(handler.body)
            _mark_start(node.finalbody)
        elif isinstance(node, ast.stmt) and any(
            not isinstance(getattr(node, name), list) for name in yielding
        ):  # a header resumes: what it leads to runs next
            for name in ("body", "orelse"):
                _mark_start(getattr(node, name, []))
            for case in getattr(node, "cases", []):
                _mark_start(case.body)

    def _lambda(self, node: ast.Lambda) -> None:
        self.children(node)
        node.body = _marked(node.body)  # its lines moved already

    def _site(self, node: ast.AST, derived: str) -> str:
        """``S:L:C`` of ``node``, unique among the hook sites (``derived`` appended) taken so far."""
        base = site_of(node, self._index, self._offset)
        site, n = base, 1
        while site + derived in self._taken:
            n += 1
            site = f"{base}#{n}"
        self._taken.add(site + derived)
        return site

    def _hook_call(
        self, method: str, site: str, argument: ast.expr, position: ast.expr | ast.stmt
    ) -> ast.Call:
        """``__resumable__.method(site, argument)``, placed where the interpreter reports
        ``position`` (a node whose lines have not moved yet)."""
        call = _hook_call(method, site, argument, position)
        if getattr(position, "lineno", None) is None:
            self.unplaced = True
        elif self._offset:
            for part in (call, call.func, call.func.value, call.args[0]):  # type: ignore[attr-defined]
                part.lineno += self._offset
                if part.end_lineno is not None:
                    part.end_lineno += self._offset
        return call


def _entered_call(place: ast.AST, *, at_end: bool = False) -> ast.Call:
    """``__resumable__.entered()``, every part an empty span at the start of ``place`` (at
    its end: ``at_end``)."""
    hook = ast.Name(id=HOOK_NAME, ctx=ast.Load())
    func = ast.Attribute(value=hook, attr="entered", ctx=ast.Load())
    call = ast.Call(func=func, args=[], keywords=[])
    for part in (hook, func, call):
        if at_end:
            _at_end(part, place)
        else:
            _at_start(part, place)
    return call


_BLOCKS = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.Try,
    ast.TryStar,
    ast.Match,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)
"""Compound statements whose yields are marked inside them (a ``with`` is marked after too:
its manager may swallow the exception thrown in at the yield)."""


def _marked(expression: ast.expr) -> ast.expr:
    """``__resumable__.entered() or EXPRESSION``, placed where the expression starts."""
    marked = ast.BoolOp(op=ast.Or(), values=[_entered_call(expression), expression])
    _at_start(marked, expression)
    return marked


def _marked_after_yields(body: list[ast.stmt], holding: list[ast.AST]) -> list[ast.stmt]:
    """``body`` with ``entered()`` after each simple statement (or ``with``) of ``holding``,
    those that hold a yield."""
    marked: list[ast.stmt] = []
    for statement in body:
        marked.append(statement)
        if not isinstance(statement, _BLOCKS) and any(item is statement for item in holding):
            mark = ast.Expr(value=_entered_call(statement, at_end=True))
            _at_start(mark, mark.value)
            marked.append(mark)
    return marked


def _mark_start(body: list[ast.stmt]) -> None:
    """``entered()`` first in ``body`` (an empty ``orelse`` or ``finally`` stays empty)."""
    if body:
        mark = ast.Expr(value=_entered_call(body[0]))
        _at_start(mark, body[0])
        body.insert(0, mark)


def _at_start(node: ast.AST, place: ast.AST) -> None:
    """Give ``node`` an empty span where ``place`` starts (absent positions stay absent)."""
    _empty_span(node, getattr(place, "lineno", None), getattr(place, "col_offset", 0))


def _at_end(node: ast.AST, place: ast.AST) -> None:
    """Give ``node`` an empty span where ``place`` ends (absent positions stay absent)."""
    _empty_span(node, getattr(place, "end_lineno", None), getattr(place, "end_col_offset", 0))


def _empty_span(node: ast.AST, line: int | None, column: int) -> None:
    if line is not None:
        node.lineno, node.col_offset = line, column  # type: ignore[attr-defined]
        node.end_lineno, node.end_col_offset = line, column  # type: ignore[attr-defined]


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
