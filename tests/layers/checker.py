"""The layer rule of the package, checked on source text: imports point down, never up.

Every ``resumable`` module belongs to a layer (its first package below ``resumable``). A module
may import its own layer and the layers ranked below it; layers of the same rank (the storage,
LLM and streaming cores; the drivers) are peers that never import each other. Imports inside
functions and under ``TYPE_CHECKING`` count: a lazy import is still a dependency.

Inside a layer listed in ``SUBPACKAGE_RANKS`` its modules and subpackages keep an order of
their own (the store's backends above the protocol and what they share, never importing each
other); and the import graph, of the package and of scripts/, has no circle.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

RANKS: dict[str, int] = {
    "errors": 0,
    "extras": 1,
    "config": 1,
    "exec": 2,
    "store": 2,
    "llm": 2,
    "durability": 3,
    "script": 4,
    "playbooks": 4,
    "integrations": 4,
    "drivers": 5,
    "fleet": 6,
    "ui": 6,
    "cli": 7,
    "__init__": 8,
    "__main__": 9,
    "launcher": 8,
}


DURABILITY_RANKS: dict[str, int] = {
    "effects": 0,
    "log": 1,
    "capture": 1,
    "replay": 2,
    "runs": 3,
    "embedded": 4,
}
"""The subpackages of ``durability``, by the same rule: down only, peers never each other."""


@dataclass(frozen=True)
class Violation:
    module: str
    line: int
    imported: str
    note: str = ""
    """Said instead of the import when the module itself is at fault."""

    def __str__(self) -> str:
        return (
            f"{self.module}: {self.note}"
            if self.note
            else f"{self.module}:{self.line} imports {self.imported}"
        )


def layer_of(module: str, package: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _from_name(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name ``from ... import`` takes its names from, in ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, node.module] if node.module else base)


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            name = _from_name(node, module, is_package)
            if name.count(".") == 0 and node.module is not None:
                # `from resumable import drivers`: the names may be modules
                found.extend((node.lineno, f"{name}.{alias.name}") for alias in node.names)
            else:
                found.append((node.lineno, name))
    return found


def violations(root: Path, package: str = "resumable") -> list[Violation]:
    """Every import in the package under ``root`` that points to a higher or peer layer."""
    out: list[Violation] = []
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        is_package = rel.name == "__init__"
        parts = rel.parts[:-1] if is_package else rel.parts
        module = ".".join(parts) if parts != (package,) else package
        if module == package and not is_package:
            continue
        own = layer_of(module, package) if module != package else "__init__"
        if rel.parts == (package, "__main__"):
            own = "__main__"
        for line, name in _imports(ast.parse(path.read_text(encoding="utf-8")), module, is_package):
            if name != package and not name.startswith(package + "."):
                continue
            target = layer_of(name, package)
            if target not in RANKS:
                target = "__init__"  # a name from the package root, e.g. `from resumable import x`
            if target == own:
                continue
            if own not in RANKS:
                out.append(Violation(module, line, f"{name} (layer {own!r} has no rank)"))
            elif RANKS[target] >= RANKS[own]:
                out.append(Violation(module, line, name))
    return out


# -- import circles ---------------------------------------------------------------------------


def modules_of(root: Path, package: str = "") -> dict[str, Path]:
    """Every module under ``root`` (only ``package`` if named) by dotted name relative to
    ``root``; a package is its ``__init__``."""
    found: dict[str, Path] = {}
    for path in sorted((root / package if package else root).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def resolved_imports(path: Path, module: str, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """Each import of the module at ``path`` as ``(line, one of modules)``, every import
    counted (lazy and TYPE_CHECKING too); imports of anything else are left out.

    ``from a.b import c`` names the module ``a.b.c`` when there is one, else ``a.b``; an
    import of a module does not count as an import of its package's ``__init__``.
    """
    is_package = path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            name = _from_name(node, module, is_package)
            names = [
                f"{name}.{alias.name}" if f"{name}.{alias.name}" in modules else name
                for alias in node.names
            ]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]  # `import a.b.c` where c is not a module
            if name and name != module:
                found.append((node.lineno, name))
    return sorted(set(found))


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Which of ``modules`` each one imports (see :func:`resolved_imports`)."""
    return {
        module: {name for _, name in resolved_imports(path, module, modules)}
        for module, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each strongly connected set of two or more modules,
    sorted (Tarjan's algorithm, iterative so a deep graph does not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(sorted(members))
    return sorted(found)


def package_cycles(root: Path, package: str = "") -> list[list[str]]:
    """The import circles among the modules under ``root`` (of ``package`` if named)."""
    return cycles(import_graph(modules_of(root, package)))


# -- order inside a layer -----------------------------------------------------------------------

SUBPACKAGE_RANKS: dict[str, dict[str, int]] = {
    "store": {
        "base": 0,
        "heads": 0,
        "urls": 0,
        "common": 1,
        "aside": 1,
        "group_commit": 1,
        "holes": 1,
        "meta_check": 2,
        "filesystem": 3,
        "sqlite": 3,
        "postgres": 3,
        "redis": 3,
        "__init__": 4,
    },
    "fleet": {
        "queue": 0,
        "migrate": 0,
        "handoff": 1,
        "worker": 2,
        "handoff_child": 3,
        "__init__": 4,
    },
    "playbooks": {
        "program": 0,
        "primitives": 0,
        "signatures": 1,
        "prompt": 1,
        "human": 1,
        "markdown": 2,
        "turns": 2,
        "loading": 3,
        "runtime": 3,
        "runner": 4,
        "__init__": 5,
    },
}
"""The order inside a layer: each entry a module or subpackage of the layer (its first name
below the layer; the layer's own ``__init__`` is ``__init__``). A unit imports itself and
units ranked below it; units of one rank (the store's backends) are peers that never import
each other. Every unit of a ranked layer needs a rank, so a new module is placed on purpose."""


def unit_of(module: str) -> tuple[str, str] | None:
    """``(layer, unit)`` of a ``resumable`` module when its layer is ranked inside."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in SUBPACKAGE_RANKS:
        return None
    return parts[1], parts[2] if len(parts) > 2 else "__init__"


def order_violations(root: Path, package: str = "resumable") -> list[Violation]:
    """Every import inside a ranked layer that points to a unit ranked at or above its own."""
    out: list[Violation] = []
    modules = modules_of(root, package)
    for module, path in sorted(modules.items()):
        own = unit_of(module)
        if own is None:
            continue
        layer, unit = own
        ranks = SUBPACKAGE_RANKS[layer]
        if unit not in ranks:
            out.append(Violation(module, 0, "", f"{layer}.{unit} has no rank in SUBPACKAGE_RANKS"))
            continue
        for line, name in resolved_imports(path, module, modules):
            target = unit_of(name)
            if target is None or target[0] != layer or target[1] == unit:
                continue
            if target[1] not in ranks:
                continue  # reported at the unranked module itself
            if ranks[target[1]] >= ranks[unit]:
                out.append(Violation(module, line, name))
    return out


def sublayer_violations(
    root: Path,
    layer: str = "durability",
    ranks: dict[str, int] = DURABILITY_RANKS,
    package: str = "resumable",
) -> list[Violation]:
    """Every import between the subpackages of ``layer`` that points up or to a peer."""
    out: list[Violation] = []
    prefix = f"{package}.{layer}."
    for path in sorted((root / package / layer).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        is_package = rel.name == "__init__"
        parts = rel.parts[:-1] if is_package else rel.parts
        if len(parts) < 3:
            continue  # the layer's own __init__
        module, own = ".".join(parts), parts[2]
        for line, name in _imports(ast.parse(path.read_text(encoding="utf-8")), module, is_package):
            if not name.startswith(prefix):
                continue
            target = name[len(prefix) :].split(".")[0]
            if target == own:
                continue
            if own not in ranks or target not in ranks:
                out.append(Violation(module, line, f"{name} (a subpackage without a rank)"))
            elif ranks[target] >= ranks[own]:
                out.append(Violation(module, line, name))
    return out
