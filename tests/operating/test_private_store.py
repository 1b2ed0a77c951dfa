"""A folder store whose key others can read, or whose folder anyone can write, is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, resumable


@pytest.mark.parametrize(
    ("target", "mode", "fix"), [("key", 0o644, "chmod 600"), ("", 0o777, "chmod 700")]
)
def test_a_store_that_is_not_private_is_refused_with_the_fix(
    tmp_path: Path, target: str, mode: int, fix: str
) -> None:
    shutil.copy(EXAMPLES / "ledger.py", tmp_path / "ledger.py")
    env = {"LEDGER": "ledger.txt"}
    assert resumable(["exec", "ledger.py", "--run-id", "a"], tmp_path, env=env).code == 0
    loose = tmp_path / ".resumable" / target
    loose.chmod(mode)
    refused = resumable(["exec", "ledger.py", "--run-id", "b"], tmp_path, env=env)
    assert refused.code == 2, refused.stderr
    (line,) = refused.stderr.splitlines()
    assert line.startswith(
        f"resumable: error: checkpoint store {tmp_path / '.resumable'} is not private: "
    )
    assert f"{fix} {loose.resolve() if target else tmp_path / '.resumable'}" in line
    shown = resumable(["show", "a"], tmp_path, env=env)  # reading: said, not refused
    assert shown.code == 0, shown.stderr
    assert "resumable: warning: checkpoint store" in shown.stderr
    loose.chmod(0o600 if target else 0o700)
    assert resumable(["exec", "ledger.py", "--run-id", "b"], tmp_path, env=env).code == 0


@pytest.mark.parametrize(
    ("target", "mode", "fix"), [("runs.db", 0o644, "chmod 600"), ("", 0o777, "chmod 700")]
)
def test_a_sqlite_store_that_is_not_private_is_refused_with_the_fix(
    tmp_path: Path, target: str, mode: int, fix: str
) -> None:
    """The database holds the MAC key: a database others can read, or a folder anyone can
    write, is refused for writing (the chmod that fixes it) and said when only reading."""
    shutil.copy(EXAMPLES / "ledger.py", tmp_path / "ledger.py")
    store = tmp_path / "store"
    env = {
        "LEDGER": "ledger.txt",
        "RESUMABLE_DURABILITY_STORE": "sqlite",
        "RESUMABLE_DURABILITY_PATH": str(store / "runs.db"),
    }
    assert resumable(["exec", "ledger.py", "--run-id", "a"], tmp_path, env=env).code == 0
    assert (store / "runs.db").stat().st_mode & 0o777 == 0o600  # created private
    loose = store / target if target else store
    loose.chmod(mode)
    ledger = (tmp_path / "ledger.txt").read_text()
    refused = resumable(["exec", "ledger.py", "--run-id", "b"], tmp_path, env=env)
    assert refused.code == 2, refused.stderr
    (line,) = refused.stderr.splitlines()
    assert line.startswith(
        f"resumable: error: checkpoint store {store / 'runs.db'} is not private: "
    )
    assert f"{fix} {loose}" in line
    assert line.endswith("(another local user could forge its records)")
    assert (tmp_path / "ledger.txt").read_text() == ledger  # nothing ran
    shown = resumable(["show", "a"], tmp_path, env=env)  # reading: said, not refused
    assert shown.code == 0, shown.stderr
    assert "resumable: warning: checkpoint store" in shown.stderr
    for path in store.glob("runs.db*"):
        if path.is_file():
            path.chmod(0o600)
    store.chmod(0o700)
    assert resumable(["exec", "ledger.py", "--run-id", "b"], tmp_path, env=env).code == 0
