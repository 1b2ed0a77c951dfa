"""Imports point down: cli -> fleet/ui -> drivers -> script/playbooks/integrations -> durability
-> exec/store/llm -> config -> errors (tests/layers/checker.py has the ranks)."""

from __future__ import annotations

from pathlib import Path

from tests.layers.checker import violations

SRC = Path(__file__).resolve().parents[2] / "src"


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
