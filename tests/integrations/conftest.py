"""The kill -9 sweeps in scripts/ are imported here as the modules they are when run."""

import sys
from pathlib import Path

import pytest

SCRIPTS = str(Path(__file__).resolve().parents[2] / "scripts")
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A module that runs another project's tests marks them (skips, expected failures)."""
    for item in items:
        adjust = getattr(getattr(item, "module", None), "adjust_collected", None)
        if adjust is not None:
            adjust(item)
