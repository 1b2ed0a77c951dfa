"""The store's subpackages: the folder store and the protocol load no server driver."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize(
    "module", ["resumable.store", "resumable.store.filesystem", "resumable.store.sqlite"]
)
def test_an_embedded_store_loads_no_server_driver(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "loaded = sorted(m for m in ('asyncpg', 'redis') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_each_backend_keeps_its_import_path(tmp_path: Path) -> None:
    from resumable.store import FileStore, open_store
    from resumable.store.filesystem import FileStore as Direct

    assert FileStore is Direct
    assert type(open_store("sqlite", path=str(tmp_path / "runs.db"))).__name__ == "SQLiteStore"
