"""Set a project up: ``init``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from resumable.cli.app import (
    _fail,
    app,
    err,
)
from resumable.errors import UsageError


@app.command("init")
def init_command(
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    path: Annotated[Path, typer.Option("--path", help="Where to write it.")] = Path(
        "playbooks.toml"
    ),
) -> None:
    """Write a commented playbooks.toml with every setting and its default.

    Example: resumable init --path playbooks.toml
    """
    from resumable.config import render_example

    if path.is_dir():
        _fail(
            UsageError(
                f"{path} is a directory; give --path the file to write, e.g. {path / 'playbooks.toml'}"
            )
        )
    if path.exists() and not force:
        _fail(UsageError(f"{path} already exists; pass --force to overwrite it"))
    from resumable.durability.crypto import generate_key

    try:
        path.write_text(render_example(), encoding="utf-8")
    except OSError as exc:
        _fail(UsageError(f"cannot write {path} ({exc.strerror or exc}); choose another --path"))
    err.print(f"resumable: wrote {path}", markup=False)
    err.print(
        "resumable: to encrypt checkpoints at rest, set encrypt = true and keep this key "
        f"secret: export RESUMABLE_ENCRYPTION_KEY={generate_key()}",
        markup=False,
    )
