"""Imports point down: cli -> fleet/ui -> drivers -> script/playbooks/integrations -> durability
-> exec/store/llm -> config -> errors (tests/layers/checker.py has the ranks); inside a layer,
its units keep their order (SUBPACKAGE_RANKS); and no import circle, in src/ or scripts/."""

from __future__ import annotations

from pathlib import Path

from tests.layers.checker import order_violations, package_cycles, violations

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def test_the_package_keeps_its_layers() -> None:
    assert [str(v) for v in violations(SRC)] == []


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """A lower layer importing a higher one (here lazily, inside a function) fails the rule."""
    pkg = tmp_path / "resumable"
    (pkg / "durability").mkdir(parents=True)
    (pkg / "cli").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "durability" / "__init__.py").write_text("")
    (pkg / "cli" / "__init__.py").write_text("from resumable.durability import session\n")
    (pkg / "durability" / "session.py").write_text(
        "def resume():\n    from resumable.cli import app\n    return app\n"
    )
    assert [str(v) for v in violations(tmp_path)] == [
        "resumable.durability.session:2 imports resumable.cli"
    ]


def test_peers_do_not_import_each_other(tmp_path: Path) -> None:
    pkg = tmp_path / "resumable"
    (pkg / "store").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "store" / "__init__.py").write_text("from ..exec import rewrite\n")
    assert [str(v) for v in violations(tmp_path)] == ["resumable.store:1 imports resumable.exec"]


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_package_has_no_import_circle() -> None:
    assert package_cycles(SRC, "resumable") == []


def test_the_scripts_have_no_import_circle() -> None:
    assert package_cycles(ROOT / "scripts") == []


def test_an_import_circle_is_reported(tmp_path: Path) -> None:
    """A circle closed by a lazy import (inside a function) is still a circle; a package's
    ``__init__`` importing its own modules is not one."""
    _tree(
        tmp_path,
        {
            "resumable/__init__.py": "",
            "resumable/fleet/__init__.py": "from resumable.fleet.worker import Worker\n",
            "resumable/fleet/worker.py": "from resumable.fleet.handoff import ChildRun\n",
            "resumable/fleet/handoff.py": (
                "def main():\n    from resumable.fleet import worker\n    return worker\n"
            ),
            "resumable/fleet/queue.py": "from . import handoff\n",
        },
    )
    assert package_cycles(tmp_path, "resumable") == [
        ["resumable.fleet.handoff", "resumable.fleet.worker"]
    ]


def test_the_layers_keep_their_inner_order() -> None:
    assert [str(v) for v in order_violations(SRC)] == []


def test_store_backends_are_peers_above_what_they_share(tmp_path: Path) -> None:
    """A backend importing another backend, the protocol importing a backend, and a module
    with no rank all fail the order."""
    _tree(
        tmp_path,
        {
            "resumable/__init__.py": "",
            "resumable/store/__init__.py": "from resumable.store.base import Lease\n",
            "resumable/store/base.py": (
                "def f():\n    from resumable.store.filesystem import FileStore\n"
            ),
            "resumable/store/common.py": "from resumable.store.base import Lease\n",
            "resumable/store/sqlite/__init__.py": "",
            "resumable/store/sqlite/store.py": (
                "from resumable.store.common import busy\n"
                "from resumable.store.postgres.log import PostgresLog\n"
            ),
            "resumable/store/postgres/__init__.py": "",
            "resumable/store/postgres/log.py": "from ..common import busy\n",
            "resumable/store/filesystem/__init__.py": "",
            "resumable/store/tape.py": "",
        },
    )
    assert [str(v) for v in order_violations(tmp_path)] == [
        "resumable.store.base:2 imports resumable.store.filesystem",
        "resumable.store.sqlite.store:2 imports resumable.store.postgres.log",
        "resumable.store.tape: store.tape has no rank in SUBPACKAGE_RANKS",
    ]
