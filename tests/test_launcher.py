"""The command's fast start: the seed it computes before loading anything is the store's own,
and ``--version`` says what the full command line says."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES
from typer.testing import CliRunner

from resumable.cli.commands import app
from resumable.config import load_config
from resumable.durability.log import hashseed
from resumable.durability.runs.session import codec_for, store_for
from resumable.launcher import early_seed, print_version


def _store_seed(tmp_path: Path, env: dict[str, str]) -> int:
    config = load_config(None, cwd=tmp_path, env=env)

    async def go() -> int:
        store = store_for(config.durability, config)
        async with store:
            return hashseed.store_seed(await codec_for(store, config.durability, env))

    return asyncio.run(go())


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_no_seed_before_the_store_has_a_key(in_tmp: Path) -> None:
    assert early_seed(["hi.py"], {}) is None
    assert not (in_tmp / ".resumable").exists()  # nothing made: the store makes its key


def test_the_early_seed_is_the_stores_seed(in_tmp: Path) -> None:
    seed = _store_seed(in_tmp, {})  # opening the store makes its key
    assert early_seed(["hi.py", "--run-id", "r1", "-q"], {}) == seed
    assert early_seed(["--config=playbooks.toml", "hi.py"], {}) is None  # no such file


def test_the_early_seed_follows_a_key_in_the_environment(in_tmp: Path) -> None:
    env = {"RESUMABLE_MAC_KEY": "a key from the environment"}
    assert early_seed(["hi.py"], env) == _store_seed(in_tmp, env)


def test_unclear_arguments_are_left_to_the_command_line(in_tmp: Path) -> None:
    _store_seed(in_tmp, {})
    assert early_seed(["hi.py", "--help"], {}) is None
    assert early_seed(["hi.py", "--run-id"], {}) is None
    assert early_seed(["hi.py", "--config"], {}) is None


def test_exec_runs_with_the_stores_seed(in_tmp: Path) -> None:
    seed = _store_seed(in_tmp, {})
    (in_tmp / "seed.py").write_text("import os\nprint(os.environ['PYTHONHASHSEED'])\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    done = subprocess.run(
        [sys.executable, "-m", "resumable", "exec", "seed.py", "-q"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert done.stdout.split() == [str(seed)]


def test_version_says_what_the_command_line_says(capsys: pytest.CaptureFixture[str]) -> None:
    if not print_version():
        pytest.skip("resumable is not installed here: no metadata to read")
    fast = capsys.readouterr().out
    assert fast.startswith("resumable ")
    assert CliRunner().invoke(app, ["--version"]).output == fast


def test_import_resumable_loads_the_runtime_only_when_used() -> None:
    probe = (
        "import sys, resumable\n"
        "print(sorted(m for m in ('asyncio', 'resumable.drivers', 'resumable.durability')"
        " if m in sys.modules))\n"
        "print(resumable.step.__module__, 'resumable.drivers' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == ["[]", "resumable.durability.effects.steps False"]


def _exec(cwd: Path, *args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "resumable", "exec", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"},
        timeout=120,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize(
    ("script", "options"),
    [
        ("print('hi')\n", ["-q", "--json"]),
        ("import sys\nprint('bye')\nsys.exit(3)\n", ["--quiet"]),
        ("raise ValueError('no')\n", []),
        ("print('hi')\n", ["--run-id", "bad id"]),
        ("print('hi')\n", ["--events", "json", "-q"]),
    ],
)
def test_plain_exec_arguments_behave_as_the_full_command_line(
    tmp_path: Path, script: str, options: list[str]
) -> None:
    """Plain ``exec`` arguments skip building the command line; the same run through typer
    (``--`` before the script sends it there) prints and exits the same."""
    from resumable.cli.direct import plain_exec

    (tmp_path / "s.py").write_text(script, encoding="utf-8")
    assert plain_exec(["exec", *options, "s.py"]) is not None
    assert plain_exec(["exec", *options, "--", "s.py"]) is None

    def shown(text: str) -> str:  # run ids and timings differ between two runs
        text = re.sub(r"\d{8}-\d{6}-[0-9a-f]{6}", "RUN", text)
        return re.sub(r"\d+\.\d+", "T", text)

    direct = _exec(tmp_path, *options, "s.py")
    typer_path = _exec(tmp_path, *options, "--", "s.py")
    assert direct[0] == typer_path[0]
    assert shown(direct[1]) == shown(typer_path[1])
    assert shown(direct[2]) == shown(typer_path[2])


def test_unclear_exec_arguments_go_to_the_command_line() -> None:
    from resumable.cli.direct import plain_exec

    assert plain_exec(["exec", "a.py", "b.py"]) is None
    assert plain_exec(["exec", "--help"]) is None
    assert plain_exec(["exec", "a.py", "--no-input"]) is None
    assert plain_exec(["exec", "a.py", "--run-id"]) is None
    assert plain_exec(["run", "a.pb"]) is None
    assert plain_exec(["exec", "--config=x.toml", "a.py", "-q"]) == {
        "script": Path("a.py"),
        "config_path": Path("x.toml"),
        "quiet": True,
        "events": None,
        "json_out": False,
    }


@pytest.mark.parametrize("options", [[], ["-q"], ["--events", "json"]])
def test_a_plain_exec_runs_without_the_command_lines_libraries(
    tmp_path: Path, options: list[str]
) -> None:
    """typer, rich and the other commands are not loaded for a plain ``exec`` off a terminal
    (rich is for the status line, drawn on a terminal only): they are a fifth of its start.
    Nor is what a new run of one statement does not use: the run loader and the replay order
    (a resume's), the cipher (an encrypted run's), the settings' descriptions (``init``'s),
    statistics (the store's fsync choice, made 64 boundaries in)."""
    (tmp_path / "s.py").write_text("print('hi')\n", encoding="utf-8")
    names = (
        "typer",
        "rich",
        "resumable.cli.inspecting",
        "resumable.durability.runs.recovery",
        "resumable.durability.replay.order",
        "resumable.durability.log.crypto",
        "resumable.store.holes",
        "resumable.config.described",
        "statistics",
    )
    probe = (
        "import sys\n"
        f"sys.argv = ['resumable', 'exec', 's.py', *{options!r}]\n"
        "from resumable.launcher import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in {names!r} if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # no start again with the store's seed
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.splitlines() == ["hi", "[]"], done.stderr


@pytest.mark.parametrize(
    ("example", "options", "code"),
    [
        ("nested", ["-q"], 0),
        ("nested", ["--json", "--run-id", "n1"], 0),
        ("approval", ["--no-input", "--events", "json"], 3),  # waits for an answer
        ("approval", ["--run-id", "bad id"], 2),
    ],
)
def test_plain_run_arguments_behave_as_the_full_command_line(
    tmp_path: Path, example: str, options: list[str], code: int
) -> None:
    """``run`` of a playbook takes the direct path too; through typer (``--`` before the
    program) it prints and exits the same."""
    from resumable.cli.direct import plain_arguments

    for name in ("direct", "typer"):
        shutil.copytree(EXAMPLES / example, tmp_path / name)
    program = f"{example}.pb"
    assert plain_arguments(["run", program, *options]) is not None
    assert plain_arguments(["run", *options, "--", program]) is None

    def shown(text: str) -> str:  # run ids and timings differ between two runs
        text = re.sub(r"\d{8}-\d{6}-[0-9a-f]{6}", "RUN", text)
        return re.sub(r"\d+\.\d+", "T", text)

    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    done = [
        subprocess.run(
            [sys.executable, "-m", "resumable", "run", *args],
            cwd=tmp_path / name,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        for name, args in (("direct", [program, *options]), ("typer", [*options, "--", program]))
    ]
    assert done[0].returncode == done[1].returncode == code, done[0].stderr
    assert shown(done[0].stdout) == shown(done[1].stdout)
    assert shown(done[0].stderr) == shown(done[1].stderr)
