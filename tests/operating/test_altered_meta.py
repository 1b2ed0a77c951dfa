"""Input is checked before it is used: every field of a run's metadata, an empty id."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.crash.harness import EXAMPLES, resumable


def test_an_impossible_hash_seed_in_meta_json_is_refused_in_one_line(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "ledger.py", tmp_path / "ledger.py")
    env = {"LEDGER": "ledger.txt"}
    cut = resumable(
        ["exec", "ledger.py", "--run-id", "r"], tmp_path, env={**env, "RESUMABLE_CRASH_AFTER": "5"}
    )
    assert cut.code == -9
    meta_path = tmp_path / ".resumable" / "runs" / "r" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["extra"]["hash_seed"] = -5
    meta_path.write_text(json.dumps(meta))
    refused = resumable(["resume", "r"], tmp_path, env=env)
    assert refused.code == 2, refused.stderr
    assert refused.stderr.splitlines() == [
        "resumable: error: the run's metadata holds hash_seed = -5, which no Python can hash "
        "with (0 to 4294967295); it was altered: restore it, or set it to the seed the run "
        "was started with"
    ]
    assert meta_path.read_text() == json.dumps(meta)  # refused untouched


def test_show_with_an_empty_id_is_refused_not_the_newest_run(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "ledger.py", tmp_path / "ledger.py")
    assert resumable(["exec", "ledger.py"], tmp_path, env={"LEDGER": "ledger.txt"}).code == 0
    refused = resumable(["show", ""], tmp_path)
    assert refused.code == 2
    assert refused.stderr.splitlines() == [
        "resumable: error: invalid run id '': it is empty; name a run (`resumable runs` lists them)"
    ]


ALTERED = [
    ("run_id", 5),
    ("program", 3),
    ("kind", 9),
    ("status", "zombie"),
    ("status", 4),
    ("created_at", "x"),
    ("updated_at", [1]),
    ("epoch", "1"),
    ("epoch", -3),
    ("epoch", True),
    ("epoch", 1.5),
    ("epoch", 2**64),
    ("owner", 5),
    ("parent", 7),
    ("parent", "../x"),
    ("extra", []),
    ("extra.attempts", "x"),
    ("extra.attempts", -1),
    ("extra.attempt_from", "x"),
    ("extra.attempt_open", "yes"),
    ("extra.hash_probe", "x"),
    ("extra.cancel", "now"),
    ("extra.interrupted", 5),
]


@pytest.fixture(scope="module")
def crashed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run killed after its fifth record, to copy for each alteration."""
    folder = tmp_path_factory.mktemp("crashed")
    shutil.copy(EXAMPLES / "ledger.py", folder / "ledger.py")
    cut = resumable(
        ["exec", "ledger.py", "--run-id", "r"],
        folder,
        env={"LEDGER": "ledger.txt", "RESUMABLE_CRASH_AFTER": "5"},
    )
    assert cut.code == -9
    return folder


@pytest.mark.parametrize(("field", "value"), ALTERED, ids=[f"{f}={v!r}" for f, v in ALTERED])
def test_every_field_of_meta_json_is_checked_before_use(
    crashed_run: Path, tmp_path: Path, field: str, value: object
) -> None:
    work = tmp_path / "work"
    shutil.copytree(crashed_run, work)
    meta_path = work / ".resumable" / "runs" / "r" / "meta.json"
    meta = json.loads(meta_path.read_text())
    if field.startswith("extra."):
        meta["extra"][field.removeprefix("extra.")] = value
    else:
        meta[field] = value
    meta_path.write_text(json.dumps(meta))
    ledger = _text(work / "ledger.txt")
    for command in (["show", "r"], ["resume", "r"]):
        refused = resumable(command, work, env={"LEDGER": "ledger.txt"})
        assert refused.code == 2, refused.stderr
        [line] = refused.stderr.splitlines()
        assert line.startswith("resumable: error: run r: its metadata (")
        assert f"is damaged ({field} is {value!r}, expected" in line
        assert line.endswith("`resumable repair r` rebuilds it from the log")
    listed = resumable(["runs"], work)
    assert listed.code == 0
    assert "damaged" in listed.stdout
    assert "Traceback" not in listed.stderr
    assert meta_path.read_text() == json.dumps(meta)  # refused untouched
    assert _text(work / "ledger.txt") == ledger  # nothing ran


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""
