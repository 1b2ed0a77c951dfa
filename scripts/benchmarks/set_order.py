"""`bench.py set-order`: checkpointing a set with its hash table, against pickling it as pickle does.

    python scripts/bench.py set-order            # a table (a few seconds)
    python scripts/bench.py set-order --quick    # small sets: a smoke test, not figures

A namespace holding one set of N strings, made at once or made of 1.5 N with a third deleted
(its table then has dummies and is larger than ``set(items)`` would make it), is captured by a ``Snapshotter`` as a
statement boundary captures it: with the set's table, as resumable does, and, as the
baseline, without it (``set_order.UNSUPPORTED`` set: the set is pickled by pickle alone, as
before tables were kept). The two take turns in every round. Restoring each capture into a
new namespace is timed the same way; the table's restore is the one that rebuilds it.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from benchmarks.report import Report, median_seconds
from resumable.durability.capture import set_order
from resumable.durability.capture.snapshot import Snapshotter


def set_order_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small sets: a smoke test")
    parser.add_argument("--sizes", default="100,1000,10000", help="items in the set")


@contextlib.contextmanager
def tables_off() -> Iterator[None]:
    """Sets pickled as pickle does, silently: the baseline."""
    saved = set_order.UNSUPPORTED, set_order._unsupported_warned
    set_order.UNSUPPORTED, set_order._unsupported_warned = "baseline", True
    try:
        yield
    finally:
        set_order.UNSUPPORTED, set_order._unsupported_warned = saved


def namespace(size: int, deleted: bool) -> dict[str, Any]:
    made = size * 3 // 2 if deleted else size
    words = {f"word{i}" for i in range(made)}
    for i in range(0, made if deleted else 0, 3):
        words.discard(f"word{i}")
    return {"words": words, "count": size, "label": "a set of words"}


BLOBS: dict[str, bytes] = {}
"""What the captures stored beside their data (a large namespace is stored in pieces)."""


def capture(snapshotter: Snapshotter, ns: dict[str, Any]) -> bytes:
    taken = snapshotter.capture(ns)
    BLOBS.update(taken.new_blobs)
    SIZES[taken.data] = len(taken.data) + sum(len(BLOBS[digest]) for digest in taken.blobs)
    return taken.data


SIZES: dict[bytes, int] = {}
"""A capture's bytes with those of its pieces."""


def restore(data: bytes) -> dict[str, Any]:
    into: dict[str, Any] = {}
    Snapshotter().restore(data, load_blob=BLOBS.__getitem__, into=into)
    return into


def measure(size: int, deleted: bool, repeat: int) -> tuple[Any, ...]:
    """One row: capture and restore times of the set with its table and without, and sizes."""
    ns = namespace(size, deleted)
    with_table, plain = Snapshotter(), Snapshotter()

    def pickled_plain() -> bytes:
        with tables_off():
            return capture(plain, ns)

    data, plain_data = capture(with_table, ns), pickled_plain()
    assert list(restore(data)["words"]) == list(ns["words"])
    captures = median_seconds(
        {"table": lambda: capture(with_table, ns), "plain": pickled_plain}, repeat
    )
    restores = median_seconds(
        {"table": lambda: restore(data), "plain": lambda: restore(plain_data)}, repeat
    )
    return (
        f"{size} str" + (", 1/3 deleted" if deleted else ""),
        captures["table"] * 1e6,
        captures["plain"] * 1e6,
        captures["table"] / captures["plain"],
        SIZES[data],
        SIZES[plain_data],
        restores["table"] * 1e6,
        restores["plain"] * 1e6,
        restores["table"] / restores["plain"],
    )


def bench_set_order(args: argparse.Namespace) -> Report:
    sizes = [100] if args.quick else [int(size) for size in args.sizes.split(",")]
    repeat = 3 if args.quick else args.repeat
    columns = (
        "namespace",
        "capture us",
        "plain us",
        "x plain",
        "bytes",
        "plain bytes",
        "restore us",
        "plain restore us",
        "restore x plain",
    )
    title = "Capture and restore of a set with its hash table, against pickle's (median)"
    rows = [measure(size, deleted, repeat) for size in sizes for deleted in (False, True)]
    return Report(title, columns, rows, {"repeat": repeat})
