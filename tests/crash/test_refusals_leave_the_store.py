"""Every refusal with exit code 2 leaves the store byte for byte as it was.

A crashed run and a waiting one sit in a folder store; each bad command line or setting
of the fuzzed kinds (over-long names, settings refused only at resume, bad answers and
forks) is run against it, the store folder's bytes compared before and after, and the
crashed run still resumes to the ledger of a run that never stopped.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.crash.damage import LEDGER, SCRIPT
from tests.crash.harness import EXAMPLES, Result, resumable

LONG = "a" * 300
DEEP = "/".join(["d" * 200] * 30)


def store_bytes(work: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under the store, by relative path."""
    root = work / ".resumable"
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
    }


def _one_error(result: Result) -> str:
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("resumable: error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("refusals")
    (work / "s.py").write_text(SCRIPT)
    crashed = resumable(["exec", "s.py", "--run-id", "r"], work, env={"RESUMABLE_CRASH_AFTER": "8"})
    assert crashed.code == -9
    approval = str(EXAMPLES / "approval" / "approval.pb")
    assert resumable(["run", approval, "--run-id", "w", "--no-input"], work).code == 3
    return work


SETTINGS = [
    ("max_record_bytes = 1", "over the limit of 1"),
    ("max_record_bytes = 200", "over the limit of 200"),
    ('before_checkpoint = "no_such_module:hook"', "before_checkpoint"),
    ('after_checkpoint = "no_such_module:hook"', "after_checkpoint"),
    ('after_checkpoint = "os:no_such_function"', "after_checkpoint"),
]


@pytest.mark.parametrize(("setting", "said"), SETTINGS)
@pytest.mark.parametrize("run_id", ["r", "w"])
def test_a_setting_refused_at_resume_leaves_the_store_untouched(
    work: Path, setting: str, said: str, run_id: str
) -> None:
    (work / "refused.toml").write_text(f"[durability]\n{setting}\n")
    before = store_bytes(work)
    error = _one_error(resumable(["resume", run_id, "--config", "refused.toml"], work))
    assert said in error
    assert store_bytes(work) == before


COMMANDS = [
    (["exec", f"{LONG}.py"], "File name too long"),
    (["run", f"{LONG}.pb"], "File name too long"),
    (["exec", f"{DEEP}.py"], "File name too long"),
    (["exec", "s.py", "--config", LONG], "File name too long"),
    (["resume", "r", "--config", LONG], "File name too long"),
    (["run", f"{LONG}.pb", "--run-id", "r"], "File name too long"),
    (["exec", "s.py", "--run-id", "r"], "already exists"),
    (["resume", ""], "it is empty"),
    (["answer", "r", "yes"], "r"),
    (["fork", "r", "--at", "999"], "no record 999"),
    (["fork", "r", "--at", "2", "--set", "x=[1"], "not a Python literal"),
    (["fork", "w", "--at", "3", "--frame", "zzz", "--set", "x=1"], "no frame 'zzz'"),
    (["fork", "r", "--at", "2", "--edit-code", LONG], ""),
    (["cancel", ""], "it is empty"),
]


@pytest.mark.parametrize(("args", "said"), COMMANDS, ids=lambda a: " ".join(a)[:40])
def test_a_refused_command_leaves_the_store_untouched(
    work: Path, args: list[str], said: str
) -> None:
    before = store_bytes(work)
    error = _one_error(resumable(args, work))
    assert said in error
    assert len(error) < 400
    assert store_bytes(work) == before


def test_after_every_refusal_the_crashed_run_resumes_exactly(work: Path) -> None:
    resumed = resumable(["resume", "r"], work)
    assert resumed.code == 0, resumed.stderr
    assert (work / "effects.log").read_text().splitlines() == LEDGER
