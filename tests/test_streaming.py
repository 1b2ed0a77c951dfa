"""StatementSplitter: what a caller feeding chunks sees - statements, their places, errors."""

from __future__ import annotations

import ast
import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resumable.exec.streaming import Statement, StatementSplitter

# -- helpers -------------------------------------------------------------------


def chunks_of(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def split(chunks: list[str], **start: int) -> list[Statement]:
    splitter = StatementSplitter(**start)
    out: list[Statement] = []
    for chunk in chunks:
        out += splitter.feed(chunk)
    return out + splitter.close()


def split_until_error(chunks: list[str]) -> tuple[list[Statement], SyntaxError, int]:
    """Statements delivered before the error, the error, and how many characters were fed."""
    splitter = StatementSplitter()
    out: list[Statement] = []
    fed = 0
    try:
        for chunk in chunks:
            fed += len(chunk)
            out += splitter.feed(chunk)
        out += splitter.close()
    except SyntaxError as exc:
        return out, exc, fed
    pytest.fail(f"no SyntaxError; statements: {[s.source for s in out]}")


def position(stream: str, offset: int) -> tuple[int, int]:
    """1-based line and 0-based column of a stream offset."""
    return stream.count("\n", 0, offset) + 1, offset - (stream.rfind("\n", 0, offset) + 1)


def check_statements(stream: str, statements: list[Statement]) -> None:
    """Every statement is its exact slice, at its place, with its own parse as tree."""
    for statement in statements:
        assert stream[statement.start : statement.end] == statement.source
        assert position(stream, statement.start) == (statement.line, statement.col)
        assert statement.tree is not None
        expected = [ast.dump(n) for n in ast.parse(statement.source).body]
        assert [ast.dump(n) for n in statement.tree] == expected


CHUNKINGS = [pytest.param(1, id="1-char"), pytest.param(10**9, id="whole")]

# -- what is one statement -------------------------------------------------------

VALID: list[tuple[str, list[str]]] = [
    ("a = 1\nb = 2\n", ["a = 1\n", "b = 2\n"]),
    ("a = 1\nb = 2", ["a = 1\n", "b = 2"]),
    ("", []),
    ("# only a comment\n\n   \n# another", []),
    ("\n\n# lead\nx = 1  # trailing\n\n# tail\n", ["x = 1  # trailing\n"]),
    (
        "if x:\n    y = 1\nelif z:\n    y = 2\nelse:\n    y = 3\nw = 4\n",
        ["if x:\n    y = 1\nelif z:\n    y = 2\nelse:\n    y = 3\n", "w = 4\n"],
    ),
    ("if x: y = 1\nelse: y = 2\nz = 3\n", ["if x: y = 1\nelse: y = 2\n", "z = 3\n"]),
    (
        "try:\n    f()\nexcept ValueError as e:\n    g(e)\nexcept (KeyError, OSError):\n"
        "    pass\nelse:\n    h()\nfinally:\n    done()\nnext_one = 1\n",
        [
            "try:\n    f()\nexcept ValueError as e:\n    g(e)\nexcept (KeyError, OSError):\n"
            "    pass\nelse:\n    h()\nfinally:\n    done()\n",
            "next_one = 1\n",
        ],
    ),
    (
        "try:\n    f()\nexcept* ValueError:\n    pass\nexcept* TypeError:\n    pass\nx = 1\n",
        ["try:\n    f()\nexcept* ValueError:\n    pass\nexcept* TypeError:\n    pass\n", "x = 1\n"],
    ),
    ("try: x = 1\nfinally: y = 2\n", ["try: x = 1\nfinally: y = 2\n"]),
    (
        "for i in r:\n    pass\nelse:\n    done = 1\nwhile c:\n    c -= 1\nelse:\n    pass\n",
        ["for i in r:\n    pass\nelse:\n    done = 1\n", "while c:\n    c -= 1\nelse:\n    pass\n"],
    ),
    (
        "async def f():\n    await g()\nasync with a as b:\n    pass\nasync for x in y:\n"
        "    pass\nelse:\n    pass\nawait f()\n",
        [
            "async def f():\n    await g()\n",
            "async with a as b:\n    pass\n",
            "async for x in y:\n    pass\nelse:\n    pass\n",
            "await f()\n",
        ],
    ),
    (
        "with (open(a) as f,\n      open(b) as g):\n    pass\nx = 1\n",
        ["with (open(a) as f,\n      open(b) as g):\n    pass\n", "x = 1\n"],
    ),
    (
        "class A(\n    Base,\n):\n    x = 1\n\n    def m(self):\n\n        return 2\n\n\nB = A\n",
        ["class A(\n    Base,\n):\n    x = 1\n\n    def m(self):\n\n        return 2\n", "B = A\n"],
    ),
    (
        "@a\n@b(1,\n   2)\n\n# between\ndef f():\n    pass\n@c\nclass K: pass\n@d\nasync def g(): pass\n",
        [
            "@a\n@b(1,\n   2)\n\n# between\ndef f():\n    pass\n",
            "@c\nclass K: pass\n",
            "@d\nasync def g(): pass\n",
        ],
    ),
    ('x = """\nif y:\nelse:\n  z\n"""\nw = 1\n', ['x = """\nif y:\nelse:\n  z\n"""\n', "w = 1\n"]),
    (
        "def f():\n    '''doc\n\nnot code: x = (\n'''\n    return 1\nf()\n",
        ["def f():\n    '''doc\n\nnot code: x = (\n'''\n    return 1\n", "f()\n"],
    ),
    (
        "x = [\n# comment at column 0\n    1,\n\n]\ny = 2\n",
        ["x = [\n# comment at column 0\n    1,\n\n]\n", "y = 2\n"],
    ),
    ("x = 1 + \\\n    2\ny = 3\n", ["x = 1 + \\\n    2\n", "y = 3\n"]),
    ("x = 'a\\\nb'\ny = 1\n", ["x = 'a\\\nb'\n", "y = 1\n"]),
    (
        "def f():\n    a = 1\n# at column 0, inside the block\n\n    return a\n# after\n\nz = f()\n",
        ["def f():\n    a = 1\n# at column 0, inside the block\n\n    return a\n", "z = f()\n"],
    ),
    ("a = 1; b = 2\n", ["a = 1", "b = 2\n"]),
    ("a = 1 ;  b = 2 ; \n", ["a = 1", "b = 2"]),
    ("x = 'a;b'; y = [1,\n 2]; z = 3  # c;d\n", ["x = 'a;b'", "y = [1,\n 2]", "z = 3  # c;d\n"]),
    ("if x: a = 1; b = 2\nz = 3\n", ["if x: a = 1; b = 2\n", "z = 3\n"]),
    ("if x:\n\ty = 1\n\tz = 2\nw = 3\n", ["if x:\n\ty = 1\n\tz = 2\n", "w = 3\n"]),
    (
        "if x:\r\n    y = 1\r\nelse:\r\n    y = 2\r\n\r\nz = (1,\r\n 2)\r\n",
        ["if x:\r\n    y = 1\r\nelse:\r\n    y = 2\r\n", "z = (1,\r\n 2)\r\n"],
    ),
    ("x = 1 + \\\r\n    2\r\n", ["x = 1 + \\\r\n    2\r\n"]),
    ("match = 3\nmatch(x)\nmatch.y = 1\n", ["match = 3\n", "match(x)\n", "match.y = 1\n"]),
    (
        "match point:\n    case (0, y):\n        pass\n    case _:\n        pass\nmatch (p):\n"
        "    case 1:\n        pass\nx = 1\n",
        [
            "match point:\n    case (0, y):\n        pass\n    case _:\n        pass\n",
            "match (p):\n    case 1:\n        pass\n",
            "x = 1\n",
        ],
    ),
    ("\fx = 1\n\f\ny = 2\n", ["x = 1\n", "y = 2\n"]),
    ("été = 1\nprint(été)\n", ["été = 1\n", "print(été)\n"]),
    (
        "lambda: (yield)\n{1: 2}\n(a, b) = 1, 2\n",
        ["lambda: (yield)\n", "{1: 2}\n", "(a, b) = 1, 2\n"],
    ),
    ("def f():\n    pass", ["def f():\n    pass"]),
    ("class A: pass\nx = 1\n", ["class A: pass\n", "x = 1\n"]),
    # A line holding only a backslash: CPython takes the indentation from its column,
    # or, at column 0, from the next line.
    ("if x:\n    y = 1\n    \\\nz = 2\nw = 3\n", ["if x:\n    y = 1\n    \\\nz = 2\n", "w = 3\n"]),
    ("if x:\n    y = 1\n\\\nz = 2\n", ["if x:\n    y = 1\n", "z = 2\n"]),
    ("def f():\n    a = 1\n\\\n    return a\n", ["def f():\n    a = 1\n\\\n    return a\n"]),
    ("a = 1\n\\\n\\\nb = 2\n\\\n# c\n", ["a = 1\n", "b = 2\n"]),
    ("@dec\n\\\ndef f(): pass\n", ["@dec\n\\\ndef f(): pass\n"]),
]

# Streams where each line is one simple statement: strings, prefixes, brackets in strings.
ONE_PER_LINE = [
    "x = f'{a!r:>{w}} {b[\"k\"]}'\ny = rb'\\'' + br\"\\\\\"\n",
    "x = 'a # not a comment'  # a comment (\ny = '''#'''\n",
    "x = {'a': '(', 'b': [']', \"}\"]}\ny = '\"'\nz = \"'\"\n",
    "print(1)\nnot x\n-x\n...\n",
]
VALID += [(stream, stream.splitlines(keepends=True)) for stream in ONE_PER_LINE]


@pytest.mark.parametrize("size", CHUNKINGS)
@pytest.mark.parametrize(("stream", "expected"), VALID)
def test_statements_of_valid_streams(stream: str, expected: list[str], size: int) -> None:
    statements = split(chunks_of(stream, size))
    check_statements(stream, statements)
    assert [s.source for s in statements] == expected
    body = [ast.dump(n) for s in statements for n in s.tree or []]
    assert body == [ast.dump(n) for n in ast.parse(stream).body]


# Block lines that look like whole lines of code but leave a string or a bracket open, or
# end the block: the splitter takes plain block lines many at a time, and must not take these.
BLOCK_LINES = [
    'def f():\n    s = """a"\nx = 1\n"""\n    return s\ny = 2\n',
    "def f():\n    s = '''it's'''\n    t = ''\ny = 2\n",
    "def f():\n    s = 'a\\'b' + \"c\\\"d\" ; t = '#'  # ( [ '\n    return (s, t)\nz = 3\n",
    "def f():\n    return [[[[1]]]], {'a': ({1}, [2])}\nz = 3\n",
    "def f():\n    x = (1,\n2)\n    return x\nz = 3\n",
    "def f():\n    x = f'{a!r:>{w}}' + f\"{b['k']}\"\n\n    # note (\n\n    return x\nz = 3\n",
    "def f():\r\n    x = 1\r\n    \r\n\r\n# c\r\ny = 2\r\n",
    "class A:\n\tx = 1\n\ty = [x]\n\n\f\n@dec\ndef g(): pass\n",
    "if a:\n    b = 1 \\\n+ 2\nelse:\n    c = (3)\nd = 4\n",
]


@pytest.mark.parametrize("size", [1, 3, 7, 10**9])
@pytest.mark.parametrize("stream", BLOCK_LINES)
def test_block_lines_are_taken_whole_only_when_they_close_what_they_open(
    stream: str, size: int
) -> None:
    statements = split(chunks_of(stream, size))
    check_statements(stream, statements)
    body = [ast.dump(n) for s in statements for n in s.tree or []]
    assert body == [ast.dump(n) for n in ast.parse(stream).body]


@pytest.mark.parametrize(("stream", "expected"), VALID)
def test_resuming_after_any_statement_gives_the_rest(stream: str, expected: object) -> None:
    """A splitter started at a statement's end (line, column) yields the remaining ones."""
    whole = split([stream])
    for index, done in enumerate(whole):
        line, col = position(stream, done.end)
        rest = split(chunks_of(stream[done.end :], 3), offset=done.end, line=line, col=col)
        assert rest == whole[index + 1 :]


def test_semicolon_statements_have_their_own_columns() -> None:
    first, second, third = split(["x = 1;  y = (2,\n 3); z = 4\n"])
    assert (first.source, first.start, first.end, first.col) == ("x = 1", 0, 5, 0)
    assert (second.source, second.line, second.col) == ("y = (2,\n 3)", 1, 8)
    assert (third.source, third.line, third.col) == ("z = 4\n", 2, 5)


def test_resume_mid_line_after_a_semicolon() -> None:
    stream = "a = 1; b = 2\nc = 3\n"
    (b, c) = split(["; b = 2\nc = 3\n"], offset=5, line=1, col=5)
    assert (b.source, b.start, b.end, b.line, b.col) == ("b = 2\n", 7, 13, 1, 7)
    assert (c.source, c.start, c.line, c.col) == ("c = 3\n", 13, 2, 0)
    check_statements(stream, [b, c])


def test_offset_and_line_place_statements_in_the_whole_stream() -> None:
    (statement,) = split(["if x:\n    y = 1\n"], offset=1000, line=40)
    assert (statement.start, statement.end, statement.line, statement.col) == (1000, 1016, 40, 0)


# -- when a statement is emitted ---------------------------------------------------


def test_simple_statement_is_emitted_when_its_newline_arrives() -> None:
    splitter = StatementSplitter()
    assert splitter.feed("x = 1") == []
    assert splitter.pending == "x = 1"
    assert [s.source for s in splitter.feed("\ny")] == ["x = 1\n"]
    assert splitter.pending == "y"


@pytest.mark.parametrize(
    ("opened", "more"),
    [
        pytest.param("x = (1,\n", "\n# a comment\n   2,\n", id="bracket"),
        pytest.param('x = """\n', "\nelse:\n# not a comment\n", id="triple-quote"),
        pytest.param("x = 'a\\\n", "b\\\n", id="continued-string"),
        pytest.param("x = 1 + \\\n", "  2 + \\\n", id="backslash"),
        pytest.param("@decorator\n", "\n# a comment\n@another\n", id="decorator"),
        pytest.param("if x: y = 1\n", "\n# a comment\n", id="one-line-compound"),
        pytest.param("try:\n    pass\n", "# a comment\nexcept E:\n    pass\n", id="try-body"),
    ],
)
def test_incomplete_statements_wait(opened: str, more: str) -> None:
    splitter = StatementSplitter()
    assert splitter.feed(opened) == []
    assert splitter.feed(more) == []
    assert splitter.pending == opened + more


def test_compound_statement_waits_for_the_next_statement_or_close() -> None:
    splitter = StatementSplitter()
    assert splitter.feed("if x:\n    y = 1\n") == []
    assert splitter.feed("# column 0 comment\n\n") == []
    assert splitter.feed("    z = 2\n") == []
    (done,) = splitter.close()
    assert done.source == "if x:\n    y = 1\n# column 0 comment\n\n    z = 2\n"


def test_compound_statement_is_emitted_with_the_first_character_of_the_next() -> None:
    splitter = StatementSplitter()
    assert splitter.feed("def f():\n    return 1\n") == []
    assert [s.source for s in splitter.feed("p")] == ["def f():\n    return 1\n"]
    assert [s.source for s in splitter.feed("rint(f())\n")] == ["print(f())\n"]


@pytest.mark.parametrize("continuation", ["e", "el", "else", "ex", "f", "fin"])
def test_a_possible_continuation_keeps_the_compound_pending(continuation: str) -> None:
    splitter = StatementSplitter()
    splitter.feed("try:\n    pass\n")
    assert splitter.feed(continuation) == []


def test_statements_before_an_error_in_the_same_chunk_come_first() -> None:
    splitter = StatementSplitter()
    assert [s.source for s in splitter.feed("a = 1\nb = (]\n")] == ["a = 1\n"]
    with pytest.raises(SyntaxError, match="does not match") as raised:
        splitter.close()
    assert raised.value.lineno == 2


def test_empty_chunks_change_nothing() -> None:
    splitter = StatementSplitter()
    assert splitter.feed("def f():\n    pass\n") == []
    assert splitter.feed("") == []
    assert [s.source for s in splitter.feed("x")] == ["def f():\n    pass\n"]
    assert splitter.feed("") == []
    assert [s.source for s in splitter.close()] == ["x"]


def test_a_lone_carriage_return_is_not_a_line_break() -> None:
    """A documented limit: CPython splits at a lone CR, the splitter does not."""
    (statement,) = split(["a = 1\rb = 2\n"])
    assert statement.tree is not None
    assert [type(node) for node in statement.tree] == [ast.Assign, ast.Assign]


# -- bad input -------------------------------------------------------------------

# stream, message fragment, stream line, 1-based column (None: not checked),
# number of statements delivered before the error.
INVALID: list[tuple[str, str, int, int | None, int]] = [
    ("a = 1\nb = 2\nx = (1]\n", "does not match", 3, 7, 2),
    ("a = 1\nx = 1)\ny = 2\n", "unmatched ')'", 2, 6, 1),
    ("x = [\n  1,\n  2))\n", "does not match", 3, 4, 0),
    ("a = 1\nelse:\n    pass\n", "invalid syntax", 2, 1, 1),
    ("def f():\n    pass\nelse:\n    pass\n", "invalid syntax", 3, 1, 0),
    ("a = 1\n  b = 2\n", "unexpected indent", 2, 3, 1),
    ("a = 1\nif x\n    y = 1\n", "expected ':'", 2, 5, 1),
    ("x = 1\ndef f(:\n    pass\n", "invalid syntax", 2, 7, 1),
    ("a = 1\ndef f():\n    return 1 +\nz = 1\n", "invalid syntax", 3, 15, 1),
    ("a = 1\nx = 'abc\ny = 2\n", "unterminated string literal", 2, 5, 1),
    ("@dec\nx = 1\n", "invalid syntax", 2, 1, 0),
    ("a = 1;; b = 2\n", "invalid syntax", 1, 7, 0),
    ("a = 1; if x: pass\n", "invalid syntax", 1, 8, 0),
    ("x = 1 \\ y\n", "continuation character", 1, 7, 0),
    ("ok = 1\nx = (1,\n", "was never closed", 2, 5, 1),
    ("ok = 1\nx = '''abc\n", "unterminated triple-quoted", 2, 5, 1),
    ("ok = 1\n@dec\n", "invalid syntax", 2, None, 1),
    ("x = 1\nx = = 2\n", "invalid syntax", 2, 5, 1),
    ("x = 0\n\nclass A:\n    def f(self):\n        return (1 2)\n", "comma", 5, 17, 1),
    ("\\\n    y = 1\n", "unexpected indent", 2, 5, 0),
    ("a = 1\n\\\n", "unexpected EOF", 2, 2, 1),
    ("if x:\n    y = 1\n  \\\n    z = 2\n", "unindent does not match", 4, 10, 0),
]


@pytest.mark.parametrize("size", CHUNKINGS)
@pytest.mark.parametrize(("stream", "fragment", "line", "column", "before"), INVALID)
def test_syntax_errors_carry_the_stream_line(
    stream: str, fragment: str, line: int, column: int | None, before: int, size: int
) -> None:
    delivered, error, _ = split_until_error(chunks_of(stream, size))
    assert fragment in error.msg
    assert error.lineno == line
    if column is not None:
        assert error.offset == column
    assert len(delivered) == before
    check_statements(stream, delivered)


@pytest.mark.parametrize(
    ("stream", "raised_at"),
    [
        ("a = 1\nx = (1]\n" + "y = 2\n" * 5, "(1]\n"),
        ("a = 1\nif x\n" + "    y = 2\n" * 5, "if x\n"),
        ("a = 1\n  b = 2\n" + "c = 3\n" * 5, "b = 2\n"),
        ("def f():\n    pass\nelse:\n" + "    x = 1\n" * 5, "else:\n"),
        ("x = 'abc\n" + "y = 2\n" * 5, "abc\n"),
        ("def f():\n    return 1 +\nzz = 1\n", "z"),
    ],
)
def test_errors_are_raised_as_soon_as_they_are_certain(stream: str, raised_at: str) -> None:
    _, _, fed = split_until_error(chunks_of(stream, 1))
    assert fed == stream.index(raised_at) + len(raised_at)


def test_error_lines_account_for_the_resume_position() -> None:
    splitter = StatementSplitter(offset=500, line=30)
    assert [s.line for s in splitter.feed("ok = 1\n")] == [30]
    with pytest.raises(SyntaxError) as raised:
        splitter.feed("x = (1,\n 2]\n")
    assert (raised.value.lineno, raised.value.offset) == (32, 3)


def test_error_messages_name_stream_lines() -> None:
    with pytest.raises(SyntaxError, match="detected at line 4") as raised:
        split(["a = 1\nb = 2\nc = 3\nx = 'abc\n"])
    assert raised.value.lineno == 4


def test_the_splitter_keeps_raising_after_an_error() -> None:
    splitter = StatementSplitter()
    with pytest.raises(SyntaxError):
        splitter.feed("x = )\n")
    with pytest.raises(SyntaxError):
        splitter.feed("y = 1\n")
    with pytest.raises(SyntaxError):
        splitter.close()


# -- real sources, random chunkings ---------------------------------------------------

LIBRARY = Path(os.path.dirname(ast.__file__))
MAX_CHARS = 120_000


def library_sources() -> list[Path]:
    """The standard library's own modules that parse and are not huge."""
    paths = []
    for path in sorted(LIBRARY.glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
            ast.parse(text)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        if len(text) <= MAX_CHARS:
            paths.append(path)
    return paths


SOURCES = library_sources()


def random_chunks(text: str, seed: int, largest: int, by_lines: bool) -> list[str]:
    """Chunks of 1..largest characters, or of 1..3 whole lines."""
    rng = random.Random(seed)
    pieces = text.split("\n") if by_lines else list(text)
    joint = "\n" if by_lines else ""
    out, i = [], 0
    while i < len(pieces):
        n = rng.randint(1, 3 if by_lines else largest)
        out.append(joint.join(pieces[i : i + n]) + (joint if i + n < len(pieces) else ""))
        i += n
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(SOURCES),
    seed=st.integers(0, 2**32),
    largest=st.sampled_from([1, 2, 4, 7, 16, 80, 400]),
    by_lines=st.booleans(),
)
def test_library_sources_split_into_the_whole_file_parse(
    path: Path, seed: int, largest: int, by_lines: bool
) -> None:
    text = path.read_text(encoding="utf-8")
    chunks = random_chunks(text, seed, largest, by_lines)
    assert "".join(chunks) == text
    statements = split(chunks)
    whole = ast.parse(text).body
    lines = text.split("\n")
    assert len(statements) == len(whole)
    for statement, expected in zip(statements, whole, strict=True):
        assert text[statement.start : statement.end] == statement.source
        assert [ast.dump(n) for n in ast.parse(statement.source).body] == [ast.dump(expected)]
        assert [ast.dump(n) for n in statement.tree or []] == [ast.dump(expected)]
        decorators = getattr(expected, "decorator_list", [])
        if decorators:  # the node's lineno is its def/class line; the statement starts at `@`
            assert (statement.line, statement.source[0]) == (decorators[0].lineno, "@")
            continue
        assert statement.line == expected.lineno
        line_bytes = lines[expected.lineno - 1].encode()
        assert statement.col == len(line_bytes[: expected.col_offset].decode())
