"""``asyncio.run(...)`` in a script's top-level code becomes an await of its coroutine."""

from __future__ import annotations

import ast

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
def test_arguments_a_running_loop_cannot_honour_are_refused(call: str, says: str) -> None:
    tree = ast.parse(f"import asyncio\n\nif True:\n    {call}\n")
    refused = refused_loop_run(tree, loop_run_names(tree))
    assert refused is not None
    assert refused[0] == 4
    assert says in refused[1]


def test_accepted_calls_are_not_refused() -> None:
    tree = ast.parse("import asyncio\nasyncio.run(main(), debug=None)\nasyncio.run(main())\n")
    assert refused_loop_run(tree, loop_run_names(tree)) is None
