"""Loading settings: ``playbooks.toml`` plus environment overrides, checked, as frozen dataclasses.

Lookup: an explicit path (``--config``), else ``$RESUMABLE_CONFIG``, else
``playbooks.toml`` in the working directory, else the defaults (durable). Then
``RESUMABLE_<SECTION>_<KEY>`` variables override single keys. A field's type
annotation drives its validation (``Literal`` choices, ``bool`` is not ``int``) and
its metadata holds its help line and range, so adding a setting is adding a field:
the checks, the environment override, ``to_toml`` and the commented example follow.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from resumable.config.files import BOOL_WORDS, CONFIG_FILE, config_error, locate
from resumable.config.settings import _SECTIONS, Config, DurabilitySettings

_HOOK = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_URL_SCHEMES = {
    "postgres": ("postgresql://", "postgres://"),
    "redis": ("redis://", "rediss://", "unix://"),
}


def load_config(
    path: Path | None = None, *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Config:
    """Read the settings: file (explicit, ``$RESUMABLE_CONFIG``, ./playbooks.toml), then env.

    ``env`` defaults to ``os.environ`` read now; relative names resolve against ``cwd``.
    """
    environ = os.environ if env is None else env
    base = (Path.cwd() if cwd is None else cwd).absolute()
    reader = _Reader()
    located = locate(path, base, environ)
    if located is not None:
        reader.read_file(*located)
    reader.read_env(environ, base)
    source = located[0] if located is not None else None
    config = Config(
        **{section: cls(**reader.values[section]) for section, cls in _SECTIONS.items()},
        source=source,
        base_dir=source.parent if source is not None else base,
    )
    _check_store_url(config.durability, reader.origins)
    return config


class _Reader:
    """Validated values per section, and where each came from (a file or a variable)."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, Any]] = {section: {} for section in _SECTIONS}
        self.origins: dict[str, str] = {}

    def read_file(self, file: Path, shown: str) -> None:
        import tomllib  # loaded here: a run without a settings file needs no TOML reader

        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as error:
            raise config_error(
                shown, None, f"not valid TOML: {error}; fix the file there"
            ) from None
        except UnicodeDecodeError:
            raise config_error(shown, None, "not UTF-8 text; save the file as UTF-8") from None
        except OSError as error:
            raise config_error(
                shown, None, f"cannot read it ({error.strerror}); check the path"
            ) from None
        for section, table in data.items():
            if section not in _SECTIONS:
                hint = _did_you_mean(section, list(_SECTIONS), "[{}]")
                valid = ", ".join(f"[{name}]" for name in _SECTIONS)
                text = f"unknown section [{section}] ({hint}valid sections: {valid})"
                raise config_error(shown, section, text)
            if not isinstance(table, dict):
                how = f"write [{section}] on its own line, then key = value lines"
                text = f"{section} must be a table, got {_show(table)} ({how})"
                raise config_error(shown, section, text)
            for key, value in table.items():
                self.put(section, key, value, shown, from_env=False)

    def read_env(self, environ: Mapping[str, str], base: Path) -> None:
        secrets = self._env_names_in_use()
        for name, text in sorted(environ.items()):
            prefixes = ((s, f"RESUMABLE_{s.upper()}_") for s in _SECTIONS)
            section = next((s for s, prefix in prefixes if name.startswith(prefix)), None)
            if section is None or name in secrets:
                continue
            key = name[len(f"RESUMABLE_{section}_") :].lower()
            value = self.put(section, key, text, name, from_env=True)
            is_path = _fields(section)[key].metadata.get("path")
            if is_path and value and not Path(value).expanduser().is_absolute():
                self.values[section][key] = str(base / value)  # a shell's path means its cwd

    def put(self, section: str, key: str, value: Any, shown: str, *, from_env: bool) -> Any:
        fields = _fields(section)
        if key not in fields:
            template = f"RESUMABLE_{section.upper()}_{{}}" if from_env else '"{}"'
            hint = _did_you_mean(key, list(fields), template, upper=from_env)
            text = f'unknown key [{section}] "{key}" ({hint}valid keys: {", ".join(fields)})'
            raise config_error(shown, f"{section}.{key}", text)
        accepted = _accept_or_raise(section, key, value, shown, from_env=from_env)
        self.values[section][key] = accepted
        self.origins[f"{section}.{key}"] = shown
        return accepted

    def _env_names_in_use(self) -> set[str]:
        """Variables settings name (``api_key_env``...): they hold secrets, not overrides."""
        return {
            self.values[section].get(item.name, item.default)
            for section, cls in _SECTIONS.items()
            for item in dataclasses.fields(cls)
            if item.metadata.get("env_name")
        }


def _check_store_url(settings: DurabilitySettings, origins: dict[str, str]) -> None:
    """A postgres or redis store needs a URL of its kind; say so now, not at first use."""
    schemes = _URL_SCHEMES.get(settings.store)
    if schemes is None or settings.url.startswith(schemes):
        return
    where = origins.get("durability.url") or origins.get("durability.store", CONFIG_FILE)
    text = f'[durability] url must be a {schemes[0]} URL when store = "{settings.store}", '
    text += f'got {_show(settings.url)} (e.g. url = "{schemes[0]}localhost/resumable")'
    raise config_error(where, "durability.url", text)


def _fields(section: str) -> dict[str, dataclasses.Field[Any]]:
    return {item.name: item for item in dataclasses.fields(_SECTIONS[section])}


class _Invalid(Exception):
    """Internal: a value that does not fit its field; turned into a ConfigError by the caller."""


def _accept_or_raise(section: str, key: str, value: Any, shown: str, *, from_env: bool) -> Any:
    hint = get_type_hints(_SECTIONS[section])[key]
    rules = _fields(section)[key].metadata
    try:
        return _accept(_from_text(value, hint) if from_env else value, hint, rules)
    except _Invalid:
        pass
    import json

    import tomli_w

    message = f"[{section}] {key} must be {_expected(hint, rules, from_env)}, "
    message += f"got {json.dumps(value) if from_env else _show(value)}"
    if get_origin(hint) is Literal and isinstance(value, str):
        if hint_text := _did_you_mean(value, [str(c) for c in get_args(hint)], '"{}"'):
            message += f" ({hint_text.strip()})"
    elif not from_env and isinstance(value, str) and hint is not str:
        try:
            fixed = _accept(_from_text(value, hint), hint, rules)
        except _Invalid:
            pass
        else:
            message += f" (write {tomli_w.dumps({key: fixed}).strip()}, without quotes)"
    raise config_error(shown, f"{section}.{key}", message)


def _accept(value: Any, hint: Any, rules: Mapping[str, Any]) -> Any:
    """The value as the field stores it; raises ``_Invalid`` when it does not fit."""
    if get_origin(hint) is Literal:
        fits = any(type(value) is type(choice) and value == choice for choice in get_args(hint))
    elif hint is bool or hint is str:
        fits = isinstance(value, hint)
        if fits and rules.get("hook") and value:
            fits = _HOOK.fullmatch(value) is not None
    else:
        kinds = (int,) if hint is int else (int, float)
        fits = isinstance(value, kinds) and not isinstance(value, bool) and math.isfinite(value)
        low, above, high = rules.get("min"), rules.get("above"), rules.get("max")
        fits = fits and (low is None or value >= low) and (above is None or value > above)
        fits = fits and (high is None or value <= high)
    if not fits:
        raise _Invalid
    return float(value) if hint is float else value


def _from_text(text: str, hint: Any) -> Any:
    """An environment variable's text as the field's type."""
    try:
        if hint is bool:
            return BOOL_WORDS[text.strip().lower()]
        if hint is int:
            return int(text.strip())
        if hint is float:
            return float(text.strip())
    except (KeyError, ValueError):
        raise _Invalid from None
    return text


def _expected(hint: Any, rules: Mapping[str, Any], from_env: bool) -> str:
    if get_origin(hint) is Literal:
        return "one of " + ", ".join(_show(choice) for choice in get_args(hint))
    if hint is bool:
        return "a boolean (1/0, true/false, yes/no, on/off)" if from_env else "true or false"
    if hint is str:
        return '"package.module:function" or ""' if rules.get("hook") else "a string"
    noun = "an integer" if hint is int else "a number"
    low, above, high = rules.get("min"), rules.get("above"), rules.get("max")
    if high is not None:
        return f"{noun} from {low} to {high}"
    return noun + (f" >= {low}" if low is not None else f" > {above}" if above is not None else "")


def _did_you_mean(word: str, options: list[str], template: str, *, upper: bool = False) -> str:
    import difflib

    close = difflib.get_close_matches(word, options, n=1)
    if not close:
        return ""
    return f"did you mean {template.format(close[0].upper() if upper else close[0])}? "


def _show(value: Any) -> str:
    """A value as the user wrote it in TOML, for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        import json

        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return str(value)
