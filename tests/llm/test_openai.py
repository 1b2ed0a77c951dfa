"""The OpenAI-compatible provider against a real SSE server on 127.0.0.1."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from resumable.errors import ConfigError, LLMError
from resumable.llm import make_provider
from resumable.llm.base import CONTINUE_INSTRUCTION, LLMRequest, Message, Usage
from resumable.llm.openai import OpenAIProvider, is_local_url
from resumable.llm.sse import SSEDecoder, SSEEvent, SSEFormatError

from .sse_server import Raw, SSEServer, Status, Stream

CODE = (
    'await Step("Main:01:QUE")\n'
    'name = await Input("What is your name?")\n'
    'await Say("user", f"Hello, {name}! Nice to meet you.")\n'
    "await Return(name)\n"
)
REQUEST = LLMRequest(
    (Message("system", "You write Python."), Message("user", "Run Main.")),
    playbook="Main",
    call_index=1,
    frame_id="main",
)


@pytest.fixture
async def server() -> AsyncIterator[SSEServer]:
    async with SSEServer() as running:
        yield running


def provider_for(
    server: SSEServer,
    *,
    model: str = "test-model",
    api_key_env: str = "OPENAI_API_KEY",
    max_retries: int = 2,
    timeout_seconds: float = 5.0,
    temperature: float = 0.0,
) -> OpenAIProvider:
    return OpenAIProvider(
        base_url=server.base_url,
        model=model,
        api_key="sk-test",
        api_key_env=api_key_env,
        max_retries=max_retries,
        timeout_seconds=timeout_seconds,
        temperature=temperature,
        backoff_seconds=0.001,
    )


async def collect(provider: OpenAIProvider, request: LLMRequest = REQUEST) -> list[str]:
    try:
        return [piece async for piece in provider.stream(request)]
    finally:
        await provider.aclose()


async def test_streams_the_response_in_many_pieces_and_reads_usage(server: SSEServer) -> None:
    server.add(Stream(CODE, piece=4, usage=(120, 37)))
    provider = provider_for(server, temperature=0.3)

    pieces = await collect(provider)

    assert "".join(pieces) == CODE
    assert len(pieces) == -(-len(CODE) // 4)
    assert provider.last_usage == Usage(120, 37)
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["model"] == "test-model"
    assert request.body["stream"] is True
    assert request.body["temperature"] == 0.3
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.messages == [
        {"role": "system", "content": "You write Python."},
        {"role": "user", "content": "Run Main."},
    ]


@pytest.mark.parametrize(
    "style",
    [
        {"keepalive": True},
        {"multiline": True},
        {"named_events": True},
        {"crlf": True, "keepalive": True, "multiline": True},
        {"done": False},  # finish_reason then end of body: complete without [DONE]
    ],
    ids=["keepalive", "multiline", "event-field", "crlf", "no-done"],
)
async def test_parses_every_legal_shape_of_event_stream(
    server: SSEServer, style: dict[str, Any]
) -> None:
    server.add(Stream(CODE, piece=5, **style))

    assert "".join(await collect(provider_for(server))) == CODE
    assert len(server.requests) == 1


async def test_429_with_retry_after_then_success(server: SSEServer) -> None:
    server.add(Status(429, "Rate limit reached", retry_after="0"), Stream(CODE))

    assert "".join(await collect(provider_for(server))) == CODE
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body


async def test_500_then_success(server: SSEServer) -> None:
    server.add(Status(500, "internal"), Status(503, "overloaded"), Stream(CODE))

    assert "".join(await collect(provider_for(server))) == CODE
    assert len(server.requests) == 3


async def test_server_errors_past_max_retries_name_endpoint_status_and_message(
    server: SSEServer,
) -> None:
    server.add(*[Status(502, "upstream exploded")] * 3)

    with pytest.raises(LLMError) as caught:
        await collect(provider_for(server, max_retries=2))

    message = str(caught.value)
    assert server.base_url in message
    assert "502" in message
    assert "upstream exploded" in message
    assert caught.value.status == 502  # type: ignore[attr-defined]
    assert len(server.requests) == 3


async def test_read_timeout_before_any_content_is_retried(server: SSEServer) -> None:
    server.add(Stream(CODE, delay=3.0), Stream(CODE))

    assert "".join(await collect(provider_for(server, timeout_seconds=0.6))) == CODE
    assert len(server.requests) == 2


@pytest.mark.parametrize("clean_close", [False, True], ids=["aborted", "closed-before-done"])
async def test_cut_stream_is_continued_without_duplicating_text(
    server: SSEServer, clean_close: bool
) -> None:
    cut = 30
    server.add(
        Stream(CODE, piece=3, cut_after=cut, clean_close=clean_close),
        Stream(CODE[cut:], piece=7),
    )

    pieces = await collect(provider_for(server))

    assert "".join(pieces) == CODE
    first, second = server.requests
    assert len(first.messages) == 2
    assert second.messages[:2] == first.messages
    assert second.messages[2] == {"role": "assistant", "content": CODE[:cut]}
    assert second.messages[3] == {"role": "user", "content": CONTINUE_INSTRUCTION}


async def test_continuation_that_repeats_the_prefix_is_not_duplicated(server: SSEServer) -> None:
    cut = 45
    server.add(Stream(CODE, piece=5, cut_after=cut), Stream(CODE, piece=4))

    assert "".join(await collect(provider_for(server))) == CODE


async def test_recorded_prefix_after_a_crash_yields_only_the_rest(server: SSEServer) -> None:
    prefix = CODE[:26]
    server.add(Stream(CODE[26:], usage=(200, 20)))
    request = LLMRequest(REQUEST.messages, "Main", 1, "main", prefix=prefix)
    provider = provider_for(server)

    assert "".join(await collect(provider, request)) == CODE[26:]
    assert server.requests[0].messages[-2:] == [
        {"role": "assistant", "content": prefix},
        {"role": "user", "content": CONTINUE_INSTRUCTION},
    ]
    assert provider.last_usage == Usage(200, 20)


async def test_stream_cut_on_every_attempt_gives_up(server: SSEServer) -> None:
    server.add(*[Stream(CODE, cut_after=12)] * 3)

    with pytest.raises(LLMError, match="gave up after 3 attempts"):
        await collect(provider_for(server, max_retries=2))


async def test_401_names_the_key_variable_and_is_not_retried(server: SSEServer) -> None:
    server.add(Status(401, "Incorrect API key provided"))

    with pytest.raises(LLMError) as caught:
        await collect(provider_for(server, api_key_env="MY_LLM_KEY"))

    assert "API key refused" in str(caught.value)
    assert "MY_LLM_KEY" in str(caught.value)
    assert "Incorrect API key provided" in str(caught.value)
    assert len(server.requests) == 1


async def test_404_says_model_or_endpoint_not_found(server: SSEServer) -> None:
    server.add(Status(404, "The model `nope` does not exist"))

    with pytest.raises(LLMError, match=r"model 'nope' or endpoint .* not found") as caught:
        await collect(provider_for(server, model="nope"))
    assert "does not exist" in str(caught.value)


async def test_malformed_event_names_the_problem_and_position(server: SSEServer) -> None:
    good = b'data: {"choices":[{"delta":{"content":"ok"}}]}\n\n'
    server.add(Raw(b": hello\n\n" + good + b"data: {not json\n\ndata: [DONE]\n\n"))

    with pytest.raises(LLMError) as caught:
        await collect(provider_for(server, max_retries=0))

    message = str(caught.value)
    assert "not JSON" in message
    assert f"byte {len(b': hello') + 2 + len(good)}" in message
    assert "line 5" in message
    assert len(server.requests) == 1


async def test_a_garbled_event_is_asked_again_from_the_text_that_arrived(
    server: SSEServer,
) -> None:
    good = b'data: {"choices":[{"delta":{"content":"x = 1\\n"}}]}\n\n'
    server.add(Raw(good + b'data: {"choi\xff\n\n'), Stream("y = 2\n"))

    assert "".join(await collect(provider_for(server))) == "x = 1\ny = 2\n"
    assert server.requests[1].messages[-2] == {"role": "assistant", "content": "x = 1\n"}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'data: {"id": 1}\n\n', "no 'choices' list"),
        (b'data: {"choices": [{"index": 0}]}\n\n', "no 'delta' object"),
        (b'data: {"choices": [{"delta": {"content": 7}}]}\n\n', "content is not a string"),
        (b"data: [1, 2]\n\n", "not a JSON object"),
    ],
)
async def test_events_missing_fields_are_refused(
    server: SSEServer, body: bytes, problem: str
) -> None:
    server.add(Raw(body))

    with pytest.raises(LLMError, match=problem):
        await collect(provider_for(server))


async def test_error_object_mid_stream_is_reported(server: SSEServer) -> None:
    server.add(Raw(b'data: {"error": {"message": "context length exceeded"}}\n\n'))

    with pytest.raises(LLMError, match="context length exceeded"):
        await collect(provider_for(server))


async def test_unreachable_endpoint_names_the_url() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAIProvider(
        base_url=f"http://127.0.0.1:{port}/v1",
        model="m",
        api_key=None,
        max_retries=1,
        backoff_seconds=0.001,
    )

    with pytest.raises(LLMError, match=f"cannot reach http://127.0.0.1:{port}/v1/chat/completions"):
        await collect(provider)


def test_missing_key_for_a_remote_endpoint_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"set OPENAI_API_KEY or \[llm\] api_key_env"):
        make_provider(provider="openai", base_url="https://api.openai.com/v1", env={})
    with pytest.raises(ConfigError, match="set TEAM_KEY"):
        make_provider(
            provider="openai", base_url="https://llm.example.com/v1", api_key_env="TEAM_KEY", env={}
        )


async def test_key_comes_from_the_named_variable(server: SSEServer) -> None:
    server.add(Stream("x = 1\n"))
    provider = make_provider(
        provider="openai", base_url=server.base_url, api_key_env="TEAM_KEY", env={"TEAM_KEY": "k9"}
    )
    try:
        assert "".join([piece async for piece in provider.stream(REQUEST)]) == "x = 1\n"
    finally:
        await provider.aclose()
    assert server.requests[0].headers["authorization"] == "Bearer k9"


async def test_local_server_without_key_gets_no_authorization_header(server: SSEServer) -> None:
    server.add(Stream("x = 1\n"))
    provider = make_provider(provider="openai", base_url=server.base_url, model="llama3", env={})
    try:
        assert "".join([piece async for piece in provider.stream(REQUEST)]) == "x = 1\n"
    finally:
        await provider.aclose()
    assert "authorization" not in server.requests[0].headers
    assert server.requests[0].body["model"] == "llama3"


def test_local_urls() -> None:
    assert is_local_url("http://localhost:11434/v1")
    assert is_local_url("http://127.0.0.1:8080/v1")
    assert is_local_url("http://[::1]:8080/v1")
    assert is_local_url("http://192.168.1.20:8000/v1")
    assert not is_local_url("https://api.openai.com/v1")
    assert not is_local_url("http://8.8.8.8/v1")


def test_base_url_that_is_not_http_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not an http"):
        make_provider(provider="openai", base_url="api.openai.com", env={"OPENAI_API_KEY": "k"})


STREAM = (
    b"\xef\xbb\xbf: comment\r\n\r\n"
    b'event: message\r\ndata: {"a":\r\ndata:  1}\r\nid: 4\r\n\r\n'
    b"data:no-space\n\n"
    b"retry: 10\rdata: caf\xc3\xa9\r\r"
    b"data\n\n"
    b"data: unterminated"
)


def test_decoder_events_do_not_depend_on_how_bytes_are_split() -> None:
    whole = SSEDecoder()
    expected = whole.feed(STREAM) + whole.close()
    assert [(e.event, e.data) for e in expected] == [
        ("message", '{"a":\n 1}'),
        ("", "no-space"),
        ("", "café"),
        ("", ""),
    ]
    rng = random.Random(7)
    for _ in range(50):
        decoder, events, start = SSEDecoder(), [], 0
        while start < len(STREAM):
            end = start + rng.randint(1, 6)
            events += decoder.feed(STREAM[start:end])
            start = end
        events += decoder.close()
        assert events == expected


def test_decoder_reports_invalid_utf8_with_its_position() -> None:
    decoder = SSEDecoder()
    with pytest.raises(SSEFormatError, match=r"invalid UTF-8 .*byte 11 \(line 3\)"):
        decoder.feed(b": x\n\ndata: \xff\n\n")


def test_decoder_events_carry_their_position() -> None:
    events = SSEDecoder().feed(b": c\n\ndata: 1\n\nevent: e\ndata: 2\n\n")
    assert events == [SSEEvent("", "1", 5, 3), SSEEvent("e", "2", 14, 5)]


async def test_retry_after_is_honoured_and_capped(server: SSEServer) -> None:
    server.add(Status(429, "slow down", retry_after="0.2"), Stream(CODE))
    provider = provider_for(server)
    started = time.monotonic()
    assert "".join(await collect(provider)) == CODE
    assert time.monotonic() - started >= 0.15

    server.add(Status(503, "maintenance", retry_after="3600"), Stream(CODE))
    capped = provider_for(server)
    capped.max_backoff_seconds = 0.01
    started = time.monotonic()
    assert "".join(await collect(capped)) == CODE
    assert time.monotonic() - started < 5


async def test_consumer_stopping_early_closes_the_response(server: SSEServer) -> None:
    server.add(Stream(CODE, piece=2), Stream("x = 1\n"))
    provider = provider_for(server)
    stream = provider.stream(REQUEST)
    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]

    assert first == CODE[:2]
    assert "".join(await collect(provider)) == "x = 1\n"


async def test_a_reply_stopped_at_the_length_limit_is_continued_from_its_prefix(
    server: SSEServer,
) -> None:
    cut = 37
    server.add(
        Stream(CODE, piece=4, length_after=cut, usage=(100, 10)),
        Stream(CODE[cut:], piece=4, usage=(140, 20)),
    )
    provider = provider_for(server)
    provider.max_continuations = 1

    pieces = await collect(provider)

    assert "".join(pieces) == CODE
    assert len(server.requests) == 2
    continued = server.requests[1].messages
    assert continued[-2] == {"role": "assistant", "content": CODE[:cut]}
    assert continued[-1] == {"role": "user", "content": CONTINUE_INSTRUCTION}
    assert provider.last_usage == Usage(240, 30)  # both requests were billed


async def test_more_length_stops_than_max_continuations_fail_naming_the_setting(
    server: SSEServer,
) -> None:
    server.add(Stream(CODE, piece=4, length_after=20), Stream(CODE[20:], piece=4, length_after=20))
    provider = provider_for(server)
    provider.max_continuations = 1

    with pytest.raises(LLMError) as caught:
        await collect(provider)

    assert 'finish_reason "length"' in str(caught.value)
    assert "[llm] max_continuations (now 1)" in str(caught.value)
    assert len(server.requests) == 2


def test_max_continuations_is_a_validated_setting() -> None:
    from resumable.config import load_config

    with pytest.raises(ConfigError, match="max_continuations"):
        load_config(env={"RESUMABLE_LLM_MAX_CONTINUATIONS": "-1"})
    made = make_provider(
        provider="openai", base_url="http://127.0.0.1:1/v1", max_continuations=5, env={}
    )
    assert isinstance(made, OpenAIProvider)
    assert made.max_continuations == 5
