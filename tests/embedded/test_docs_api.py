"""Every example in docs/api.md runs as written (each in a fresh folder and process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_page_has_its_examples() -> None:
    assert len(SNIPPETS) >= 5


@pytest.mark.parametrize("number", range(len(SNIPPETS)))
def test_snippet_runs(number: int, tmp_path: Path) -> None:
    source = SNIPPETS[number]
    if "smolagents" in source:
        pytest.importorskip("smolagents")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("RESUMABLE_CRASH_AFTER", None)
    script = tmp_path / "snippet.py"
    script.write_text(source, encoding="utf-8")  # smolagents' @tool reads its source
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
