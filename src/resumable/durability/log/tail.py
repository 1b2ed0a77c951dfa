"""The await a statement ends with: its record can become durable with the statement's own.

For ``r = await tool(x)`` and ``await tool(x)`` nothing of the program runs between the
awaited call returning and the statement ending: the result is bound to plain names and
that is all. No output is printed, no step or other await starts, no task of the
statement is left running (the journal checks that none was spawned). The await's record
and the statement's boundary record are then made durable by one append, one fsync: a
crash in between runs only that await again on resume, with the same idempotency key -
the await in flight, as the contract allows.
"""

from __future__ import annotations

import ast
import re

from resumable.durability.effects.tasks import TaskCursor
from resumable.exec.hooks import HOOK_NAME
from resumable.exec.rewrite import site_of
from resumable.exec.statement import Statement

__all__ = ["ends_statement", "tail_await_site"]

_WORDS = re.compile(r"\b(?:await|async)\b")


def tail_await_site(statement: Statement, index: int) -> str | None:
    """The hook site of the one await statement ``index`` ends with, or None for another shape.

    Read from the statement's tree: as the executor rewrote it (in place, before the
    statement starts), ``await __resumable__.await_(SITE, EXPR)``; or, where its code was
    moved from a template (:mod:`resumable.exec.compiled`) and the tree left as parsed,
    named as the rewrite names it (:func:`~resumable.exec.rewrite.site_of`). A statement
    without a parsed tree gets None: its records are written as any others.
    """
    tree, source = statement.tree, statement.source
    # Every await, async for, async with and async comprehension spells its keyword in
    # the source: one word "await" and no word "async" is one await (such a word in a
    # string or comment only makes the statement fall back to the usual records).
    if tree is None or len(tree) != 1 or _WORDS.findall(source) != ["await"]:
        return None
    node = tree[0]
    # A subscript, attribute or annotated target would run program code after the await.
    names_only = isinstance(node, ast.Assign) and all(
        isinstance(target, ast.Name) for target in node.targets
    )
    if not (names_only or isinstance(node, ast.Expr)):
        return None
    value = node.value  # type: ignore[attr-defined]
    if not isinstance(value, ast.Await) or not isinstance(value.value, ast.Call):
        return None
    hooked = value.value
    if not _is_hook_call(hooked):
        return site_of(value, index, statement.line - 1)  # the tree as parsed
    site = hooked.args[0]
    if not isinstance(site, ast.Constant) or not isinstance(site.value, str):
        return None
    return site.value


def _is_hook_call(call: ast.Call) -> bool:
    """``__resumable__.await_(SITE, EXPR)``: what the rewrite put around an await."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "await_"
        and isinstance(func.value, ast.Name)
        and func.value.id == HOOK_NAME
        and len(call.args) == 2
    )


def ends_statement(
    cursor: TaskCursor, site: str, tail_site: str | None, *, others_running: bool
) -> bool:
    """Whether the await at ``site`` may be made durable with its statement's boundary.

    Only the statement's own task (it spawned none), at the statement's tail await, and
    only while no task of an earlier statement runs: such a task could start a foreign
    await or a step between this await and the boundary.
    """
    alone = cursor.path == "" and cursor.spawns == 0 and not others_running
    return alone and tail_site is not None and site == tail_site
