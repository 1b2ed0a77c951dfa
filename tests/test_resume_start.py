"""``resume`` starts as ``exec`` does: plain arguments skip the command line's libraries, only
the driver of the run's kind is loaded, and the launcher starts it with the store's seed before
the run is read; a run recorded with another seed still resumes with its own."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.crash.harness import SETS

from resumable.cli.direct import plain_arguments

AT_THE_AWAIT = "4"
"""RESUMABLE_CRASH_AFTER for a kill inside the last statement, after its await's record."""


def _resumable(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    return subprocess.run(
        [sys.executable, "-m", "resumable", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        timeout=120,
    )


def _crashed(folder: Path, env: dict[str, str] | None = None) -> str:
    """A run of ``SETS`` killed inside its last statement; its id."""
    folder.mkdir(exist_ok=True)
    (folder / "sets.py").write_text(SETS, encoding="utf-8")
    killed = _resumable(
        folder, "exec", "sets.py", "-q", env={**(env or {}), "RESUMABLE_CRASH_AFTER": AT_THE_AWAIT}
    )
    assert killed.returncode == -9, killed.stderr
    assert killed.stdout == ""
    (run_id,) = re.findall(r"run: (\S+)", killed.stderr)
    return run_id


def test_plain_resume_arguments_are_read_as_the_command_line_reads_them() -> None:
    assert plain_arguments(["resume", "r1"]) == ("resume", {"run_id": "r1"})
    assert plain_arguments(
        ["resume", "--latest", "-q", "--no-input", "--events=json", "--config", "p.toml"]
    ) == (
        "resume",
        {
            "run_id": None,
            "latest": True,
            "quiet": True,
            "no_input": True,
            "events": "json",
            "config_path": Path("p.toml"),
        },
    )
    assert plain_arguments(["resume", "r1", "--force", "--accept-loss", "--quiet"]) == (
        "resume",
        {"run_id": "r1", "force": True, "accept_loss": True, "quiet": True},
    )
    for unclear in (
        ["resume", "r1", "r2"],
        ["resume", "--help"],
        ["resume", "r1", "--json"],  # exec's option, not resume's
        ["resume", "--", "r1"],
        ["resume", "--events"],
        ["resume", "--config", "--latest"],
        ["resume", "-qq"],
        ["runs"],
        [],
    ):
        assert plain_arguments(unclear) is None, unclear


@pytest.mark.parametrize(
    ("ids", "options"),
    [
        (["RUN"], ["-q"]),
        ([], ["--latest"]),
        (["RUN"], ["--events", "json", "-q"]),
        (["RUN"], ["--latest"]),
        ([], []),
        (["no such run"], []),
    ],
)
def test_a_plain_resume_behaves_as_the_full_command_line(
    tmp_path: Path, ids: list[str], options: list[str]
) -> None:
    """The same crashed run resumed twice, once with plain arguments and once through typer
    (``--`` before the run's id sends it there): the same output, exit code and run."""
    run_id = _crashed(tmp_path / "direct")
    shutil.copytree(tmp_path / "direct", tmp_path / "typer")
    ids = [run_id if given == "RUN" else given for given in ids]
    assert plain_arguments(["resume", *ids, *options]) is not None
    direct = _resumable(tmp_path / "direct", "resume", *ids, *options)
    typer_path = _resumable(tmp_path / "typer", "resume", *options, "--", *ids)
    assert direct.returncode == typer_path.returncode
    assert direct.stdout == typer_path.stdout

    def shown(text: str) -> str:  # timings differ between two runs
        return re.sub(r"\d+\.\d+", "T", text)

    assert shown(direct.stderr) == shown(typer_path.stderr)
    if direct.returncode == 0:
        assert direct.stdout.startswith("['word")


def test_a_plain_resume_loads_neither_the_command_line_nor_another_kinds_driver(
    tmp_path: Path,
) -> None:
    """typer, rich, the other commands and the playbooks' parser are not loaded to resume a
    script run off a terminal: they were half of ``resume``'s start."""
    run_id = _crashed(tmp_path / "work")
    meta = json.loads((tmp_path / "work/.resumable/runs" / run_id / "meta.json").read_text())
    probe = (
        "import sys\n"
        f"sys.argv = ['resumable', 'resume', {run_id!r}, '-q']\n"
        "from resumable.launcher import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as stop:\n"
        "    print('exit', stop.code)\n"
        "names = ('typer', 'rich', 'resumable.cli.inspecting', 'resumable.playbooks',\n"
        "         'markdown_it', 'resumable.durability.embedded.run', 'resumable.script')\n"
        "print(sorted(m for m in names if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONHASHSEED": str(meta["extra"]["hash_seed"])}  # the run's own
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stdout.splitlines()
    assert lines[-2:] == ["exit 0", "['resumable.script']"], done.stderr


@pytest.mark.parametrize("pinned", [None, "7"], ids=["the stores seed", "a seed pinned by hand"])
def test_a_resumed_run_hashes_as_it_did_when_it_started(tmp_path: Path, pinned: str | None) -> None:
    """The resume runs the last statement again, building its set of strings anew: it prints
    the set in the uninterrupted run's order only with the seed the run started with, whether
    that is the store's (which the launcher starts ``resume`` with) or one pinned by hand."""
    env = {"PYTHONHASHSEED": pinned} if pinned else {}
    run_id = _crashed(tmp_path, env)  # the store, its key and so its seed are made here
    done = _resumable(tmp_path, "exec", "sets.py", "-q", env=env)
    assert done.returncode == 0, done.stderr
    resumed = _resumable(tmp_path, "resume", run_id, "-q")  # no PYTHONHASHSEED
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == done.stdout
    other = _resumable(tmp_path, "exec", "sets.py", "-q", env={"PYTHONHASHSEED": "8"})
    assert other.stdout != done.stdout  # another seed would show


def test_each_kinds_driver_is_loaded_by_the_first_resume_of_its_kind() -> None:
    """``resumable.drivers`` names a module for every kind; importing it registers the kind,
    and nothing else is imported until a run of that kind is resumed."""
    probe = (
        "import sys\n"
        "from resumable.drivers import MODULES\n"
        "from resumable.durability.runs.kinds import driver_for\n"
        "for kind, module in MODULES.items():\n"
        "    before = module in sys.modules\n"
        "    driver = driver_for(kind, 'r1')\n"
        "    print(kind, before, module in sys.modules, driver.__module__ == module)\n"
        "try:\n"
        "    driver_for('unknown', 'r1')\n"
        "except Exception as error:\n"
        "    print(type(error).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == [
        "script False True True",
        "playbook False True True",
        "embedded False True True",
        "UsageError",
    ]
