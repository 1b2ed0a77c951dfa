"""Values crossing between the agent's tools, the snippet and the model, as code mode has them.

Into the snippet, a tool's result keeps what Python holds as itself (strings, ``bytes`` of
any encoding, numbers, ``None``) and multimodal content (``BinaryContent``, file URLs); the
other leaves become their JSON form, mappings get JSON keys. Back to the model, the
snippet's value is converted leaf by leaf: a leaf with no JSON form becomes its repr, the
rest of the value keeps its shape. Two keys of one mapping that render as the same JSON key
(``{1: "a", "1": "b"}``) are refused, naming both: one of the values would be lost.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from pydantic_ai.messages import BinaryContent, FileUrl
from pydantic_core import PydanticSerializationError, to_jsonable_python

_NATIVE = (str, bytes, bytearray, bool, int, float, type(None), type(Ellipsis))
MULTIMODAL = (BinaryContent, FileUrl)


class KeyCollision(ValueError):
    """Two keys of a mapping render as the same JSON key."""


def _key(key: Any, taken: dict[Any, Any]) -> Any:
    """``key`` as a JSON key; ``taken`` maps the JSON keys so far to the keys they came from."""
    (rendered,) = to_jsonable_python({key: None})
    if rendered in taken:
        raise KeyCollision(
            f"a mapping has keys {taken[rendered]!r} and {key!r}, which both render as the JSON "
            f"key {rendered!r}; one of the two values would be lost: use distinct string keys"
        )
    taken[rendered] = key
    return rendered


def for_snippet(value: Any) -> Any:
    """A tool's result as the snippet gets it."""
    if isinstance(value, (*_NATIVE, *MULTIMODAL)):
        return value
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        keys: dict[Any, Any] = {}
        for key, item in value.items():
            out[_key(key, keys)] = for_snippet(item)
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [for_snippet(item) for item in value]
    return to_jsonable_python(value, fallback=repr)


def contains_multimodal(value: Any) -> bool:
    if isinstance(value, MULTIMODAL):
        return True
    return isinstance(value, list | tuple) and any(isinstance(v, MULTIMODAL) for v in value)


def for_model(value: Any) -> Any:
    """The snippet's value as the model is sent it (a copy: later snippets may change it)."""
    if isinstance(value, MULTIMODAL):
        return copy.deepcopy(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str | bool | int | type(None)):
        return value
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        keys: dict[Any, Any] = {}
        for key, item in value.items():
            out[_key(key, keys)] = for_model(item)
        return out
    if isinstance(value, tuple):
        return tuple(for_model(item) for item in value)
    if isinstance(value, list | set | frozenset):
        return [for_model(item) for item in value]
    try:
        return to_jsonable_python(value)
    except (PydanticSerializationError, TypeError, ValueError):
        return repr(value)
