"""The placeholder a variable becomes when it could not be checkpointed, and the warning.

A resumed program that uses such a variable gets a :class:`LostVariableError` naming it
and the reason, at the first use, instead of a wrong value. Older checkpoints name
``LostVariable`` in the snapshot module, which re-exports it.
"""

from __future__ import annotations

from typing import Any, Final

from resumable.errors import LostVariableError


class CheckpointWarning(UserWarning):
    """A variable could not be checkpointed and will be a placeholder after a resume."""


class LostVariable:
    """Bound, after a resume, where a variable could not be checkpointed; any use raises."""

    __slots__ = ("_lost_name", "_lost_reason")

    def __init__(self, name: str, reason: str) -> None:
        object.__setattr__(self, "_lost_name", name)
        object.__setattr__(self, "_lost_reason", reason)

    def __reduce__(self) -> tuple[Any, ...]:
        return (LostVariable, (self._lost_name, self._lost_reason))

    def __repr__(self) -> str:
        return f"<lost variable {self._lost_name!r}: {self._lost_reason}>"

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # protocol probes (copy, pickle, numpy) expect this
        _refuse(self)


def _refuse(self: LostVariable, *args: Any, **kwargs: Any) -> Any:
    name, reason = self._lost_name, self._lost_reason
    raise LostVariableError(
        f"variable {name!r} could not be checkpointed ({reason}), so it does not exist after "
        "the resume; create it again",
        name=name,
        reason=reason,
    )


_BINARY_OPS: Final = (
    *("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow"),
    *("lshift", "rshift", "and", "xor", "or"),
)
_OTHER_OPS: Final = (
    *("abs", "neg", "pos", "invert", "bool", "int", "float", "complex", "index", "round"),
    *("bytes", "str", "format", "fspath", "call", "dir", "hash", "eq", "ne", "lt", "le"),
    *("gt", "ge", "len", "iter", "next", "reversed", "contains", "getitem", "setitem"),
    *("delitem", "setattr", "delattr", "enter", "exit", "aenter", "aexit", "aiter", "anext"),
    *("await", "divmod", "rdivmod"),
)
for _op in (*_OTHER_OPS, *(p + op for op in _BINARY_OPS for p in ("", "r", "i"))):
    setattr(LostVariable, f"__{_op}__", _refuse)
del _op
