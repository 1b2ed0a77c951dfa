"""Errors in generated code are the LLM's next observation; too many LLM calls fail the run."""

from __future__ import annotations

from pathlib import Path

from tests.playbooks_runtime import cli, errors, prompts, show, write_program

AGENT = """# Fixer
Makes mistakes and recovers from them.

## Main
### Steps
- Work out a total with Helper and tell the user
- End

## Helper($start)
Adds up from $start.
### Steps
- Return a total
"""


def test_a_syntax_error_or_an_exception_stops_its_response_and_is_the_next_observation(
    tmp_path: Path,
) -> None:
    main = [
        'await Say("user", "first try")\nx = 1 +\nawait Say("user", "not reached")\n',
        'await Say("user", "second try")\nlabel = "ok"\nsize = {}["size"]\n'
        'label = "changed"\nawait Say("user", "not reached either")\n',
        'total = await Helper(start=1)\nawait Say("user", f"{label}: {total}")\nawait End()\n',
    ]
    helper = [
        "value = start\nvalue += int('three')\nvalue += 100\n",
        'await Input("Go on?")\nawait Return(value + 2)\n',
    ]
    program = write_program(tmp_path, "fixer", AGENT, {"Main": main, "Helper": helper})
    waiting = cli(["run", str(program), "--run-id", "r", "--no-input"], tmp_path)
    assert waiting.code == 3, waiting.stderr
    view = show(tmp_path, "r")
    first, after_syntax, after_exception = prompts(view, "main")
    assert "Error" not in first
    assert "Said to user: first try" in after_syntax
    assert "SyntaxError: invalid syntax (line 2 of the response)" in after_syntax
    assert "x = 1 +" in after_syntax
    assert "KeyError: 'size' (line 3 of the response)" in after_exception
    assert 'size = {}["size"]' in after_exception
    assert "not reached" not in after_exception
    # a called playbook's error is its own frame's observation, not its caller's
    (helper_frame,) = [f["frame_id"] for f in view["frames"] if f["playbook"] == "Helper"]
    _, observed = prompts(view, helper_frame)
    assert "ValueError: invalid literal for int() with base 10: 'three' (line 2" in observed
    assert "value += int('three')" in observed
    assert cli(["answer", "r", "yes"], tmp_path).code == 0
    done = cli(["resume", "r", "--no-input"], tmp_path)
    assert done.code == 0, done.stderr
    # the statements after an error did not run: label stayed "ok", value stayed 1
    assert (waiting.stdout + done.stdout).splitlines() == [
        "Fixer → user: first try",
        "Fixer → user: second try",
        "Fixer → user: ok: 3",
    ]


def _looping(folder: Path, loops_in: str) -> Path:
    again = 'await Say("user", "thinking")\n'
    calls = {
        "Main": ["total = await Helper(1)\nawait End()\n"] if loops_in == "Helper" else [again] * 3,
        "Helper": [again] * 3,
    }
    return write_program(folder, "fixer", AGENT, calls)


def test_too_many_llm_calls_fail_the_run_with_one_clear_message(tmp_path: Path) -> None:
    program = _looping(tmp_path, "Main")
    limit = {"RESUMABLE_RUNTIME_MAX_LLM_CALLS": "2"}
    failed = cli(["run", str(program), "--run-id", "r"], tmp_path, env=limit)
    assert failed.code == 1
    assert failed.stdout.splitlines() == ["Fixer → user: thinking"] * 2
    assert "Traceback" not in failed.stderr
    assert "playbook Main (frame main) made 2 LLM calls without Return() or End()" in failed.stderr
    assert "max_llm_calls" in failed.stderr
    assert failed.stderr.splitlines()[-1] == "resumable: run r failed"
    assert show(tmp_path, "r")["status"] == "failed"
    again = cli(["resume", "r"], tmp_path, env=limit)
    assert again.code == 2
    assert "already failed" in errors(again)[0]


def test_too_many_llm_calls_in_a_called_playbook_fail_the_whole_run(tmp_path: Path) -> None:
    program = _looping(tmp_path, "Helper")
    failed = cli(
        ["run", str(program), "--run-id", "r"],
        tmp_path,
        env={"RESUMABLE_RUNTIME_MAX_LLM_CALLS": "2"},
    )
    assert failed.code == 1
    assert "playbook Helper (frame main/0.0.0) made 2 LLM calls" in failed.stderr
    view = show(tmp_path, "r")
    assert view["status"] == "failed"
    # the caller's LLM was not asked to deal with it
    assert len(prompts(view, "main")) == 1
