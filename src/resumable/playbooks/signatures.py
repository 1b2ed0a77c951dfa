"""Signatures of playbooks: names and parameters read with ``ast``, never run."""

from __future__ import annotations

import ast
import keyword

from resumable.playbooks.program import ParamSpec

PLAYBOOK_DECORATOR = "playbook"


def is_name(text: str) -> bool:
    return text.isidentifier() and not keyword.iskeyword(text)


def is_playbook_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Name):
        return target.id == PLAYBOOK_DECORATOR
    return isinstance(target, ast.Attribute) and target.attr == PLAYBOOK_DECORATOR


def python_params(args: ast.arguments, source: str) -> tuple[ParamSpec, ...]:
    def default_text(node: ast.expr | None) -> str | None:
        if node is None:
            return None
        return ast.get_source_segment(source, node) or ast.unparse(node)

    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    params = [
        ParamSpec(a.arg, default_text(d))
        for a, d in zip(positional, [*defaults, *args.defaults], strict=True)
    ]
    if args.vararg:
        params.append(ParamSpec(args.vararg.arg, None, "var_positional"))
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append(ParamSpec(arg.arg, default_text(kw_default), "keyword_only"))
    if args.kwarg:
        params.append(ParamSpec(args.kwarg.arg, None, "var_keyword"))
    return tuple(params)
