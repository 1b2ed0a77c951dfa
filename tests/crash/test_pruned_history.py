"""The history of a pruned playbook run reads from the oldest snapshot kept, on every store.

Compaction drops old snapshots with the records they cover; the SQL and Redis stores keep
records from the newest snapshot dropped, the folder store from the oldest one kept. A
record kept after the cut may continue an LLM response that began before it: `steps` and
the inspector's timeline folded the kept records from an empty state and died on such a
record (an IndexError with a traceback). They now start at the oldest snapshot kept, and
`show --at N` below it names the range instead of reporting the pruned records lost.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.crash.damage import Site
from tests.crash.harness import EXAMPLES, resumable

from resumable.config import load_config
from resumable.durability.log.pruned import oldest_base
from resumable.durability.runs.session import codec_for, store_for
from resumable.ui.timeline import read_timeline

PRUNED = {"RESUMABLE_DURABILITY_SNAPSHOT_EVERY": "20", "RESUMABLE_DURABILITY_KEEP": "1"}


async def test_steps_and_the_timeline_of_a_pruned_playbook_run(site: Site, tmp_path: Path) -> None:
    site.prepare(tmp_path)
    env = {**PRUNED, "SCENARIO_LEDGER": "ledger.txt"}
    program = str(EXAMPLES / "scenario" / "main.pb")
    done = resumable(["run", program, "--run-id", "s"], tmp_path, env=env)
    assert done.code == 0, done.stderr
    config = load_config(cwd=tmp_path, env={})
    async with store_for(config.durability, config) as store:
        records = (await store.read("s", 0)).records
        assert records[0].seq > 1, "nothing was pruned"
        base = await oldest_base(store, "s", records[0].seq, records[-1].seq)
        assert base is not None
        codec = await codec_for(store, config.durability, os.environ)
        timeline = await read_timeline(store, codec, "s")
    assert timeline.first_seq == base[0] + 1
    assert [e.seq for e in timeline.entries] == [r.seq for r in records if r.seq > base[0]]
    steps = resumable(["steps", "s", "--json"], tmp_path)
    assert steps.code == 0, steps.stderr
    assert "Traceback" not in steps.stderr
    assert f"the history starts at record {base[0] + 1}" in steps.stderr
    seqs = [entry["seq"] for entry in json.loads(steps.stdout)]
    assert seqs
    assert min(seqs) > base[0]
    assert seqs[-1] == records[-1].seq  # the final status
    shown = resumable(["show", "s", "--at", str(base[0])], tmp_path)
    assert shown.code == 0, shown.stderr
    assert "warning" not in shown.stderr
    below = resumable(["show", "s", "--at", "1"], tmp_path)
    assert below.code == 2
    assert below.stderr == (
        f"resumable: error: run s has no record 1 to show (its log was pruned up to record "
        f"{records[0].seq - 1}, its oldest snapshot is at record {base[0]}): choose --at "
        f"between {base[0]} and {records[-1].seq}\n"
    )
