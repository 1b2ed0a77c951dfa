"""The settings dataclasses: each section's fields with their defaults, help and rules."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal


def _setting(default: Any, help: str, **rules: Any) -> Any:
    """A field with its one help line and its rules (min, above, max, path, hook, env_name)."""
    return field(default=default, metadata={"help": help, **rules})


@dataclass(frozen=True, slots=True)
class DurabilitySettings:
    """``[durability]``: how runs are checkpointed and where the checkpoints live."""

    enabled: bool = _setting(
        True, "Checkpoint runs so they can resume after a crash; false: `resumable exec` only."
    )
    store: Literal["file", "sqlite", "postgres", "redis"] = _setting(
        "file", "Where checkpoints are kept."
    )
    path: str = _setting(
        ".resumable", "Folder of the file store, or file of the sqlite store.", path=True
    )
    url: str = _setting("", "Connection URL of the postgres or redis store.")
    sync: Literal["fsync", "flush"] = _setting(
        "fsync", "fsync survives a power loss; flush survives a killed process and is faster."
    )
    every: int = _setting(1, "Make a checkpoint durable every N awaits (1 = every await).", min=1)
    interval_seconds: float = _setting(
        0.0, "Also write buffered await records at least this often (0 = off).", min=0
    )
    snapshot_every: int = _setting(
        500, "Records between full snapshots (fewer: faster resume).", min=1
    )
    keep: int = _setting(3, "Snapshots kept; older ones and their records are pruned.", min=1)
    compression: Literal["none", "zlib"] = _setting("none", "Compression of records and blobs.")
    max_record_bytes: int = _setting(
        64 * 2**20, "Largest record allowed; a bigger one fails with a clear error.", min=1
    )
    blob_threshold_bytes: int = _setting(
        64 * 1024, "Strings and bytes larger than this are stored once, as blobs.", min=1
    )
    before_checkpoint: str = _setting(
        "",
        'Hook "package.module:function" called with a CheckpointInfo before each checkpoint.',
        hook=True,
    )
    after_checkpoint: str = _setting(
        "",
        'Hook "package.module:function" called after each checkpoint; a failing hook only warns.',
        hook=True,
    )
    mac_key_env: str = _setting(
        "RESUMABLE_MAC_KEY",
        "Variable holding the key that signs records (unset: the store's own key).",
        env_name=True,
    )
    encrypt: bool = _setting(False, "Encrypt checkpoints with the key in encryption_key_env.")
    encryption_key_env: str = _setting(
        "RESUMABLE_ENCRYPTION_KEY", "Variable holding the encryption key.", env_name=True
    )
    lease_seconds: float = _setting(
        30.0,
        "Seconds a worker keeps a run without a heartbeat before another may claim it.",
        above=0,
    )
    max_attempts: int = _setting(
        5,
        "Attempts in a row that may die without writing a new record; then the run is failed.",
        min=1,
    )


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """``[llm]``: where the LLM responses come from."""

    provider: Literal["scripted", "openai"] = _setting(
        "scripted", "scripted replays responses from a file, offline; openai calls an endpoint."
    )
    responses: str = _setting(
        "", 'scripted: responses TOML ("" = <program>.responses.toml beside it).', path=True
    )
    chunk_delay_seconds: float = _setting(0.0, "scripted: pause between streamed chunks.", min=0)
    seed: int = _setting(0, "scripted: seed of how responses are cut into chunks.")
    base_url: str = _setting(
        "",
        "openai: any OpenAI-compatible endpoint (Ollama, vLLM...); "
        '"" = $OPENAI_BASE_URL, else https://api.openai.com/v1.',
    )
    model: str = _setting("gpt-4o-mini", "openai: model name sent to the endpoint.")
    api_key_env: str = _setting(
        "OPENAI_API_KEY",
        "openai: variable holding the API key (keys never go in this file).",
        env_name=True,
    )
    timeout_seconds: float = _setting(
        60.0, "openai: seconds to wait for a connection or the next piece of a response.", above=0
    )
    request_timeout_seconds: float = _setting(
        300.0, "openai: hard limit on one request, first byte to last.", above=0
    )
    turn_timeout_seconds: float = _setting(
        600.0, "openai: budget of one LLM turn, all its retries and waits included.", above=0
    )
    max_retries: int = _setting(
        3, "openai: retries of a failed request, with jittered backoff.", min=0
    )
    max_continuations: int = _setting(
        3,
        'openai: continuations of one reply the server cut at its length limit (finish_reason "length").',
        min=0,
    )
    temperature: float = _setting(0.0, "openai: sampling temperature.", min=0, max=2)


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """``[runtime]``: limits and interaction of a run."""

    max_llm_calls: int = _setting(50, "Most LLM calls one playbook frame may make.", min=1)
    max_fix_attempts: int = _setting(
        2,
        "Replies in a row the model may spend fixing its failing code before the run fails.",
        min=0,
    )
    no_input: bool = _setting(
        False, "Never ask on a terminal: human input makes the run wait (exit code 3)."
    )
    progress: Literal["auto", "on", "off"] = _setting(
        "auto", "Progress line on stderr (auto: on a terminal only)."
    )


@dataclass(frozen=True, slots=True)
class Config:
    """Every setting, and where relative paths in them are anchored."""

    durability: DurabilitySettings = field(default_factory=DurabilitySettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    source: Path | None = None
    """The file the settings came from; None when only defaults and environment apply."""
    base_dir: Path | None = None
    """Folder relative paths resolve against: the file's folder, else the load's cwd."""

    def resolve_path(self, value: str) -> Path:
        """``value`` (a ``path``-like setting) as a path, anchored at ``base_dir``."""
        path = Path(value).expanduser()
        if path.is_absolute():
            return path
        return (self.base_dir or Path.cwd()) / path

    def to_toml(self) -> str:
        """Every setting as TOML that ``load_config`` reads back to equal settings."""
        import tomli_w  # only `init` and `config` write TOML

        return tomli_w.dumps({name: dataclasses.asdict(getattr(self, name)) for name in _SECTIONS})


_SECTIONS: dict[str, type[Any]] = {
    "durability": DurabilitySettings,
    "llm": LLMSettings,
    "runtime": RuntimeSettings,
}
