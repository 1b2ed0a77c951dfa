"""A continuation that starts by repeating the text it was asked to continue is de-duplicated."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.llm.continuation import RepeatFilter

CODE = (
    'await Step("Main:01:QUE")\n'
    'name = await Input("What is your name?")\n'
    'await Say("user", f"Hello, {name}!")\n'
)


def cut_in_line_3() -> tuple[str, str]:
    cut = CODE.index("Hello")
    return CODE[:cut], CODE[cut:]


@pytest.mark.parametrize(
    ("prefix", "continuation", "new"),
    [
        pytest.param(*cut_in_line_3(), cut_in_line_3()[1], id="a clean continuation"),
        pytest.param(CODE[:70], CODE, CODE[70:], id="the whole prefix again"),
        pytest.param(
            cut_in_line_3()[0],
            'await Say("user", f"Hello, {name}!")\n',
            cut_in_line_3()[1],
            id="the cut line again",
        ),
        pytest.param(
            cut_in_line_3()[0],
            CODE[CODE.index("name =") :],
            cut_in_line_3()[1],
            id="from a line further back",
        ),
        pytest.param(
            'await Say("user", "again")\n',
            'await Say("user", "again")\n',
            'await Say("user", "again")\n',
            id="a short prefix cut at a line end may recur",
        ),
        pytest.param("x = 1\nab", "ab = 2\n", "ab = 2\n", id="a cut line too short to tell"),
    ],
)
def test_only_new_text_is_kept(prefix: str, continuation: str, new: str) -> None:
    repeat = RepeatFilter(prefix)
    out = "".join(repeat.feed(c) for c in continuation) + repeat.flush()
    assert out == new


def test_what_may_be_a_repeat_is_held_back_until_it_is_known() -> None:
    prefix, _ = cut_in_line_3()
    repeat = RepeatFilter(prefix)
    assert repeat.feed("await Say(") == ""
    assert repeat.feed('"user", f"Hel') == "Hel"
    assert repeat.feed("lo") == "lo"
    short = RepeatFilter(prefix)
    assert short.feed("await") == ""
    assert short.flush() == "await"  # the stream ended: it was no repeat


@settings(max_examples=200, deadline=None)
@given(
    cut=st.integers(min_value=1, max_value=len(CODE) - 1), back=st.integers(0, 3), data=st.data()
)
def test_any_restart_at_a_line_start_is_dropped_whatever_the_pieces(
    cut: int, back: int, data: st.DataObject
) -> None:
    prefix = CODE[:cut]
    starts = [0] + [i + 1 for i, c in enumerate(prefix) if c == "\n"]
    restart = starts[max(0, len(starts) - 1 - back)]
    continuation = CODE[restart:] if not prefix.endswith("\n") else CODE[cut:]
    sizes = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=40))
    repeat, out, start, i = RepeatFilter(prefix), [], 0, 0
    while start < len(continuation):
        end = start + sizes[i % len(sizes)]
        out.append(repeat.feed(continuation[start:end]))
        start, i = end, i + 1
    out.append(repeat.flush())
    cut_line = prefix[prefix.rfind("\n") + 1 :]
    if prefix.endswith("\n") or len(cut_line.strip()) >= 4:
        assert prefix + "".join(out) == CODE
