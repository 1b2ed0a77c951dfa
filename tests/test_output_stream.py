"""``sys.stdout``/``sys.stderr`` as a program sees them keep the API of a text stream."""

from __future__ import annotations

import contextvars
import io
import os
import pickle
import sys

from resumable.exec import output as output_module
from resumable.exec.output import ProgramOutput, _Router


def router(**settings: object) -> tuple[_Router, io.BytesIO]:
    raw = io.BytesIO()
    real = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", **settings)  # type: ignore[arg-type]
    return _Router(real), raw


def test_the_text_stream_attributes_are_the_real_streams() -> None:
    out, _ = router(line_buffering=True)
    assert (out.encoding, out.errors, out.line_buffering, out.write_through) == (
        "utf-8",
        "strict",
        True,
        False,
    )
    assert out.newlines is None
    assert out.isatty() is False
    assert out.writable()
    assert not out.readable()


def test_the_binary_layer_answers_as_the_real_stream() -> None:
    """A terminal's descriptor, as ``sys.stdout.buffer`` reports it to the program."""
    controller, terminal = os.openpty()
    try:
        with open(terminal, "w", encoding="utf-8") as real:
            out = _Router(real)
            assert out.buffer.isatty()
            assert out.isatty()
            assert out.buffer.fileno() == out.fileno() == terminal
            assert out.buffer.writable()
            assert out.buffer.raw is real.buffer.raw
    finally:
        os.close(controller)


def test_reconfigure_changes_the_real_stream() -> None:
    out, _ = router()
    out.reconfigure(line_buffering=True, errors="replace")
    assert out.line_buffering
    assert out.real.errors == "replace"


def test_writelines_and_the_binary_layer_keep_their_order() -> None:
    out, raw = router()
    out.write("a\n")
    out.buffer.write("b é\n".encode())
    out.writelines(["c\n", "d\n"])
    out.buffer.write(b"\xff\n")  # not UTF-8: written as it is
    out.flush()
    out.buffer.flush()
    assert raw.getvalue() == "a\nb é\nc\nd\n".encode() + b"\xff\n"


def test_bytes_are_muted_and_counted_like_text() -> None:
    out, raw = router()

    def replay() -> None:
        program = ProgramOutput(printed=4)  # the process that died printed 4 characters
        output_module._current.set(program)
        out.write("ab")
        out.buffer.write(b"cdef")
        assert program.position == 6

    contextvars.copy_context().run(replay)
    out.flush()
    assert raw.getvalue() == b"ef"


def test_the_real_stdout_has_the_text_stream_api_under_a_run() -> None:
    with ProgramOutput().installed():
        assert isinstance(sys.stdout, _Router)
        assert isinstance(sys.stdout.encoding, str)
        assert hasattr(sys.stdout.buffer, "write")
        assert pickle.loads(pickle.dumps(sys.stdout)) is sys.stdout


class _Calls(io.RawIOBase):
    """A raw stream that keeps each write call apart, as a pipe's reader sees them."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: object) -> int:
        chunk = bytes(data)  # type: ignore[call-overload]
        self.calls.append(chunk)
        return len(chunk)


def test_held_output_reaches_a_write_through_stream_in_one_call_per_stream() -> None:
    """With PYTHONUNBUFFERED each write reaches the OS at once: released output held for a
    record goes in one call, so a kill after the record cannot leave half a line printed."""
    raw_out, raw_err = _Calls(), _Calls()
    stdout = _Router(io.TextIOWrapper(raw_out, encoding="utf-8", write_through=True))  # type: ignore[arg-type]
    stderr = _Router(io.TextIOWrapper(raw_err, encoding="utf-8", write_through=True))  # type: ignore[arg-type]
    program = ProgramOutput(hold=True)
    with program.installed():
        print("turn", 8, "starts", file=stdout)
        print("tool said", 64, file=stdout)
        print("warning", file=stderr)
        print("turn", 8, "ends", file=stdout)
        assert raw_out.calls == []  # held until its record is written
        assert raw_err.calls == []
        program.release(program.mark()[1])
    assert raw_out.calls == [b"turn 8 starts\ntool said 64\n", b"turn 8 ends\n"]
    assert raw_err.calls == [b"warning\n"]
