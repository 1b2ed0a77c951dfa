"""A large namespace is stored in pieces: a value that did not change is not written again.

What a user relies on: after a resume every variable holds what it held, values shared
between variables are still shared, functions still see the live globals, sets iterate as
before; and a statement that leaves a large value alone writes kilobytes, not the value.
"""

from __future__ import annotations

import pytest

from resumable.durability.capture.pieces import LARGE, PIECE, PIECES_CODEC
from resumable.durability.capture.snapshot import Capture, Snapshotter
from resumable.errors import IntegrityError, RecordError

BIG = 400 * 1024


def _big_dict() -> dict[int, str]:
    return {i: f"{i:090d}" for i in range(BIG // 90)}


def _store(*captures: Capture) -> dict[str, bytes]:
    blobs: dict[str, bytes] = {}
    for capture in captures:
        blobs.update(capture.new_blobs)
    return blobs


def _restore(capture: Capture, blobs: dict[str, bytes]) -> dict[str, object]:
    into: dict[str, object] = {}
    Snapshotter().restore(capture.data, load_blob=blobs.__getitem__, into=into)
    return into


def test_a_large_namespace_is_stored_in_pieces_and_restored_whole() -> None:
    ns: dict[str, object] = {"small": 1, "big": _big_dict(), "tail": "x"}
    capture = Snapshotter().capture(ns)
    assert capture.data[:1] == PIECES_CODEC
    assert len(capture.data) < 4096
    assert all(len(blob) <= PIECE + 1 for blob in capture.new_blobs.values())
    restored = _restore(capture, _store(capture))
    assert restored == ns
    assert list(restored) == list(ns)  # the namespace's order, not the order of the pieces


def test_an_unchanged_large_value_is_not_written_again() -> None:
    snapshotter = Snapshotter()
    ns: dict[str, object] = {"big": _big_dict(), "counter": 0}
    first = snapshotter.capture(ns)
    seconds = []
    for n in range(1, 4):
        ns["counter"] = n
        seconds.append(snapshotter.capture(ns))
    assert sum(len(b) for b in first.new_blobs.values()) > BIG
    for later in seconds:
        assert later.new_blobs == {}, "the unchanged dict was written again"
        assert len(later.data) < 4096
    assert _restore(seconds[-1], _store(first))["counter"] == 3


def test_a_growing_value_writes_only_its_last_pieces() -> None:
    snapshotter = Snapshotter()
    rows = [f"{i:090d}" for i in range(3 * PIECE // 90)]
    ns: dict[str, object] = {"rows": rows}
    first = snapshotter.capture(ns)
    rows.append("one more")
    second = snapshotter.capture(ns)
    written = sum(len(b) for b in second.new_blobs.values())
    assert 0 < written <= PIECE + 1
    restored = _restore(second, _store(first, second))
    assert restored["rows"] == rows


def test_values_shared_between_variables_stay_shared() -> None:
    inner = [1, 2, 3]
    big = {"inner": inner, "rows": [f"{i:090d}" for i in range(BIG // 90)]}
    ns: dict[str, object] = {"big": big, "alias": big, "inner": inner, "pair": (inner, big)}
    snapshotter = Snapshotter()
    first = snapshotter.capture(ns)  # learns which variables are large
    capture = snapshotter.capture(ns)
    assert capture.data[:1] == PIECES_CODEC
    restored = _restore(capture, _store(first, capture))
    assert restored["alias"] is restored["big"]
    assert restored["inner"] is restored["big"]["inner"]  # type: ignore[index]
    assert restored["pair"][0] is restored["inner"]  # type: ignore[index]
    restored["inner"].append(4)  # type: ignore[attr-defined]
    assert restored["big"]["inner"] == [1, 2, 3, 4]  # type: ignore[index]


def test_functions_in_a_large_value_see_the_restored_globals() -> None:
    ns: dict[str, object] = {}
    exec("n = 1\ndef get():\n    return n\nhandlers = [get] * 10\n", ns)
    ns["data"] = _big_dict()
    del ns["__builtins__"]
    capture = Snapshotter().capture(ns)
    into: dict[str, object] = {}
    Snapshotter().restore(capture.data, load_blob=_store(capture).__getitem__, into=into)
    into["n"] = 7
    assert into["handlers"][3]() == 7  # type: ignore[index]


def test_sets_in_a_large_value_iterate_as_before() -> None:
    items = {f"k{i}" for i in range(3000)} | {i * 8 for i in range(500)}
    ns: dict[str, object] = {"sets": [items, frozenset(items)], "pad": _big_dict()}
    capture = Snapshotter().capture(ns)
    restored = _restore(capture, _store(capture))
    assert [list(s) for s in restored["sets"]] == [list(items), list(frozenset(items))]  # type: ignore[attr-defined]


def test_a_small_namespace_stays_one_pickle() -> None:
    ns: dict[str, object] = {"a": "x" * (LARGE // 2), "b": list(range(100))}
    capture = Snapshotter().capture(ns)
    assert capture.data[:1] != PIECES_CODEC
    assert capture.new_blobs == {}


def test_a_missing_or_altered_piece_is_refused() -> None:
    capture = Snapshotter().capture({"big": _big_dict()})
    blobs = _store(capture)
    digest = sorted(blobs)[0]
    altered = dict(blobs)
    altered[digest] = blobs[digest][:-1] + b"!"
    with pytest.raises(IntegrityError, match=digest):
        _restore(capture, altered)
    del altered[digest]
    with pytest.raises(RecordError, match=f"blob {digest} that a checkpoint refers to is missing"):
        _restore(capture, altered)
