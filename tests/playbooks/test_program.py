"""The .pb program format: what a program author writes and what the runtime gets."""

from __future__ import annotations

import pickle
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.errors import ProgramError
from resumable.playbooks.loading import load_program, parse_program
from resumable.playbooks.program import (
    PlaybookSpec,
    Program,
    StepSpec,
    step_code,
)

PATH = Path("agent.pb")

EXAMPLE = textwrap.dedent(
    '''\
    # Greeter
    A friendly agent that greets the user and summarises data.

    ## Main
    ### Triggers
    - At the beginning
    ### Steps
    - Greet the user
    - Call SomePlaybook and keep its result as $x
    - If $x is large
      - Tell the user it is large
    - Fetch data with FetchData, then ProcessData it
    - End the program
    ### Notes
    - Be concise.

    ## SomePlaybook($topic, $depth=2)
    Computes something.
    ### Steps
    - Return 42

    ```python
    @playbook
    async def FetchData() -> dict:
        """Fetches data from the outside world."""
        ...

    @playbook(public=True)
    async def ProcessData(data: dict, scale: int = 2) -> int:
        ...
    ```
    '''
)


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first line of ``text`` that contains ``needle``."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def marked(text: str) -> tuple[str, int]:
    """Strip the ``!`` that marks the line an error must point at; return text and that line."""
    lines = textwrap.dedent(text).splitlines()
    bad = next(n for n, line in enumerate(lines, 1) if line.startswith("!"))
    lines[bad - 1] = lines[bad - 1][1:]
    return "\n".join(lines) + "\n", bad


def where(error: ProgramError) -> tuple[str, int | None]:
    """The structured ``path`` and ``line`` fields every program error carries."""
    return error.fields["path"], error.fields["line"]


def flat(steps: tuple[StepSpec, ...]) -> list[StepSpec]:
    return [s for step in steps for s in (step, *flat(step.children))]


@pytest.fixture
def program() -> Program:
    return parse_program(EXAMPLE, PATH)


# -- the example program --------------------------------------------------------------------


def test_agent_and_entry(program: Program) -> None:
    assert program.agent == "Greeter"
    assert program.description == "A friendly agent that greets the user and summarises data."
    assert program.entry == "Main"
    assert program.path == PATH
    assert program.source == EXAMPLE
    assert list(program.playbooks) == ["Main", "SomePlaybook", "FetchData", "ProcessData"]


def test_main_steps_have_ids_codes_lines_and_nesting(program: Program) -> None:
    main = program.playbook("Main")
    assert main.kind == "llm"
    assert main.line == line_of(EXAMPLE, "## Main")
    assert main.triggers == ("At the beginning",)
    assert main.notes == ("Be concise.",)
    assert [s.ref("Main") for s in flat(main.steps)] == [
        "Main:01:QUE",
        "Main:02:QUE",
        "Main:03:CND",
        "Main:03.01:QUE",
        "Main:04:ACT",
        "Main:05:END",
    ]
    assert [s.line for s in flat(main.steps)] == [
        line_of(EXAMPLE, s.text) for s in flat(main.steps)
    ]
    condition = main.steps[2]
    assert condition.text == "If $x is large"
    assert [c.text for c in condition.children] == ["Tell the user it is large"]
    assert [len(s.children) for s in main.steps] == [0, 0, 1, 0, 0]


def test_llm_playbook_parameters_and_signature(program: Program) -> None:
    spec = program.playbook("SomePlaybook")
    assert [(p.name, p.default) for p in spec.params] == [("topic", None), ("depth", "2")]
    assert spec.signature() == "SomePlaybook($topic, $depth=2)"
    assert spec.description == "Computes something."
    assert spec.triggers == ()
    assert [s.ref(spec.name) for s in spec.steps] == ["SomePlaybook:01:RET"]


def test_python_playbooks_come_from_the_fenced_block(program: Program) -> None:
    fetch, process = program.playbook("FetchData"), program.playbook("ProcessData")
    assert (fetch.kind, process.kind) == ("python", "python")
    assert fetch.line == line_of(EXAMPLE, "async def FetchData")
    assert process.line == line_of(EXAMPLE, "async def ProcessData")
    assert fetch.description == "Fetches data from the outside world."
    assert fetch.signature() == "FetchData()"
    assert [(p.name, p.default) for p in process.params] == [("data", None), ("scale", "2")]
    assert process.signature() == "ProcessData($data, $scale=2)"
    assert (fetch.steps, fetch.triggers, fetch.notes) == ((), (), ())

    (block,) = program.python_blocks
    assert block.line == line_of(EXAMPLE, "```python") + 1
    assert block.source == EXAMPLE.split("```python\n")[1].split("```")[0]


def test_program_playbook_names_the_missing_one_and_the_known_ones(program: Program) -> None:
    with pytest.raises(ProgramError) as caught:
        program.playbook("SomePlaybok")
    message = str(caught.value)
    assert "'SomePlaybok'" in message
    assert "did you mean SomePlaybook?" in message
    assert "Main, SomePlaybook, FetchData, ProcessData" in message
    assert caught.value.fields["playbook"] == "SomePlaybok"


def test_parsing_never_runs_the_python(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran"
    text = EXAMPLE.replace(
        "@playbook\nasync def FetchData",
        f"open({str(sentinel)!r}, 'w')\n@playbook\nasync def FetchData",
    )
    assert "open(" in text
    parse_program(text, PATH)
    assert not sentinel.exists()


# -- the finer points of the format ---------------------------------------------------------


@pytest.mark.parametrize(
    ("wording", "code"),
    [
        ("Greet the user", "QUE"),
        ("Ask the user for their name", "QUE"),
        ("Say goodbye", "QUE"),
        ("call SomePlaybook", "QUE"),
        ("If the list is empty", "CND"),
        ("When done, move on", "CND"),
        ("Otherwise, apologise", "CND"),
        ("Unless told otherwise, continue", "CND"),
        ("For each item in $items", "LOP"),
        ("While there is work left", "LOP"),
        ("Repeat three times", "LOP"),
        ("Return the total", "RET"),
        ("End the program", "END"),
        ("Finish up", "END"),
        ("Exit", "END"),
        ("Compute the total", "ACT"),
        ("Format the report", "ACT"),
        ("Endorse the proposal", "ACT"),
        ("For the user, pick a colour", "ACT"),
    ],
)
def test_step_codes_follow_the_wording(wording: str, code: str) -> None:
    assert step_code(wording) == code
    assert StepSpec("07", wording, 1).ref("P") == f"P:07:{code}"


def test_lists_nest_by_indentation_with_any_marker() -> None:
    text = textwrap.dedent(
        """\
        # A
        ## Main
        ### Steps
        1. First
        2. Second, which goes on
           over two lines
           * Nested with a star
             - deeper still
        \t- nested with a tab
        - Third

        - Fourth after a blank line
          continued after it
        """
    )
    main = parse_program(text, PATH).playbook("Main")
    assert [(s.id, s.text) for s in flat(main.steps)] == [
        ("01", "First"),
        ("02", "Second, which goes on over two lines"),
        ("02.01", "Nested with a star"),
        ("02.01.01", "deeper still"),
        ("02.02", "nested with a tab"),
        ("03", "Third"),
        ("04", "Fourth after a blank line continued after it"),
    ]
    assert main.steps[1].line == line_of(text, "2. Second")


def test_one_space_is_not_nesting() -> None:
    text = "# A\n## Main\n### Steps\n- one\n - two\n"
    assert [s.id for s in flat(parse_program(text, PATH).playbook("Main").steps)] == ["01", "02"]


def test_ten_or_more_steps_keep_their_order() -> None:
    text = "# A\n## Main\n### Steps\n" + "".join(f"- step {n}\n" for n in range(1, 13))
    steps = parse_program(text, PATH).playbook("Main").steps
    assert [s.id for s in steps][8:] == ["09", "10", "11", "12"]
    assert [s.text for s in steps] == [f"step {n}" for n in range(1, 13)]


def test_a_trigger_picks_the_entry_and_unknown_sections_are_ignored() -> None:
    text = textwrap.dedent(
        """\
        # Helper
        Helps.

        ```text
        # not a heading
        ```

        ## Main
        ### Steps
        - Not where we start
        ## Start($who="world, and all")
        ### Examples
        - an ignored section, with prose
        ### Triggers
        - At the beginning of the program
        ### Steps
        - Greet $who
        """
    )
    program = parse_program(text, PATH)
    assert program.entry == "Start"
    assert program.description == "Helps.\n\n```text\n# not a heading\n```"
    start = program.playbook("Start")
    assert start.params[0].default == '"world, and all"'
    assert [s.text for s in start.steps] == ["Greet $who"]
    assert start.description == ""


def test_python_playbook_signatures_keep_their_shape() -> None:
    text = textwrap.dedent(
        """\
        # A
        ```python
        import resumable

        @resumable.playbook
        async def Main(query, *tags, limit=10, **extra):
            return query

        async def helper():  # not a playbook
            return 1

        @other
        async def NotOne():
            pass
        ```
        """
    )
    program = parse_program(text, PATH)
    assert list(program.playbooks) == ["Main"]
    assert program.playbook("Main").signature() == "Main($query, *$tags, $limit=10, **$extra)"
    text = text.replace("query, *tags,", "query, *,")
    assert parse_program(text, PATH).playbook("Main").signature() == (
        "Main($query, *, $limit=10, **$extra)"
    )


def test_closing_hashes_crlf_and_bom_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "a.pb"
    text = "# Agent #\r\n## Main ##\r\n### Steps\r\n- Greet the user\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    program = load_program(path)
    assert program.agent == "Agent"
    assert program.playbook("Main").steps[0].text == "Greet the user"
    assert program.path == path


def test_program_error_survives_pickling() -> None:
    with pytest.raises(ProgramError) as caught:
        parse_program("# A\n## Say\n### Steps\n- x\n", PATH)
    again = pickle.loads(pickle.dumps(caught.value))
    assert isinstance(again, ProgramError)
    assert (where(again), str(again)) == ((str(PATH), 2), str(caught.value))


# -- malformed programs ---------------------------------------------------------------------

MAIN = "## Main\n### Steps\n- Go\n"

MALFORMED = {
    "no agent heading": ("!## Main\n### Steps\n- Go\n", "`# AgentName`"),
    "text before the agent": ("!Hello\n# A\n" + MAIN, "before the `# AgentName`"),
    "second agent": ("# A\n" + MAIN + "!# B\n", "a second `#` heading"),
    "agent without a name": ("!#\n" + MAIN, "no agent name"),
    "not a signature": (
        "# A\n" + MAIN + "!## Do some things\n### Steps\n- x\n",
        "not a playbook signature",
    ),
    "parameter without $": ("# A\n" + MAIN + "!## Foo(topic)\n### Steps\n- x\n", "`topic`"),
    "annotated parameter": ("# A\n" + MAIN + "!## Foo($t: int)\n### Steps\n- x\n", "`$t: int`"),
    "keyword parameter": ("# A\n" + MAIN + "!## Foo($class)\n### Steps\n- x\n", "`$class`"),
    "starred parameter": ("# A\n" + MAIN + "!## Foo(*$rest)\n### Steps\n- x\n", "parameter `*`"),
    "duplicate parameter": ("# A\n" + MAIN + "!## Foo($a, $a=1)\n### Steps\n- x\n", "$a twice"),
    "default order": ("# A\n" + MAIN + "!## Foo($a=1, $b)\n### Steps\n- x\n", "do not parse"),
    "empty default": ("# A\n" + MAIN + "!## Foo($a=)\n### Steps\n- x\n", "do not parse"),
    "unclosed string": ("# A\n" + MAIN + "!## Foo($a='x)\n### Steps\n- x\n", "do not parse"),
    "reserved name": ("# A\n" + MAIN + "!## Say($text)\n### Steps\n- x\n", "Say is a primitive"),
    "reserved python name": (
        "# A\n" + MAIN + "```python\n@playbook\n!async def Input():\n    pass\n```\n",
        "Input is a primitive",
    ),
    "duplicate playbook": (
        "# A\n" + MAIN + "## Foo\n### Steps\n- x\n!## Foo\n### Steps\n- y\n",
        "(the first is the llm playbook at line 5)",
    ),
    "python after llm": (
        "# A\n" + MAIN + "```python\n@playbook\n!async def Main():\n    pass\n```\n",
        "the llm playbook at line 2",
    ),
    "llm after python": (
        "# A\n```python\n@playbook\nasync def Main():\n    pass\n```\n!" + MAIN,
        "the python playbook at line 4",
    ),
    "no steps": ("# A\n" + MAIN + "!## Foo\nDoes things.\n### Notes\n- none\n", "Foo has no steps"),
    "empty steps": (
        "# A\n" + MAIN + "!## Foo\n### Steps\n\n## Bar\n### Steps\n- x\n",
        "Foo has no steps",
    ),
    "prose in steps": ("# A\n## Main\n### Steps\n- Go\n\n!Then stop\n", "not a list item"),
    "empty item": ("# A\n## Main\n### Steps\n- Go\n!-\n", "empty list item"),
    "syntax error": ("# A\n" + MAIN + "```python\nx = 1\n!y = (\n```\n", "does not parse"),
    "sync python playbook": (
        "# A\n" + MAIN + "```python\n@playbook(public=True)\n!def Fetch():\n    pass\n```\n",
        "Python playbooks must be async def",
    ),
    "no entry": ("!# A\n## Foo\n### Steps\n- x\n", "no entry playbook"),
    "two starts": (
        "# A\n## Foo\n### Triggers\n- At the beginning\n### Steps\n- x\n"
        "!## Bar\n### Triggers\n- at the beginning\n### Steps\n- y\n",
        "Foo (line 2) and Bar",
    ),
    "unclosed fence": ("# A\n" + MAIN + "!```python\nx = 1\n", "never closed"),
    "steps outside a playbook": ("# A\n!### Steps\n- x\n" + MAIN, "belongs to no playbook"),
    "second steps section": ("# A\n" + MAIN + "!### Steps\n- again\n", "merge them"),
}


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_malformed_program_names_file_and_line(case: str) -> None:
    source, fragment = MALFORMED[case]
    text, line = marked(source)
    with pytest.raises(ProgramError) as caught:
        parse_program(text, PATH)
    error = caught.value
    assert where(error) == (str(PATH), line)
    assert str(error).startswith(f"{PATH}:{line}: ")
    assert fragment in str(error)
    assert "; " in str(error)  # what is wrong; how to fix it


def test_error_line_counts_from_the_pb_file_into_an_indented_block() -> None:
    text, line = marked(
        "# A\n" + MAIN + "- Also\n  ```python\n  @playbook\n!  def Late():\n      pass\n  ```\n"
    )
    with pytest.raises(ProgramError, match="must be async def") as caught:
        parse_program(text, PATH)
    assert where(caught.value) == (str(PATH), line)


# -- reading files --------------------------------------------------------------------------


def test_load_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.pb"
    with pytest.raises(ProgramError, match="no such file") as caught:
        load_program(path)
    assert where(caught.value) == (str(path), None)


def test_load_directory(tmp_path: Path) -> None:
    with pytest.raises(ProgramError, match="cannot be read"):
        load_program(tmp_path)


def test_load_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.pb"
    path.write_bytes("# A\n## Main\n### Steps\n- Grüße\n".encode("latin-1"))
    with pytest.raises(ProgramError, match="not UTF-8") as caught:
        load_program(path)
    assert where(caught.value) == (str(path), 4)


def test_load_reads_what_parse_reads(tmp_path: Path) -> None:
    path = tmp_path / "greeter.pb"
    path.write_text(EXAMPLE, encoding="utf-8")
    loaded = load_program(path)
    assert loaded.playbooks == parse_program(EXAMPLE, path).playbooks
    assert isinstance(loaded.playbooks["Main"], PlaybookSpec)


# -- robustness -----------------------------------------------------------------------------

FRAGMENTS = [
    "# A", "## Main", "## F($a, $b=[1, 2])", "## G($x=", "### Steps", "### Triggers",
    "### Notes", "- At the beginning", "- step", "  - child", "\t* tab child", "1. one",
    "-", "text", "", "```python", "```", "~~~", "@playbook", "async def F():", "def G():",
    "    pass", "    return 1", "#### deep", "## Say",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=12), max_size=25))
def test_any_text_parses_or_gives_a_program_error(lines: list[str]) -> None:
    text = "\n".join(lines)
    try:
        program = parse_program(text, PATH)
    except ProgramError as error:
        failure = error
    else:
        assert program.entry in program.playbooks
        return
    path, line = where(failure)
    assert path == str(PATH)
    assert line is not None
    assert 1 <= line <= len(re.split(r"\r\n|\r|\n", text))  # lines as CommonMark counts them
    assert str(failure).startswith(f"{PATH}:{line}: ")
