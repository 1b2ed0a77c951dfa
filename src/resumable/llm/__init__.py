"""LLM providers: the contract, the offline scripted provider, an OpenAI-compatible client.

``make_provider`` builds one from plain settings, so it needs nothing from the
config module: pass keyword arguments, or any object with attributes of the same
names (keywords win). Heavy imports (httpx) happen only for the provider chosen.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from resumable.errors import ConfigError
from resumable.llm.base import LLMProvider, LLMRequest, Message, RetryNotice, Usage

PROVIDERS = ("scripted", "openai")
DEFAULT_BASE_URL = "https://api.openai.com/v1"
BASE_URL_ENV = "OPENAI_BASE_URL"
"""Where the ``openai`` provider sends requests when ``[llm] base_url`` is not set."""

_DEFAULTS: dict[str, Any] = {
    "provider": "scripted",
    "responses": None,
    "base_url": "",
    "model": "gpt-4o-mini",
    "api_key_env": "OPENAI_API_KEY",
    "timeout_seconds": 60.0,
    "request_timeout_seconds": 300.0,
    "turn_timeout_seconds": 600.0,
    "max_retries": 3,
    "max_continuations": 3,
    "temperature": 0.0,
    "chunk_delay_seconds": 0.0,
    "seed": 0,
}

__all__ = [
    "PROVIDERS",
    "LLMProvider",
    "LLMRequest",
    "Message",
    "RetryNotice",
    "Usage",
    "make_provider",
]


def make_provider(
    settings: object | None = None,
    *,
    program_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> LLMProvider:
    """Build the provider named by ``provider`` ("scripted" or "openai").

    Options: provider, responses, base_url, model, api_key_env, timeout_seconds,
    request_timeout_seconds, turn_timeout_seconds, max_retries, max_continuations, temperature,
    chunk_delay_seconds, seed. ``env`` defaults to the process environment; API keys
    are read from it only, and ``OPENAI_BASE_URL`` when ``base_url`` is empty.
    """
    unknown = sorted(set(options) - set(_DEFAULTS))
    if unknown:
        raise ConfigError(
            f"unknown LLM option(s) {', '.join(unknown)}: expected {', '.join(_DEFAULTS)}",
            options=unknown,
        )
    chosen = {name: _pick(name, options, settings) for name in _DEFAULTS}
    environment = os.environ if env is None else env
    provider = chosen["provider"]
    if provider == "scripted":
        from resumable.llm.scripted import ScriptedProvider, default_responses_path

        if chosen["responses"]:
            path = Path(chosen["responses"])
        elif program_path is not None:
            path = default_responses_path(program_path)
        else:
            raise ConfigError(
                "the scripted LLM provider needs a responses file: set [llm] responses "
                "or run a .pb program with a <name>.responses.toml beside it",
                provider=provider,
            )
        return ScriptedProvider.from_env(
            path,
            environment,
            seed=chosen["seed"],
            chunk_delay_seconds=float(chosen["chunk_delay_seconds"]),
        )
    if provider == "openai":
        from resumable.llm.openai import OpenAIProvider

        return OpenAIProvider.from_env(
            environment,
            base_url=chosen["base_url"] or environment.get(BASE_URL_ENV) or DEFAULT_BASE_URL,
            model=chosen["model"],
            api_key_env=chosen["api_key_env"],
            timeout_seconds=float(chosen["timeout_seconds"]),
            request_timeout_seconds=float(chosen["request_timeout_seconds"]),
            turn_timeout_seconds=float(chosen["turn_timeout_seconds"]),
            max_retries=int(chosen["max_retries"]),
            max_continuations=int(chosen["max_continuations"]),
            temperature=float(chosen["temperature"]),
        )
    raise ConfigError(
        f"unknown LLM provider {provider!r}: choose one of {', '.join(PROVIDERS)}",
        provider=provider,
        choices=PROVIDERS,
    )


def _pick(name: str, options: Mapping[str, Any], settings: object | None) -> Any:
    """A keyword given, else the settings object's attribute, else the default (None = unset)."""
    for value in (options.get(name), getattr(settings, name, None)):
        if value is not None:
            return value
    return _DEFAULTS[name]
