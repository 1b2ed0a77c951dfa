"""Client for any OpenAI-compatible chat-completions endpoint, streamed over SSE.

Works with OpenAI, Ollama, vLLM and llama.cpp. Failures before the response
started (429, 5xx, connect errors, timeouts) are retried with capped exponential
backoff and jitter, honouring ``Retry-After``. A stream cut off mid-response is
not requested again from the start: the text received so far is sent back as an
assistant turn with a request to continue, and only new text is yielded. The same
mechanism continues a response that a crash interrupted (``LLMRequest.prefix``) and one
the server stopped at its length limit (``finish_reason: "length"``), the latter at most
``max_continuations`` times per reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import random
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import httpx

from resumable.errors import ConfigError, LLMError
from resumable.llm.base import LLMRequest, Message, RetryNotice, Usage, continuation_messages
from resumable.llm.continuation import RepeatFilter
from resumable.llm.openai_fields import error_message, retry_after, total_usage, usage_of
from resumable.llm.sse import SSEDecoder, SSEEvent, SSEFormatError


class _Retry(Exception):
    """A failure worth another request: a busy server, a network fault, a cut stream."""

    def __init__(self, reason: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after


class _Truncated(Exception):
    """The server ended the reply at its token limit (``finish_reason: "length"``)."""


class OpenAIProvider:
    """Streams chat completions; one ``stream`` call may make several HTTP requests."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_seconds: float = 60.0,
        request_timeout_seconds: float = 300.0,
        turn_timeout_seconds: float = 600.0,
        max_retries: int = 3,
        max_continuations: int = 3,
        temperature: float = 0.0,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_seconds = timeout_seconds
        self.request_timeout_seconds = request_timeout_seconds
        self.turn_timeout_seconds = turn_timeout_seconds
        self.max_retries = max_retries
        self.max_continuations = max_continuations
        self.temperature = temperature
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self._headers = {"Accept": "text/event-stream"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._jitter = random.Random()
        self._usage: Usage | None = None

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str],
        *,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        **options: Any,
    ) -> OpenAIProvider:
        """Take the key from the variable named ``api_key_env``; local servers need none."""
        url = httpx.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ConfigError(
                f"[llm] base_url {base_url!r} is not an http(s) URL: "
                'use e.g. "https://api.openai.com/v1" or "http://127.0.0.1:11434/v1"',
                base_url=base_url,
            )
        key = env.get(api_key_env) or None
        if key is None and not is_local_url(base_url):
            raise ConfigError(
                f"no API key for {base_url}: set {api_key_env} or [llm] api_key_env",
                variable=api_key_env,
                base_url=base_url,
            )
        return cls(base_url=base_url, model=model, api_key=key, api_key_env=api_key_env, **options)

    @property
    def last_usage(self) -> Usage | None:
        return self._usage

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def stream(self, request: LLMRequest) -> AsyncGenerator[str, None]:
        self._usage = None
        tally: list[Usage] = []
        received = [request.prefix]
        failures = continuations = 0
        clock = asyncio.get_running_loop().time
        give_up_at = clock() + self.turn_timeout_seconds
        while True:
            so_far = "".join(received)
            repeat = RepeatFilter(so_far)
            deadline = min(give_up_at, clock() + self.request_timeout_seconds)
            messages = continuation_messages(request.messages, so_far)
            try:
                async with contextlib.aclosing(self._attempt(messages, tally, deadline)) as pieces:
                    async for piece in pieces:
                        fresh = repeat.feed(piece)
                        if fresh:
                            received.append(fresh)
                            yield fresh
            except _Truncated:
                continuations += 1
                if continuations > self.max_continuations:
                    raise LLMError(
                        f"{self.url} stopped the reply at its length limit (finish_reason "
                        f'"length") {continuations} times, after {len("".join(received))} '
                        f"characters; raise [llm] max_continuations (now "
                        f"{self.max_continuations}) or the server's output token limit",
                        url=self.url,
                        setting="llm.max_continuations",
                    ) from None
                continue
            except _Retry as retry:
                failures += 1
                delay = self._delay(failures, retry.retry_after)
                if failures > self.max_retries:
                    raise LLMError(
                        f"{retry.reason}; gave up after {failures} attempts ([llm] max_retries)",
                        url=self.url,
                        status=retry.status,
                    ) from None
                if clock() + delay >= give_up_at:
                    raise LLMError(
                        f"{retry.reason}; gave up after {failures} attempts in "
                        f"{self.turn_timeout_seconds:g} s ([llm] turn_timeout_seconds)",
                        url=self.url,
                        status=retry.status,
                    ) from None
                if request.on_retry is not None:
                    await request.on_retry(RetryNotice(failures, delay, retry.reason, retry.status))
                await asyncio.sleep(delay)
                continue
            rest = repeat.flush()
            if rest:
                yield rest
            self._usage = total_usage(tally)
            return

    async def _attempt(
        self, messages: tuple[Message, ...], tally: list[Usage], deadline: float
    ) -> AsyncGenerator[str, None]:
        """One HTTP request: its text pieces, or ``_Retry`` when another request may succeed."""
        body = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "stream": True,
            "temperature": self.temperature,
            "stream_options": {"include_usage": True},
        }
        received = 0
        try:
            async with contextlib.AsyncExitStack() as stack:
                request = self._client_().stream("POST", self.url, json=body, headers=self._headers)
                async with asyncio.timeout_at(deadline):  # around awaits only, never a yield
                    response = await stack.enter_async_context(request)
                if response.status_code != 200:
                    await self._refuse(response)
                decoder, finished = SSEDecoder(), None
                chunks = response.aiter_bytes()
                while True:
                    async with asyncio.timeout_at(deadline):
                        data = await anext(chunks, None)
                    for event in self._decode(decoder, data):
                        piece, finish, done = self._read(event, tally)
                        if done:
                            if finished == "length":
                                raise _Truncated
                            return
                        finished = finished or finish
                        if piece:
                            received += len(piece)
                            yield piece
                    if data is None:
                        break
                if finished == "length":
                    raise _Truncated
                if not finished:
                    raise _Retry(
                        f"the stream from {self.url} ended before [DONE] "
                        f"after {received} characters"
                    )
        except TimeoutError:
            raise _Retry(
                f"{self.url} did not finish within the hard limit per request "
                f"({self.request_timeout_seconds:g} s, [llm] request_timeout_seconds) "
                f"after {received} characters"
            ) from None
        except httpx.ConnectError as exc:
            raise _Retry(f"cannot reach {self.url}: {exc or type(exc).__name__}") from None
        except httpx.TimeoutException as exc:
            phase = "before the response started" if not received else "mid-response"
            raise _Retry(
                f"{self.url} timed out {phase} ({type(exc).__name__}, "
                f"timeout {self.timeout_seconds}s)"
            ) from None
        except httpx.TransportError as exc:
            raise _Retry(
                f"the connection to {self.url} failed after {received} characters: "
                f"{exc or type(exc).__name__}"
            ) from None

    def _client_(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_seconds), transport=self._transport
            )
        return self._client

    async def _refuse(self, response: httpx.Response) -> None:
        """Turn a non-200 answer into ``_Retry`` (busy, failing) or a final ``LLMError``."""
        status = response.status_code
        message = error_message(await response.aread())
        if status == 429 or status >= 500 or status == 408:
            raise _Retry(
                f"{status} from {self.url}: {message}",
                status=status,
                retry_after=retry_after(response.headers.get("Retry-After")),
            )
        if status in (401, 403):
            sent = "Authorization" in self._headers
            fix = f"check {self.api_key_env}" if sent else f"set {self.api_key_env}"
            raise LLMError(
                f"API key refused by {self.url} ({status}: {message}): {fix}",
                url=self.url,
                status=status,
                variable=self.api_key_env,
            )
        if status == 404:
            raise LLMError(
                f"model {self.model!r} or endpoint {self.url} not found (404: {message}): "
                "check [llm] model and [llm] base_url",
                url=self.url,
                status=status,
                model=self.model,
            )
        raise LLMError(
            f"{self.url} refused the request ({status}: {message})", url=self.url, status=status
        )

    def _decode(self, decoder: SSEDecoder, data: bytes | None) -> list[SSEEvent]:
        try:
            return decoder.close() if data is None else decoder.feed(data)
        except SSEFormatError as exc:
            raise self._garbled(exc.problem, exc.offset, exc.line) from None

    def _read(self, event: SSEEvent, tally: list[Usage]) -> tuple[str, str | None, bool]:
        """One event -> (text piece, its finish_reason if any, [DONE] seen)."""
        data = event.data.strip()
        if event.event == "error":
            raise LLMError(
                f"{self.url} sent an error event: {error_message(data.encode())}", url=self.url
            )
        if event.event not in ("", "message") or not data:
            return "", None, False
        if data == "[DONE]":
            return "", None, True
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise self._garbled(f"data is not JSON ({exc})", event.offset, event.line) from None
        if not isinstance(chunk, dict):
            raise self._malformed("data is not a JSON object", event.offset, event.line)
        if chunk.get("error") is not None:
            raise LLMError(
                f"{self.url} reported an error mid-stream: {error_message(data.encode())}",
                url=self.url,
            )
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            tally.append(usage_of(usage))
        choices = chunk.get("choices")
        if choices is None and usage is not None:
            return "", None, False
        if not isinstance(choices, list):
            raise self._malformed("event has no 'choices' list", event.offset, event.line)
        if not choices:
            return "", None, False
        first = choices[0]
        delta = first.get("delta") if isinstance(first, dict) else None
        if not isinstance(delta, dict):
            raise self._malformed("choices[0] has no 'delta' object", event.offset, event.line)
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise self._malformed(
                "choices[0].delta.content is not a string", event.offset, event.line
            )
        reason = first.get("finish_reason")
        return content or "", None if reason is None else str(reason), False

    def _garbled(self, problem: str, offset: int, line: int) -> _Retry:
        """Bytes damaged on the way (not UTF-8, not JSON): asked again, from what arrived."""
        return _Retry(f"malformed event from {self.url} at byte {offset} (line {line}): {problem}")

    def _malformed(self, problem: str, offset: int, line: int) -> LLMError:
        """Well-formed events of another shape: the endpoint does not speak this API."""
        return LLMError(
            f"malformed event from {self.url} at byte {offset} (line {line}): {problem}",
            url=self.url,
            offset=offset,
            line=line,
        )

    def _delay(self, failures: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(self.max_backoff_seconds, retry_after)
        base = min(self.max_backoff_seconds, self.backoff_seconds * 2.0 ** (failures - 1))
        return base * (0.5 + self._jitter.random() / 2)


def is_local_url(url: str) -> bool:
    """Loopback and private-network servers (Ollama, llama.cpp) usually need no API key."""
    host = httpx.URL(url).host
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private
