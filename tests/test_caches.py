"""lru_cache and cache wrappers of program functions come back with their entries and counters."""

from __future__ import annotations

import functools
import traceback
from typing import Any

import pytest
from tests.test_snapshot import program, resume

from resumable.durability.capture.lost import CheckpointWarning


def _calls(ns: dict[str, Any]) -> list[Any]:
    return ns["calls"]  # type: ignore[no-any-return]


SOURCE = """
    import functools
    calls = []

    @functools.lru_cache(maxsize=3)
    def bounded(x, y=0):
        calls.append(("bounded", x, y))
        return [x, y]

    @functools.cache
    def unbounded(*args, **kwargs):
        calls.append(("unbounded", args, kwargs))
        return len(calls)

    @functools.lru_cache(typed=True)
    def typed(x, *, scale=1):
        calls.append(("typed", x, scale))
        return x * scale

    class Shop:
        def __init__(self, name):
            self.name = name

        @functools.lru_cache(maxsize=None)
        def price(self, item):
            calls.append(("price", self.name, item))
            return len(item)

    shop = Shop("corner")
    for x in [1, 2, 1, "a", (1, 2), 3, 1]:
        bounded(x)
    bounded(5, y=6)
    unbounded(1, "b", k=2)
    unbounded(); unbounded(); unbounded(2.5)
    typed(1); typed(1.0); typed(1, scale=3); typed(1)
    shop.price("tea"); shop.price("tea"); shop.price("coffee")
"""


def test_entries_counters_and_lru_order_come_back() -> None:
    ns = program(SOURCE)
    into = resume(ns)
    names = ("bounded", "unbounded", "typed")
    for name in names:
        assert into[name].cache_info() == ns[name].cache_info(), name
    assert into["Shop"].price.cache_info() == ns["Shop"].price.cache_info()
    before = len(_calls(into))

    # every cached call answers from the cache, without running the function
    def cached_calls(namespace: dict[str, Any]) -> list[Any]:
        return [
            namespace["bounded"](5, y=6),
            namespace["bounded"](1),
            namespace["unbounded"](1, "b", k=2),
            namespace["unbounded"](),
            namespace["typed"](1.0),
            type(namespace["typed"](1.0)),
            namespace["typed"](1, scale=3),
            namespace["shop"].price("tea"),
        ]

    assert cached_calls(into) == cached_calls(ns)
    assert len(_calls(into)) == before
    # the least recently used entry is the next to go, as in the original
    for namespace in (ns, into):
        namespace["bounded"](7)
        namespace["bounded"]("a")
    assert _calls(into)[before:] == _calls(ns)[-2:] == [("bounded", 7, 0), ("bounded", "a", 0)]
    for name in names:
        assert into[name].cache_info() == ns[name].cache_info(), name


def test_the_restored_wrapper_is_the_same_kind_of_object() -> None:
    ns = program(SOURCE)
    into = resume(ns)
    wrapper = into["bounded"]
    assert type(wrapper) is type(ns["bounded"])
    assert wrapper.__wrapped__.__name__ == "bounded"
    assert (wrapper.__name__, wrapper.__qualname__) == ("bounded", "bounded")
    assert wrapper.cache_parameters() == {"maxsize": 3, "typed": False}
    assert into["typed"].cache_parameters() == {"maxsize": 128, "typed": True}
    wrapper.cache_clear()
    assert wrapper.cache_info() == functools._CacheInfo(0, 0, 3, 0)
    assert wrapper(1) == [1, 0]
    assert _calls(into)[-1] == ("bounded", 1, 0)


def test_a_restored_cache_adds_no_frame_to_tracebacks() -> None:
    ns = program(
        """
        import functools
        @functools.cache
        def fails(x):
            raise ValueError(x)
        """
    )
    into = resume(ns)
    for namespace in (ns, into):
        with pytest.raises(ValueError, match="1") as raised:
            namespace["fails"](1)
        frames = [f.name for f in traceback.extract_tb(raised.value.__traceback__)]
        assert frames[-1] == "fails"
        assert "<lambda>" not in frames
    assert into["fails"].cache_info() == ns["fails"].cache_info()


def test_misses_of_calls_that_raised_are_counted() -> None:
    ns = program(
        """
        import functools
        @functools.lru_cache(maxsize=2)
        def half(x):
            if x % 2:
                raise ValueError(x)
            return x // 2
        for x in range(6):
            try:
                half(x)
            except ValueError:
                pass
        """
    )
    into = resume(ns)
    assert into["half"].cache_info() == ns["half"].cache_info()
    assert into["half"].cache_info().misses == 6


def test_an_entry_that_cannot_be_pickled_is_left_out_with_a_warning() -> None:
    ns = program(
        """
        import functools
        calls = []
        @functools.cache
        def chars(name):
            calls.append(name)
            return (c for c in name) if name == "gen" else name
        chars("gen"), chars("plain")
        """
    )
    with pytest.warns(CheckpointWarning, match=r"1 entries of the cache of chars\(\)"):
        into = resume(ns)
    assert into["chars"]("plain") == "plain"
    assert into["calls"] == ["gen", "plain"]
    into["chars"]("gen")
    assert into["calls"] == ["gen", "plain", "gen"]
