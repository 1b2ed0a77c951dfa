"""The ``resumable`` command's first steps, before the command line and the runtime are loaded.

Two things need none of them, and a user feels both:

- ``resumable --version`` reads the installed distribution's metadata file directly;
- a new run (``exec``, ``run``) must hash strings with its store's seed (see
  ``durability/log/hashseed.py``), which only takes effect when an interpreter starts. When the
  store is a folder whose key is already there (or the key is in the environment), the seed is
  computed here from the key alone (``resumable.config.files`` finds it without loading the
  settings), and the command starts once more with it at once, before anything heavy is
  imported. Otherwise (another store, a store not made yet, a setting that fails) nothing is
  decided here: the command line finds the seed the long way, and reports whatever is wrong.
- a resumed run must hash as it did, with the seed its metadata recorded. That is the store's
  seed for every run ``exec`` and ``run`` started, so ``resume`` starts once more with the
  store's seed too, before it has read the run; a run recorded with another seed (its
  ``PYTHONHASHSEED`` pinned by hand) is started once more with that one when it is read.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if _TYPE_CHECKING:
    from pathlib import Path

_SEED_ENV = "PYTHONHASHSEED"
_SEED_LABEL = b"resumable hash seed"
"""As ``hashseed.store_seed`` authenticates it: the two must agree (tests check they do)."""
_SEEDED = ("exec", "run", "resume")
"""The commands that run a program, with the store's seed (see above for ``resume``)."""


def main() -> None:
    """Console-script entry point: the fast paths, else the ``resumable`` command line."""
    args = sys.argv[1:]
    if args == ["--version"] and print_version():
        return
    from resumable.cli.direct import plain_arguments, run_directly

    plain = plain_arguments(args)
    if plain is not None and plain[0] in _SEEDED and _SEED_ENV not in os.environ:
        seed = _store_seed(plain[1].get("config_path"), os.environ)  # type: ignore[arg-type]
        if seed is not None:
            sys.stdout.flush()
            argv = [sys.executable, "-m", "resumable", *args]
            os.execve(sys.executable, argv, {**os.environ, _SEED_ENV: str(seed)})
    if plain is not None:
        run_directly(*plain)
        return
    from resumable.cli.commands import main as command_line

    command_line()


def print_version() -> bool:
    """Print what ``--version`` prints from the metadata file; False if it is not found."""
    from resumable.extras import DISTRIBUTION

    prefix = DISTRIBUTION.replace("-", "_") + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(prefix) and name.endswith(".dist-info"):
                return _print_metadata(os.path.join(entry or ".", name, "METADATA"))
    return False


def _print_metadata(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError:
        return False
    fields = text.split("\n\n", 1)[0].splitlines()
    versions = [f.removeprefix("Version: ") for f in fields if f.startswith("Version: ")]
    if not versions:
        return False
    lines = [f"resumable {versions[0]}"]
    for field in fields:
        if field.startswith("Project-URL: "):
            label, _, url = field.removeprefix("Project-URL: ").partition(", ")
            lines.append(f"{label}: {url}")
    print("\n".join(lines))
    return True


def early_seed(args: list[str], env: Mapping[str, str]) -> int | None:
    """The store's seed for ``exec`` with these arguments, or None when only the command line
    can tell (or durability is off: then no seed is pinned)."""
    from resumable.cli.direct import plain_arguments

    plain = plain_arguments(["exec", *args])
    return None if plain is None else _store_seed(plain[1].get("config_path"), env)  # type: ignore[arg-type]


def _store_seed(config_path: Path | None, env: Mapping[str, str]) -> int | None:
    """The seed of the store the settings at ``config_path`` (None: the default) name, or
    None when only the command line can tell."""
    from pathlib import Path

    from resumable.config.files import store_key

    key = store_key(config_path, Path.cwd().absolute(), env)
    if key is None:
        return None
    import hashlib
    import hmac

    return int.from_bytes(hmac.digest(key, _SEED_LABEL, hashlib.sha256)[:4], "big")
