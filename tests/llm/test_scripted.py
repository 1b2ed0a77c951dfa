"""The scripted provider: offline, deterministic responses read from a TOML file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from resumable.errors import ConfigError, LLMError
from resumable.llm import LLMProvider, make_provider
from resumable.llm.base import LLMRequest, Message
from resumable.llm.scripted import ScriptedCall, ScriptedProvider

MAIN_1 = 'await Step("Main:01:QUE")\nawait Say("user", "Hello!")\nresult = await Greet("Ada")\n'
MAIN_2 = "await Return(result)\n"
GREET_1 = 'await Say("user", f"Hi {name}, welcome to the durable world of resumable!")\n'

RESPONSES = f'''
[[Main]]
response = """
{MAIN_1}"""

[[Main]]
response = """
{MAIN_2}"""

[[Greet]]
response = """
{GREET_1}"""
'''
MESSAGES = (Message("system", "You write Python."), Message("user", "Run the playbook."))


def request(playbook: str = "Main", call: int = 1, prefix: str = "") -> LLMRequest:
    frame = "main" if playbook == "Main" else "main/0:3:9#1"
    return LLMRequest(MESSAGES, playbook, call, frame, prefix=prefix)


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "hello.pb"
    path.write_text("# Hello\n")
    (tmp_path / "hello.responses.toml").write_text(RESPONSES)
    return path


async def chunks(provider: LLMProvider, req: LLMRequest) -> list[str]:
    return [chunk async for chunk in provider.stream(req)]


async def test_each_call_of_a_playbook_gets_its_own_response(program: Path) -> None:
    provider = make_provider(provider="scripted", program_path=program, env={})

    assert "".join(await chunks(provider, request("Main", 1))) == MAIN_1
    assert "".join(await chunks(provider, request("Greet", 1))) == GREET_1
    assert "".join(await chunks(provider, request("Main", 2))) == MAIN_2
    assert provider.name == "scripted"
    assert isinstance(provider, ScriptedProvider)
    assert provider.calls == [
        ScriptedCall("Main", 1, "main", 0),
        ScriptedCall("Greet", 1, "main/0:3:9#1", 0),
        ScriptedCall("Main", 2, "main", 0),
    ]


async def test_chunks_are_small_and_identical_across_instances(program: Path) -> None:
    first = await chunks(make_provider(program_path=program, env={}), request())
    second = await chunks(make_provider(program_path=program, env={}), request())
    reseeded = await chunks(make_provider(program_path=program, env={}, seed=8), request())

    assert first == second
    assert len(first) > 5
    assert all(1 <= len(chunk) <= 12 for chunk in first)
    assert "".join(reseeded) == MAIN_1
    assert reseeded != first


def test_chunking_is_the_same_in_another_process(program: Path) -> None:
    script = (
        "import asyncio, json, sys\n"
        "from pathlib import Path\n"
        "from resumable.llm import make_provider\n"
        "from resumable.llm.base import LLMRequest\n"
        "async def main():\n"
        "    provider = make_provider(program_path=Path(sys.argv[1]), env={})\n"
        "    request = LLMRequest((), 'Greet', 1, 'main/0:3:9#1')\n"
        "    print(json.dumps([c async for c in provider.stream(request)]))\n"
        "asyncio.run(main())\n"
    )
    outputs = [
        subprocess.run(
            [sys.executable, "-c", script, str(program)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            timeout=60,
        ).stdout
        for seed in ("1", "2")
    ]

    assert outputs[0] == outputs[1]
    assert "".join(json.loads(outputs[0])) == GREET_1


async def test_prefix_streams_only_the_rest(program: Path) -> None:
    provider = make_provider(program_path=program, env={})

    rest = await chunks(provider, request("Main", 1, prefix=MAIN_1[:20]))

    assert "".join(rest) == MAIN_1[20:]
    assert provider.calls[-1].prefix_len == 20  # type: ignore[attr-defined]


async def test_complete_prefix_streams_nothing(program: Path) -> None:
    provider = make_provider(program_path=program, env={})
    assert await chunks(provider, request("Main", 2, prefix=MAIN_2)) == []


async def test_prefix_that_does_not_match_is_refused(program: Path) -> None:
    provider = make_provider(program_path=program, env={})

    with pytest.raises(LLMError, match="recorded prefix does not match the scripted response"):
        await chunks(provider, request("Main", 1, prefix='await Step("Other'))


async def test_call_past_the_end_names_playbook_call_and_file(program: Path) -> None:
    provider = make_provider(program_path=program, env={})

    with pytest.raises(LLMError) as caught:
        await chunks(provider, request("Main", 3))

    message = str(caught.value)
    assert "call 3" in message
    assert "'Main'" in message
    assert str(program.with_name("hello.responses.toml")) in message
    assert "add a [[Main]] response" in message
    assert caught.value.call_index == 3  # type: ignore[attr-defined]


async def test_playbook_without_responses_says_how_to_add_one(program: Path) -> None:
    provider = make_provider(program_path=program, env={})
    with pytest.raises(LLMError, match=r"add a \[\[Summarize\]\] response"):
        await chunks(provider, request("Summarize", 1))


def test_missing_file_names_it_and_the_fix(tmp_path: Path) -> None:
    program = tmp_path / "lonely.pb"
    with pytest.raises(ConfigError) as caught:
        make_provider(program_path=program, env={})
    assert str(tmp_path / "lonely.responses.toml") in str(caught.value)
    assert "[llm] responses" in str(caught.value)


def test_explicit_responses_path_wins(tmp_path: Path, program: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text('[[Main]]\nresponse = "x = 1\\n"\n')
    provider = make_provider(program_path=program, responses=str(other), env={})
    assert isinstance(provider, ScriptedProvider)
    assert provider.responses == {"Main": ("x = 1\n",)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[[Main]\nresponse = "x"\n', "not valid TOML"),
        ('Main = "x = 1"\n', "must be an array of tables"),
        ("[[Main]]\nreply = 'x'\n", "unknown key"),
        ("[[Main]]\n", "has no 'response'"),
        ("[[Main]]\nresponse = 3\n", "has a response of type int"),
    ],
)
def test_bad_responses_file_names_file_and_fix(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)

    with pytest.raises(ConfigError, match=expected) as caught:
        make_provider(responses=str(path), env={})
    assert str(path) in str(caught.value)


def test_scripted_without_program_or_responses_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="needs a responses file"):
        make_provider(provider="scripted", env={})


def test_unknown_provider_names_it_and_the_choices() -> None:
    with pytest.raises(ConfigError, match="unknown LLM provider 'anthropic'") as caught:
        make_provider(provider="anthropic", env={})
    assert "scripted, openai" in str(caught.value)


def test_settings_object_is_read_and_keywords_win(program: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text('[[Main]]\nresponse = "y = 2\\n"\n')
    settings = SimpleNamespace(provider="scripted", responses=str(other), seed=3)

    from_settings = make_provider(settings, program_path=program, env={})
    overridden = make_provider(settings, program_path=program, env={}, seed=4)

    assert isinstance(from_settings, ScriptedProvider)
    assert from_settings.responses == {"Main": ("y = 2\n",)}
    assert (from_settings.seed, overridden.seed) == (3, 4)  # type: ignore[attr-defined]


def test_unknown_option_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown LLM option"):
        make_provider(provider="scripted", api_key="sk-nope", env={})


async def test_call_is_logged_before_the_first_chunk(program: Path, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    provider = make_provider(program_path=program, env={"RESUMABLE_SCRIPTED_LOG": str(log)})

    stream = provider.stream(request("Greet", 1, prefix=GREET_1[:4]))
    await anext(stream)
    lines = log.read_text().splitlines()
    await stream.aclose()  # type: ignore[attr-defined]
    await chunks(provider, request("Main", 1))

    assert [json.loads(line) for line in lines] == [
        {"playbook": "Greet", "call_index": 1, "frame_id": "main/0:3:9#1", "prefix_len": 4}
    ]
    assert len(log.read_text().splitlines()) == 2


async def test_usage_is_a_rough_token_count(program: Path) -> None:
    provider = make_provider(program_path=program, env={})
    assert provider.last_usage is None
    await chunks(provider, request("Greet", 1))
    usage = provider.last_usage
    assert usage is not None
    assert usage.completion_tokens == len(GREET_1) // 4


async def test_chunk_delay_sleeps_between_chunks(program: Path) -> None:
    provider = make_provider(program_path=program, env={}, chunk_delay_seconds=0.005)
    started = time.monotonic()
    pieces = await chunks(provider, request("Main", 2))
    assert time.monotonic() - started >= 0.004 * (len(pieces) - 1)
    assert len(pieces) > 1
