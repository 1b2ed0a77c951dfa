"""How replay leaving the recorded path stops a run: the NonDeterminismError of each case."""

from __future__ import annotations

from typing import Any

from resumable.durability.log.run_state import AwaitEntry
from resumable.errors import NonDeterminismError


class ReplayDiverged(BaseException):
    """Replay left the recorded path: carries the NonDeterminismError for the runner.

    A BaseException, so ``except Exception:`` in the program cannot swallow it and let
    the run go on along a path the log never saw.
    """

    def __init__(self, error: NonDeterminismError) -> None:
        super().__init__(error.message)
        self.error = error


def site_changed(
    frame_id: str, index: int, key: Any, site: str, entry: AwaitEntry
) -> ReplayDiverged:
    """Replay reached ``site`` at a key where the log recorded another site."""
    return ReplayDiverged(
        NonDeterminismError(
            f"replay reached await site {site} where the log recorded site "
            f"{entry.site} (key {key} of statement {index}); the program "
            "is not deterministic (does it branch on the clock or randomness?)",
            frame=frame_id,
            site=site,
            recorded_site=entry.site,
            seq=entry.seq,
        )
    )


def site_missed(frame_id: str, index: int, line: int, first: AwaitEntry) -> ReplayDiverged:
    """The statement finished on replay without reaching a site the log recorded."""
    return ReplayDiverged(
        NonDeterminismError(
            f"statement {index} (line {line}) finished without reaching await "
            f"site {first.site} that the log recorded; the program is not deterministic",
            frame=frame_id,
            site=first.site,
            seq=first.seq,
        )
    )


def never_reached(
    frame_id: str, index: int, expected: str, seq: int, waiting: list[int]
) -> ReplayDiverged:
    """Replay waits for a result the log says came next, at a site replay never reaches."""
    return ReplayDiverged(
        NonDeterminismError(
            f"replay of statement {index} never reached await site {expected} "
            f"(record {seq}) that the log says completed next, while awaits recorded at "
            f"{waiting} waited for it; the program is not deterministic",
            frame=frame_id,
            site=expected,
            seq=seq,
        )
    )
