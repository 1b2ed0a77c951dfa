"""Every command and code block of README.md, docs/*.md and examples/*/README.md runs as
written: offline, against the scripted LLM, in a temporary copy of the repository.

The ```sh/```bash/```console blocks of one page run in order in one copy (a later block
may look at the runs of an earlier one), each line a command whose exit code must be 0 -
or 137 (SIGKILL) where it sets ``RESUMABLE_CRASH_AFTER``, or 3 where it says "exit code 3".
``RUN_ID`` stands for the newest run, as a reader would paste it from ``resumable runs``.
``pip install`` is what made this environment: it is not run again (tests/packaging installs
the built wheel by its name). Each ```python block runs as a script in a folder of its own.
A block that needs a server, a key or a value of the reader's own is preceded by
``<!-- not run: why -->``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "examples").glob("*/README.md")),
]
SHELL = ("sh", "bash", "console")
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
PRELUDE = """\
newest_run() { resumable runs --json --limit 1 | python -c 'import json,sys; print(json.load(sys.stdin)[0]["run_id"])'; }
check() { case " $2 " in *" $1 "*) ;; *) echo "docs: line $3 exited $1: $4" >&2; exit 1;; esac; }
"""


@dataclass(frozen=True)
class Block:
    page: Path
    language: str
    code: str
    line: int
    skipped: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        language = match[1]
        if language not in (*SHELL, "python"):
            continue
        before = text[: match.start()].rstrip("\n").splitlines()[-1:]
        marker = NOT_RUN.search(before[0]) if before else None
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(page, language, match[2], line, marker[1] if marker else None))
    return found


ALL = [block for page in PAGES for block in blocks(page)]


def _script(block: Block) -> str:
    """The block as bash: each command followed by a check of its exit code."""
    out = []
    for number, line in enumerate(block.code.splitlines(), block.line + 1):
        command = line.strip()
        if not command or command.startswith("#"):
            continue
        command = re.sub(r"\bpip install [^&#]*", "true ", line)
        allowed = "0"
        if "RESUMABLE_CRASH_AFTER=" in line:
            allowed = "137"
        elif "exit code 3" in line:
            allowed = "3"
        out.append(command.replace("RUN_ID", '"$(newest_run)"'))
        shown = line.strip().replace("'", "")[:80]
        out.append(f"check $? '{allowed}' {number} '{shown}'")
    return "\n".join(out) + "\n"


def _environment(bin_dir: Path, copy: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESUMABLE_", "OPENAI_"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(copy / "src")
    return env


@pytest.fixture
def copy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the repository, and a shell whose `resumable` and `python` are this one."""
    repo = tmp_path / "repo"
    shutil.copytree(
        ROOT,
        repo,
        ignore=shutil.ignore_patterns(
            ".git",
            ".resumable",
            "__pycache__",
            "*.egg-info",
            ".*_cache",
            "build",
            "dist",
            "*ledger*.txt",
            "*.db",
            ".venv",
        ),
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, command in (("python", ""), ("resumable", " -m resumable")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}"{command} "$@"\n')
        shim.chmod(0o755)
    return repo, _environment(bin_dir, repo)


def test_every_page_has_blocks_and_few_are_not_run() -> None:
    assert len(ALL) >= 25
    skipped = [b for b in ALL if b.skipped]
    assert len(skipped) <= len(ALL) // 2 - 3, [b.name for b in skipped]
    assert all(len(b.skipped or "") > 10 for b in skipped)


@pytest.mark.parametrize(
    "page", [p for p in PAGES if any(b.language in SHELL for b in blocks(p))], ids=lambda p: p.name
)
def test_the_commands_of_a_page_run_as_written(
    page: Path, copy: tuple[Path, dict[str, str]]
) -> None:
    repo, env = copy
    for block in blocks(page):
        if block.language not in SHELL or block.skipped:
            continue
        done = subprocess.run(
            ["bash", "-c", PRELUDE + _script(block)],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"{block.name}:\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, f"{block.name}:\n{done.stderr[-3000:]}"


PYTHON = [b for b in ALL if b.language == "python"]


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.name)
def test_each_python_block_runs_as_a_script(
    block: Block, copy: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    if block.skipped:
        pytest.skip(block.skipped)
    _, env = copy
    folder = tmp_path / "snippet"
    folder.mkdir()
    script = folder / "snippet.py"
    script.write_text(block.code, encoding="utf-8")  # smolagents' @tool reads its source
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{block.name}:\n{done.stderr[-3000:]}"
