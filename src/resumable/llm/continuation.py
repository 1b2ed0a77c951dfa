"""Continuations that start by repeating what they were asked to continue.

Asked to go on from a cut-off reply, chat models often start again from the
beginning of the line they were cut in, a few lines back, or from the very start.
:class:`RepeatFilter` drops that repeat from the continuation, streamed: it holds
back the continuation's first characters only while they could still be a repeat.

What counts as a repeat (the longest one wins):
- the whole prefix, when it is at least :data:`WHOLE_REPEAT_MIN` characters;
- when the prefix was cut mid-line, any tail of it that starts at a line start and
  holds at least :data:`LINE_REPEAT_MIN` non-blank characters of the cut line:
  valid code never follows a partial line with that same partial line again.
A prefix cut at a line end is continued as sent otherwise: the next line may
legitimately equal the last one (a loop of identical calls).
"""

from __future__ import annotations

WHOLE_REPEAT_MIN = 32
LINE_REPEAT_MIN = 4
_MAX_LINES_BACK = 50


class RepeatFilter:
    """``feed`` the continuation's pieces, get what is new; ``flush`` at its end."""

    def __init__(self, prefix: str) -> None:
        self.repeats = sorted(repeat_candidates(prefix), key=len)
        self.deciding = bool(self.repeats)
        self.pending = ""

    def feed(self, piece: str) -> str:
        if not self.deciding:
            return piece
        self.pending += piece
        if any(len(r) > len(self.pending) and r.startswith(self.pending) for r in self.repeats):
            return ""  # still maybe a repeat
        return self._decide()

    def flush(self) -> str:
        """Text held back when the stream ended while still undecided."""
        return self._decide() if self.deciding else ""

    def _decide(self) -> str:
        self.deciding = False
        matched = [r for r in self.repeats if self.pending.startswith(r)]
        return self.pending[len(matched[-1]) :] if matched else self.pending


def repeat_candidates(prefix: str) -> list[str]:
    """The tails of ``prefix`` a continuation may repeat (see the module docstring)."""
    candidates = {prefix} if len(prefix) >= WHOLE_REPEAT_MIN else set()
    if prefix and not prefix.endswith("\n"):
        cut_line = prefix[prefix.rfind("\n") + 1 :]
        if len(cut_line.strip()) >= LINE_REPEAT_MIN:
            start = len(prefix) - len(cut_line)
            for _ in range(_MAX_LINES_BACK):
                candidates.add(prefix[start:])
                if start == 0:
                    break
                start = prefix.rfind("\n", 0, start - 1) + 1
    return sorted(candidates, key=len)
