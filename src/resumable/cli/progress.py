"""What a run is doing, on stderr: a live status line, JSON events for tools, a summary.

On a terminal the status line (rich) shows the playbook and frame, the turn,
statements run, checkpoints written, tokens streamed and retries. It shares the
terminal with the program's output, so both streams are guarded while it is shown:
before the program writes, the status line is erased; it is drawn again only once
the program's line is finished. The program's output and the status line are never
on one line. Off a terminal (or with ``--quiet``) no guard is installed and stdout
carries the program's bytes untouched; stderr gets retries (unless quiet) and the
summary. ``--events json`` writes one JSON object per line on stderr instead.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TextIO

from resumable.config import Config
from resumable.durability.runs.progress import RunProgress
from resumable.errors import UsageError
from resumable.exec.wrapped_stream import WrappedStream

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

Mode = Literal["live", "plain", "quiet", "json"]
_REFRESH_SECONDS = 0.1


class _Guard(WrappedStream):
    """A program stream in front of the terminal: erases the status line before each write."""

    def __init__(self, real: TextIO, status: StatusDisplay) -> None:
        super().__init__(real)
        self.status = status

    def write(self, text: str) -> int:
        if not self.status.showing:
            return self.real.write(text)
        with self.status.lock:
            self.status.erase()
            written = self.real.write(text)
            self.real.flush()  # before the status line can be drawn after it
            if text:
                self.status.held = not text.endswith("\n")
        return written

    @property
    def buffer(self) -> Any:
        return getattr(self.real, "buffer", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)  # the rest of the stream's API, as the real one has it


class StatusDisplay:
    """Listens to a :class:`RunProgress` and shows it the way ``mode`` says."""

    def __init__(self, mode: Mode, stream: TextIO) -> None:
        self.mode = mode
        self.stream = stream
        self.progress = RunProgress(listener=self.event)
        self.lock = threading.RLock()
        self.showing = False
        self.held = False
        self._drawn = False
        self._last = 0.0
        self._console: Console | None = None  # rich, loaded when the line is first drawn

    @classmethod
    def choose(cls, config: Config, *, quiet: bool, events: str | None) -> StatusDisplay:
        if events not in (None, "json"):
            raise UsageError(f"--events {events!r} is not known: use --events json")
        stream = sys.stderr  # taken before the run puts its guards and routers in front
        mode: Mode
        if events == "json":
            mode = "json"
        elif quiet:
            mode = "quiet"
        else:
            setting = config.runtime.progress
            live = setting == "on" or (setting == "auto" and stream.isatty())
            mode = "live" if live else "plain"
        return cls(mode, stream)

    # -- around the run ----------------------------------------------------------------
    @contextmanager
    def installed(self) -> Iterator[StatusDisplay]:
        """Guard the program's streams while the status line may be on screen."""
        if self.mode != "live":
            yield self
            return
        sys.stdout = _Guard(sys.stdout, self)
        sys.stderr = _Guard(sys.stderr, self)
        self.showing = True
        try:
            yield self
        finally:
            with self.lock:
                self.erase()
                self.showing = False  # the guards stay, passing writes through

    def started(self, run_id: str) -> None:
        self.progress.run_started(run_id)

    def finish(self, status: str) -> None:
        """The one summary line (or JSON event) at the end of the run."""
        line = self.progress.summary(status)
        if self.mode == "json":
            self._json("summary", {"status": status, "line": line, **self._counts()})
        else:
            self._say(f"resumable: {line}")

    # -- events ------------------------------------------------------------------------
    def event(self, kind: str, fields: dict[str, Any]) -> None:
        try:
            self._show(kind, fields)
        except (OSError, ValueError):  # stderr went away: the run goes on without a display
            self.mode, self.showing = "quiet", False

    def _show(self, kind: str, fields: dict[str, Any]) -> None:
        if self.mode == "json":
            self._json(kind, fields)
        elif kind == "retry" and self.mode != "quiet":
            self._say(f"resumable: {fields['message']}")
        elif kind == "ask" and self.mode == "live":
            with self.lock:  # the question and its answer get the line; drawn again after
                self.erase()
                self.held = True
        elif self.mode == "live":
            self.draw(force=kind in ("frame", "turn", "retry"))

    def _json(self, kind: str, fields: dict[str, Any]) -> None:
        payload = {"event": kind, "t": round(time.monotonic() - self.progress.started, 3)}
        self.stream.write(json.dumps(payload | fields, default=str) + "\n")
        self.stream.flush()

    def _say(self, line: str) -> None:
        with self.lock:
            self.erase()
            if self.held:  # the program's line is unfinished: ours goes below it
                self.stream.write("\n")
                self.held = False
            self.stream.write(line + "\n")
            self.stream.flush()
            self.draw(force=True)

    def _counts(self) -> dict[str, Any]:
        p = self.progress
        return {
            "statements": p.statements,
            "checkpoints": p.checkpoints,
            "turns": p.turns,
            "tokens": p.tokens,
            "retries": p.retries,
        }

    # -- the status line ---------------------------------------------------------------
    def draw(self, *, force: bool = False) -> None:
        if not self.showing or self.held:
            return
        now = time.monotonic()
        if not force and now - self._last < _REFRESH_SECONDS:
            return
        with self.lock:
            self._last = now
            console = self._console or self._open_console()
            width = max(10, console.width - 1)
            text = self.render()
            text.truncate(width, overflow="ellipsis")
            with console.capture() as captured:
                console.print(text, end="", soft_wrap=True)
            self.stream.write("\r\x1b[2K" + captured.get())
            self.stream.flush()
            self._drawn = True

    def _open_console(self) -> Console:
        from rich.console import Console

        self._console = Console(
            file=self.stream, force_terminal=self.mode == "live", highlight=False
        )
        return self._console

    def erase(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._drawn = False

    def render(self) -> Text:
        from rich.text import Text

        p = self.progress
        text = Text()
        text.append("resumable ", style="bold cyan")
        text.append(p.run_id, style="bold")
        if p.playbook:
            text.append(f" · {p.playbook} ({p.frame}) turn {p.turn + 1}")
        text.append(f" · {p.statements} statements · {p.checkpoints} checkpoints", style="default")
        if p.turns:
            text.append(f" · {p.tokens} tokens")
        if p.retries:
            text.append(f" · {p.retries} retries", style="yellow")
        return text
