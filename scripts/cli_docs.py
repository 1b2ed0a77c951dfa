#!/usr/bin/env python
"""Write docs/cli.md from the `resumable` command (every command, whoever added it).

python scripts/cli_docs.py           # rewrite docs/cli.md
python scripts/cli_docs.py --check   # exit 1 if docs/cli.md is not what the app renders
"""

from __future__ import annotations

import sys
from pathlib import Path

from resumable.cli.commands import app
from resumable.cli.docs import render

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def main(argv: list[str]) -> int:
    text = render(app)
    if "--check" in argv:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.name} is out of date: run python scripts/cli_docs.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
