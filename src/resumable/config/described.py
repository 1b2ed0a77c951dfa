"""Every setting described, for the docs and the commented example file (``resumable init``).

Apart from :mod:`.loading`: a run loads its settings, only ``init`` and the docs describe them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin, get_type_hints

from resumable.config.files import CONFIG_FILE
from resumable.config.loading import _show
from resumable.config.settings import _SECTIONS


@dataclass(frozen=True, slots=True)
class SettingInfo:
    """One setting as documentation sees it; the example file and the docs are built from these."""

    section: str
    key: str
    default: Any
    help: str
    choices: tuple[str, ...]
    env: str

    @property
    def comment(self) -> str:
        """The help line, with the allowed values when they are a fixed set."""
        if not self.choices:
            return self.help
        return f"{self.help} One of {', '.join(_show(choice) for choice in self.choices)}."


def describe_settings() -> tuple[SettingInfo, ...]:
    """Every setting of every section, in file order."""
    infos = []
    for section, cls in _SECTIONS.items():
        hints = get_type_hints(cls)
        for item in dataclasses.fields(cls):
            hint = hints[item.name]
            choices = get_args(hint) if get_origin(hint) is Literal else ()
            env = f"RESUMABLE_{section.upper()}_{item.name.upper()}"
            infos.append(
                SettingInfo(section, item.name, item.default, item.metadata["help"], choices, env)
            )
    return tuple(infos)


def render_example() -> str:
    """A commented playbooks.toml: every key with its default and one line saying what it does."""
    lines = [
        f"# {CONFIG_FILE}: settings of resumable, each shown with its default.",
        "# Relative paths are relative to this file's folder.",
        "# The environment overrides any key as RESUMABLE_<SECTION>_<KEY>,"
        " e.g. RESUMABLE_DURABILITY_SYNC=flush.",
    ]
    import tomli_w  # loaded here: every run reads its settings, only `init` writes them

    infos = describe_settings()
    for section, cls in _SECTIONS.items():
        summary = (cls.__doc__ or "").split(":", 1)[-1].strip()
        lines += ["", f"# {summary[:1].upper()}{summary[1:]}", f"[{section}]"]
        for info in (info for info in infos if info.section == section):
            lines += [f"# {info.comment}", tomli_w.dumps({info.key: info.default}).rstrip("\n")]
    return "\n".join(lines) + "\n"
