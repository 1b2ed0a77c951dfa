"""playbooks.toml and environment overrides, as a user of the CLI meets them."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from resumable.config import (
    Config,
    DurabilitySettings,
    LLMSettings,
    RuntimeSettings,
    describe_settings,
    load_config,
    render_example,
)
from resumable.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def write(folder: Path, text: str, name: str = "playbooks.toml") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def config_error(tmp_path: Path, text: str) -> ConfigError:
    write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    return caught.value


# --- defaults and lookup ---------------------------------------------------------------


def test_without_a_file_the_defaults_are_durable(tmp_path: Path) -> None:
    config = load_config(cwd=tmp_path, env={})
    assert config.source is None
    assert config.durability == DurabilitySettings()
    assert config.llm == LLMSettings()
    assert config.runtime == RuntimeSettings()
    assert config.durability.enabled
    assert config.durability.store == "file"
    assert config.durability.sync == "fsync"
    assert config.resolve_path(config.durability.path) == tmp_path / ".resumable"


def test_playbooks_toml_in_the_working_directory_is_found(tmp_path: Path) -> None:
    file = write(tmp_path, "[durability]\nevery = 7\n")
    config = load_config(cwd=tmp_path, env={})
    assert config.durability.every == 7
    assert config.source == file


def test_lookup_order_explicit_then_variable_then_working_directory(tmp_path: Path) -> None:
    write(tmp_path, "[durability]\nevery = 1\n")
    from_env = write(tmp_path, "[durability]\nevery = 2\n", "env.toml")
    explicit = write(tmp_path, "[durability]\nevery = 3\n", "explicit.toml")
    env = {"RESUMABLE_CONFIG": str(from_env)}

    assert load_config(explicit, cwd=tmp_path, env=env).durability.every == 3
    assert load_config(cwd=tmp_path, env=env).durability.every == 2
    assert load_config(cwd=tmp_path, env={}).durability.every == 1
    assert load_config(cwd=tmp_path, env={"RESUMABLE_CONFIG": ""}).durability.every == 1


def test_relative_explicit_path_is_relative_to_cwd(tmp_path: Path) -> None:
    write(tmp_path / "conf", "[runtime]\nmax_llm_calls = 9\n", "mine.toml")
    config = load_config(Path("conf/mine.toml"), cwd=tmp_path, env={})
    assert config.runtime.max_llm_calls == 9
    assert config.source == tmp_path / "conf" / "mine.toml"


def test_missing_explicit_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(Path("nope.toml"), cwd=tmp_path, env={})
    assert "nope.toml" in str(caught.value)
    assert caught.value.fields["source"] == "nope.toml"
    assert "resumable init" in str(caught.value)


def test_missing_file_named_by_resumable_config_is_an_error_naming_both(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={"RESUMABLE_CONFIG": "gone.toml"})
    message = str(caught.value)
    assert "RESUMABLE_CONFIG" in message
    assert "gone.toml" in message
    assert caught.value.fields["source"] == "RESUMABLE_CONFIG"


def test_env_none_reads_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESUMABLE_DURABILITY_KEEP", "11")
    monkeypatch.delenv("RESUMABLE_CONFIG", raising=False)
    assert load_config(cwd=tmp_path).durability.keep == 11


# --- environment overrides -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "section", "key", "expected"),
    [
        ("RESUMABLE_DURABILITY_SYNC", "flush", "durability", "sync", "flush"),
        ("RESUMABLE_DURABILITY_EVERY", "5", "durability", "every", 5),
        ("RESUMABLE_DURABILITY_INTERVAL_SECONDS", "0.25", "durability", "interval_seconds", 0.25),
        ("RESUMABLE_DURABILITY_LEASE_SECONDS", "2", "durability", "lease_seconds", 2.0),
        ("RESUMABLE_DURABILITY_ENABLED", "off", "durability", "enabled", False),
        ("RESUMABLE_DURABILITY_ENCRYPT", "Yes", "durability", "encrypt", True),
        ("RESUMABLE_DURABILITY_URL", "redis://h:6379/0", "durability", "url", "redis://h:6379/0"),
        ("RESUMABLE_LLM_PROVIDER", "openai", "llm", "provider", "openai"),
        ("RESUMABLE_LLM_TEMPERATURE", "0.7", "llm", "temperature", 0.7),
        ("RESUMABLE_LLM_SEED", "-4", "llm", "seed", -4),
        ("RESUMABLE_RUNTIME_NO_INPUT", "1", "runtime", "no_input", True),
        ("RESUMABLE_RUNTIME_PROGRESS", "off", "runtime", "progress", "off"),
    ],
)
def test_environment_overrides_one_key_with_its_type(
    tmp_path: Path, name: str, text: str, section: str, key: str, expected: object
) -> None:
    value = getattr(getattr(load_config(cwd=tmp_path, env={name: text}), section), key)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [(word, True) for word in ("1", "true", "TRUE", "yes", "on")]
    + [(word, False) for word in ("0", "false", "No", "no", "off")],
)
def test_boolean_words_in_the_environment(tmp_path: Path, text: str, expected: bool) -> None:
    env = {"RESUMABLE_RUNTIME_NO_INPUT": text}
    assert load_config(cwd=tmp_path, env=env).runtime.no_input is expected


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    write(tmp_path, '[durability]\nsync = "fsync"\nkeep = 4\n')
    config = load_config(cwd=tmp_path, env={"RESUMABLE_DURABILITY_SYNC": "flush"})
    assert config.durability.sync == "flush"
    assert config.durability.keep == 4


def test_other_resumable_variables_are_not_overrides(tmp_path: Path) -> None:
    env = {
        "RESUMABLE_CRASH_AFTER": "3",
        "RESUMABLE_MAC_KEY": "secret",
        "RESUMABLE_ENCRYPTION_KEY": "secret",
        "RESUMABLE_SCRIPTED_LOG": "/dev/null",
    }
    assert load_config(cwd=tmp_path, env=env) == load_config(cwd=tmp_path, env={})


def test_a_variable_a_setting_names_for_a_secret_is_not_an_override(tmp_path: Path) -> None:
    write(tmp_path, '[llm]\napi_key_env = "RESUMABLE_LLM_TOKEN"\n')
    config = load_config(cwd=tmp_path, env={"RESUMABLE_LLM_TOKEN": "sk-123"})
    assert config.llm.api_key_env == "RESUMABLE_LLM_TOKEN"


@pytest.mark.parametrize(
    ("name", "text", "key", "fragments"),
    [
        ("RESUMABLE_DURABILITY_SYNK", "flush", "durability.synk", ["RESUMABLE_DURABILITY_SYNC"]),
        ("RESUMABLE_LLM_MODLE", "x", "llm.modle", ["RESUMABLE_LLM_MODEL", "valid keys"]),
        ("RESUMABLE_RUNTIME_NO_INPUT", "maybe", "runtime.no_input", ["yes/no", '"maybe"']),
        ("RESUMABLE_DURABILITY_EVERY", "often", "durability.every", ["integer >= 1"]),
        ("RESUMABLE_DURABILITY_EVERY", "1.5", "durability.every", ["integer >= 1"]),
        ("RESUMABLE_DURABILITY_KEEP", "0", "durability.keep", ["integer >= 1", '"0"']),
        ("RESUMABLE_DURABILITY_SYNC", "always", "durability.sync", ['"fsync", "flush"']),
        ("RESUMABLE_LLM_TIMEOUT_SECONDS", "nan", "llm.timeout_seconds", ["number > 0"]),
    ],
)
def test_bad_environment_values_name_the_variable_and_key(
    tmp_path: Path, name: str, text: str, key: str, fragments: list[str]
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={name: text})
    message = str(caught.value)
    assert message.startswith(f"{name}: ")
    assert caught.value.fields["key"] == key
    assert caught.value.fields["source"] == name
    for fragment in fragments:
        assert fragment in message


# --- file validation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "fragments"),
    [
        (
            '[durability]\nsynk = "flush"\n',
            "durability.synk",
            ['unknown key [durability] "synk"', 'did you mean "sync"?', "valid keys: enabled"],
        ),
        ("[durability]\nzzz = 1\n", "durability.zzz", ["valid keys:"]),
        (
            '[durability]\nevery = "3"\n',
            "durability.every",
            ['[durability] every must be an integer >= 1, got "3"', "every = 3, without quotes"],
        ),
        ("[durability]\nevery = 0\n", "durability.every", ["integer >= 1, got 0"]),
        ("[durability]\nevery = true\n", "durability.every", ["integer >= 1, got true"]),
        ("[durability]\nevery = 2.0\n", "durability.every", ["integer >= 1, got 2.0"]),
        (
            '[durability]\nsync = "always"\n',
            "durability.sync",
            ['[durability] sync must be one of "fsync", "flush", got "always"'],
        ),
        ('[durability]\nsync = "flsuh"\n', "durability.sync", ['did you mean "flush"?']),
        ('[durability]\nstore = "s3"\n', "durability.store", ['"file", "sqlite", "postgres"']),
        ("[durability]\ninterval_seconds = -1\n", "durability.interval_seconds", [">= 0"]),
        ("[durability]\ninterval_seconds = nan\n", "durability.interval_seconds", ["got nan"]),
        ("[durability]\nlease_seconds = 0\n", "durability.lease_seconds", ["number > 0"]),
        ('[durability]\nkeep = "x"\n', "durability.keep", ['got "x"']),
        ("[durability]\nmax_record_bytes = {a = 1}\n", "durability.max_record_bytes", ["table"]),
        ("[durability]\nurl = [1]\n", "durability.url", ["a string, got an array"]),
        (
            '[runtime]\nno_input = "yes"\n',
            "runtime.no_input",
            ['must be true or false, got "yes"', "no_input = true, without quotes"],
        ),
        ("[llm]\ntemperature = 3.5\n", "llm.temperature", ["number from 0 to 2, got 3.5"]),
        ("[llm]\nmax_retries = -1\n", "llm.max_retries", ["integer >= 0"]),
        ("[llm]\nmax_continuations = -1\n", "llm.max_continuations", ["integer >= 0"]),
        (
            '[durability]\nbefore_checkpoint = "not a hook"\n',
            "durability.before_checkpoint",
            ['"package.module:function"'],
        ),
        (
            '[durabilty]\nsync = "flush"\n',
            "durabilty",
            ["unknown section [durabilty]", "did you mean [durability]?", "[runtime]"],
        ),
        ("durability = 3\n", "durability", ["must be a table, got 3", "[durability]"]),
        ("[durability]\nsync = 'flush'\n[extra]\n", "extra", ["unknown section [extra]"]),
        (
            '[durability]\nstore = "postgres"\n',
            "durability.url",
            ['url must be a postgresql:// URL when store = "postgres", got ""'],
        ),
        (
            '[durability]\nstore = "redis"\nurl = "http://cache"\n',
            "durability.url",
            ['redis:// URL when store = "redis", got "http://cache"'],
        ),
    ],
)
def test_bad_file_values_are_one_line_naming_the_key(
    tmp_path: Path, text: str, key: str, fragments: list[str]
) -> None:
    error = config_error(tmp_path, text)
    message = str(error)
    assert message.startswith("playbooks.toml: ")
    assert "\n" not in message
    assert error.fields["key"] == key
    assert error.fields["source"] == "playbooks.toml"
    for fragment in fragments:
        assert fragment in message


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    error = config_error(tmp_path, '[durability]\nsync = "flush"\nevery = \n')
    assert "not valid TOML" in str(error)
    assert "line 3" in str(error)
    assert error.fields["key"] is None


def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "playbooks.toml").write_bytes(b'[llm]\nmodel = "\xff"\n')
    with pytest.raises(ConfigError, match="UTF-8"):
        load_config(cwd=tmp_path, env={})


def test_an_explicit_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path, cwd=tmp_path, env={})


def test_messages_for_an_explicit_file_use_its_name(tmp_path: Path) -> None:
    write(tmp_path, "[runtime]\nmax_llm_calls = 0\n", "custom.toml")
    with pytest.raises(ConfigError) as caught:
        load_config(Path("custom.toml"), cwd=tmp_path, env={})
    assert str(caught.value).startswith("custom.toml: [runtime] max_llm_calls must be")
    assert caught.value.fields["key"] == "runtime.max_llm_calls"


def test_integers_are_accepted_for_float_settings(tmp_path: Path) -> None:
    write(tmp_path, "[durability]\ninterval_seconds = 2\n[llm]\ntemperature = 1\n")
    config = load_config(cwd=tmp_path, env={})
    assert config.durability.interval_seconds == 2.0
    assert isinstance(config.durability.interval_seconds, float)
    assert isinstance(config.llm.temperature, float)


def test_config_error_survives_pickling(tmp_path: Path) -> None:
    import pickle

    error = config_error(tmp_path, '[durability]\nsync = "always"\n')
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.fields["key"], copy.fields["source"]) == (
        str(error),
        error.fields["key"],
        error.fields["source"],
    )


# --- relative paths ------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_config_files_folder(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    write(folder, '[durability]\npath = "state"\n[llm]\nresponses = "r/answers.toml"\n')
    config = load_config(Path("project/playbooks.toml"), cwd=tmp_path, env={})
    assert config.durability.path == "state"  # the field keeps what the user wrote
    assert config.resolve_path(config.durability.path) == folder / "state"
    assert config.resolve_path(config.llm.responses) == folder / "r" / "answers.toml"


def test_absolute_and_home_paths_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = load_config(cwd=tmp_path, env={})
    assert config.resolve_path(str(tmp_path / "abs")) == tmp_path / "abs"
    assert config.resolve_path("~/x") == tmp_path / "home" / "x"


def test_relative_path_from_the_environment_is_relative_to_cwd(tmp_path: Path) -> None:
    write(tmp_path / "elsewhere", '[durability]\npath = "in-file"\n')
    env = {"RESUMABLE_DURABILITY_PATH": "from-shell"}
    config = load_config(Path("elsewhere/playbooks.toml"), cwd=tmp_path, env=env)
    assert config.resolve_path(config.durability.path) == tmp_path / "from-shell"


# --- writing -------------------------------------------------------------------------------


def test_to_toml_round_trips_every_setting(tmp_path: Path) -> None:
    changed = Config(
        durability=DurabilitySettings(
            enabled=False,
            store="redis",
            path="elsewhere",
            url="redis://localhost:6379/2",
            sync="flush",
            every=4,
            interval_seconds=1.5,
            snapshot_every=20,
            keep=5,
            compression="zlib",
            max_record_bytes=1024,
            blob_threshold_bytes=99,
            before_checkpoint="my.hooks:before",
            after_checkpoint="my.hooks:after",
            mac_key_env="MY_MAC",
            encrypt=True,
            encryption_key_env="MY_ENC",
            lease_seconds=7.5,
            max_attempts=9,
        ),
        llm=LLMSettings(
            provider="openai",
            responses="answers.toml",
            chunk_delay_seconds=0.01,
            seed=42,
            base_url="http://localhost:11434/v1",
            model="llama3",
            api_key_env="MY_KEY",
            timeout_seconds=5.0,
            request_timeout_seconds=30.0,
            turn_timeout_seconds=90.0,
            max_retries=0,
            max_continuations=7,
            temperature=0.3,
        ),
        runtime=RuntimeSettings(max_llm_calls=7, max_fix_attempts=0, no_input=True, progress="off"),
    )
    for section in ("durability", "llm", "runtime"):
        default, ours = getattr(Config(), section), getattr(changed, section)
        for item in dataclasses.fields(ours):
            assert getattr(ours, item.name) != getattr(default, item.name), item.name

    file = write(tmp_path, changed.to_toml(), "round.toml")
    loaded = load_config(file, cwd=tmp_path, env={})
    assert (loaded.durability, loaded.llm, loaded.runtime) == (
        changed.durability,
        changed.llm,
        changed.runtime,
    )


def test_default_to_toml_lists_every_key(tmp_path: Path) -> None:
    data = tomllib.loads(Config().to_toml())
    assert {(s, k) for s, table in data.items() for k in table} == {
        (info.section, info.key) for info in describe_settings()
    }


def test_example_file_is_the_rendered_example() -> None:
    text = (REPO / "playbooks.toml.example").read_text(encoding="utf-8")
    assert text == render_example()


def test_rendered_example_loads_as_the_defaults(tmp_path: Path) -> None:
    write(tmp_path, render_example())
    config = load_config(cwd=tmp_path, env={})
    assert (config.durability, config.llm, config.runtime) == (
        DurabilitySettings(),
        LLMSettings(),
        RuntimeSettings(),
    )


def test_every_key_in_the_example_has_one_comment_line_above_it() -> None:
    lines = render_example().splitlines()
    for info in describe_settings():
        index = next(i for i, line in enumerate(lines) if line.startswith(f"{info.key} = "))
        assert lines[index - 1] == f"# {info.comment}"
        assert info.help
    assert "# Where checkpoints are kept." in "\n".join(lines)
    assert '"file", "sqlite", "postgres", "redis"' in render_example()


def test_settings_description_names_each_environment_variable() -> None:
    infos = {(info.section, info.key): info for info in describe_settings()}
    assert infos["durability", "sync"].env == "RESUMABLE_DURABILITY_SYNC"
    assert infos["durability", "sync"].choices == ("fsync", "flush")
    assert infos["runtime", "no_input"].default is False
    assert len(infos) == sum(
        len(dataclasses.fields(cls)) for cls in (DurabilitySettings, LLMSettings, RuntimeSettings)
    )
