"""Set a project up: ``init``."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Annotated

import typer

from resumable.cli.app import app, err
from resumable.cli.runtime import _fail
from resumable.errors import UsageError


@app.command("init")
def init_command(
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    path: Annotated[Path, typer.Option("--path", help="Where to write it.")] = Path(
        "playbooks.toml"
    ),
) -> None:
    """Write a commented playbooks.toml with every setting and its default.

    Beside it, resumable.key holds a new encryption key (mode 0600; an existing key file is
    kept): with encrypt = true, export RESUMABLE_ENCRYPTION_KEY="$(cat resumable.key)".

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
    from resumable.durability.log.crypto import generate_key

    key_file = path.parent / KEY_FILE
    try:
        path.write_text(render_example(), encoding="utf-8")
        made = _write_new_key(key_file, generate_key())
    except OSError as exc:
        where = exc.filename or path
        _fail(UsageError(f"cannot write {where} ({exc.strerror or exc}); choose another --path"))
    err.print(f"resumable: wrote {path}", markup=False)
    said = (
        f"wrote a new encryption key to {key_file} (mode 0600: readable by you only)"
        if made
        else f"kept the encryption key already in {key_file}"
    )
    err.print(
        f"resumable: {said}; keep it secret and out of version control. To encrypt checkpoints "
        "at rest, set encrypt = true and "
        f'export RESUMABLE_ENCRYPTION_KEY="$(cat {shlex.quote(str(key_file))})"',
        markup=False,
    )


KEY_FILE = "resumable.key"
"""The file ``init`` writes a new encryption key to, beside the config file."""


def _write_new_key(key_file: Path, key: str) -> bool:
    """Write ``key`` to a new file only its owner can read; False if the file exists."""
    try:
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(key + "\n")
    return True
