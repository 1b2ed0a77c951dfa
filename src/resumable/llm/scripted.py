"""Offline, deterministic LLM: responses read from a TOML file, streamed in small chunks.

The n-th call of a frame running playbook ``P`` gets the n-th ``[[P]]`` response.
Chunk sizes are pseudo-random (1..12 characters) but seeded by (seed, playbook,
call index, prefix length) through ``random.Random`` with a string seed, which does
not depend on ``PYTHONHASHSEED``: a run chunks identically in every process, so
crash tests can kill it at a reproducible point.
"""

from __future__ import annotations

import asyncio
import json
import random
import tomllib
from collections.abc import AsyncGenerator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from resumable.errors import ConfigError, LLMError
from resumable.llm.base import LLMRequest, Usage

MAX_CHUNK = 12
LOG_ENV = "RESUMABLE_SCRIPTED_LOG"
"""Environment variable naming a file that receives one JSON line per call (for tests)."""


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One call the provider answered, as tests count them."""

    playbook: str
    call_index: int
    frame_id: str
    prefix_len: int


def default_responses_path(program_path: Path) -> Path:
    """``hello.pb`` is answered from ``hello.responses.toml`` beside it."""
    return program_path.with_name(f"{program_path.stem}.responses.toml")


def load_responses(path: Path) -> dict[str, tuple[str, ...]]:
    """Read and validate a responses file: playbook name -> its responses in call order."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"scripted responses file {path} does not exist: create it with [[Main]] "
            'response = """...""" entries, or set [llm] responses',
            path=str(path),
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read scripted responses file {path}: {exc}", path=str(path)
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"scripted responses file {path} is not valid TOML: {exc}", path=str(path)
        ) from None
    return {name: _responses_of(path, name, value) for name, value in data.items()}


def _responses_of(path: Path, name: str, value: Any) -> tuple[str, ...]:
    fix = f'write each as [[{name}]] with response = """..."""'
    if not isinstance(value, list):
        raise ConfigError(
            f"{path}: {name!r} must be an array of tables ([[{name}]]), not "
            f"{type(value).__name__}: {fix}",
            path=str(path),
            playbook=name,
        )
    responses: list[str] = []
    for number, entry in enumerate(value, start=1):
        where = f"{path}: [[{name}]] number {number}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} is not a table: {fix}", path=str(path), playbook=name)
        unknown = sorted(set(entry) - {"response"})
        if unknown:
            raise ConfigError(
                f"{where} has unknown key(s) {', '.join(unknown)}: only 'response' is allowed",
                path=str(path),
                playbook=name,
            )
        response = entry.get("response")
        if not isinstance(response, str):
            got = (
                "no 'response'"
                if response is None
                else f"a response of type {type(response).__name__}"
            )
            raise ConfigError(f"{where} has {got}: {fix}", path=str(path), playbook=name)
        responses.append(response)
    return tuple(responses)


def chunk_sizes(text_length: int, seed_key: str) -> list[int]:
    """Sizes (1..12) that cut ``text_length`` characters the same way in every process."""
    rng = random.Random(seed_key)
    sizes: list[int] = []
    left = text_length
    while left > 0:
        size = min(left, rng.randint(1, MAX_CHUNK))
        sizes.append(size)
        left -= size
    return sizes


class ScriptedProvider:
    """Answers requests from a responses file; the embedded default provider."""

    name = "scripted"

    def __init__(
        self,
        responses_path: Path,
        *,
        seed: int | str = 0,
        chunk_delay_seconds: float = 0.0,
        log_path: Path | None = None,
    ) -> None:
        self.path = responses_path
        self.responses = load_responses(responses_path)
        self.seed = seed
        self.chunk_delay_seconds = chunk_delay_seconds
        self.log_path = log_path
        self.calls: list[ScriptedCall] = []
        self._usage: Usage | None = None

    @classmethod
    def from_env(
        cls,
        responses_path: Path,
        env: Mapping[str, str],
        *,
        seed: int | str = 0,
        chunk_delay_seconds: float = 0.0,
    ) -> ScriptedProvider:
        """Build one that logs its calls to the file named by ``RESUMABLE_SCRIPTED_LOG``, if set."""
        log = env.get(LOG_ENV)
        return cls(
            responses_path,
            seed=seed,
            chunk_delay_seconds=chunk_delay_seconds,
            log_path=Path(log) if log else None,
        )

    @property
    def last_usage(self) -> Usage | None:
        return self._usage

    def response_for(self, request: LLMRequest) -> str:
        """The scripted response for this call; a clear error when the file has none."""
        answers = self.responses.get(request.playbook, ())
        if request.call_index < 1 or request.call_index > len(answers):
            raise self._error(
                request,
                f"no scripted response for call {request.call_index} of playbook "
                f"{request.playbook!r} (frame {request.frame_id}) in {self.path}, which has "
                f"{len(answers)}: add a [[{request.playbook}]] response",
            )
        return answers[request.call_index - 1]

    def _error(self, request: LLMRequest, message: str) -> LLMError:
        """An error about this call of the script, naming the call and the file."""
        return LLMError(
            message,
            playbook=request.playbook,
            call_index=request.call_index,
            frame_id=request.frame_id,
            path=str(self.path),
        )

    async def stream(self, request: LLMRequest) -> AsyncGenerator[str, None]:
        self._usage = None
        response = self.response_for(request)
        if not response.startswith(request.prefix):
            raise self._error(
                request,
                f"recorded prefix does not match the scripted response for call "
                f"{request.call_index} of playbook {request.playbook!r} "
                f"(frame {request.frame_id}): was {self.path} edited since the run started?",
            )
        call = ScriptedCall(
            request.playbook, request.call_index, request.frame_id, len(request.prefix)
        )
        self.calls.append(call)
        if self.log_path is not None:
            _append_log(self.log_path, call)
        rest = response[len(request.prefix) :]
        key = f"{self.seed}:{request.playbook}:{request.call_index}:{len(request.prefix)}"
        start = 0
        for size in chunk_sizes(len(rest), key):
            if start and self.chunk_delay_seconds > 0:
                await asyncio.sleep(self.chunk_delay_seconds)
            yield rest[start : start + size]
            start += size
        prompt_chars = sum(len(message.content) for message in request.messages)
        self._usage = Usage(prompt_tokens=prompt_chars // 4, completion_tokens=len(rest) // 4)

    async def aclose(self) -> None:
        """Nothing to release; present for the provider contract."""


def _append_log(path: Path, call: ScriptedCall) -> None:
    # Written synchronously before the first chunk so a process killed mid-stream
    # has already accounted for the call.
    with path.open("a", encoding="utf-8") as log:
        log.write(json.dumps(asdict(call)) + "\n")
        log.flush()
