"""The launcher's store key, found without the settings' loader, is the loader's."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from resumable.config import load_config
from resumable.config.files import store_key
from resumable.config.settings import DurabilitySettings
from resumable.errors import ConfigError

KEYS = {"here": b"k" * 32, "elsewhere": b"e" * 32, "short": b"s" * 7}
"""Key files of the store folders the settings may name (``short``: not a key)."""


def loader_key(path: Path | None, cwd: Path, env: dict[str, str]) -> bytes | None:
    """The key as the settings' loader has it; None where the loader fails."""
    try:
        config = load_config(path, cwd=cwd, env=env)
    except (ConfigError, OSError):
        return None
    durability = config.durability
    if not durability.enabled:
        return None
    if raw := env.get(durability.mac_key_env, ""):
        return raw.encode()
    if durability.store != "file" or not durability.path:
        return None
    try:
        stored = (config.resolve_path(durability.path) / "key").read_bytes()
    except OSError:
        return None
    return stored if len(stored) == 32 else None


folders = st.sampled_from([".resumable", "here", "elsewhere", "short", "missing", "", "ABS"])
stores = st.sampled_from(["file", "sqlite", "postgres", "redis", "folder"])
variables = st.sampled_from(["RESUMABLE_MAC_KEY", "MY_KEY", "RESUMABLE_DURABILITY_PATH"])
table = st.fixed_dictionaries(
    {},
    optional={
        "enabled": st.booleans() | st.just("yes"),
        "store": stores,
        "path": folders,
        "mac_key_env": variables,
        "sync": st.sampled_from(["flush", "fsync", "never"]),
    },
)
environment = st.fixed_dictionaries(
    {},
    optional={
        "RESUMABLE_DURABILITY_ENABLED": st.sampled_from(["1", " off", "TRUE", "maybe"]),
        "RESUMABLE_DURABILITY_STORE": stores,
        "RESUMABLE_DURABILITY_PATH": folders,
        "RESUMABLE_DURABILITY_MAC_KEY_ENV": variables,
        "MY_KEY": st.sampled_from(["a key in MY_KEY", ""]),
        "RESUMABLE_MAC_KEY": st.just("a key in RESUMABLE_MAC_KEY"),
    },
)


def _absolute(value: Any, root: Path) -> Any:
    return str(root / "elsewhere") if value == "ABS" else value


@settings(max_examples=300, deadline=None)
@given(
    file=st.none() | st.fixed_dictionaries({"durability": table}),
    secret=st.none() | variables,
    env=environment,
    where=st.sampled_from(["cwd", "sub", "explicit"]),
)
def test_the_launcher_finds_the_key_the_loader_finds(
    file: dict[str, Any] | None, secret: str | None, env: dict[str, str], where: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        cwd = root / "work"
        for name, key in KEYS.items():
            for base in (root / "work", root / "work" / "sub", root):
                (base / name).mkdir(parents=True, exist_ok=True)
                (base / name / "key").write_bytes(key)
        (cwd / ".resumable").mkdir()
        (cwd / ".resumable" / "key").write_bytes(b"d" * 32)
        path = None
        if file is not None:
            data: dict[str, Any] = {
                "durability": {k: _absolute(v, root) for k, v in file["durability"].items()}
            }
            if secret is not None:
                data["llm"] = {"api_key_env": secret}
            name = {"cwd": "playbooks.toml", "sub": "sub/p.toml", "explicit": "sub/q.toml"}[where]
            (cwd / name).write_text(tomli_w.dumps(data), encoding="utf-8")
            if where == "sub":
                env = {**env, "RESUMABLE_CONFIG": name}
            elif where == "explicit":
                path = Path(name)
        env = {k: _absolute(v, root) for k, v in env.items()}
        expected = loader_key(path, cwd, env)
        found = store_key(path, cwd, env)
        if expected is None:
            assert found is None or _loader_fails(path, cwd, env)
        else:
            assert found in (None, expected)
            if _plain(file, secret, env):
                assert found == expected


def _loader_fails(path: Path | None, cwd: Path, env: dict[str, str]) -> bool:
    try:
        load_config(path, cwd=cwd, env=env)
    except (ConfigError, OSError):
        return True
    return False


def _plain(file: dict[str, Any] | None, secret: str | None, env: dict[str, str]) -> bool:
    """Settings the launcher must decide itself: no secret named after an override."""
    named = [secret, (file or {}).get("durability", {}).get("mac_key_env")]
    return not any(str(name).startswith("RESUMABLE_DURABILITY_") for name in named)


def test_the_defaults_are_the_settings_defaults(tmp_path: Path) -> None:
    (tmp_path / ".resumable").mkdir()
    (tmp_path / ".resumable" / "key").write_bytes(b"d" * 32)
    assert store_key(None, tmp_path, {}) == b"d" * 32
    defaults = DurabilitySettings()
    assert (defaults.enabled, defaults.store, defaults.path) == (True, "file", ".resumable")
    assert store_key(None, tmp_path, {defaults.mac_key_env: "x"}) == b"x"


def test_the_launcher_leaves_the_settings_unloaded(tmp_path: Path) -> None:
    """The seed of a new run is computed without the settings' dataclasses (a third of an
    interpreter's start): a store with its key, a settings file beside it."""
    probe = (
        "import sys\n"
        "from resumable.launcher import early_seed\n"
        "print(early_seed(['hi.py'], {}))\n"
        "print([m for m in ('resumable.config.loading', 'resumable.config.settings') if m in sys.modules])\n"
    )
    (tmp_path / "playbooks.toml").write_text("[durability]\npath = 'st'\n", encoding="utf-8")
    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "key").write_bytes(b"k" * 32)
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("RESUMABLE_")},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seed, loaded = done.stdout.splitlines()
    assert seed.isdigit(), done.stderr
    assert loaded == "[]"
