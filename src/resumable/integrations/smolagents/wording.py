"""CPython's words for a few errors, as smolagents' interpreter says them to the model.

The model was prompted for smolagents' executor; where its interpreter raises an error of
its own for what CPython reports in other words, the model is shown smolagents' words
(the type becomes ``InterpreterError``, as there). Other errors keep CPython's wording.
"""

from __future__ import annotations

import re

_STAR_STAR = re.compile(r"argument after \*\* must be a mapping, not (\w+)$")
_UNPACK = re.compile(r"^(too many|not enough) values to unpack")
_NAME = re.compile(r"^name '(\w+)' is not defined")


def smolagents_wording(kind: str, message: str, statement: str) -> tuple[str, str]:
    """``(type name, message)`` of an error as smolagents words it."""
    if kind == "TypeError" and (found := _STAR_STAR.search(message)):
        return "InterpreterError", f"Cannot unpack non-dict value in **kwargs: {found[1]}"
    if kind == "ValueError" and _UNPACK.match(message):
        return "InterpreterError", "Cannot unpack tuple of wrong size"
    if kind == "NameError" and (found := _NAME.match(message)):
        name = found[1]
        if re.match(rf"del\s+(.*,\s*)?{name}\b", statement.strip()):
            return "InterpreterError", f"Cannot delete name '{name}': name is not defined"
        return "InterpreterError", f"The variable `{name}` is not defined."
    return kind, message
