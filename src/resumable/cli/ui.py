"""``resumable ui``: serve the read-only web inspector of the configured store's runs."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from resumable.cli.app import ConfigOption, app, err
from resumable.cli.runtime import _config, _fail
from resumable.errors import ResumableError
from resumable.extras import import_extra


@app.command("ui")
def ui_command(
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (loopback unless --token).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: any free one).")
    ] = 8000,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            help="Secret every request must carry (?token=T or Authorization: Bearer T); "
            "needed to listen on a non-loopback address.",
        ),
    ] = None,
    config_path: ConfigOption = None,
) -> None:
    """Serve a read-only web inspector of the runs: timeline, code, variables, questions.

    Example: resumable ui --port 8765
    """
    config = _config(config_path)
    try:
        for module in ("starlette", "uvicorn", "jinja2"):
            import_extra(module, "ui", "resumable ui")
    except ResumableError as error:
        _fail(error)
    from resumable.ui import serve

    def announce(url: str) -> None:
        err.print(f"resumable: inspector at {url} (read-only; Ctrl-C to stop)", markup=False)

    try:
        serve(config, os.environ, host=host, port=port, token=token, announce=announce)
    except ResumableError as error:
        _fail(error)
