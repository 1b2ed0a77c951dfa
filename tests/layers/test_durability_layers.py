"""Inside durability, imports point down too: embedded -> runs -> replay -> capture, log
-> effects (DURABILITY_RANKS in tests/layers/checker.py)."""

from __future__ import annotations

from pathlib import Path

from tests.layers.checker import sublayer_violations

SRC = Path(__file__).resolve().parents[2] / "src"


def test_durability_keeps_the_order_of_its_subpackages() -> None:
    assert [str(v) for v in sublayer_violations(SRC)] == []


def test_an_upward_or_peer_import_inside_durability_is_caught(tmp_path: Path) -> None:
    """The log importing the session (lazily), or capture importing the log (a peer), fails."""
    durability = tmp_path / "resumable" / "durability"
    for sub in ("log", "capture", "runs"):
        (durability / sub).mkdir(parents=True)
        (durability / sub / "__init__.py").write_text("")
    (durability / "log" / "records.py").write_text(
        "def load():\n    from resumable.durability.runs.session import RunSession\n"
    )
    (durability / "capture" / "snapshot.py").write_text(
        "from resumable.durability.log import records\n"
    )
    (durability / "runs" / "session.py").write_text(
        "from resumable.durability.log import records\n"
    )
    assert [str(v) for v in sublayer_violations(tmp_path)] == [
        "resumable.durability.capture.snapshot:1 imports resumable.durability.log",
        "resumable.durability.log.records:2 imports resumable.durability.runs.session",
    ]
