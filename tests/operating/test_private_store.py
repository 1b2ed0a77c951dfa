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
