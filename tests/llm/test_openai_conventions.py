"""Provider conventions: the base URL from the environment, retries said and bounded, timeouts."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from resumable.errors import LLMError
from resumable.llm import make_provider
from resumable.llm.base import LLMRequest, RetryNotice
from resumable.llm.openai import OpenAIProvider

from .sse_server import SSEServer, Status, Stream
from .test_openai import CODE, REQUEST


@pytest.fixture
async def server() -> AsyncIterator[SSEServer]:
    async with SSEServer() as running:
        yield running


def provider_for(server: SSEServer, **options: float) -> OpenAIProvider:
    settings = {"max_retries": 3, "backoff_seconds": 0.001, **options}
    return OpenAIProvider(base_url=server.base_url, model="m", api_key="sk-test", **settings)  # type: ignore[arg-type]


async def collect(provider: OpenAIProvider, notices: list[RetryNotice]) -> str:
    async def on_retry(notice: RetryNotice) -> None:
        notices.append(notice)

    request = LLMRequest(REQUEST.messages, "Main", 1, "main", on_retry=on_retry)
    try:
        return "".join([piece async for piece in provider.stream(request)])
    finally:
        await provider.aclose()


async def test_each_retry_is_announced_with_its_wait_and_reason(server: SSEServer) -> None:
    server.add(Status(503, "overloaded"), Status(429, "slow down", retry_after="0.3"), Stream(CODE))
    notices: list[RetryNotice] = []
    started = time.monotonic()
    assert await collect(provider_for(server), notices) == CODE
    assert time.monotonic() - started >= 0.3  # Retry-After was waited out
    assert [(n.attempt, n.status) for n in notices] == [(1, 503), (2, 429)]
    assert notices[1].delay == 0.3
    assert (
        notices[1].line()
        == f"retrying in 0.3 s: 429 from {server.base_url}/chat/completions: slow down"
    )
    assert notices[0].line().startswith("retrying in 0.0 s: 503 from ")


async def test_the_turn_budget_stops_retrying_before_max_retries(server: SSEServer) -> None:
    server.add(*[Status(503, "down", retry_after="1")] * 5)
    notices: list[RetryNotice] = []
    with pytest.raises(
        LLMError, match=r"gave up after 2 attempts in 1.5 s \(\[llm\] turn_timeout_seconds\)"
    ):
        await collect(provider_for(server, max_retries=10, turn_timeout_seconds=1.5), notices)
    assert len(notices) == 1
    assert len(server.requests) == 2


async def test_a_slow_drip_hits_the_hard_limit_per_request_and_is_continued(
    server: SSEServer,
) -> None:
    # Pieces of 32 characters every 0.3 s: each arrives well within the idle timeout, the
    # whole reply takes longer than the hard limit, and however loaded the machine, what
    # arrived before the cut is long enough to be recognised when the model repeats it.
    server.add(Stream(CODE, piece=32, pause=0.3), Stream(CODE, piece=50))
    notices: list[RetryNotice] = []
    provider = provider_for(server, request_timeout_seconds=1.0, timeout_seconds=5.0)
    assert await collect(provider, notices) == CODE
    (notice,) = notices
    assert "hard limit per request (1 s, [llm] request_timeout_seconds)" in notice.reason
    # the second request continued the first: it was sent what had arrived
    sent = server.requests[1].messages[-2]
    assert sent["role"] == "assistant"
    assert sent["content"]
    assert CODE.startswith(sent["content"])


async def test_a_bom_split_across_reads_does_not_hide_the_first_event(server: SSEServer) -> None:
    server.add(Stream(CODE, piece=3, bom=True))
    assert await collect(provider_for(server), []) == CODE


async def test_base_url_comes_from_openai_base_url_when_the_config_has_none(
    server: SSEServer,
) -> None:
    server.add(Stream("x = 1\n"), Stream("y = 2\n"))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-env"}
    from_env = make_provider(provider="openai", env=env)
    assert await collect(from_env, []) == "x = 1\n"  # type: ignore[arg-type]
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"
    configured = make_provider(
        provider="openai",
        base_url=server.base_url,
        env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    )
    assert await collect(configured, []) == "y = 2\n"  # type: ignore[arg-type]


def test_without_any_base_url_the_openai_api_is_used() -> None:
    provider = make_provider(provider="openai", env={"OPENAI_API_KEY": "k"})
    assert provider.url == "https://api.openai.com/v1/chat/completions"  # type: ignore[attr-defined]
