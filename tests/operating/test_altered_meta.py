"""Input is checked before it is used: an altered hash seed in a run's metadata, an empty id."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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
