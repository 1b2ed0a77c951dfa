"""Where the settings file is, and what the launcher reads of it before the settings load.

A new run's interpreter must start with its store's hash seed, so ``resumable exec`` and
``run`` compute it in a first process and start again with it (``resumable.launcher``).
That process should cost little more than an interpreter's start; the settings' dataclasses
alone cost a third of one (their generated methods are compiled when the classes are made).
:func:`store_key` finds the store's key by the loader's rules from the four settings it
depends on, without the loader. Whatever it cannot decide as the loader would (a value the loader
rejects, a variable a setting names as its secret) it leaves to the loader: None, and the
command line finds the seed the long way. A test checks the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from resumable.errors import ConfigError

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the launcher loads this)
if _TYPE_CHECKING:
    from typing import Any

CONFIG_FILE = "playbooks.toml"
CONFIG_ENV = "RESUMABLE_CONFIG"

_STORES = ("file", "sqlite", "postgres", "redis")
_DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "store": "file",
    "path": ".resumable",
    "mac_key_env": "RESUMABLE_MAC_KEY",
}
"""The four ``[durability]`` settings the seed depends on, with their defaults (a test checks
they are ``DurabilitySettings``')."""
_ENV_PREFIX = "RESUMABLE_DURABILITY_"
BOOL_WORDS = dict.fromkeys(("1", "true", "yes", "on"), True)
BOOL_WORDS |= dict.fromkeys(("0", "false", "no", "off"), False)
"""A variable's boolean, by its lowered, stripped text (``RESUMABLE_DURABILITY_ENABLED=off``)."""


def config_error(shown: str, key: str | None, text: str) -> ConfigError:
    """One line: where the bad setting came from, then what is wrong and how to fix it."""
    return ConfigError(f"{shown}: {text}", key=key, source=shown)


def locate(path: Path | None, base: Path, environ: Mapping[str, str]) -> tuple[Path, str] | None:
    """The config file as (absolute path, name to show in messages), or None for defaults."""
    if path is None and not environ.get(CONFIG_ENV):
        found = base / CONFIG_FILE
        return (found, CONFIG_FILE) if found.is_file() else None
    given = path if path is not None else Path(environ[CONFIG_ENV])
    file = base / given.expanduser()
    try:
        if file.exists():
            return file, str(given)
    except OSError as exc:  # a name longer than the file system allows
        shown = str(given) if len(str(given)) <= 80 else f"{str(given)[:40]}...{str(given)[-40:]}"
        raise config_error(
            shown, None, f"cannot read the config file: {exc.strerror or exc}"
        ) from None
    if path is not None:
        fix = f"fix the path, or create it with `resumable init --path {given}`"
        raise config_error(str(given), None, f"config file not found; {fix}")
    raise config_error(
        CONFIG_ENV, None, f"config file {given} not found; fix or unset {CONFIG_ENV}"
    )


def store_key(path: Path | None, cwd: Path, environ: Mapping[str, str]) -> bytes | None:
    """The key a new run's store signs with, as ``load_config(path, cwd=cwd, env=environ)``
    would have it found: the variable ``mac_key_env`` names, else a folder store's key file.
    None when durability is off, when the store keeps its key elsewhere or has none yet, and
    when only the loader can tell. ``cwd`` must be absolute."""
    try:
        located = locate(path, cwd, environ)
        values = _from_file(located[0]) if located is not None else {}
    except (ConfigError, OSError, ValueError):
        return None
    if values is None:
        return None
    values = {**_DEFAULTS, **values}
    for key in _DEFAULTS:
        text = environ.get(_ENV_PREFIX + key.upper())
        if text is None:
            continue
        if key == "enabled":
            word = text.strip().lower()
            if word not in BOOL_WORDS:
                return None
            values[key] = BOOL_WORDS[word]
        elif key == "path" and text and not Path(text).expanduser().is_absolute():
            values[key] = str(cwd / text)  # a shell's path means its cwd
        else:
            values[key] = text
    if not values["enabled"] or values["store"] not in _STORES:
        return None
    if raw := environ.get(values["mac_key_env"], ""):
        return raw.encode()
    if values["store"] != "file" or not values["path"]:
        return None
    folder = Path(values["path"]).expanduser()
    base = located[0].parent if located is not None else cwd
    try:
        stored = ((folder if folder.is_absolute() else base / folder) / "key").read_bytes()
    except OSError:  # no key yet: the store makes it when it opens
        return None
    return stored if len(stored) == 32 else None


def _from_file(file: Path) -> dict[str, Any] | None:
    """The file's ``[durability]`` values among the four; None if one is not of its type, or
    if a setting names one of the four's variables as a secret (the loader then skips it)."""
    import tomllib

    data = tomllib.loads(file.read_text(encoding="utf-8"))
    for table in data.values():
        if not isinstance(table, dict):
            return None
        for key, value in table.items():
            if key.endswith("_env") and str(value).startswith(_ENV_PREFIX):
                return None
    table = data.get("durability", {})
    values = {key: table[key] for key in _DEFAULTS if key in table}
    valid = all(type(values[key]) is type(_DEFAULTS[key]) for key in values)
    return values if valid else None
