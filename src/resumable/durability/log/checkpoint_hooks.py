"""``before_checkpoint`` / ``after_checkpoint``: the user's functions called around each append.

``before`` runs right before a batch of records is written, ``after`` once it is durable.
A hook that raises never fails the checkpoint: it is ignored, with one warning per hook.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from resumable.durability.log.records import Record
from resumable.errors import ConfigError

__all__ = ["CheckpointHooks", "CheckpointInfo", "load_hook"]


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """What a ``before_checkpoint``/``after_checkpoint`` hook is told."""

    run_id: str
    seq: int
    kind: str
    frame: str
    records: int


def load_hook(spec: str, key: str) -> Callable[[CheckpointInfo], Any] | None:
    """Resolve ``package.module:function``; a bad spec is a ConfigError naming the key."""
    if not spec:
        return None
    module_name, _, attr = spec.partition(":")
    try:
        hook = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(
            f'[durability] {key} = "{spec}" cannot be loaded ({exc}); '
            'use "package.module:function"',
            key=f"durability.{key}",
        ) from exc
    if not callable(hook):
        raise ConfigError(f'[durability] {key} = "{spec}" is not callable', key=f"durability.{key}")
    return hook  # type: ignore[no-any-return]


class CheckpointHooks:
    """The two hooks of a run's settings (either may be absent)."""

    def __init__(self, before: str, after: str) -> None:
        self._before = load_hook(before, "before_checkpoint")
        self._after = load_hook(after, "after_checkpoint")
        self._warned: set[str] = set()

    def before(self, run_id: str, records: Sequence[Record]) -> CheckpointInfo | None:
        """Call ``before_checkpoint`` for a batch; what ``after`` needs (None: no hooks)."""
        if self._before is None and self._after is None:
            return None
        last = records[-1]
        info = CheckpointInfo(run_id, last.seq, last.kind, last.frame, len(records))
        self._call("before_checkpoint", self._before, info)
        return info

    def after(self, info: CheckpointInfo | None) -> None:
        """Call ``after_checkpoint``: the batch ``before`` was told of is durable."""
        if info is not None:
            self._call("after_checkpoint", self._after, info)

    def _call(
        self, name: str, hook: Callable[[CheckpointInfo], Any] | None, info: CheckpointInfo
    ) -> None:
        if hook is None:
            return
        try:
            hook(info)
        except Exception as exc:  # a failing hook never fails the checkpoint
            if name in self._warned:
                return
            self._warned.add(name)
            failure = f"{name} hook failed and was ignored: {type(exc).__name__}: {exc}"
            warnings.warn(failure, RuntimeWarning, stacklevel=3)
