"""Checkpoint logs written by an earlier version still resume; newer versions are refused.

The runs under ``tests/golden/`` are kept byte for byte (see its README). Each is
copied, shown and resumed; its output must match what the program recorded in it
prints when run from the start today. Bumping the format or schema version of one
record (with a valid MAC and CRC, as a newer writer would make it) must be refused
with a version error, exit code 2, and the run left untouched.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import json
import shutil
from pathlib import Path

import msgpack
import pytest
from tests.crash.harness import Result, resumable

from resumable.durability.capture.moved import current_module
from resumable.durability.log.records import HEADER_BYTES as SEAL_HEADER_BYTES
from resumable.store.base import StoredRecord
from resumable.store.filesystem import encode_frames, scan_frames

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(path.name for path in GOLDEN.iterdir() if (path / "store").is_dir())


def _install(case: str, work: Path) -> str:
    """Copy a golden run into ``work`` as its store; returns the run id."""
    work.mkdir()
    shutil.copytree(GOLDEN / case / "store", work / ".resumable")
    # git keeps no file modes: the key is made private again, as a restored store's must be
    (work / ".resumable" / "key").chmod(0o600)
    if (GOLDEN / case / "playbooks.toml").exists():
        shutil.copy(GOLDEN / case / "playbooks.toml", work / "playbooks.toml")
    (run,) = (work / ".resumable" / "runs").iterdir()
    for folder in ("log", "snapshots", "blobs"):  # git keeps no empty folders
        (run / folder).mkdir(exist_ok=True)
    return run.name


def _tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _one_error_line(result: Result) -> str:
    lines = result.stderr.splitlines()
    assert all(line.startswith("resumable: ") for line in lines), result.stderr
    (error,) = [line for line in lines if line.startswith("resumable: error: ")]
    return error


def test_there_are_golden_runs() -> None:
    assert len(CASES) >= 2


@pytest.mark.parametrize("case", CASES)
def test_a_golden_run_is_still_shown_and_resumed(tmp_path: Path, case: str) -> None:
    run_id = _install(case, tmp_path / "work")
    work = tmp_path / "work"
    log = sorted((work / ".resumable" / "runs" / run_id / "log").glob("*.seg"))
    last = scan_frames(log[-1].read_bytes()).records[-1].seq
    shown = resumable(["show", run_id, "--json"], work)
    assert shown.code == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert (view["status"], view["seq"]) == ("crashed", last)
    (frame,) = view["frames"]
    source = frame["executed"] + frame["remaining"]

    # The program recorded in the run, run from the start by the current code
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "script.py").write_text(source)
    if (work / "playbooks.toml").exists():
        shutil.copy(work / "playbooks.toml", fresh / "playbooks.toml")
    done = resumable(["exec", "script.py", "--run-id", "fresh"], fresh)
    assert done.code == 0, done.stderr

    resumed = resumable(["resume", run_id], work)
    assert resumed.code == 0, resumed.stderr
    printed = (GOLDEN / case / "printed.txt").read_text()
    assert printed + resumed.stdout == done.stdout
    assert "warning" not in resumed.stderr


def _reseal(
    sealed: bytes, key: bytes, *, format_version: int | None = None, **envelope: object
) -> bytes:
    """The sealed record with a changed header byte or envelope field, and a MAC that verifies."""
    header, mac, payload = (
        sealed[:2],
        sealed[2:SEAL_HEADER_BYTES],
        sealed[SEAL_HEADER_BYTES:],
    )
    # the MAC is HMAC-SHA256 over header and payload: check that before forging a new one
    assert hmac.new(key, header + payload, hashlib.sha256).digest() == mac
    if format_version is not None:
        header = bytes((format_version, header[1]))
    if envelope:
        fields = msgpack.unpackb(payload, raw=False)
        fields.update(envelope)
        payload = msgpack.packb(fields, use_bin_type=True)
    return header + hmac.new(key, header + payload, hashlib.sha256).digest() + payload


def _refused(work: Path, run_id: str) -> str:
    before = _tree_digest(work / ".resumable")
    result = resumable(["resume", run_id], work)
    assert result.code == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert _tree_digest(work / ".resumable") == before
    return _one_error_line(result)


def test_a_record_of_a_newer_format_version_is_refused(tmp_path: Path) -> None:
    work = tmp_path / "work"
    run_id = _install("script-await", work)
    key = (work / ".resumable" / "key").read_bytes()
    (segment,) = (work / ".resumable" / "runs" / run_id / "log").glob("*.seg")
    records = scan_frames(segment.read_bytes()).records
    newest = records[-1]
    bumped = _reseal(newest.data, key, format_version=newest.data[0] + 1)
    records[-1] = StoredRecord(newest.seq, newest.epoch, bumped)
    segment.write_bytes(encode_frames(records))
    assert scan_frames(segment.read_bytes()).reason is None  # framing and CRC are fine
    error = _refused(work, run_id)
    assert f"record {newest.seq} of run {run_id}" in error
    assert f"format version {newest.data[0] + 1}" in error
    assert "upgrade resumable" in error


def test_a_snapshot_of_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    work = tmp_path / "work"
    run_id = _install("script-snapshot", work)
    key = (work / ".resumable" / "key").read_bytes()
    (snapshot,) = (work / ".resumable" / "runs" / run_id / "snapshots").glob("*.snap")
    version = msgpack.unpackb(snapshot.read_bytes()[SEAL_HEADER_BYTES:], raw=False)["v"]
    snapshot.write_bytes(_reseal(snapshot.read_bytes(), key, v=version + 1))
    error = _refused(work, run_id)
    assert f"schema version {version + 1}" in error
    assert "upgrade resumable" in error


def test_the_state_golden_names_modules_of_the_flat_layout() -> None:
    """script-state's snapshot names helpers by module paths from before the subpackages."""
    (snapshot,) = (GOLDEN / "script-state" / "store" / "runs" / "golden-state" / "snapshots").glob(
        "*.snap"
    )
    fields = msgpack.unpackb(snapshot.read_bytes()[SEAL_HEADER_BYTES:], raw=False)
    state = fields["body"]["state"]
    for module in ("pickling", "caches", "resources", "live_frames"):
        assert f"resumable.durability.{module}".encode() in state


def test_every_flat_durability_module_is_mapped_to_one_that_imports() -> None:
    """Pickles name modules by path: each path of the flat layout maps to where it is now."""
    flat = {
        *("boundaries", "caches", "call_sites", "checkpoint_hooks", "checkpoints", "control"),
        *("crypto", "divergence", "explain", "fast_forward", "finished", "foreign", "fork"),
        *("generations", "hashseed", "history", "interleaving", "interrupts", "journal", "keys"),
        *("live_frames", "lost", "nondeterminism", "order", "owners", "pickling", "process_state"),
        *("progress", "recording", "records", "recovery", "reducers", "repair", "resources"),
        *("runs", "scopes", "session", "set_order", "set_rebuild", "set_table", "snapshot"),
        *("state", "state_codec", "steps", "stopping", "store_faults", "tail", "task_exit"),
        *("tasks", "writer", "written_files"),
    }
    for name in flat:
        module = current_module(f"resumable.durability.{name}", "x")
        assert module != f"resumable.durability.{name}"
        importlib.import_module(module)
    assert current_module("resumable.snapshot", "_make_cell").endswith("capture.pickling")
    assert current_module("resumable.durability.snapshot", "LostVariable").endswith(
        "capture.snapshot"
    )
    assert current_module("resumable.state", "RunState").endswith("log.run_state")
