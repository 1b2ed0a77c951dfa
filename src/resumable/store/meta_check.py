"""A run's stored metadata is checked field by field before it is used.

``meta.json`` (and the same document in other stores) is not authenticated: a field of
the wrong type or an impossible value (an epoch below 0, a status no version writes, a
parent that is not a run id) is refused here with a ``ValueError`` naming the field, which
the store reports as damaged metadata that ``resumable repair`` rebuilds from the log.
"""

from __future__ import annotations

import math
from typing import Any

from resumable.store.base import STATUSES
from resumable.store.common import RUN_ID

_COUNTS = ("attempts", "crashed_attempts", "attempt_from", "last_error_attempt")
_FLAGS = ("attempt_open",)
_TEXTS = ("last_error", "gave_up", "migrating_from", "interrupted")
_TABLES = ("cancel", "fork_edits")
_MAX_INT = 2**63 - 1


def check_meta_json(data: Any) -> None:
    """Refuse stored metadata that a run could not have written (see the module doc)."""
    if not isinstance(data, dict):
        raise ValueError(f"it holds {type(data).__name__}, not an object")
    for name in ("run_id", "program"):
        _need(isinstance(data.get(name), str), name, data.get(name), "a string")
    _need(isinstance(data.get("kind", ""), str), "kind", data.get("kind"), "a string")
    status = data.get("status", "pending")
    _need(status in STATUSES, "status", status, "one of " + ", ".join(STATUSES))
    for name in ("created_at", "updated_at"):
        value = data.get(name, 0.0)
        _need(_number(value) and math.isfinite(value) and value >= 0, name, value, "a time")
    epoch = data.get("epoch", 0)
    _need(_count(epoch), "epoch", epoch, "a whole number from 0")
    owner = data.get("owner")
    _need(owner is None or isinstance(owner, str), "owner", owner, "a string or null")
    parent = data.get("parent")
    fits = parent is None or (isinstance(parent, str) and RUN_ID.fullmatch(parent) is not None)
    _need(fits, "parent", parent, "a run id or null")
    extra = {} if data.get("extra") is None else data["extra"]
    _need(isinstance(extra, dict), "extra", extra, "an object")
    _check_extra(extra)


def _check_extra(extra: dict[str, Any]) -> None:
    for name in _COUNTS:
        if name in extra:
            _need(_count(extra[name]), f"extra.{name}", extra[name], "a whole number from 0")
    for name in _FLAGS:
        if name in extra:
            _need(isinstance(extra[name], bool), f"extra.{name}", extra[name], "true or false")
    for name in _TEXTS:
        if extra.get(name) is not None:
            _need(isinstance(extra[name], str), f"extra.{name}", extra[name], "a string")
    for name in _TABLES:
        if extra.get(name) is not None:
            _need(isinstance(extra[name], dict), f"extra.{name}", extra[name], "an object")
    probe = extra.get("hash_probe")
    _need(probe is None or _int(probe), "extra.hash_probe", probe, "a whole number")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: Any) -> bool:
    return _int(value) and 0 <= value <= _MAX_INT


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _need(ok: bool, name: str, value: Any, expected: str) -> None:
    if not ok:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise ValueError(f"{name} is {shown}, expected {expected}")
