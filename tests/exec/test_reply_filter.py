"""Reply hygiene: only the code of a reply runs, whatever the model wrapped it in, streamed."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.errors import RecordVersionError
from resumable.exec.reply_filter import ReplyFilter, executed_text, filter_reply

CODE = 'await Step("Main:01:QUE")\nx = (1,\n     2)\nawait Say("user", f"{x}")\n'


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        pytest.param(CODE, CODE, id="plain code is untouched"),
        pytest.param(f"```python\n{CODE}```\n", f"\n{CODE}\n", id="python fence"),
        pytest.param(f"```py\n{CODE}```", f"\n{CODE}", id="py fence, no final newline"),
        pytest.param(f"```\n{CODE}```\n", f"\n{CODE}\n", id="fence without language"),
        pytest.param(f"  ```Python3  \n{CODE}  ```\n", f"\n{CODE}\n", id="indented fence"),
        pytest.param(
            f"Sure! Here is the code:\n\n```python\n{CODE}```\nThis greets the user.\n",
            f"\n\n\n{CODE}\n\n",
            id="prose around a fence",
        ),
        pytest.param(
            f"I'll start with step 1.\n{CODE}", f"\n{CODE}", id="prose before unfenced code"
        ),
        pytest.param(f"Done\n- first\n{CODE}", f"\n\n{CODE}", id="lone names are prose"),
        pytest.param(
            f"<think>\nThe user wants x.\nI'll use Step.\n</think>\n\n{CODE}",
            f"\n\n\n\n\n{CODE}",
            id="think block",
        ),
        pytest.param(f"<THINKING>short</THINKING>{CODE}", CODE, id="reasoning block ends mid-line"),
        pytest.param(
            f'<reasoning>plan</reasoning>\n```python\n{CODE}```\n```json\n{{"a": 1}}\n```\n',
            f"\n\n{CODE}\n\n\n\n",
            id="a fence of another language is not run",
        ),
        pytest.param(
            f"# comment first\n{CODE}", f"# comment first\n{CODE}", id="a comment is code"
        ),
        pytest.param(
            'await Say("user", "<think> is a tag")\n',
            'await Say("user", "<think> is a tag")\n',
            id="a tag inside code is code",
        ),
        pytest.param("if ok:\n    x = 1\n", "if ok:\n    x = 1\n", id="compound header is code"),
    ],
)
def test_only_the_code_of_a_reply_is_run_and_lines_keep_their_numbers(
    reply: str, code: str
) -> None:
    assert filter_reply(reply) == code
    assert filter_reply(reply).count("\n") == reply.count("\n")


def test_a_line_is_held_back_until_it_is_complete() -> None:
    reply = ReplyFilter()
    assert reply.feed("``") == ""
    assert reply.feed("`pyth") == ""
    assert reply.feed("on\nx = 1") == "\n"
    assert reply.feed("\n``") == "x = 1\n"
    assert reply.feed("`\nThat is all") == "\n"
    assert reply.close() == ""


def test_executed_text_of_a_recorded_reply() -> None:
    raw = f"```python\n{CODE}```\nDone"
    assert executed_text(raw, 0, complete=True) == raw
    assert executed_text(raw, 1, complete=True) == f"\n{CODE}\n"
    assert executed_text(raw[:20], 1, complete=False) == "\n"
    with pytest.raises(RecordVersionError, match="reply filter version 9, which this version"):
        executed_text(raw, 9, complete=True)


PIECES = [
    CODE,
    "```python\n",
    "```py\n",
    "```\n",
    "```json\n",
    "Here is the plan:\n",
    "Let's go.\n",
    "<think>\n",
    "</think>\n",
    "<think>why not</think>",
    "hmm, so x?\n",
    "for i in range(2):\n    y = i\n",
    "Done\n",
    '"""doc\n```\n"""\n',
    "\r\n",
    "\n",
]


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.sampled_from(PIECES), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
)
def test_streaming_gives_the_same_code_however_the_reply_is_chunked(
    parts: list[str], cuts: list[int]
) -> None:
    reply = "".join(parts)
    points = sorted({0, len(reply), *(c % (len(reply) + 1) for c in cuts)})
    streamed = ReplyFilter()
    code = "".join(streamed.feed(reply[a:b]) for a, b in itertools.pairwise(points))
    code += streamed.close()
    assert code == filter_reply(reply)
    assert code.count("\n") == reply.count("\n")
