"""Server-Sent Events: an incremental ``text/event-stream`` decoder, bytes in, events out.

Kept apart from the HTTP client because it is a wire format with its own rules
(WHATWG HTML, "Server-sent events"), testable on bytes alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched Server-Sent Event; ``offset``/``line`` locate its first field."""

    event: str
    data: str
    offset: int
    line: int


class SSEFormatError(Exception):
    """Bytes that are not a valid event stream, with their position."""

    def __init__(self, problem: str, offset: int, line: int) -> None:
        super().__init__(f"{problem} at byte {offset} (line {line})")
        self.problem = problem
        self.offset = offset
        self.line = line


class SSEDecoder:
    """Incremental ``text/event-stream`` parser (WHATWG rules): bytes in, events out.

    Lines end with CRLF, LF or CR, also when split across reads; ``:`` lines are
    comments; ``data`` lines of one event are joined with LF; a blank line
    dispatches. An event not ended by a blank line when the stream ends is dropped,
    as the spec says: a cut stream never yields half an event. One leading UTF-8
    BOM is skipped, also when its three bytes arrive in different reads. Bytes that
    are not UTF-8 raise :class:`SSEFormatError`, after the events completed before them.
    """

    _EOL = re.compile(rb"\r\n|\r|\n")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._offset = 0
        self._line = 1
        self._event = ""
        self._data: list[str] = []
        self._start: tuple[int, int] | None = None
        self._bom_pending = True
        self._error: SSEFormatError | None = None

    def feed(self, data: bytes) -> list[SSEEvent]:
        self._buffer += data
        if self._bom_pending and not self._skip_bom(final=False):
            return []
        return self._drain(final=False)

    def close(self) -> list[SSEEvent]:
        """Events completed by the end of the stream; an undispatched one is dropped."""
        if self._bom_pending:
            self._skip_bom(final=True)
        return self._drain(final=True)

    def _skip_bom(self, *, final: bool) -> bool:
        """Drop a leading UTF-8 BOM, even one split across reads; False while undecided."""
        head = bytes(self._buffer[: len(_BOM)])
        if head == _BOM:
            del self._buffer[: len(_BOM)]
            self._offset = len(_BOM)
        elif _BOM.startswith(head) and not final:
            return False  # maybe the first byte or two of a BOM: wait for more
        self._bom_pending = False
        return True

    def _drain(self, *, final: bool) -> list[SSEEvent]:
        if self._error is not None:
            raise self._error
        events: list[SSEEvent] = []
        position = 0
        while match := self._EOL.search(self._buffer, position):
            if match.group() == b"\r" and match.end() == len(self._buffer) and not final:
                break  # maybe the first half of a CRLF
            try:
                self._take(
                    bytes(self._buffer[position : match.start()]), self._offset + position, events
                )
            except SSEFormatError as exc:
                if not events:
                    raise
                self._error = exc  # the events before it first; the error on the next call
                break
            self._line += 1
            position = match.end()
        del self._buffer[:position]
        self._offset += position
        return events

    def _take(self, raw: bytes, offset: int, events: list[SSEEvent]) -> None:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SSEFormatError(
                f"invalid UTF-8 ({exc.reason})", offset + exc.start, self._line
            ) from None
        if not line:
            if self._data and self._start is not None:
                events.append(SSEEvent(self._event, "\n".join(self._data), *self._start))
            self._event, self._data, self._start = "", [], None
            return
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if self._start is None:
            self._start = (offset, self._line)
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
