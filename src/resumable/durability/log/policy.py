"""The ``[durability]`` settings that shape how a run's records are written."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CheckpointPolicy"]


@dataclass(frozen=True, slots=True)
class CheckpointPolicy:
    """How records are written: ``every`` awaits a batch (or ``interval_seconds``), a
    snapshot every ``snapshot_every`` records with the ``keep`` newest kept, and the
    checkpoint hooks (``module:function``) called around each batch."""

    every: int = 1
    interval_seconds: float = 0.0
    snapshot_every: int = 500
    keep: int = 3
    before_checkpoint: str = ""
    after_checkpoint: str = ""
