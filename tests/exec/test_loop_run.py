"""``asyncio.run(...)`` in a script's top-level code becomes an await of its coroutine."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from resumable.exec.loop_run import await_loop_runs, loop_run_names, refused_loop_run


def _rewritten(source: str) -> str:
    tree = ast.parse(source)
    return ast.unparse(await_loop_runs(tree, loop_run_names(tree)))


def test_the_names_come_from_the_script_imports() -> None:
    tree = ast.parse("import asyncio\nimport asyncio as aio\nfrom asyncio import run as go\n")
    assert loop_run_names(tree) == {"asyncio.run", "aio.run", "go"}


def test_a_from_import_name_bound_again_is_not_asyncio_run() -> None:
    assert loop_run_names(ast.parse("from asyncio import run\ndef run(x):\n    pass\n")) == set()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import asyncio\nasyncio.run(main())", "import asyncio\nawait main()"),
        (
            "import asyncio\nif __name__ == '__main__':\n    sys.exit(asyncio.run(main(), debug=False))",
            "import asyncio\nif __name__ == '__main__':\n    sys.exit(await main())",
        ),
        ("from asyncio import run\nx = run(main(1))", "from asyncio import run\nx = await main(1)"),
        # not in a function, class or generator expression, where await means something else
        (
            "import asyncio\ndef cli():\n    asyncio.run(main())",
            "import asyncio\n\ndef cli():\n    asyncio.run(main())",
        ),
        (
            "import asyncio\ng = (asyncio.run(c) for c in cs)",
            "import asyncio\ng = (asyncio.run(c) for c in cs)",
        ),
        ("subprocess.run(['ls'])", "subprocess.run(['ls'])"),
    ],
)
def test_top_level_calls_become_awaits(source: str, expected: str) -> None:
    assert _rewritten(source) == expected


@pytest.mark.parametrize(
    ("call", "says"),
    [
        ("asyncio.run(main(), debug=True)", "PYTHONASYNCIODEBUG=1"),
        ("asyncio.run(main(), loop_factory=uvloop.new_event_loop)", "loop_factory="),
        ("asyncio.run()", "takes one coroutine"),
        ("asyncio.run(*coros)", "takes one coroutine"),
    ],
)
@pytest.mark.parametrize("with_source", [False, True])
def test_arguments_a_running_loop_cannot_honour_are_refused(
    call: str, says: str, with_source: bool
) -> None:
    source = f"import asyncio\n\nif True:\n    {call}\n"
    tree = ast.parse(source)
    refused = refused_loop_run(tree, loop_run_names(tree), source if with_source else None)
    assert refused is not None
    assert refused[0] == 4
    assert says in refused[1]


def test_the_text_spares_the_walk_only_where_it_cannot_hold_a_call() -> None:
    spaced = "import asyncio as aio\n(aio  # the loop\n .run)(main(), debug=True)\n"
    fullwidth = "from asyncio import run as \uff52\n\uff52(main(), debug=True)\n"  # NFKC: r
    for source in (spaced, fullwidth):
        tree = ast.parse(source)
        assert refused_loop_run(tree, loop_run_names(tree), source) is not None, source
    quiet = "import asyncio\nx = await asyncio.sleep(0)\n"
    tree = ast.parse(quiet)
    assert loop_run_names(tree) == {"asyncio.run"}
    assert refused_loop_run(tree, loop_run_names(tree), quiet) is None


def _names_by_walking_everything(tree: ast.Module) -> frozenset[str]:
    """The rule read plainly, one walk over every node: what the faster reading must give."""
    names: set[str] = set()
    bare: set[str] = set()
    rebound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(f"{a.asname or a.name}.run" for a in node.names if a.name == "asyncio")
        elif isinstance(node, ast.ImportFrom) and node.module == "asyncio" and not node.level:
            bare.update(a.asname or a.name for a in node.names if a.name == "run")
        elif isinstance(node, ast.ImportFrom):
            rebound.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            rebound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            rebound.add(node.name)
    return frozenset(names | (bare - rebound))


NESTED_IMPORTS = [
    "def f():\n    import asyncio as a\n",
    "class C:\n    if x:\n        pass\n    else:\n        import asyncio\n",
    "try:\n    pass\nexcept E:\n    from asyncio import run\n",
    "match x:\n    case 1:\n        from asyncio import run as go\n",
    "with w:\n    for i in y:\n        while z:\n            import asyncio as b\n",
    "from asyncio import run\nrun = 1\n",
    "from asyncio import run\n[run := 2]\n",
    "from asyncio import run\nfrom other import run\n",
    "async def g():\n    async with a:\n        async for i in b:\n            import asyncio\n",
    "try:\n    pass\nfinally:\n    import asyncio as c\n",
]


@pytest.mark.parametrize("source", NESTED_IMPORTS)
def test_the_names_are_read_from_imports_at_any_depth(source: str) -> None:
    tree = ast.parse(source)
    assert loop_run_names(tree) == _names_by_walking_everything(tree)


def test_the_names_of_every_script_in_the_corpus_are_those_of_a_plain_walk() -> None:
    corpus = Path(__file__).resolve().parents[1] / "replay" / "corpus"
    library = Path(ast.__file__).parent
    paths = [*corpus.glob("*.py"), *sorted(library.glob("*.py"))[:200]]
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert loop_run_names(tree) == _names_by_walking_everything(tree), path


def test_accepted_calls_are_not_refused() -> None:
    tree = ast.parse("import asyncio\nasyncio.run(main(), debug=None)\nasyncio.run(main())\n")
    assert refused_loop_run(tree, loop_run_names(tree)) is None
