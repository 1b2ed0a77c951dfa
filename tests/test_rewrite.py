"""The await rewrite must not change what a program does, and every await must reach the hook.

Each program runs twice, as CPython's asyncio REPL runs top-level code (compiled with
``PyCF_ALLOW_TOP_LEVEL_AWAIT``, then ``await eval(code, ns)``): as written, and rewritten with a
recording hook. Variables, printed output and the exception raised (type, message, chain and
traceback positions) must be equal. The awaits the interpreter performs in the original run
(traced opcode by opcode) must be the hook calls of the rewritten run, in the same order.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dis
import inspect
import io
import sys
import textwrap
import traceback
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType, TracebackType
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resumable.exec.hooks import HOOK_NAME, AwaitHook, DirectHook, HookBase
from resumable.exec.rewrite import rewrite_source, rewrite_statement

T = TypeVar("T")

FILENAME = "<program>"
CORPUS = Path(__file__).parent / "replay" / "corpus"

PRELUDE = """
import asyncio
import traceback
log = []

async def val(x, delay=0):
    log.append(("val", x if isinstance(x, (int, float, str, tuple, list)) else type(x).__name__))
    await asyncio.sleep(delay)
    return x

async def pair(a, b):
    return (a, b)

async def fail(exc):
    log.append(("fail", repr(exc)))
    await asyncio.sleep(0)
    raise exc

def where(exc):
    tb, lines = exc.__traceback__, []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<program>":
            lines.append(tb.tb_lineno)
        tb = tb.tb_next
    return lines

class Ticker:
    def __init__(self, n):
        self.n, self.i = n, 0
    def __aiter__(self):
        log.append(("aiter", self.n))
        return self
    async def __anext__(self):
        await asyncio.sleep(0)
        if self.i >= self.n:
            raise StopAsyncIteration
        self.i += 1
        return self.i

class Manager:
    def __init__(self, name, suppress=False):
        self.name, self.suppress = name, suppress
    async def __aenter__(self):
        log.append(("enter", self.name))
        await asyncio.sleep(0)
        return self.name
    async def __aexit__(self, et, ev, tb):
        log.append(("exit", self.name, et and et.__name__, repr(ev), tb is not None))
        await asyncio.sleep(0)
        return self.suppress

async def agen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i
"""


@dataclass(frozen=True)
class Program:
    name: str
    body: str
    # False where the interpreter's own await fails its protocol check (``await 5``): the
    # original then performs a failing await that the rewritten code reports from the hook.
    counted: bool = True

    @property
    def source(self) -> str:
        return PRELUDE + textwrap.dedent(self.body)


PROGRAMS = [
    Program(
        "nested awaits",
        """
        a = await val(await val(1) + await val(2))
        b = await pair(await val("x"), await pair(await val("y"), await val("z")))
        c = await {"p": pair}[await val("p")](await val(3), await (await val(val("inner"))))
        """,
    ),
    Program(
        "evaluation order",
        """
        r = (await val("a"), log.append("mid"), await val("b"),
             {await val("k"): await val("v")},
             await val("c") if await val(True) else await val("d"))
        d = {}
        d[await val("key")] = await val("value")
        s = await val(1) + await val(2) * await val(3)
        t = await val(0) or await val(4) and await val(5)
        n = 0
        while await val(n) < 2:
            n += 1
        assert await val(True), await val("never")
        """,
    ),
    Program(
        "comprehensions",
        """
        a = [await val(i) for i in range(3)]
        b = {await val(i) % 2 for i in range(4)}
        c = {i: await val(i * i) for i in range(3)}
        d = [x async for x in Ticker(3)]
        e = {x: y async for x in Ticker(2) async for y in agen(2)}
        g = (await val(x) async for x in agen(3))
        f = [y async for y in g]
        h = [x async for x in agen(5) if await val(x % 2)]
        i = [[await val((x, y)) for y in range(2)] for x in range(2)]
        j = sorted({x async for x in agen(3)})
        k = [x for x in await val([7, 8]) if x > 7]
        """,
    ),
    Program(
        "try except finally",
        """
        try:
            await fail(ValueError("bad"))
        except ValueError as exc:
            caught = (str(exc), where(exc))
            r = await val("handled")
        else:
            r = "no error"
        finally:
            fin = await val("finally")
        try:
            try:
                await fail(KeyError("k"))
            finally:
                log.append("inner finally")
                await val("cleanup")
        except LookupError as e:
            kind = (type(e).__name__, where(e))
        try:
            await val("fine")
        except Exception:
            bad = True
        else:
            ok = await val("else branch")
        """,
    ),
    Program(
        "exception chaining",
        """
        try:
            await fail(ValueError("first"))
        except ValueError:
            await fail(RuntimeError("second"))
        """,
    ),
    Program(
        "uncaught exception from an awaited call",
        """
        x = await val(1)
        async def deeper(n):
            if n == 0:
                await fail(ZeroDivisionError("at the bottom"))
            return await deeper(n - 1)
        await deeper(2)
        y = "not reached"
        """,
    ),
    Program(
        "async with",
        """
        async with Manager("c") as name:
            res = name
        async with Manager("a") as a, Manager("b") as b:
            both = (a, b, await val("body"))
        try:
            async with Manager("x"), Manager("y", suppress=True):
                log.append("body")
                raise ValueError("inside")
            after = "suppressed"
        except ValueError:
            after = "not suppressed"
        try:
            async with Manager("d"):
                raise KeyError("escapes")
        except KeyError as e:
            esc = (repr(e), where(e))
        async with Manager("outer") as o:
            async with Manager(await val("inner")) as i:
                nested = (o, i)
        for n in range(3):
            async with Manager(f"loop{n}"):
                if n == 0:
                    continue
                if n == 1:
                    break
        """,
    ),
    Program(
        "async with failing enter",
        """
        class BadEnter:
            async def __aenter__(self):
                raise OSError("cannot enter")
            async def __aexit__(self, *exc):
                log.append("exit must not run")
        try:
            async with Manager("first"), BadEnter():
                log.append("body must not run")
        except OSError as e:
            err = (str(e), where(e))
        async with BadEnter():
            pass
        """,
    ),
    Program(
        "asynccontextmanager",
        """
        import contextlib
        @contextlib.asynccontextmanager
        async def opened(name):
            log.append(("open", name))
            try:
                yield await val(name.upper())
            except ValueError as e:
                log.append(("swallowed", str(e)))
            finally:
                log.append(("close", name))
        async with opened("f") as f:
            got = f
        async with opened("g"):
            raise ValueError("swallow me")
        async with opened("h"):
            raise KeyError("not swallowed")
        """,
    ),
    Program(
        "async for else break continue",
        """
        out = []
        async for x in Ticker(5):
            if x == 2:
                continue
            if x == 4:
                break
            out.append(await val(x))
        else:
            out.append("no-break")
        async for x in agen(2):
            out.append(x)
        else:
            out.append("else")
        async for x in Ticker(0):
            out.append("never")
        else:
            out.append("empty")
        async def first_even(source):
            async for x in source:
                if x % 2 == 0:
                    return x
        fe = await first_even(Ticker(5))
        async for a in agen(2):
            async for b in Ticker(2):
                out.append((a, b))
        """,
    ),
    Program(
        "async for raising",
        """
        async def broken():
            yield 1
            raise ValueError("stream broke")
        got = []
        try:
            async for x in broken():
                got.append(x)
        except ValueError as e:
            err = (str(e), where(e))
        async for x in broken():
            got.append(x)
        """,
    ),
    Program(
        "f-strings",
        """
        s = f"{await val('a')}-{await val(1)!r:>5}-{f'{await val(2)}'}"
        w = 4
        t = f"{await val(3.14159):{w}.{await val(2)}f}"
        u = f\"\"\"
        {await val('multi')}
          {await val('line')}\"\"\"
        """,
    ),
    Program(
        "walrus",
        """
        r = [(y := await val(i)) for i in range(3)]
        last = y
        if (n := await val(5)) > 3:
            big = n
        total = 0
        while (step := await val(total)) < 3:
            total = step + 1
        z = [q async for x in agen(3) if (q := x * 10) > 0]
        """,
    ),
    Program(
        "lambda default arguments",
        """
        f = lambda x=await val(3), *, k=await val("k"): (x * 2, k)
        r = f()
        rs = [h() for h in [lambda i=await val(i): i for i in range(3)]]
        """,
    ),
    Program(
        "async generator with asend athrow aclose",
        """
        async def echo():
            received = []
            try:
                while True:
                    v = yield await val(len(received))
                    received.append(v)
            except KeyError as e:
                yield f"caught {e}"
            finally:
                log.append(("closed", received))
        g = echo()
        a = await g.asend(None)
        b = await g.asend("x")
        c = await g.athrow(KeyError("k"))
        await g.aclose()
        try:
            await g.asend("late")
        except StopAsyncIteration:
            stopped = True
        h = echo()
        first = await anext(h)
        await h.athrow(ValueError("out"))
        """,
    ),
    Program(
        "future and custom awaitables",
        """
        import types
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        loop.call_soon(fut.set_result, 42)
        r = await fut
        class Ready:
            def __await__(self):
                yield from asyncio.sleep(0).__await__()
                return "ready"
        s = await Ready()
        @types.coroutine
        def legacy():
            yield
            return "legacy"
        t = await legacy()
        failed = loop.create_future()
        loop.call_soon(failed.set_exception, TimeoutError("late"))
        try:
            await failed
        except TimeoutError as e:
            timeout = (str(e), where(e))
        task = asyncio.create_task(val("task"))
        u = await task
        v = await asyncio.gather(val(1), val(2, 0.001), pair(await val("p"), 3))
        w = await asyncio.wait_for(val("wait"), timeout=5)
        """,
    ),
    Program(
        "class bodies with async methods",
        """
        class Service:
            factor = 3
            async def compute(self, x):
                return await val(x * self.factor)
            @classmethod
            async def make(cls):
                return cls(), await val("made")
            async def each(self):
                return [await val(i) async for i in agen(2)]
            async def __aenter__(self):
                return await val("svc")
            async def __aexit__(self, *exc):
                return False
        class Derived(Service):
            async def compute(self, x):
                return await super().compute(x) + 1
        svc, tag = await Service.make()
        r = (await svc.compute(2), await svc.each(), await Derived().compute(1))
        async with svc as inside:
            seen = inside
        """,
    ),
    Program(
        "closures and nonlocal",
        """
        def counter():
            count = 0
            async def bump():
                nonlocal count
                count += await val(1)
                return count
            return bump
        bump = counter()
        r = [await bump(), await bump()]
        async def outer():
            x = await val("x")
            async def inner():
                return x + await val("y")
            return await inner()
        s = await outer()
        """,
    ),
    Program(
        "match, del, return",
        """
        match await val({"kind": "point", "x": 1}):
            case {"kind": "point", "x": x} if await val(x > 0):
                m = ("point", x)
            case _:
                m = "other"
        items = [1, 2, 3]
        del items[await val(0)]
        async def early():
            async with Manager("early"):
                async for x in agen(10):
                    if x == 1:
                        return x
        e = await early()
        """,
    ),
    Program(
        "await of a non-awaitable",
        """
        x = await val(1)
        await 5
        """,
        counted=False,
    ),
    Program(
        "async for over a list",
        """
        async for x in [1, 2]:
            pass
        """,
    ),
    Program(
        "async for over a non-iterator",
        """
        class NoNext:
            def __aiter__(self):
                return 5
        async for x in NoNext():
            pass
        """,
    ),
    Program(
        "anext returning a non-awaitable",
        """
        class SyncNext:
            def __aiter__(self):
                return self
            def __anext__(self):
                return 1
        try:
            async for x in SyncNext():
                pass
        except TypeError as e:
            cause = repr(e.__cause__)
        r = [x async for x in SyncNext()]
        """,
        counted=False,
    ),
    Program(
        "async with on a plain object",
        """
        async with Manager("ok"), object():
            pass
        """,
    ),
    Program(
        "async with without aexit",
        """
        class HalfManager:
            async def __aenter__(self):
                return 1
        async with HalfManager():
            pass
        """,
    ),
    Program(
        "aenter returning a non-awaitable",
        """
        class SyncEnter:
            def __aenter__(self):
                return 1
            async def __aexit__(self, *exc):
                return False
        async with SyncEnter():
            pass
        """,
        counted=False,
    ),
    Program(
        "aexit returning a non-awaitable",
        """
        class SyncExit:
            async def __aenter__(self):
                return 1
            def __aexit__(self, *exc):
                return True
        async with SyncExit():
            raise ValueError("hidden by the TypeError")
        """,
        counted=False,
    ),
    Program(
        "multi-line async with on a plain object",
        """
        async with (
            Manager("fine"),
            object(),
        ):
            pass
        """,
    ),
    Program(
        "multi-line async comprehension over a list",
        """
        r = [
            x
            async for x in
                [1, 2]
        ]
        """,
    ),
    Program(
        "async comprehensions over displays",
        """
        errors = []
        try:
            r = [x async for x in [1, 2]]
        except TypeError as e:
            errors.append(str(e))
        try:
            r = {x async for x in {1, 2}}
        except TypeError as e:
            errors.append(str(e))
        try:
            r = [x async for x in {1, len("ab")}]
        except TypeError as e:
            errors.append(str(e))
        try:
            r = [x async for x in [*"ab"]]
        except TypeError as e:
            errors.append(str(e))
        try:
            r = [(x, y) async for x in agen(1) async for y in [x]]
        except TypeError as e:
            errors.append(str(e))
        import collections
        try:
            async for x in collections.deque([1]):
                pass
        except TypeError as e:
            errors.append(str(e))
        class OnInstance:
            pass
        m = OnInstance()
        m.__aenter__ = Manager("m").__aenter__
        m.__aexit__ = Manager("m").__aexit__
        try:
            async with m:
                pass
        except TypeError as e:
            errors.append(str(e))
        del m
        """,
    ),
    Program(
        "printed output",
        """
        print("start")
        print(await val("printed"), end="|")
        async for x in agen(2):
            print(x)
        print(f"{await val('done')}")
        """,
    ),
    Program(
        "multi-line constructs",
        """
        a = await (
            val("a")
        )
        async with (
            Manager("m1") as m1,
            Manager(
                await val("m2")
            ) as m2,
        ):
            pair_ = (m1, m2)
        b = [
            x
            async for x in
                agen(2)
        ]
        async for x in (
            Ticker(1)
        ):
            c = x
        await fail(
            ValueError(
                "multi-line"
            )
        )
        """,
    ),
]


# -- running a program ------------------------------------------------------------------------


class RecordingHook(HookBase):
    """Passes every await through, noting its site."""

    def __init__(self) -> None:
        self.sites: list[str] = []

    async def await_(self, site: str, awaitable: Awaitable[T]) -> T:
        self.sites.append(site)
        return await awaitable


@dataclass(frozen=True)
class Outcome:
    namespace: dict[str, str]
    output: str
    error: list[tuple[str, str, list[tuple[Any, ...]]]] | None


def _describe(value: Any) -> str:
    plain = (type(None), bool, int, float, str, bytes, list, tuple, dict, set, frozenset)
    if isinstance(value, (*plain, BaseException)):
        return repr(value)
    return f"<{type(value).__qualname__}>"


def _positions(tb: TracebackType | None) -> list[tuple[Any, ...]]:
    return [
        (frame.lineno, frame.colno, frame.end_lineno, frame.end_colno)
        for frame in traceback.extract_tb(tb)
        if frame.filename == FILENAME
    ]


def _describe_error(exc: BaseException | None) -> list[tuple[str, str, list[tuple[Any, ...]]]]:
    chain: list[tuple[str, str, list[tuple[Any, ...]]]] = []
    while exc is not None and len(chain) < 5:
        chain.append((type(exc).__name__, str(exc), _positions(exc.__traceback__)))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return chain


async def run(tree: ast.Module, hook: AwaitHook | None = None) -> Outcome:
    code = compile(tree, FILENAME, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    namespace: dict[str, Any] = {"__name__": "__main__", HOOK_NAME: hook}
    output = io.StringIO()
    error: BaseException | None = None
    with contextlib.redirect_stdout(output):
        try:
            result = eval(code, namespace)
            if code.co_flags & inspect.CO_COROUTINE:
                await result
        except Exception as exc:
            error = exc
    names = {k: _describe(v) for k, v in namespace.items() if not k.startswith("__")}
    return Outcome(names, output.getvalue(), _describe_error(error) if error else None)


class AwaitTracer:
    """Where the interpreter performs each await in the program's own frames, in order.

    Positions are instruction starts (line, column). An async comprehension is a coroutine
    that the enclosing code awaits at the comprehension's start: that await is the
    interpreter's, not the program's, and is left out.
    """

    _AWAIT = dis.opmap["GET_AWAITABLE"]
    _NEXT = dis.opmap["GET_ANEXT"]

    def __init__(self, tree: ast.Module) -> None:
        self.positions: list[tuple[int | None, int | None]] = []
        self._comprehensions = {
            (node.lineno, node.col_offset)
            for node in ast.walk(tree)
            if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp)
        }
        self._code_positions: dict[CodeType, list[tuple[Any, ...]]] = {}

    def _call(self, frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename != FILENAME:
            return None
        frame.f_trace_opcodes = True
        return self._opcode

    def _opcode(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if event == "opcode" and code.co_code[frame.f_lasti] in (self._AWAIT, self._NEXT):
            positions = self._code_positions.setdefault(code, list(code.co_positions()))
            line, _, column, _ = positions[frame.f_lasti // 2]
            implicit = code.co_code[frame.f_lasti] == self._AWAIT and (
                (line, column) in self._comprehensions
            )
            if not implicit:
                self.positions.append((line, column))
        return self._opcode

    @contextlib.contextmanager
    def installed(self) -> Any:
        previous = sys.gettrace()
        sys.settrace(self._call)
        try:
            yield self
        finally:
            sys.settrace(previous)


_DERIVED = {"await_": "", "aiter": "/next", "with_": "/enter"}


def _hook_calls(tree: ast.AST) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == HOOK_NAME
        and node.func.attr != "entered"
    ]


def hook_sites(tree: ast.AST) -> list[str]:
    """The sites the hook's ``await_`` will see from a rewritten tree (``/next`` for aiter...)."""
    sites = []
    for call in _hook_calls(tree):
        assert isinstance(call.func, ast.Attribute)
        assert isinstance(call.args[0], ast.Constant)
        assert isinstance(call.args[0].value, str)
        sites.append(call.args[0].value + _DERIVED[call.func.attr])
    return sites


def hook_positions(tree: ast.AST, sites: list[str]) -> list[tuple[int | None, int | None]]:
    """Where the hook calls that produced ``sites`` stand in the rewritten tree."""
    where = {}
    for call in _hook_calls(tree):
        assert isinstance(call.args[0], ast.Constant)
        where[call.args[0].value] = (call.lineno, call.col_offset)
    return [where[site.split("/")[0]] for site in sites]


def async_constructs(tree: ast.AST) -> int:
    """How many awaits, async fors and async with items a tree holds."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Await | ast.AsyncFor):
            count += 1
        elif isinstance(node, ast.AsyncWith):
            count += len(node.items)
        elif isinstance(node, ast.comprehension) and node.is_async:
            count += 1
    return count


# -- the programs behave the same ---------------------------------------------------------------


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
async def test_rewritten_program_behaves_like_the_original(program: Program) -> None:
    tree = ast.parse(program.source, FILENAME)
    tracer = AwaitTracer(tree)
    with tracer.installed():
        original = await run(tree)
    hook = RecordingHook()
    rewritten_tree = rewrite_source(program.source, 7, filename=FILENAME)
    rewritten = await run(rewritten_tree, hook)

    assert rewritten == original
    if program.counted:
        assert hook_positions(rewritten_tree, hook.sites) == tracer.positions


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
async def test_direct_hook_behaves_like_the_original(program: Program) -> None:
    original = await run(ast.parse(program.source, FILENAME))
    direct = await run(rewrite_source(program.source, filename=FILENAME), DirectHook())
    assert direct == original


async def test_programs_run_as_intended() -> None:
    """The table is not vacuous: programs print, raise what they mean to, and use every hook."""
    outputs, raised, sites = [], set(), []
    for program in PROGRAMS:
        hook = RecordingHook()
        outcome = await run(rewrite_source(program.source, filename=FILENAME), hook)
        outputs.append(outcome.output)
        sites += hook.sites
        if outcome.error:
            raised.add(outcome.error[0][0])
    assert any(outputs)
    assert raised == {
        "TypeError",
        "RuntimeError",
        "ZeroDivisionError",
        "KeyError",
        "ValueError",
        "OSError",
    }
    assert {site.partition("/")[2] for site in sites} == {"", "next", "enter", "exit"}
    assert len(sites) > 300


def test_error_messages_are_the_interpreters() -> None:
    """The protocol errors the proxies raise word things as the interpreter does."""
    by_name = {p.name: p for p in PROGRAMS}
    expected = {
        "await of a non-awaitable": "object int can't be used in 'await' expression",
        "async for over a list": "'async for' requires an object with __aiter__ method, got list",
        "async for over a non-iterator": "'async for' received an object from __aiter__ that "
        "does not implement __anext__: int",
        "async with on a plain object": "'object' object does not support the asynchronous "
        "context manager protocol",
    }
    for name, message in expected.items():
        outcome = asyncio.run(
            run(rewrite_source(by_name[name].source, filename=FILENAME), DirectHook())
        )
        assert outcome.error is not None
        assert outcome.error[0][:2] == ("TypeError", message)


# -- every await reaches the hook; sites are unique and stable --------------------------------


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_every_await_is_routed_through_the_hook(program: Program) -> None:
    original = ast.parse(program.source)
    rewritten = rewrite_source(program.source, 3)
    sites = hook_sites(rewritten)

    assert len(sites) == async_constructs(original) > 0
    assert len(set(sites)) == len(sites)
    assert all(site.startswith("3:") for site in sites)
    assert not any("#" in site for site in sites)
    for node in ast.walk(rewritten):
        if isinstance(node, ast.Await):
            assert isinstance(node.value, ast.Call)
            assert ast.unparse(node.value.func) == f"{HOOK_NAME}.await_"


def test_sites_are_stable_and_name_the_construct() -> None:
    source = textwrap.dedent(
        """\
        async with A() as a, B() as b:
            async for x in it:
                y = [z async for z in await src(await g())]
        """
    )
    first = hook_sites(rewrite_source(source, 5))
    second = hook_sites(rewrite_source(source, 5))
    assert first == second
    assert sorted(first) == [
        "5:1:11/enter",
        "5:1:21/enter",
        "5:2:4/next",
        "5:3:30",
        "5:3:30/next",
        "5:3:40",
    ]
    assert hook_sites(rewrite_source(source, 6)) == [s.replace("5:", "6:", 1) for s in first]


def test_sites_follow_the_lines_of_the_response() -> None:
    tree = ast.parse("x = await f()\ny = await g()")
    ast.increment_lineno(tree, 10)
    assert hook_sites(rewrite_statement(tree, 2)) == ["2:11:4", "2:12:4"]


@pytest.mark.parametrize("offset", [0, 1, 41])
def test_a_line_offset_places_every_node_as_moving_the_lines_first_would(offset: int) -> None:
    """The executor rewrites a statement parsed alone with its line in the stream: the tree
    (sites, positions of the nodes parsed and of the nodes added) is the one that moving the
    lines first, then rewriting, then placing what lacks a position would give."""
    sources = [program.source for program in PROGRAMS]
    sources += [path.read_text() for path in sorted(CORPUS.glob("*.py"))]
    for index, source in enumerate(sources):
        moved = ast.parse(source)
        ast.increment_lineno(moved, offset)
        expected = ast.fix_missing_locations(rewrite_statement(moved, index))
        walked = rewrite_statement(ast.parse(source), index, line_offset=offset)
        assert ast.dump(walked, include_attributes=True) == ast.dump(
            expected, include_attributes=True
        ), source


def test_sites_stay_unique_without_positions() -> None:
    call = ast.Call(func=ast.Name(id="f", ctx=ast.Load()), args=[], keywords=[])
    value = ast.Tuple(elts=[ast.Await(value=call), ast.Await(value=call)], ctx=ast.Load())
    tree = ast.Module(body=[ast.Expr(value=value)], type_ignores=[])
    assert hook_sites(rewrite_statement(tree, 0)) == ["0:0:0", "0:0:0#2"]
    compile(tree, FILENAME, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)  # placed, as it must be


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    return await g()",
        "class A:\n    x = await g()",
        "def f():\n    return [x async for x in g()]",
        "def f():\n    async with g():\n        pass",
        "x = lambda: await g()",
    ],
)
def test_compile_errors_are_unchanged(source: str) -> None:
    def compile_error(tree: ast.Module) -> tuple[str, int | None]:
        with pytest.raises(SyntaxError) as info:
            compile(tree, FILENAME, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return info.value.msg, info.value.lineno

    assert compile_error(rewrite_source(source)) == compile_error(ast.parse(source))


def test_rewrite_source_reports_syntax_errors_with_the_filename() -> None:
    with pytest.raises(SyntaxError) as info:
        rewrite_source("x = (await f(", filename="<turn 3>")
    assert info.value.filename == "<turn 3>"


# -- the hook protocol --------------------------------------------------------------------------


class OutcomeHook(HookBase):
    """Notes each site with what its await gave: a value or an exception type."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[str, str]] = []

    async def await_(self, site: str, awaitable: Awaitable[T]) -> T:
        try:
            value = await awaitable
        except BaseException as exc:
            self.outcomes.append((site, type(exc).__name__))
            raise
        self.outcomes.append((site, repr(value)))
        return value


class CountingIterable:
    def __init__(self) -> None:
        self.aiter_calls = 0

    def __aiter__(self) -> AsyncIterator[int]:
        self.aiter_calls += 1

        async def numbers() -> AsyncIterator[int]:
            yield 1
            yield 2

        return numbers()


async def test_aiter_calls_aiter_once_and_steps_through_await() -> None:
    hook = OutcomeHook()
    source = CountingIterable()
    iterator = hook.aiter("0:1:0", source)
    assert source.aiter_calls == 1
    assert [x async for x in iterator] == [1, 2]
    assert source.aiter_calls == 1
    assert hook.outcomes == [
        ("0:1:0/next", "1"),
        ("0:1:0/next", "2"),
        ("0:1:0/next", "StopAsyncIteration"),
    ]


class Suppressing:
    def __init__(self) -> None:
        self.exit_args: tuple[Any, ...] = ()

    async def __aenter__(self) -> str:
        return "entered"

    async def __aexit__(self, *exc: Any) -> bool:
        self.exit_args = exc
        return True


async def test_with_enters_and_exits_through_await() -> None:
    hook = OutcomeHook()
    manager = Suppressing()
    error = ValueError("body")
    async with hook.with_("0:2:6", manager) as value:
        assert value == "entered"
        raise error
    assert manager.exit_args == (ValueError, error, error.__traceback__)
    assert hook.outcomes == [("0:2:6/enter", "'entered'"), ("0:2:6/exit", "True")]


async def test_a_hook_can_answer_an_await_without_running_it() -> None:
    """What replay does: the journaled value is returned and the call never runs."""

    class Replaying(HookBase):
        async def await_(self, site: str, awaitable: Awaitable[T]) -> T:
            if site.endswith("/next"):
                return await awaitable
            assert inspect.iscoroutine(awaitable)
            awaitable.close()
            return f"replayed {site}"  # type: ignore[return-value]

    tree = rewrite_source("calls = []\nasync def act():\n    calls.append(1)\nr = await act()", 4)
    namespace: dict[str, Any] = {HOOK_NAME: Replaying()}
    await eval(compile(tree, FILENAME, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
    assert namespace["r"] == "replayed 4:4:4"
    assert namespace["calls"] == []


async def test_direct_hook_passes_results_and_errors_through() -> None:
    hook: AwaitHook = DirectHook()
    future = asyncio.get_running_loop().create_future()
    future.set_result(3)
    assert await hook.await_("0:1:0", future) == 3
    failing = asyncio.get_running_loop().create_future()
    failing.set_exception(KeyError("k"))
    with pytest.raises(KeyError):
        await hook.await_("0:1:0", failing)


def test_a_hook_must_implement_await() -> None:
    class Incomplete(HookBase):
        pass

    with pytest.raises(TypeError, match="await_"):
        Incomplete()  # type: ignore[abstract]


# -- random expressions keep their evaluation order --------------------------------------------


def _expressions() -> st.SearchStrategy[str]:
    leaves = st.one_of(
        st.integers(0, 9).map(lambda k: f"await val({k})"),
        st.integers(0, 9).map(lambda k: f"f'<{{await val({k})}}>'"),
        st.integers(0, 3).map(lambda k: f"[x async for x in agen({k})]"),
    )

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, inner).map(lambda ab: f"await pair({ab[0]}, {ab[1]})"),
            st.tuples(inner, inner).map(lambda ab: f"[{ab[0]}, {ab[1]}]"),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[1]} if {t[0]} else {t[2]})"),
            st.tuples(inner, inner).map(lambda ab: f"{{repr({ab[0]}): {ab[1]}}}"),
            inner.map(lambda a: f"[({a}) for _ in range(2)]"),
            inner.map(lambda a: f"(w := {a})"),
            inner.map(lambda a: f"await (lambda v={a}: val(v))()"),
        )

    return st.recursive(leaves, extend, max_leaves=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_expressions())
def test_random_expressions_keep_order_and_reach_the_hook(expression: str) -> None:
    source = PRELUDE + f"result = {expression}\n"
    tree = ast.parse(source, FILENAME)
    tracer = AwaitTracer(tree)
    with tracer.installed():
        original = asyncio.run(run(tree))
    hook = RecordingHook()
    rewritten_tree = rewrite_source(source, filename=FILENAME)
    rewritten = asyncio.run(run(rewritten_tree, hook))
    assert rewritten == original
    assert original.error is None
    assert hook_positions(rewritten_tree, hook.sites) == tracer.positions


def test_functions_the_program_defines_say_when_they_start() -> None:
    source = (
        "def f(x):\n"
        "    'doc'\n"
        "    return x + 1\n"
        "async def g():\n"
        "    return 2\n"
        "h = lambda: 3\n"
        "class C:\n"
        "    def m(self):\n"
        "        return 4\n"
    )
    calls: list[str] = []

    class Counting(DirectHook):
        def entered(self) -> None:
            calls.append("entered")

    namespace: dict[str, Any] = {HOOK_NAME: Counting()}
    exec(compile(rewrite_source(source), "<response>", "exec"), namespace)
    assert calls == []  # defining runs nothing
    assert namespace["f"](1) == 2
    assert namespace["f"].__doc__ == "doc"
    assert namespace["h"]() == 3
    assert namespace["C"]().m() == 4
    coroutine = namespace["g"]()
    assert calls == ["entered"] * 3  # a coroutine's body starts when it is awaited
    with pytest.raises(StopIteration):
        coroutine.send(None)
    assert calls == ["entered"] * 4


def test_a_generator_says_when_it_resumes_or_runs_a_handler() -> None:
    """A generator resumed by library code runs the program again without starting: each
    resumption after a yield, and a ``finally`` or handler reached by an exception thrown in
    at the yield (``close()``, ``aclose()``), marks that program code ran."""
    source = (
        "def g(log):\n"
        "    try:\n"
        "        x = yield 1\n"
        "        log.append(x)\n"
        "        yield 2\n"
        "    except ValueError:\n"
        "        log.append('handled')\n"
        "        yield 3\n"
        "    finally:\n"
        "        log.append('finally')\n"
    )
    calls: list[str] = []

    class Counting(DirectHook):
        def entered(self) -> None:
            calls.append("entered")

    namespace: dict[str, Any] = {HOOK_NAME: Counting()}
    exec(compile(rewrite_source(source), "<response>", "exec"), namespace)
    log: list[str] = []
    generator = namespace["g"](log)
    assert next(generator) == 1
    assert calls == ["entered"]  # the start
    assert generator.send("sent") == 2
    assert calls == ["entered"] * 2  # resumed after yield 1
    assert generator.throw(ValueError) == 3
    assert calls == ["entered"] * 3  # the handler
    generator.close()  # GeneratorExit at yield 3: the finally runs
    assert calls == ["entered"] * 4
    assert log == ["sent", "handled", "finally"]


def test_without_marks_the_rewrite_adds_no_entry_call() -> None:
    tree = rewrite_source("def f():\n    return 1\n", mark_entries=False)
    assert "entered" not in ast.unparse(tree)
