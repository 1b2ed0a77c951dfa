"""A real HTTP server on 127.0.0.1 that answers chat-completions requests like the API.

Each request takes the next scripted reply (a normal SSE stream, a stream cut off
mid-response, an error status, raw bytes); every request is recorded so tests can
assert retry counts, headers and continuation messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Stream:
    """A 200 answer streaming ``text`` in events of ``piece`` characters."""

    text: str
    piece: int = 3
    usage: tuple[int, int] | None = None
    keepalive: bool = False  # ": keep-alive" comments between events
    multiline: bool = False  # each JSON payload spread over several data: lines
    named_events: bool = False  # "event: message" fields and an unrelated "ping" event
    crlf: bool = False  # CRLF line endings
    cut_after: int | None = None  # drop the connection after this many characters
    clean_close: bool = False  # no chunked framing: a cut looks like a normal end of body
    done: bool = True  # send data: [DONE]
    finish: bool = True  # send a finish_reason chunk
    delay: float = 0.0  # seconds before the status line
    pause: float = 0.0  # seconds between events (a slow drip)
    bom: bool = False  # a UTF-8 byte order mark first, split over two writes
    length_after: int | None = None  # end after this many characters, finish_reason "length"


@dataclass(frozen=True)
class Status:
    """A non-200 answer with an OpenAI-style error body."""

    code: int
    message: str
    retry_after: str | None = None


@dataclass(frozen=True)
class Raw:
    """A 200 event stream whose body is exactly these bytes."""

    body: bytes


Reply = Stream | Status | Raw


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, str]]:
        return list(self.body["messages"])


@dataclass
class SSEServer:
    """``async with SSEServer() as server``: listens on an ephemeral port until exit."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Received] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> SSEServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            received = await _read_request(reader)
            self.requests.append(received)
            reply = (
                self.replies.popleft()
                if self.replies
                else Status(500, "the test server has no scripted reply left")
            )
            await _answer(reply, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> Received:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    method, path, _ = head[0].split(" ", 2)
    headers = {}
    for line in head[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Received(method, path, headers, json.loads(body) if body else {})


async def _answer(reply: Reply, writer: asyncio.StreamWriter) -> None:
    if isinstance(reply, Status):
        body = json.dumps({"error": {"message": reply.message, "type": "test"}}).encode()
        extra = f"Retry-After: {reply.retry_after}\r\n" if reply.retry_after is not None else ""
        writer.write(
            f"HTTP/1.1 {reply.code} Scripted\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        return
    if isinstance(reply, Raw):
        await _start(writer, chunked=True)
        await _send(writer, reply.body, chunked=True)
        await _send(writer, b"", chunked=True)
        return
    await asyncio.sleep(reply.delay)
    chunked = not reply.clean_close
    await _start(writer, chunked=chunked)
    if reply.bom:
        await _send(writer, b"\xef", chunked=chunked)
        await _send(writer, b"\xbb\xbf", chunked=chunked)
    sent = 0
    for event in _events(reply):
        if isinstance(event, int):  # a text piece of this many characters follows
            if reply.cut_after is not None and sent + event > reply.cut_after:
                return  # drop the connection: no terminating chunk, no [DONE]
            sent += event
            continue
        await _send(writer, event, chunked=chunked)
        await asyncio.sleep(reply.pause)
    if chunked:
        await _send(writer, b"", chunked=True)


def _events(reply: Stream) -> list[bytes | int]:
    """The stream as wire events, each text event preceded by its length in characters."""
    eol = "\r\n" if reply.crlf else "\n"

    def event(payload: Any, name: str | None = None) -> bytes:
        text = json.dumps(payload, indent=1 if reply.multiline else None)
        fields = [f"event: {name}"] if name else []
        fields += [f"data: {line}" for line in text.split("\n")]
        return (eol.join(fields) + eol + eol).encode()

    def chunk(delta: dict[str, str], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    name = "message" if reply.named_events else None
    out: list[bytes | int] = [event(chunk({"role": "assistant", "content": ""}), name)]
    if reply.named_events:
        out.append(f"event: ping{eol}data: {{}}{eol}{eol}".encode())
    text = reply.text if reply.length_after is None else reply.text[: reply.length_after]
    for start in range(0, len(text), reply.piece):
        piece = text[start : start + reply.piece]
        if reply.keepalive:
            out.append(f": keep-alive{eol}{eol}".encode())
        out += [len(piece), event(chunk({"content": piece}), name)]
    if reply.finish:
        out.append(event(chunk({}, "length" if len(text) < len(reply.text) else "stop"), name))
    if reply.usage is not None:
        prompt, completion = reply.usage
        usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        out.append(event({"id": "chatcmpl-test", "choices": [], "usage": usage}, name))
    if reply.done:
        out.append(f"data: [DONE]{eol}{eol}".encode())
    return out


def wire_bytes(reply: Stream) -> bytes:
    """The whole body of a ``Stream`` reply, as recorded on the wire."""
    return b"".join(part for part in _events(reply) if isinstance(part, bytes))


async def _start(writer: asyncio.StreamWriter, *, chunked: bool) -> None:
    framing = "Transfer-Encoding: chunked\r\n" if chunked else ""
    writer.write(
        f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n{framing}"
        "Cache-Control: no-cache\r\nConnection: close\r\n\r\n".encode()
    )
    await writer.drain()


async def _send(writer: asyncio.StreamWriter, data: bytes, *, chunked: bool) -> None:
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n" if chunked else data)
    await writer.drain()
