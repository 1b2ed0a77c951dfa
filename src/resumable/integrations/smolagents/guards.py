"""smolagents' guard rails for code that runs in real CPython.

``LocalPythonExecutor`` interprets the model's code and checks each value it computes.
``DurablePythonExecutor`` runs the code in CPython, so the same rules are enforced in two
places: a check of each statement's tree before it runs (dunder attributes and names, the
dangerous builtins, names of tools assigned to), and a runtime guard the same pass wraps
around what a static check cannot decide: the value of each attribute, subscript and call
is checked as smolagents checks it (a module outside the authorised imports, a module's
namespace dict, or one of smolagents' dangerous functions is refused). Errors are
``InterpreterError`` with smolagents' wording. This is not a sandbox: it refuses what
smolagents refuses, no more.
"""

from __future__ import annotations

import ast
import builtins
import difflib
from collections.abc import Callable, Collection, Mapping
from types import BuiltinFunctionType, FunctionType, ModuleType
from typing import Any, TypeVar

from smolagents import local_python_executor
from smolagents.local_python_executor import (
    DANGEROUS_FUNCTIONS,
    InterpreterError,
    check_import_authorized,
)

_Node = TypeVar("_Node", bound=ast.AST)

GUARD = "__resumable_guard__"
"""The namespace name of the runtime guard (never checkpointed)."""

ALLOWED_DUNDER_NAMES = frozenset({"__name__"})
DANGEROUS_BUILTINS = frozenset(
    {"eval", "exec", "compile", "globals", "locals", "vars", "__import__", "breakpoint"}
)
"""Builtins the code cannot name (smolagents offers none of them to the model's code)."""

_DANGEROUS = frozenset(tuple(name.rsplit(".", 1)) for name in DANGEROUS_FUNCTIONS)


class RuntimeGuard:
    """Checks a value the code reached, as smolagents' ``check_safer_result`` does."""

    def __init__(self, authorized: Callable[[], list[str]], tools: Callable[[], Collection[str]]):
        self._authorized = authorized
        self._tools = tools
        self._loops: dict[str, int] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, ModuleType):
            if not check_import_authorized(value.__name__, self._authorized()):
                raise InterpreterError(f"Forbidden access to module: {value.__name__}")
        elif isinstance(value, dict) and value.get("__spec__"):
            name = value.get("__name__", "")
            if not check_import_authorized(str(name), self._authorized()):
                raise InterpreterError(f"Forbidden access to module: {name}")
        elif isinstance(value, FunctionType | BuiltinFunctionType):
            name = getattr(value, "__name__", None)
            if (getattr(value, "__module__", None), name) in _DANGEROUS and (
                name not in self._tools()
            ):
                raise InterpreterError(f"Forbidden access to function: {name}")
        return value

    def attribute(self, value: Any, name: str) -> Any:
        return self(getattr(value, name))

    def item(self, value: Any, index: Any) -> Any:
        """``value[index]``, checked, its error worded as smolagents words it."""
        try:
            return self(value[index])
        except (KeyError, IndexError, TypeError) as error:
            message = f"Could not index {value} with '{index}': {type(error).__name__}: {error}"
            if isinstance(index, str) and isinstance(value, Mapping):
                close = difflib.get_close_matches(index, list(value.keys()))
                if close:
                    message += f". Maybe you meant one of these indexes instead: {close!s}"
            raise InterpreterError(message) from error

    slice = slice

    def getattr(self, obj: Any, name: str, *default: Any) -> Any:
        """The code's ``getattr``: no dunder names, and what it returns is checked."""
        return self(nodunder_getattr(obj, name, *default))

    def enter_loop(self, key: str) -> None:
        self._loops[key] = 0

    def more(self, key: str, condition: Any) -> Any:
        """A ``while`` loop's condition, counted: smolagents' cap on its iterations."""
        if condition:
            self._loops[key] = count = self._loops.get(key, 0) + 1
            limit = local_python_executor.MAX_WHILE_ITERATIONS
            if count > limit:
                raise InterpreterError(
                    f"Maximum number of {limit} iterations in While loop exceeded"
                )
        return condition

    def importer(self, real: Callable[..., Any]) -> Callable[..., Any]:
        """The builtins' ``__import__``: a call from the code (not an import statement,
        which passes its globals) is worded as smolagents words a module it refuses."""

        def __import__(name: str, globals: Any = None, *args: Any, **kwargs: Any) -> Any:
            if globals is None and not check_import_authorized(name, self._authorized()):
                raise InterpreterError(f"Forbidden access to module: {name}")
            return real(name, globals, *args, **kwargs)

        __import__.__module__ = "builtins"
        return __import__


def nodunder_getattr(obj: Any, name: str, *default: Any) -> Any:
    """``getattr`` that refuses dunder attributes, as smolagents' ``getattr`` does."""
    if name.startswith("__") and name.endswith("__"):
        raise InterpreterError(f"Forbidden access to dunder attribute: {name}")
    return getattr(obj, name, *default)


def _exception(name: str) -> bool:
    """A builtin exception class (smolagents offers those without tools)."""
    found = getattr(builtins, name, None)
    return isinstance(found, type) and issubclass(found, BaseException)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


class StatementCheck(ast.NodeTransformer):
    """Refuses what smolagents refuses statically; wraps values in the runtime guard."""

    def __init__(
        self, namespace: dict[str, Any], tools: Collection[str], *, builtins_offered: bool = True
    ) -> None:
        self.namespace = namespace
        self.tools = tools
        self.builtins_offered = builtins_offered
        self.defined: set[str] = set()

    def check(self, tree: ast.Module) -> None:
        """Check ``tree`` (one statement, changed in place), or raise InterpreterError."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                self.defined.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.defined.add(node.name)
            elif isinstance(node, ast.alias):
                self.defined.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.arg):
                self.defined.add(node.arg)
        self.visit(tree)

    # -- static refusals ---------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> ast.AST:
        name = node.id
        if not isinstance(node.ctx, ast.Load):
            if name in self.tools:
                raise InterpreterError(
                    f"Cannot assign to name '{name}': doing this would erase the existing tool!"
                )
            return node
        if name in self.namespace or name in self.defined or name in self.tools:
            if _dunder(name) and name not in ALLOWED_DUNDER_NAMES and name not in self.tools:
                raise InterpreterError(f"The variable `{name}` is not defined.")
            return node
        if name in DANGEROUS_BUILTINS or not (self.builtins_offered or _exception(name)):
            raise InterpreterError(
                f"Forbidden function evaluation: '{name}' is not among the explicitly "
                "allowed tools or defined/imported in the preceding code"
            )
        if _dunder(name) and name not in ALLOWED_DUNDER_NAMES:
            raise InterpreterError(f"The variable `{name}` is not defined.")
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute):
            # A method called at once is not checked itself (smolagents checks what it
            # returns), but a dunder method is refused unless smolagents allows it.
            func.value = self.visit(func.value)
            if _dunder(func.attr) and func.attr not in local_python_executor.ALLOWED_DUNDER_METHODS:
                raise InterpreterError(f"Forbidden call to dunder function: {func.attr}")
        else:
            node.func = self.visit(func)
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        return self._guarded(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and _dunder(node.attr):
            raise InterpreterError(f"Forbidden access to dunder attribute: {node.attr}")
        node.value = self.visit(node.value)
        if not isinstance(node.ctx, ast.Load):
            return node
        call = ast.Call(
            ast.Attribute(ast.Name(GUARD, ast.Load()), "attribute", ast.Load()),
            [node.value, ast.Constant(node.attr)],
            [],
        )
        return _placed(call, node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            return node
        item = ast.Attribute(ast.Name(GUARD, ast.Load()), "item", ast.Load())
        return _placed(ast.Call(item, [node.value, _as_value(node.slice)], []), node)

    def visit_While(self, node: ast.While) -> Any:
        self.generic_visit(node)
        key = f"{node.lineno}:{node.col_offset}"
        more = ast.Attribute(ast.Name(GUARD, ast.Load()), "more", ast.Load())
        node.test = _placed(ast.Call(more, [ast.Constant(key), node.test], []), node.test)
        enter = ast.Attribute(ast.Name(GUARD, ast.Load()), "enter_loop", ast.Load())
        start = _placed(ast.Expr(ast.Call(enter, [ast.Constant(key)], [])), node)
        return [start, node]

    def visit_Await(self, node: ast.Await) -> ast.AST:
        # The awaited call stays as written (the checkpoint rewrite recognises it); what
        # it is called with, and on, is checked.
        inner = node.value
        if isinstance(inner, ast.Call):
            self.visit_Call(inner)
        else:
            node.value = self.visit(inner)
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        if node.level or any(a.name == "*" for a in node.names):
            return node
        checks = [
            _placed(ast.Expr(self._guarded(ast.Name(a.asname or a.name, ast.Load()))), node)
            for a in node.names
        ]
        return [node, *checks]

    def _guarded(self, node: ast.expr) -> ast.expr:
        return _placed(ast.Call(ast.Name(GUARD, ast.Load()), [node], []), node)


def _as_value(index: ast.expr) -> ast.expr:
    """A subscript's index as an expression (``a:b`` becomes ``slice(a, b, None)``)."""
    if isinstance(index, ast.Slice):
        make = ast.Attribute(ast.Name(GUARD, ast.Load()), "slice", ast.Load())
        parts = [
            p if p is not None else ast.Constant(None)
            for p in (index.lower, index.upper, index.step)
        ]
        return _placed(ast.Call(make, parts, []), index)
    if isinstance(index, ast.Tuple) and any(isinstance(e, ast.Slice) for e in index.elts):
        index.elts = [_as_value(e) for e in index.elts]
    return index


def _placed(node: _Node, at: ast.AST) -> _Node:
    for new in ast.walk(node):
        if "lineno" in new._attributes and not hasattr(new, "lineno"):
            ast.copy_location(new, at)
    return node
