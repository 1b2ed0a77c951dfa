"""A set or frozenset restored from a checkpoint iterates, pops and grows as the original does."""

from __future__ import annotations

import builtins
import random
import sys
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.durability.capture import set_order, set_table
from resumable.durability.capture.snapshot import Snapshotter

Op = tuple[Any, ...]
EMPTY = "<pop from an empty set>"

ELEMENTS = st.one_of(st.integers(-300, 3000), st.text(alphabet="abcdefgh", max_size=4))
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), ELEMENTS),
        st.tuples(st.just("add"), ELEMENTS),
        st.tuples(st.just("discard"), ELEMENTS),
        st.tuples(st.just("discard_nth"), st.integers(0, 10**6)),
        st.tuples(st.just("pop")),
        st.tuples(st.just("grow"), st.integers(1, 300), st.sampled_from(["int", "str"])),
        st.tuples(st.just("shrink"), st.integers(1, 300)),
        st.tuples(st.just("update"), st.lists(ELEMENTS, max_size=40)),
        st.tuples(st.just("difference_update"), st.lists(ELEMENTS, max_size=40)),
        st.tuples(st.just("clear")),
    ),
    max_size=40,
)


def apply(target: set[Any], op: Op) -> Any:
    """Run one operation on ``target``; what it returns (``pop``'s item) is part of the result."""
    name, *args = op
    if name == "pop":
        return target.pop() if target else EMPTY
    if name == "discard_nth":
        if target:
            target.discard(list(target)[args[0] % len(target)])
    elif name == "grow":  # enough insertions at once to cross a resize
        count, kind = args
        start = len(target) * 7 + 10_000
        target.update(i if kind == "int" else f"g{i}" for i in range(start, start + count))
    elif name == "shrink":  # many deletions: dummies, and a smaller table on the next resize
        for item in list(target)[: args[0]]:
            target.discard(item)
    else:
        getattr(target, name)(*args)
    return None


def built(ops: list[Op]) -> set[Any]:
    made: set[Any] = set()
    for op in ops:
        apply(made, op)
    return made


def resume(variables: dict[str, Any]) -> dict[str, Any]:
    """Capture a namespace and restore it with a new Snapshotter, as a resumed process does."""
    blobs: dict[str, bytes] = {}
    capture = Snapshotter().capture(variables)
    blobs.update(capture.new_blobs)
    into: dict[str, Any] = {"__builtins__": builtins.__dict__}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an exact restore warns about nothing
        Snapshotter().restore(capture.data, load_blob=blobs.__getitem__, into=into)
    return into


@settings(max_examples=200, deadline=None)
@given(before=OPERATIONS, after=OPERATIONS)
def test_a_restored_set_goes_on_as_the_original(before: list[Op], after: list[Op]) -> None:
    original = built(before)
    restored = resume({"s": original})["s"]
    assert list(restored) == list(original)
    assert sys.getsizeof(restored) == sys.getsizeof(original)  # the same table size
    for op in after:
        assert apply(restored, op) == apply(original, op), op
        assert list(restored) == list(original), op
    for _ in range(len(original)):
        assert restored.pop() == original.pop()


FROZEN: dict[str, Callable[[set[Any]], frozenset[Any]]] = {
    "from the set": frozenset,
    "one item at a time": lambda made: frozenset(list(made)),
    "in reverse": lambda made: frozenset(reversed(list(made))),
    "from a generator": lambda made: frozenset(item for item in made if item != 0),
    "a union": lambda made: frozenset(list(made)[::2]) | frozenset(list(made)[1::2]),
    "a filtered set": lambda made: frozenset({item for item in made if item != 1}),
    "a difference": lambda made: frozenset(made) - set(list(made)[:3]),  # dummies, when copied
    "an intersection": lambda made: frozenset(made) & set(list(made)[::2]),
}


@settings(max_examples=600, deadline=None, derandomize=True)  # the same wide sample in every run
@given(ops=OPERATIONS, how=st.sampled_from(sorted(FROZEN)), other=st.lists(ELEMENTS))
def test_a_restored_frozenset_iterates_as_the_original(
    ops: list[Op], how: str, other: list[Any]
) -> None:
    original = FROZEN[how](built(ops))
    restored = resume({"f": original})["f"]
    assert type(restored) is frozenset
    assert list(restored) == list(original)
    assert sys.getsizeof(restored) == sys.getsizeof(original)
    others = set(other)
    for derive in (set, lambda f: f | others, lambda f: f & others, lambda f: f ^ others):
        assert list(derive(restored)) == list(derive(original))


def grown_like_a_program(seed: int) -> set[int]:
    """Runs of consecutive ints and scattered ones, added by ``update`` as a program would."""
    rng = random.Random(seed)
    made: set[int] = set()
    for _ in range(rng.randint(1, 6)):
        start = len(made) * 7 + 10_000
        made.update(range(start, start + rng.randint(1, 300)))
        made.update(rng.sample(range(-300, 3000), rng.randint(0, 40)))
    return made


@pytest.mark.parametrize(
    ("seed", "length", "slots"),
    [
        (14, 285, 512),  # over a quarter of its table: made at once from a dict of 128 items
        (139, 314, 2048),  # under a quarter: grown into it, as the original was
    ],
)
def test_a_frozenset_grown_from_a_generator_comes_back_in_its_order(
    seed: int, length: int, slots: int
) -> None:
    original = frozenset(item for item in grown_like_a_program(seed) if item != 0)
    assert (len(original), set_table.read(original).mask + 1) == (length, slots)  # type: ignore[union-attr]
    restored = resume({"f": original})["f"]  # warnings are errors: an inexact restore fails
    assert list(restored) == list(original)
    assert sys.getsizeof(restored) == sys.getsizeof(original)


def clustered_ints(count: int) -> set[int]:
    """``count`` ints: a run of consecutive ones (which collide in long chains) and scattered ones."""
    rng = random.Random(count)
    start = rng.randint(0, 5000)
    made = set(range(start, start + rng.randint(0, count)))
    while len(made) < count:
        made.add(rng.randint(-300, 3000))
    return made


MADE: dict[str, Callable[[set[int]], frozenset[int]]] = {
    "grown from a generator": lambda made: frozenset(item for item in made),
    "grown from a list in reverse": lambda made: frozenset(reversed(list(made))),
    "a union of halves": lambda made: frozenset(list(made)[::2]) | frozenset(list(made)[1::2]),
    "a union overlapping": lambda made: frozenset(made) | frozenset(list(made)[::3]),
    "an intersection": lambda made: frozenset(made) & frozenset([*list(made)[::2], -1, -2]),
    "a difference with dummies": lambda made: frozenset(made) - {min(made)},
    "a difference by a larger set": lambda made: frozenset(made) - frozenset(range(-300, 400)),
}


def test_frozensets_of_every_size_and_making_are_rebuilt_in_their_order() -> None:
    for count in range(1, 601):  # every size for growth, every fourth for the other makings
        made = clustered_ints(count)
        for how, make in MADE.items() if count % 4 == 0 else list(MADE.items())[:2]:
            original = make(made)
            table = set_table.read(original)
            assert table is not None
            rebuilt, inexact = set_order.restore_set(True, tuple(original), table)
            assert inexact is None, (count, how, inexact)
            assert list(rebuilt) == list(original), (count, how)


class Box:
    def __init__(self, content: Any) -> None:
        self.content = content


def test_sets_inside_other_values_keep_their_order_and_stay_one_object() -> None:
    words = {f"word{i}" for i in range(60)}
    for i in range(0, 60, 4):
        words.discard(f"word{i}")
    words.pop()
    frozen = frozenset(f"f{i}" for i in range(25))
    variables = {
        "words": words,
        "by_key": {"k": words, frozen: words},
        "pair": (words, [words, frozen]),
        "box": Box(words),
        "frozens": {frozen, frozenset({1, 2})},
        "frozen": frozen,
    }
    restored = resume(variables)
    again = restored["words"]
    assert list(again) == list(words)
    assert again is restored["by_key"]["k"] is restored["pair"][0] is restored["pair"][1][0]
    assert again is restored["box"].content
    assert list(restored["frozen"]) == list(frozen)
    assert restored["by_key"][frozen] is again
    assert restored["frozen"] in restored["frozens"]
    assert list(restored["frozens"]) == list(variables["frozens"])
    again.add("late")
    words.add("late")
    assert list(restored["box"].content) == list(words)


def test_an_unchanged_namespace_with_sets_captures_to_the_same_bytes() -> None:
    words = {f"w{i}" for i in range(200)}
    for i in range(0, 200, 3):
        words.discard(f"w{i}")
    words.pop()
    variables = {"words": words, "frozen": frozenset(words), "nested": [{1, 2}, words]}
    snapshotter = Snapshotter()
    first = snapshotter.capture(variables).data
    assert snapshotter.capture(variables).data == first
    restored = resume(variables)  # the same tables: the restored namespace pickles the same
    assert Snapshotter().capture({k: restored[k] for k in variables}).data == first


def test_a_set_in_an_await_result_comes_back_in_its_order() -> None:
    words = {f"w{i}" for i in range(2000)}
    for i in range(1960):  # a big table holding a few words: set(words) would be a small one
        words.discard(f"w{i}")
    result = {"found": words, "first": frozenset(list(words)[:30])}
    pickled = Snapshotter().dumps_value(result, {})
    answered = Snapshotter().loads_value(pickled.data, load_blob=lambda d: b"", ns={})
    assert list(answered["found"]) == list(words)
    assert list(answered["first"]) == list(result["first"])


def test_a_set_of_objects_hashed_by_identity_comes_back_with_its_items_and_a_warning() -> None:
    boxes = {Box(i) for i in range(30)}
    capture = Snapshotter().capture({"boxes": boxes, "labels": {"a", "b"}, "Box": Box})
    into: dict[str, Any] = {}
    with pytest.warns(RuntimeWarning, match=r"a set in variable 'boxes' may iterate in another"):
        Snapshotter().restore(capture.data, load_blob=lambda d: b"", into=into)
    assert sorted(box.content for box in into["boxes"]) == list(range(30))
    assert into["labels"] == {"a", "b"}


def test_where_sets_cannot_be_read_they_are_pickled_as_before_and_it_is_said_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    words = {f"w{i}" for i in range(50)}
    words.discard("w7")
    exact = Snapshotter().capture({"words": words}).data
    monkeypatch.setattr(set_order, "UNSUPPORTED", "this CPython lays sets out otherwise")
    monkeypatch.setattr(set_order, "_unsupported_warned", False)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        plain = Snapshotter().capture({"words": words}).data
        Snapshotter().capture({"again": {1, 2}})
    assert [str(w.message) for w in said] == [  # once a process
        "sets restored from a checkpoint may iterate in another order: "
        "this CPython lays sets out otherwise"
    ]
    into: dict[str, Any] = {}
    with pytest.warns(RuntimeWarning, match="a set in variable 'words' may iterate in another"):
        Snapshotter().restore(exact, load_blob=lambda d: b"", into=into)  # written where it could
    assert into["words"] == words
    monkeypatch.undo()
    into = {}
    Snapshotter().restore(plain, load_blob=lambda d: b"", into=into)  # an older checkpoint's form
    assert into["words"] == words


@pytest.mark.parametrize("version", [(3, 10, 14), (3, 14, 0)])
def test_a_cpython_whose_set_rules_were_not_read_is_unsupported_by_name(
    monkeypatch: pytest.MonkeyPatch, version: tuple[int, int, int]
) -> None:
    assert set_table.UNSUPPORTED is None  # the interpreter the suite runs on
    monkeypatch.setattr(sys, "version_info", version)
    reason = set_table._unsupported()
    assert reason is not None
    assert "is not CPython 3.11-3.13" in reason
