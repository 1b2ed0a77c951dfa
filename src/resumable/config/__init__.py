"""Settings: ``playbooks.toml`` plus environment overrides, as frozen dataclasses.

``settings`` holds the dataclasses; ``loading`` finds, reads and validates the file; ``files``
locates it, and finds a store's key before the settings load (for the launcher); ``described``
tells every setting, for the docs and the example file. The names below are imported on first
use: the launcher imports ``files`` without the dataclasses.
"""

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads it so)

if _TYPE_CHECKING:
    from resumable.config.described import SettingInfo, describe_settings, render_example
    from resumable.config.files import CONFIG_ENV, CONFIG_FILE
    from resumable.config.loading import load_config
    from resumable.config.settings import (
        Config,
        DurabilitySettings,
        LLMSettings,
        RuntimeSettings,
    )

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "Config",
    "DurabilitySettings",
    "LLMSettings",
    "RuntimeSettings",
    "SettingInfo",
    "describe_settings",
    "load_config",
    "render_example",
]

_WHERE = {
    "CONFIG_ENV": "files",
    "CONFIG_FILE": "files",
    "SettingInfo": "described",
    "describe_settings": "described",
    "load_config": "loading",
    "render_example": "described",
    "Config": "settings",
    "DurabilitySettings": "settings",
    "LLMSettings": "settings",
    "RuntimeSettings": "settings",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'resumable.config' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"resumable.config.{module}"), name)
    globals()[name] = value
    return value
