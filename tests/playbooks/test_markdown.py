"""Tricky Markdown in .pb files, read as CommonMark (markdown-it-py) would read it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from resumable.errors import ProgramError
from resumable.playbooks.loading import parse_program
from resumable.playbooks.program import StepSpec

PATH = Path("agent.pb")


def steps(text: str, playbook: str = "Main") -> list[tuple[str, str]]:
    def walk(items: tuple[StepSpec, ...]) -> list[tuple[str, str]]:
        out = []
        for step in items:
            out.append((step.id, step.text))
            out.extend(walk(step.children))
        return out

    return walk(parse_program(textwrap.dedent(text), PATH).playbook(playbook).steps)


def test_an_html_commented_step_stays_out_of_the_playbook() -> None:
    assert steps(
        """\
        # A
        ## Main
        ### Steps
        - Greet the user
        <!-- - Delete every file -->
        - Say goodbye
        """
    ) == [("01", "Greet the user"), ("02", "Say goodbye")]


def test_a_comment_spanning_lines_hides_all_the_steps_inside() -> None:
    assert steps(
        """\
        # A
        ## Main
        ### Steps
        - One
        <!--
        - Two
        - Three
        -->
        - Four
        """
    ) == [("01", "One"), ("02", "Four")]


def test_an_inline_comment_is_dropped_from_the_step_text() -> None:
    assert steps("# A\n## Main\n### Steps\n- Ask the user <!-- politely --> for a name\n") == [
        ("01", "Ask the user for a name")
    ]


def test_markup_in_a_step_is_kept_as_written() -> None:
    assert steps("# A\n## Main\n### Steps\n- Ask **twice**, then call `Lookup($x)`\n") == [
        ("01", "Ask **twice**, then call `Lookup($x)`")
    ]


def test_a_fence_with_hashes_and_dashes_inside_is_not_markdown() -> None:
    text = """\
        # A
        A description with an example:

        ~~~text
        # not the agent
        - not a step
        ~~~

        ## Main
        ### Steps
        - Go
        """
    program = parse_program(textwrap.dedent(text), PATH)
    assert program.agent == "A"
    assert "# not the agent" in program.description
    assert [s.text for s in program.playbook("Main").steps] == ["Go"]


def test_a_longer_fence_holds_a_shorter_one() -> None:
    text = """\
        # A
        ## Main
        ### Steps
        - Go

        ````python
        @playbook
        async def Show() -> str:
            return '''
        ```
        '''
        ````
        """
    program = parse_program(textwrap.dedent(text), PATH)
    assert program.playbook("Show").kind == "python"


def test_a_python_block_inside_a_list_item_is_read() -> None:
    text = "# A\n## Main\n### Steps\n- Go\n  ```python\n  @playbook\n  async def Inner(): pass\n  ```\n"
    assert parse_program(text, PATH).playbook("Inner").kind == "python"


def test_closing_hashes_of_a_heading_are_not_part_of_its_name() -> None:
    assert steps("# A #\n## Main ##\n### Steps ###\n- Go\n") == [("01", "Go")]


def test_a_table_in_a_description_is_kept_verbatim() -> None:
    text = "# A\n## Main\nRules:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n### Steps\n- Go\n"
    description = parse_program(text, PATH).playbook("Main").description
    assert "| 1 | 2 |" in description


def test_windows_line_endings_read_like_unix_ones() -> None:
    unix = "# A\n## Main\n### Steps\n- One\n  - Two\n- Three\n"
    assert steps(unix.replace("\n", "\r\n")) == steps(unix)


def test_an_unclosed_fence_names_its_line() -> None:
    with pytest.raises(ProgramError, match=r"agent\.pb:5: .*never closed"):
        parse_program("# A\n## Main\n### Steps\n- Go\n```python\nx = 1\n", PATH)


def test_prose_between_steps_is_refused_with_its_line() -> None:
    with pytest.raises(ProgramError, match=r"agent\.pb:6: .*not a list item"):
        parse_program("# A\n## Main\n### Steps\n- One\n\nSome prose here.\n", PATH)
