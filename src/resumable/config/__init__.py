"""Settings: ``playbooks.toml`` plus environment overrides, as frozen dataclasses.

``settings`` holds the dataclasses; ``loading`` finds, reads and validates the file.
"""

from resumable.config.loading import (
    SettingInfo,
    describe_settings,
    load_config,
    render_example,
)
from resumable.config.settings import (
    CONFIG_ENV,
    CONFIG_FILE,
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
