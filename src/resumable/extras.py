"""Optional parts of ``resumable`` and the ``pip install`` that brings each in.

The core install runs the folder store, the scripted LLM and the CLI. The server stores,
encryption at rest and the integrations need drivers a laptop user should not have to
download; importing one through :func:`import_extra` turns a missing driver into one line
naming the extra to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from resumable.errors import ConfigError

DISTRIBUTION = "resumable-exec"
"""The name on the package index (``resumable`` there is another project); the import
name and the command stay ``resumable``."""


def import_extra(module: str, extra: str, needed_for: str, *, key: str | None = None) -> ModuleType:
    """``importlib.import_module(module)``, or a ConfigError naming ``resumable-exec[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] != module.split(".")[0]:
            raise  # the driver is there but something inside it is broken: show that
        raise ConfigError(
            f"{needed_for} needs the {module.split('.')[0]} package, which is not installed: "
            f"pip install '{DISTRIBUTION}[{extra}]'",
            key=key,
            extra=extra,
        ) from None
