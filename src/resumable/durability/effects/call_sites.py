"""What a journaled call was, in a person's words: an await, a step, or a clock/random call.

The journal keys every answered call by its site: ``S:L:C[/...]`` for an ``await`` of the
code (statement, line, column), ``step:NAME`` for a ``@resumable.step``, ``tool:NAME`` for an
embedded run's tool, and ``MODULE.FUNCTION`` for the clock, random, uuid, urandom and secrets
calls :mod:`resumable.durability.effects.nondeterminism` journals.
"""

from __future__ import annotations

from typing import Final

CLOCK_RANDOM_MODULES: Final = ("time", "random", "uuid", "os", "secrets", "datetime")
"""The modules whose functions the nondeterminism wrappers journal as ``MODULE.FUNCTION``."""


def call_kind(site: str) -> str:
    """``await``, ``step`` or ``clock/random``."""
    if site.startswith(("step:", "tool:")):
        return "step"
    if site.split(".", 1)[0] in CLOCK_RANDOM_MODULES and "." in site:
        return "clock/random"
    return "await"


def describe_call(site: str) -> str:
    """``await at line L``, ``step NAME`` or ``clock/random random.randint``."""
    kind = call_kind(site)
    if kind == "step":
        return f"step {site.split(':', 1)[1]}"
    if kind == "clock/random":
        return f"clock/random {site}"
    parts = site.split("/", 1)[0].split(":")
    if len(parts) == 3 and all(p.isdigit() for p in parts):
        return f"await at line {parts[1]}"
    return f"await at {site}"
