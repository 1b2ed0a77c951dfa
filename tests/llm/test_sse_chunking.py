"""The SSE decoder gives the same events however the bytes of a recorded stream are split."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.llm.sse import SSEDecoder, SSEEvent, SSEFormatError

from .sse_server import Stream, wire_bytes

TEXT = 'await Step("Main:01:QUE")\nawait Say("user", "Grüße, 世界 ✓")\nawait Return(1)\n'
BOM = b"\xef\xbb\xbf"

RECORDED = [
    wire_bytes(Stream(TEXT, piece=4, usage=(12, 7))),
    wire_bytes(Stream(TEXT, piece=5, crlf=True, keepalive=True)),
    wire_bytes(Stream(TEXT, piece=7, multiline=True, named_events=True)),
    b"data: caf\xc3\xa9\r\rretry: 10\r\n: note\ndata: a\ndata: b\n\n",
]
"""Streams as the test server sends them, and one with every kind of line ending."""


def decode(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.close()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@settings(max_examples=150, deadline=None)
@given(
    stream=st.sampled_from(RECORDED),
    bom=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40),
)
def test_events_do_not_depend_on_how_a_recorded_stream_is_split(
    stream: bytes, bom: bool, cuts: list[int]
) -> None:
    data = (BOM if bom else b"") + stream
    whole = decode([data])
    assert decode(split(data, cuts)) == whole
    # a BOM is skipped, never part of the first field's name, wherever the reads split it
    plain = decode([stream])
    shift = len(BOM) if bom else 0
    assert [(e.event, e.data, e.line) for e in whole] == [(e.event, e.data, e.line) for e in plain]
    assert [e.offset for e in whole] == [e.offset + shift for e in plain]


def test_a_bom_split_over_three_reads_is_skipped() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"\xef") == []
    assert decoder.feed(b"\xbb") == []
    assert decoder.feed(b"\xbfdata: 1\n\n") == [SSEEvent("", "1", 3, 1)]


def test_bytes_that_only_start_like_a_bom_are_kept_and_refused() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"\xef") == []
    with pytest.raises(SSEFormatError, match=r"invalid UTF-8 .*byte 0 \(line 1\)"):
        decoder.feed(b"data: 1\n\n")
