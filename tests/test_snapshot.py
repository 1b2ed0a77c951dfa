"""Namespace capture/restore and await-result pickling, as a resumed program sees them."""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import json
import os
import pickle
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import resumable
from resumable.durability.capture import blobs, pickling
from resumable.durability.capture.snapshot import (
    Capture,
    CheckpointWarning,
    LostVariable,
    ReducerRegistry,
    Snapshotter,
    register_reducer,
)
from resumable.errors import (
    CodeError,
    IntegrityError,
    LostVariableError,
    RecordError,
    RecordVersionError,
)


class Hook:
    """Stands for the durable hook: never captured, provided again on restore."""


def program(source: str, **variables: Any) -> dict[str, Any]:
    """A namespace as the executor builds it, after running ``source`` in it."""
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins.__dict__}
    ns["__resumable__"] = Hook()
    ns.update(variables)
    exec(compile(textwrap.dedent(source), "<program>", "exec", dont_inherit=True), ns)
    return ns


def no_blobs(digest: str) -> bytes:
    raise AssertionError(f"blob {digest} was asked for, but nothing was externalised")


def fresh_namespace() -> dict[str, Any]:
    return {"__builtins__": builtins.__dict__, "__resumable__": Hook()}


class Store(dict[str, bytes]):
    """Blobs by digest, written only from ``new_blobs``."""

    def keep(self, capture: Any) -> Any:
        self.update(capture.new_blobs)
        return capture


def resume(
    ns: dict[str, Any], snapshotter: Snapshotter | None = None, store: Store | None = None
) -> dict[str, Any]:
    """Capture ``ns`` and restore it, with a new Snapshotter as a new process would."""
    store = Store() if store is None else store
    capture = store.keep((snapshotter or Snapshotter()).capture(ns))
    into = fresh_namespace()
    Snapshotter().restore(capture.data, load_blob=store.__getitem__, into=into)
    return into


# -- aliasing -------------------------------------------------------------------------------
def test_two_names_for_one_list_stay_one_list() -> None:
    into = resume(program("a = [1, 2]\nb = a\nd = {'k': a}\ne = d"))
    into["b"].append(3)
    assert into["a"] == [1, 2, 3]
    assert into["d"] is into["e"]
    assert into["d"]["k"] is into["a"]


def test_hook_and_builtins_are_not_captured_and_references_find_the_new_hook() -> None:
    ns = program("hooks = [__resumable__]")
    store = Store()
    capture = store.keep(Snapshotter(blob_threshold=4).capture(ns))  # names in references: inline
    into = fresh_namespace()
    lost = Snapshotter().restore(capture.data, load_blob=store.__getitem__, into=into)
    assert lost == {}
    assert into["hooks"][0] is into["__resumable__"]
    assert b"Hook" not in capture.data


def test_unchanged_namespace_captures_to_the_same_bytes() -> None:
    ns = program("class C:\n    def m(self): return n\nn = 1\nc = C()\nf = lambda: c")
    snapshotter = Snapshotter()
    assert snapshotter.capture(ns).data == snapshotter.capture(ns).data


# -- functions bound to the namespace -------------------------------------------------------
def test_restored_function_reads_and_writes_the_restored_globals() -> None:
    ns = program("n = 0\ndef inc():\n    global n\n    n += 1\n    return n")
    into = resume(ns)
    assert into["inc"]() == 1
    assert into["inc"]() == 2
    assert into["n"] == 2
    assert ns["n"] == 0
    assert into["inc"].__globals__ is into


def test_restored_functions_and_methods_keep_the_file_they_were_compiled_from() -> None:
    # Replay tells the program's coroutines from foreign ones by that file, and tracebacks
    # name it: a restored function must not come back as "<dynamic-code>".
    ns = program("async def fetch():\n    return 1\nclass C:\n    def m(self):\n        return 2")
    into = resume(ns)
    assert into["fetch"].__code__.co_filename == "<program>"
    assert into["C"].m.__code__.co_filename == "<program>"
    assert into["fetch"].__code__.co_firstlineno == 1


def test_methods_of_program_classes_use_the_restored_globals() -> None:
    ns = program(
        """
        n = 0
        class Counter:
            step = 10
            def bump(self):
                global n
                n += self.step
                return n
            @property
            def seen(self):
                return n
            @staticmethod
            def double():
                return n * 2
            @classmethod
            def make(cls):
                return cls()
        c = Counter()
        """
    )
    into = resume(ns)
    assert into["c"].bump() == 10
    assert into["n"] == 10
    assert into["c"].seen == 10
    assert into["Counter"].double() == 20
    assert isinstance(into["Counter"].make(), into["Counter"])
    assert type(into["c"]) is into["Counter"]
    assert into["Counter"] is not ns["Counter"]
    assert ns["c"].bump() == 10  # the live namespace is untouched by the restore
    assert ns["n"] == 10
    assert into["n"] == 10


def test_closures_keep_sharing_their_cells() -> None:
    ns = program(
        """
        def counter():
            count = 0
            def up():
                nonlocal count
                count += 1
                return count
            def get():
                return count
            return up, get
        up, get = counter()
        up()
        def factorial_maker():
            def f(x):
                return 1 if x <= 1 else x * f(x - 1)
            return f
        fact = factorial_maker()
        """
    )
    into = resume(ns)
    assert into["up"]() == 2
    assert into["get"]() == 2
    assert into["fact"](5) == 120


def test_decorated_functions_survive() -> None:
    ns = program(
        """
        import functools
        calls = []
        def logged(fn):
            @functools.wraps(fn)
            def wrapper(*args):
                calls.append(fn.__name__)
                return fn(*args)
            return wrapper
        @logged
        def add(a, b):
            return a + b + offset
        @functools.lru_cache(maxsize=8)
        def square(x):
            calls.append(x)
            return x * x + offset
        offset = 100
        """
    )
    into = resume(ns)
    into["offset"] = 1
    assert into["add"](1, 2) == 4
    assert into["add"].__name__ == "add"
    assert into["square"](3) == 10
    assert into["square"](3) == 10
    assert into["calls"] == ["add", 3]
    assert into["square"].cache_parameters()["maxsize"] == 8


def test_defaults_kwdefaults_and_annotations_refer_to_restored_objects() -> None:
    ns = program(
        """
        class Point:
            pass
        origin = Point()
        def move(p=origin, *, by: Point = origin) -> Point:
            return p
        """
    )
    into = resume(ns)
    move = into["move"]
    assert move() is into["origin"]
    assert move.__kwdefaults__["by"] is into["origin"]
    assert move.__annotations__["return"] is into["Point"]


def test_every_field_of_a_function_comes_back_even_those_referring_to_it() -> None:
    """Functions and their code are pickled in few objects now (a code object as its marshal
    bytes, the fields as flat tuples): each field still comes back, and those that refer to
    the function itself are set once it exists."""
    ns = program(
        """
        def outer():
            seen = []
            def helper(x, y=3, *, z=None):
                \'\'\'Adds.\'\'\'
                seen.append(x)
                return [x + y + k for k in range(2)], seen
            return helper
        helper = outer()
        helper.__qualname__ = "renamed.helper"
        helper.__module__ = "elsewhere"
        helper.tag = {"kind": "tool"}
        def itself(f=None):
            return f
        itself.__defaults__ = (itself,)
        itself.__doc__ = itself
        itself.me = itself
        """
    )
    into = resume(ns)
    helper, itself = into["helper"], into["itself"]
    assert helper(1) == ([4, 5], [1])
    assert helper.__code__ == ns["helper"].__code__
    assert helper.__code__.co_filename == "<program>"
    assert (helper.__name__, helper.__qualname__, helper.__module__) == (
        "helper",
        "renamed.helper",
        "elsewhere",
    )
    assert helper.__doc__ == "Adds."
    assert helper.__defaults__ == (3,)
    assert helper.__kwdefaults__ == {"z": None}
    assert helper.tag == {"kind": "tool"}
    assert itself() is itself
    assert itself.__doc__ is itself
    assert itself.me is itself


def test_a_code_object_marshal_refuses_is_pickled_field_by_field() -> None:
    ns = program(
        """
        class Marker:
            pass
        def answer():
            return 42
        answer.__code__ = answer.__code__.replace(co_consts=(*answer.__code__.co_consts, Marker()))
        """
    )
    into = resume(ns)
    assert into["answer"]() == 42
    assert type(into["answer"].__code__.co_consts[-1]) is into["Marker"]
    assert into["answer"].__code__.co_filename == "<program>"


async def test_async_functions_and_async_generators_use_the_restored_globals() -> None:
    ns = program(
        """
        total = 0
        async def add(x):
            global total
            total += x
            return total
        async def numbers():
            for i in range(limit):
                yield i
        limit = 3
        """
    )
    into = resume(ns)
    assert await into["add"](5) == 5
    assert into["total"] == 5
    into["limit"] = 2
    assert [i async for i in into["numbers"]()] == [0, 1]


def test_dataclasses_and_enums_defined_by_the_program() -> None:
    ns = program(
        """
        import dataclasses, enum
        class Color(enum.Enum):
            RED = 1
            BLUE = 2
        @dataclasses.dataclass(frozen=True)
        class Item:
            name: str
            color: Color = Color.RED
        item = Item("pen", Color.BLUE)
        """
    )
    into = resume(ns)
    assert into["item"] == into["Item"]("pen", into["Color"].BLUE)
    assert into["item"].color is into["Color"].BLUE
    with pytest.raises(AttributeError):
        into["item"].name = "x"  # still frozen


# -- await results ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [None, 0, -(2**70), 1.5, "text", b"\x00bytes", [1, [2, (3, "x")]], {"a": {1, 2}}],
)
def test_plain_values_round_trip(value: Any) -> None:
    snapshotter = Snapshotter()
    pickled = snapshotter.dumps_value(value, {})
    assert pickled.blobs == frozenset()
    assert pickled.new_blobs == {}
    assert snapshotter.loads_value(pickled.data, load_blob=no_blobs, ns={}) == value


def test_values_made_of_program_classes_come_back_as_the_restored_classes() -> None:
    ns = program(
        """
        class Reply:
            def __init__(self, text):
                self.text = text
            def shout(self):
                return self.text.upper() + suffix
        def helper():
            return suffix
        suffix = "!"
        """
    )
    snapshotter = Snapshotter(blob_threshold=4)
    pickled = snapshotter.dumps_value([ns["Reply"]("hi"), ns["helper"], ns["Reply"]], ns)
    into = resume(ns, snapshotter)
    reply, helper, cls = snapshotter.loads_value(pickled.data, load_blob=no_blobs, ns=into)
    assert isinstance(reply, into["Reply"])
    assert cls is into["Reply"]
    assert helper is into["helper"]
    into["suffix"] = "?"
    assert reply.shout() == "HI?"


def test_unnamed_program_functions_in_values_get_the_namespace_as_globals() -> None:
    ns = program("scale = 2\nops = [lambda x: x * scale]")
    snapshotter = Snapshotter()
    pickled = snapshotter.dumps_value(ns["ops"], ns)
    into = resume(ns)
    (op,) = snapshotter.loads_value(pickled.data, load_blob=no_blobs, ns=into)
    into["scale"] = 10
    assert op(3) == 30


def test_value_naming_a_class_the_namespace_lacks_is_refused() -> None:
    ns = program("class Gone:\n    pass")
    snapshotter = Snapshotter()
    pickled = snapshotter.dumps_value(ns["Gone"](), ns)
    with pytest.raises(RecordError, match="Gone"):
        snapshotter.loads_value(pickled.data, load_blob=no_blobs, ns=fresh_namespace())


def test_unpicklable_value_raises_naming_the_culprit() -> None:
    frame = sys._getframe()
    with pytest.raises(pickle.PicklingError, match=r"frame objects .*inside this dict"):
        Snapshotter().dumps_value({"frame": frame}, {})


# -- exceptions ------------------------------------------------------------------------------
def _caught(source: str, ns: dict[str, Any]) -> BaseException:
    try:
        exec(compile(textwrap.dedent(source), "<program>", "exec", dont_inherit=True), ns)
    except BaseException as exc:
        return exc
    raise AssertionError("the source did not raise")


def test_program_exception_with_its_own_init_signature() -> None:
    ns = program(
        """
        class AppError(Exception):
            def __init__(self, code, detail):
                super().__init__(f"{code}: {detail}")
                self.code = code
        """
    )
    exc = _caught("raise AppError(404, 'missing')", ns)
    snapshotter = Snapshotter()
    pickled = snapshotter.dumps_value(exc, ns)
    into = resume(ns)
    again = snapshotter.loads_value(pickled.data, load_blob=no_blobs, ns=into)
    assert type(again) is into["AppError"]
    assert str(again) == "404: missing"
    assert again.code == 404


@pytest.mark.parametrize(
    "exc",
    [
        KeyError("k"),
        OSError(2, "No such file or directory", "data.csv"),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
        CodeError("boom", line=3, kind="exception"),
        LostVariableError("gone", name="x", reason="why"),
    ],
    ids=["KeyError", "OSError", "UnicodeDecodeError", "CodeError", "LostVariableError"],
)
def test_builtin_and_resumable_exceptions(exc: BaseException) -> None:
    snapshotter = Snapshotter()
    again = snapshotter.loads_value(
        snapshotter.dumps_value(exc, {}).data, load_blob=no_blobs, ns={}
    )
    assert type(again) is type(exc)
    assert again.args == exc.args
    assert str(again) == str(exc)
    assert getattr(again, "fields", None) == getattr(exc, "fields", None)
    assert getattr(again, "filename", None) == getattr(exc, "filename", None)


def test_exception_keeps_its_cause_and_context() -> None:
    exc = _caught(
        """
        try:
            {}["k"]
        except KeyError as error:
            raise ValueError("bad input") from error
        """,
        {},
    )
    exc.add_note("while parsing")
    snapshotter = Snapshotter()
    again = snapshotter.loads_value(
        snapshotter.dumps_value(exc, {}).data, load_blob=no_blobs, ns={}
    )
    assert isinstance(again, ValueError)
    assert isinstance(again.__cause__, KeyError)
    assert again.__cause__.args == ("k",)
    assert again.__context__ is again.__cause__
    assert again.__suppress_context__
    assert again.__notes__ == ["while parsing"]


# -- blobs -----------------------------------------------------------------------------------
def test_large_bytes_and_str_become_blobs_written_once() -> None:
    big, text = os.urandom(4096), "é" * 3000
    ns = program("n = 1", big=big, text=text, again=big)
    snapshotter, store = Snapshotter(blob_threshold=1024), Store()
    first = store.keep(snapshotter.capture(ns))
    assert len(first.new_blobs) == 2
    assert first.blobs == frozenset(first.new_blobs)
    assert len(first.data) < 1024
    for digest, blob in first.new_blobs.items():
        assert hashlib.sha256(blob).hexdigest() == digest
    ns["n"] = 2
    second = snapshotter.capture(ns)
    assert second.new_blobs == {}
    assert second.blobs == first.blobs
    ns["copy"] = bytes(bytearray(big))  # same content, another object: not handed out again
    assert snapshotter.capture(ns).new_blobs == {}
    into = fresh_namespace()
    Snapshotter().restore(second.data, load_blob=store.__getitem__, into=into)
    assert into["big"] == big
    assert into["text"] == text
    assert into["again"] is into["big"]


def test_blob_dropped_from_the_namespace_is_handed_out_again_only_if_new() -> None:
    snapshotter = Snapshotter(blob_threshold=10)
    payload = b"x" * 100
    assert snapshotter.capture({"p": payload}).new_blobs
    assert snapshotter.capture({}).new_blobs == {}
    assert snapshotter.capture({"p": b"x" * 100}).new_blobs == {}
    assert snapshotter.capture({"q": b"y" * 100}).new_blobs


def test_blobs_in_await_results() -> None:
    snapshotter, store = Snapshotter(blob_threshold=10), Store()
    data = b"z" * 100
    pickled = store.keep(snapshotter.dumps_value({"body": data}, {}))
    assert len(pickled.new_blobs) == 1
    value = Snapshotter().loads_value(pickled.data, load_blob=store.__getitem__, ns={})
    assert value == {"body": data}
    assert snapshotter.capture({"body": data}).new_blobs == {}  # already handed out


def test_a_restored_blob_is_not_written_or_hashed_again() -> None:
    store = Store()
    ns = program("", big=b"q" * 5000)
    capture = store.keep(Snapshotter(blob_threshold=100).capture(ns))
    second = Snapshotter(blob_threshold=100)
    into = fresh_namespace()
    second.restore(capture.data, load_blob=store.__getitem__, into=into)
    again = second.capture(into)
    assert again.new_blobs == {}
    assert again.blobs == capture.blobs


def test_an_unchanged_big_value_costs_nothing_after_the_first_capture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hashed: list[int] = []
    real_sha256 = blobs.hashlib.sha256

    def counting_sha256(data: bytes) -> Any:
        hashed.append(len(data))
        return real_sha256(data)

    monkeypatch.setattr(blobs.hashlib, "sha256", counting_sha256)
    snapshotter = Snapshotter()
    ns = {"big": os.urandom(16 * 1024 * 1024), "n": 1}
    first = snapshotter.capture(ns)
    assert len(first.new_blobs) == 1
    assert max(hashed) > 16 * 1024 * 1024
    hashed.clear()
    for n in range(2, 12):
        ns["n"] = n
        later = snapshotter.capture(ns)
        assert later.new_blobs == {}
        assert later.blobs == first.blobs
    assert sum(hashed) < 1024  # neither hashed nor encoded again: known by its identity


def test_tampered_blob_is_refused() -> None:
    store = Store()
    capture = store.keep(Snapshotter(blob_threshold=10).capture({"b": b"a" * 50}))
    (digest,) = capture.blobs
    store[digest] = store[digest][:-1] + b"!"
    with pytest.raises(IntegrityError, match=digest):
        Snapshotter().restore(capture.data, load_blob=store.__getitem__, into={})


def test_missing_blob_is_a_record_error() -> None:
    capture = Snapshotter(blob_threshold=10).capture({"b": b"a" * 50})
    with pytest.raises(RecordError, match="missing"):
        Snapshotter().restore(capture.data, load_blob=Store().__getitem__, into={})


def test_unknown_blob_codec_is_refused() -> None:
    store = Store()
    capture = store.keep(Snapshotter(blob_threshold=10).capture({"b": b"a" * 50}))
    (digest,) = capture.blobs
    forged = b"Q" + store[digest][1:]
    forged_digest = hashlib.sha256(forged).hexdigest()
    data = capture.data.replace(digest.encode(), forged_digest.encode())
    with pytest.raises(RecordVersionError, match="codec tag"):
        Snapshotter().restore(data, load_blob={forged_digest: forged}.__getitem__, into={})


class Matrix:
    """A user type stored as an external blob."""

    def __init__(self, rows: list[list[int]]) -> None:
        self.rows = rows


def test_registered_external_types_become_blobs() -> None:
    registry = ReducerRegistry()
    registry.register_external(
        Matrix, lambda m: json.dumps(m.rows).encode(), lambda b: Matrix(json.loads(b))
    )
    m = Matrix([[1, 2], [3, 4]])
    store = Store()
    capture = store.keep(Snapshotter(reducers=registry).capture({"m": m, "same": m}))
    assert len(capture.new_blobs) == 1
    into: dict[str, Any] = {}
    Snapshotter(reducers=registry).restore(capture.data, load_blob=store.__getitem__, into=into)
    assert into["m"].rows == [[1, 2], [3, 4]]
    assert into["same"] is into["m"]
    with pytest.raises(RecordVersionError, match="register_external"):
        Snapshotter(reducers=ReducerRegistry()).restore(
            capture.data, load_blob=store.__getitem__, into={}
        )


# -- codec tags ------------------------------------------------------------------------------
def test_codec_tags_are_checked() -> None:
    snapshotter = Snapshotter()
    value = snapshotter.dumps_value([1], {}).data
    namespace = snapshotter.capture({"x": 1}).data
    with pytest.raises(RecordVersionError, match="expected a namespace pickle but found a value"):
        snapshotter.restore(value, load_blob=no_blobs, into={})
    with pytest.raises(RecordVersionError, match="expected a value pickle"):
        snapshotter.loads_value(namespace, load_blob=no_blobs, ns={})
    with pytest.raises(RecordVersionError, match="does not know"):
        snapshotter.restore(b"\x80" + namespace[1:], load_blob=no_blobs, into={})
    with pytest.raises(RecordVersionError):
        snapshotter.restore(b"", load_blob=no_blobs, into={})


# -- modules ---------------------------------------------------------------------------------
def test_modules_are_stored_by_name() -> None:
    ns = program("import json\nimport os.path as osp")
    capture = Snapshotter().capture(ns)
    assert len(capture.data) < 400
    into = resume(ns)
    assert into["json"] is sys.modules["json"]
    assert into["osp"] is sys.modules["os.path"]


def in_new_process(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (indented, dedented here) in a new interpreter with this resumable;
    it must exit 0."""
    src = str(Path(resumable.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out


def test_a_new_process_resumes_functions_classes_submodules_and_blobs(tmp_path: Path) -> None:
    ns = program(
        """
        import xml.dom.minidom
        n = 0
        class Greeter:
            def greet(self, who):
                global n
                n += 1
                return f"{prefix} {who} #{n}"
        def parse(text):
            return xml.dom.minidom.parseString(text).documentElement.tagName
        prefix = "hello"
        g = Greeter()
        """,
        big=b"B" * 5000,
    )
    store = Store()
    snapshotter = Snapshotter(blob_threshold=1000)
    capture = store.keep(snapshotter.capture(ns))
    value = store.keep(snapshotter.dumps_value(ns["Greeter"](), ns))
    (tmp_path / "ns").write_bytes(capture.data)
    (tmp_path / "value").write_bytes(value.data)
    (tmp_path / "blobs").write_text(json.dumps({k: v.hex() for k, v in store.items()}))
    script = f"""
        import builtins, json, sys
        from pathlib import Path
        from resumable.durability.capture.snapshot import Snapshotter
        folder = Path({str(tmp_path)!r})
        blobs = {{k: bytes.fromhex(v) for k, v in json.loads((folder / "blobs").read_text()).items()}}
        assert "xml.dom.minidom" not in sys.modules
        s = Snapshotter()
        ns = {{"__builtins__": builtins.__dict__}}
        s.restore((folder / "ns").read_bytes(), load_blob=blobs.__getitem__, into=ns)
        value = s.loads_value((folder / "value").read_bytes(), load_blob=blobs.__getitem__, ns=ns)
        print(json.dumps([
            ns["g"].greet("ann"), ns["n"], ns["parse"]("<doc/>"), len(ns["big"]),
            type(value) is ns["Greeter"], value.greet("bob"),
        ]))
    """
    out = in_new_process(script)
    assert json.loads(out.stdout) == ["hello ann #1", 1, "doc", 5000, True, "hello bob #2"]


class _ModuleAsWritten:
    """A module reference as a checkpoint names it: the module and its loaded submodules."""

    def __init__(self, submodules: object) -> None:
        self.submodules = submodules

    def __reduce__(self) -> tuple[Any, ...]:
        return (pickling._make_module, ("xml", self.submodules))


@pytest.mark.parametrize(
    "submodules",
    [
        pytest.param("xml.dom xml.dom.minidom", id="one string"),
        pytest.param(("xml.dom", "xml.dom.minidom"), id="a tuple, as written before"),
    ],
)
def test_a_module_comes_back_with_its_submodules(submodules: object) -> None:
    data = pickle.dumps(_ModuleAsWritten(submodules))
    script = f"""
        import pickle, sys
        assert "xml.dom.minidom" not in sys.modules
        module = pickle.loads({data!r})
        print(module.dom.minidom.parseString("<doc/>").documentElement.tagName)
    """
    out = in_new_process(script)
    assert out.stdout == "doc\n"


# -- lost variables --------------------------------------------------------------------------
@pytest.fixture
def unpicklable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, str]]:
    """One value that cannot be checkpointed, and a pattern its reason must match."""
    kind = request.param
    if kind == "socket":
        sock = socket.socket()
        yield sock, r"socket\.socket objects"
        sock.close()
    elif kind == "file from a descriptor":
        read, write = os.pipe()
        with open(read, "rb") as f:
            yield f, r"_io\.BufferedReader objects .*open it by its path"
        os.close(write)
    elif kind == "thread":
        yield (
            threading.Thread(target=print),
            r"threading\.Thread objects cannot be checkpointed: a thread does not survive",
        )
    elif kind == "frame":
        yield sys._getframe(), "frame objects"
    elif kind == "list holding a thread":
        yield (
            [1, threading.Thread(target=print)],
            r"threading\.Thread objects cannot be .* \(one is inside this list\)",
        )
    else:  # pragma: no cover
        raise AssertionError(kind)


@pytest.mark.parametrize(
    "unpicklable",
    [
        "socket",
        "file from a descriptor",
        "thread",
        "frame",
        "list holding a thread",
    ],
    indirect=True,
)
def test_unpicklable_variable_is_left_out_and_the_rest_survives(
    unpicklable: tuple[Any, str],
) -> None:
    value, reason = unpicklable
    ns = program("a = [1]\nb = a\ndef uses():\n    return culprit", culprit=value)
    snapshotter = Snapshotter()
    with pytest.warns(
        CheckpointWarning, match=f"variable 'culprit' cannot be checkpointed.*{reason}"
    ):
        capture = snapshotter.capture(ns)
    assert list(capture.lost) == ["culprit"]
    assert snapshotter.capture(ns).lost == capture.lost  # no second warning for the same object
    into = fresh_namespace()
    assert Snapshotter().restore(capture.data, load_blob=no_blobs, into=into) == capture.lost
    into["b"].append(2)
    assert into["a"] == [1, 2]
    assert isinstance(into["culprit"], LostVariable)
    with pytest.raises(LostVariableError, match="'culprit'") as info:
        _ = into["uses"]().anything
    assert info.value.fields == {"name": "culprit", "reason": capture.lost["culprit"]}


async def test_running_tasks_and_futures_are_lost() -> None:
    async def work() -> None:
        await asyncio.sleep(0)

    task = asyncio.create_task(work())
    ns = {"task": task, "future": asyncio.get_running_loop().create_future()}
    with pytest.warns(CheckpointWarning) as record:
        capture = Snapshotter().capture({**ns, "ok": 1})
    await task
    assert sorted(capture.lost) == ["future", "task"]
    assert len(record) == 2


def _with(v: Any) -> None:
    with v:
        pass


def _set(v: Any) -> None:
    v.attr = 1


@pytest.mark.parametrize(
    "use",
    [
        lambda v: v.attr,
        lambda v: v(),
        str,
        lambda v: f"{v}",
        list,
        iter,
        bool,
        len,
        lambda v: v[0],
        lambda v: v + 1,
        lambda v: 1 + v,
        lambda v: v < 1,
        lambda v: v == 1,
        lambda v: 1 in v,
        hash,
        int,
        _with,
        _set,
    ],
)
def test_any_use_of_a_lost_variable_raises(use: Callable[[Any], object]) -> None:
    placeholder = LostVariable("conn", "socket.socket objects cannot be checkpointed")
    with pytest.raises(LostVariableError, match="'conn' could not be checkpointed"):
        use(placeholder)


def test_a_lost_variable_stays_lost_across_resumes_without_new_warnings() -> None:
    with pytest.warns(CheckpointWarning):
        first = Snapshotter().capture({"gen": sys._getframe(), "x": 1})
    into: dict[str, Any] = {}
    Snapshotter().restore(first.data, load_blob=no_blobs, into=into)
    assert repr(into["gen"]) == "<lost variable 'gen': frame objects cannot be checkpointed>"
    again = Snapshotter().capture(into)  # the placeholder pickles; no warning
    assert again.lost == first.lost
    into2: dict[str, Any] = {}
    assert Snapshotter().restore(again.data, load_blob=no_blobs, into=into2) == first.lost
    assert into2["x"] == 1


def test_a_mutable_container_is_checked_again_once_it_can_be_pickled() -> None:
    holder: list[Any] = [threading.Thread(target=print)]
    snapshotter = Snapshotter()
    with pytest.warns(CheckpointWarning):
        assert "holder" in snapshotter.capture({"holder": holder}).lost
    holder.clear()
    assert snapshotter.capture({"holder": holder}).lost == {}


# -- reducers --------------------------------------------------------------------------------
class Connection:
    """Holds a generator, so it cannot be pickled without a reducer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.rows = (i for i in range(3))


def test_registered_reducer_makes_a_type_checkpointable() -> None:
    registry = ReducerRegistry()
    registry.register_reducer(Connection, lambda c: (Connection, (c.url,)))
    capture = Snapshotter(reducers=registry).capture({"db": Connection("pg://x")})
    assert capture.lost == {}
    into: dict[str, Any] = {}
    Snapshotter(reducers=registry).restore(capture.data, load_blob=no_blobs, into=into)
    assert into["db"].url == "pg://x"


def test_module_level_register_reducer_applies_to_default_snapshotters() -> None:
    class Token:
        def __init__(self, value: str) -> None:
            self.value = value
            self.rows = (i for i in range(3))

    register_reducer(Token, lambda t: (str, (t.value,)))
    capture = Snapshotter().capture({"t": Token("abc")})
    into: dict[str, Any] = {}
    Snapshotter().restore(capture.data, load_blob=no_blobs, into=into)
    assert into["t"] == "abc"


def test_a_reducer_registered_after_a_capture_is_used_by_the_next() -> None:
    """The pickler remembers, within one capture, which types no reducer takes; a reducer
    registered later (with us or with copyreg) is seen by the next capture."""
    import copyreg

    class Url:
        def __init__(self, url: str) -> None:
            self.url = url

    registry = ReducerRegistry()
    snapshotter = Snapshotter(reducers=registry)
    ns = {"db": [Url("pg://a"), Url("pg://b")]}
    assert snapshotter.capture(ns).lost == {}  # plain: pickled as pickle does
    registry.register_reducer(Url, lambda u: (str, (u.url,)))
    into: dict[str, Any] = {}
    Snapshotter(reducers=registry).restore(
        snapshotter.capture(ns).data, load_blob=no_blobs, into=into
    )
    assert into["db"] == ["pg://a", "pg://b"]

    class Guarded:
        def __reduce_ex__(self, protocol: Any) -> Any:
            raise TypeError("not picklable by itself")

    with pytest.warns(CheckpointWarning):
        assert "g" in snapshotter.capture({"g": Guarded()}).lost
    copyreg.pickle(Guarded, lambda g: (list, ((0, 1, 2),)))
    try:
        capture = snapshotter.capture({"g": Guarded()})
    finally:
        del copyreg.dispatch_table[Guarded]
    assert capture.lost == {}


def test_an_object_whose_class_is_not_its_type_is_judged_by_itself() -> None:
    """One instance of a type judged plain does not make the next one plain: an object may
    say another ``__class__`` (a mock with a spec), and pass ``isinstance`` for a thread."""

    class Shape:
        def __init__(self, thread: bool) -> None:
            self.thread = thread

        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return threading.Thread if self.thread else Shape

    with pytest.warns(CheckpointWarning, match="thread"):
        capture = Snapshotter().capture({"both": [Shape(False), Shape(True)]})
    assert "both" in capture.lost


@pytest.mark.parametrize("cls", [int, dict, list, str])
def test_reducers_for_types_pickle_owns_are_refused(cls: type) -> None:
    with pytest.raises(TypeError, match="pickle handles it itself"):
        ReducerRegistry().register_reducer(cls, repr)


# -- property: nested containers with shared references --------------------------------------
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=24)
    | st.binary(max_size=24)
)


@st.composite
def namespaces(draw: st.DrawFn) -> dict[str, Any]:
    pool: list[Any] = [draw(leaves)]
    for _ in range(draw(st.integers(1, 10))):
        parts = st.one_of(leaves, st.sampled_from(pool)) if pool else leaves
        kind = draw(st.sampled_from(["leaf", "list", "dict", "tuple", "cycle"]))
        if kind == "leaf":
            pool.append(draw(leaves))
        elif kind == "list":
            pool.append(draw(st.lists(parts, max_size=4)))
        elif kind == "dict":
            pool.append(draw(st.dictionaries(st.text(max_size=4), parts, max_size=4)))
        elif kind == "tuple":
            pool.append(tuple(draw(st.lists(parts, max_size=4))))
        else:
            target = [x for x in pool if isinstance(x, list)]
            if target:
                draw(st.sampled_from(target)).append(draw(st.sampled_from(pool)))
    names = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=6))
    return {f"v{i}": value for i, value in enumerate(names)}


def shape(obj: Any, seen: dict[int, int]) -> Any:
    """The value with every list/dict numbered at first sight, so aliasing is part of it."""
    if isinstance(obj, list | dict):
        if id(obj) in seen:
            return ("alias", seen[id(obj)])
        seen[id(obj)] = len(seen)
        if isinstance(obj, list):
            return ("list", [shape(x, seen) for x in obj])
        return ("dict", [(k, shape(v, seen)) for k, v in obj.items()])
    if isinstance(obj, tuple):
        return ("tuple", [shape(x, seen) for x in obj])
    return (type(obj).__name__, obj)


@settings(max_examples=60, deadline=None)
@given(namespaces(), st.sampled_from([8, 64 * 1024]))
def test_round_trip_keeps_values_and_shared_references(ns: dict[str, Any], threshold: int) -> None:
    store = Store()
    capture: Capture = store.keep(Snapshotter(blob_threshold=threshold).capture(ns))
    into: dict[str, Any] = {}
    assert Snapshotter().restore(capture.data, load_blob=store.__getitem__, into=into) == {}
    assert shape(into, {}) == shape(ns, {})


def test_code_from_another_python_version_is_refused_by_name() -> None:
    """A function's code is stored with the bytecode's magic number, as a ``.pyc`` is: a
    checkpoint written by another Python version is refused, never run."""
    from resumable.durability.capture import functions

    capture = Snapshotter().capture(program("def f():\n    return 1\n"))
    magic = functions._MAGIC
    assert magic in capture.data
    other = capture.data.replace(magic, bytes([magic[0] ^ 1, *magic[1:]]))
    with pytest.raises(RecordVersionError, match="another Python version"):
        Snapshotter().restore(other, load_blob=no_blobs, into=fresh_namespace())
