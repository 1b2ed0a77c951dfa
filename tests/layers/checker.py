"""The layer rule of the package, checked on source text: imports point down, never up.

Every ``resumable`` module belongs to a layer (its first package below ``resumable``). A module
may import its own layer and the layers ranked below it; layers of the same rank (the storage,
LLM and streaming cores; the drivers) are peers that never import each other. Imports inside
functions and under ``TYPE_CHECKING`` count: a lazy import is still a dependency.
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

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.imported}"


def layer_of(module: str, package: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
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
