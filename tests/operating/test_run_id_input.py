"""Ids and names from the user are checked before anything runs or is created: an id that
starts with '-' gets the `--` hint, an empty or control-character id is refused by `exec`,
`run` and `open_run`, and a tool name the code could not call is refused by the API."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.crash.harness import resumable as cli

import resumable
from resumable.errors import UsageError


@pytest.mark.parametrize("command", ["show", "resume", "steps", "cancel"])
def test_an_id_that_starts_with_a_dash_gets_a_hint_naming_double_dash(
    tmp_path: Path, command: str
) -> None:
    refused = cli([command, "-x"], tmp_path)
    assert refused.code == 2
    assert refused.stderr.splitlines() == [
        f"resumable: error: no option -x for `resumable {command}`; an id that starts with "
        f"'-' goes after `--`: `resumable {command} -- -x`"
    ]
    assert not (tmp_path / ".resumable").exists()


def test_a_mistyped_long_option_keeps_the_usual_error(tmp_path: Path) -> None:
    refused = cli(["show", "--jsn"], tmp_path)
    assert refused.code == 2
    assert "--json" in refused.stderr  # click's suggestion, no id hint
    assert "goes after" not in refused.stderr


@pytest.mark.parametrize("run_id", ["", "a\nb", "a\tb", "a\x1bb"])
@pytest.mark.parametrize("command", ["exec", "run"])
def test_exec_and_run_refuse_an_empty_or_control_character_id(
    tmp_path: Path, command: str, run_id: str
) -> None:
    program = "p.py" if command == "exec" else "p.pb"
    (tmp_path / program).write_text("print('ran')\n")
    refused = cli([command, program, "--run-id", run_id], tmp_path)
    assert refused.code == 2, refused.stderr
    assert refused.stdout == ""  # nothing ran
    assert len(refused.stderr.splitlines()) == 1
    assert refused.stderr.startswith(f"resumable: error: invalid run id {run_id!r}")
    assert not (tmp_path / ".resumable").exists()


@pytest.mark.parametrize("run_id", ["a\nb", "a\rb", "a\x00b"])
def test_open_run_refuses_a_control_character_id_before_making_a_store(
    tmp_path: Path, run_id: str
) -> None:
    with pytest.raises(UsageError, match="invalid run id"):
        resumable.open_run(run_id, store=tmp_path / "store")
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("name", ["a-b", "class", "1x", "", "x y"])
def test_a_tool_name_the_code_cannot_call_is_refused(tmp_path: Path, name: str) -> None:
    with resumable.open_run("tools", store=tmp_path / "store") as run:
        with pytest.raises(UsageError, match=f"invalid tool name {name!r}: .* identifier"):
            run.executor(tools={"fine": print, name: print})
        executor = run.executor(tools={"fine": len})
        outcome = executor.run_code("n = fine('abc')\nn")
        assert outcome.error is None
        assert outcome.value == 3
