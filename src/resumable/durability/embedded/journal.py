"""The embedding program's calls, journaled: answered from the log instead of asked again.

Calls the embedding program makes (an LLM call, the outcome of a code action, a memory step)
are ``await`` records, so recovery folds them as it folds every other: the n-th call of one
kind gets key n in a frame of its own (``host:KIND``) that no statement ever resets, so its
answers stay in the folded state for the whole run. The code the program feeds an executor
is journaled by the frame recorder every driver shares
(:class:`~resumable.durability.replay.journal.FrameRecorder`).

A recorded *site* (what was called) must match the site reached on replay; otherwise
:class:`~resumable.errors.NonDeterminismError` names both.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from resumable.durability.embedded.boundary import refuse_effects_after
from resumable.durability.embedded.handle import RunHandle
from resumable.durability.log.run_state import AwaitEntry
from resumable.durability.replay.divergence import ReplayDiverged
from resumable.durability.replay.recording import NEW_MODEL, record_value
from resumable.errors import NonDeterminismError

T = TypeVar("T")

_NOTHING = object()
_PLACE = {"t": 0, "i": 0}
"""Where a host call stands in its frame: host frames have no turns or statements."""


class HostJournal:
    """Calls of one kind made by the embedding program, keyed by their order."""

    def __init__(self, run: RunHandle, kind: str) -> None:
        self.run = run
        self.frame_id = f"host:{kind}"
        frame = run.state_frame(self.frame_id)
        self.replay: dict[Any, AwaitEntry] = {} if frame is None else dict(frame.journal)
        self.next_key = 0

    def recorded(self, key: int) -> AwaitEntry | None:
        return self.replay.get(key)

    def call(self, site: str, thunk: Callable[[], T], ns: dict[str, Any] | None = None) -> T:
        """``thunk()``'s result, journaled as the next call; answered from the log on replay."""
        key = self.next_key
        self.next_key += 1
        ns = {} if ns is None else ns
        found = self._answer(key, site, ns)
        if found is not _NOTHING:
            return found  # type: ignore[no-any-return]
        refuse_effects_after(self.run.session_or_fail().manager)  # the store failed: no call
        try:
            result = thunk()
        except Exception as exc:
            self._write(key, site, "e", exc, ns)
            raise
        self._write(key, site, "v", result, ns)
        return result

    def peek(self, site: str, ns: dict[str, Any] | None = None) -> tuple[bool, Any]:
        """(True, value) if the next call is recorded: it is consumed and answered."""
        key = self.next_key
        if key not in self.replay:
            return False, None
        self.next_key += 1
        return True, self._answer(key, site, {} if ns is None else ns)

    def partial(self, key: int, site: str) -> list[str]:
        """The chunks of call ``key`` recorded before it completed (keys ``KEY:0``, ...)."""
        chunks: list[str] = []
        while f"{key}:{len(chunks)}" in self.replay:
            chunks.append(self._answer(f"{key}:{len(chunks)}", site, {}))
        return chunks

    def write(self, key: int | str, site: str, value: Any) -> None:
        """Record ``value`` for ``key`` now, durably (a chunk, or a whole result)."""
        self._write(key, site, "v", value, {})

    def body(self, site: str, value: Any, ns: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
        """The record of ``value`` as the next call (to be written with other records)."""
        key = self.next_key
        self.next_key += 1
        return self._body(key, site, "v", value, ns)

    def _answer(self, key: Any, site: str, ns: dict[str, Any]) -> Any:
        """The recorded result for ``key``, raised if it was an exception; _NOTHING if none."""
        entry = self.replay.pop(key, None)
        if entry is None:
            return _NOTHING
        if entry.site != site:
            raise ReplayDiverged(
                NonDeterminismError(
                    f"replay of {self.frame_id} reached {site!r} as call {key} where run "
                    f"{self.run.run_id} recorded {entry.site!r}; the program or agent is not "
                    "the one that started this run, or it is not deterministic",
                    frame=self.frame_id,
                    site=site,
                    recorded_site=entry.site,
                    seq=entry.seq,
                )
            )
        if entry.outcome == "x":  # its result could not be pickled: it runs again
            return _NOTHING
        value = self.run.load_value(entry.value, ns)  # type: ignore[arg-type]
        if entry.outcome == "e":
            raise value
        return value

    def _body(
        self, key: Any, site: str, outcome: str, value: Any, ns: Mapping[str, Any]
    ) -> tuple[dict[str, Any], Any]:
        body: dict[str, Any] = {**_PLACE, "k": key, "s": site, "n": NEW_MODEL, "o": outcome}
        snapshotter = self.run.session_or_fail().snapshotter
        blobs, exc = record_value(body, snapshotter, value, ns)
        if exc is not None:
            warnings.warn(
                f"the result of {site} cannot be checkpointed and it will run again on resume: {exc}",
                RuntimeWarning,
                stacklevel=4,
            )
        return body, blobs

    def _write(self, key: Any, site: str, outcome: str, value: Any, ns: Mapping[str, Any]) -> None:
        body, blobs = self._body(key, site, outcome, value, ns)
        self.run.write([("await", self.frame_id, body)], blobs)


class JournaledRun(RunHandle, Protocol):
    """A run handle that also gives out its journals, one per kind of call."""

    def journal(self, kind: str) -> HostJournal: ...
