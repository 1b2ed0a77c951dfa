"""A statement deeper than Python's parser or compiler go (a 100,000-term sum) is a program
error naming its line, in `resumable exec` and in the embedded executor, never a
RecursionError out of the executor."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.crash.harness import resumable as cli

import resumable

DEEP = "y = 2\nx = " + "+".join(["1"] * 100_000) + "\nprint(x)\n"
RECURSES = "y = 2\nx = " + "+".join(["1"] * 900) + "\nprint(x)\n"  # parses, too deep to rewrite
TOO_DEEP = (
    "the statement is nested too deeply for Python to compile (RecursionError); "
    "split it into smaller statements"
)


def test_exec_refuses_a_script_too_deep_to_parse_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "deep.py").write_text(DEEP)
    refused = cli(["exec", "deep.py"], tmp_path, timeout=120)
    assert refused.code == 2
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [f"resumable: error: deep.py:2: {TOO_DEEP}"]


def test_exec_fails_a_statement_too_deep_to_rewrite_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "deep.py").write_text(RECURSES)
    failed = cli(["exec", "deep.py"], tmp_path, timeout=120)
    assert failed.code == 1
    assert failed.stdout == ""
    assert 'File "deep.py", line 2' in failed.stderr
    assert f"SyntaxError: {TOO_DEEP}" in failed.stderr
    assert "Traceback" not in failed.stderr


@pytest.mark.parametrize("source", [DEEP, RECURSES], ids=["parse", "rewrite"])
@pytest.mark.parametrize("streamed", [False, True], ids=["run_code", "feed"])
def test_the_embedded_executor_reports_a_too_deep_statement_as_a_failure(
    tmp_path: Path, source: str, streamed: bool
) -> None:
    with resumable.open_run("deep", store=tmp_path / "store") as run:
        executor = run.executor()
        if streamed:
            executor.feed(source)
            outcome = executor.finish()
        else:
            outcome = executor.run_code(source)
        assert outcome.error is not None
        assert outcome.error.line == 2
        assert TOO_DEEP in outcome.error.message
        assert outcome.output == ""
        after = executor.run_code("z = 3\nz")
        assert after.error is None
        assert after.value == 3
