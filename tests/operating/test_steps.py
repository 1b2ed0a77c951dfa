"""`resumable steps`: the seed scenario's history matches a golden listing (times masked),
`--json` follows the schema in docs/cli.md, and the filters narrow it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import jsonschema
import pytest
from tests.crash.harness import EXAMPLES, REPO, resumable
from tests.operating.conftest import look

GOLDEN = Path(__file__).parent / "scenario.steps.txt"


def _schema() -> dict[str, object]:
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    section = page[page.index("`resumable steps --json`") :]
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block, "docs/cli.md has no JSON schema for `steps --json`"
    return json.loads(block[1])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("steps")
    done = resumable(
        ["run", str(EXAMPLES / "scenario" / "main.pb"), "--run-id", "seed"],
        work,
        env={"SCENARIO_LEDGER": str(work / "ledger.txt")},
    )
    assert done.code == 0, done.stderr
    return work


def _masked(text: str) -> str:
    text = re.sub(r"\d\d:\d\d:\d\d\.\d{3}", "HH:MM:SS.mmm", text)
    text = re.sub(r"\d+\.\dms", "T", text)
    text = text.replace(str(EXAMPLES), "EXAMPLES")
    # columns move with the width of the masked values: compare cell by cell
    return "\n".join(" ".join(line.split()) for line in text.splitlines()) + "\n"


def test_steps_of_the_seed_scenario_match_the_golden_listing(scenario: Path) -> None:
    listed = look(["steps", "seed"], scenario)
    assert listed.code == 0, listed.stderr
    got = _masked(listed.stdout)
    if os.environ.get("RESUMABLE_UPDATE_GOLDEN"):
        GOLDEN.write_text(got, encoding="utf-8")
    assert got == GOLDEN.read_text(encoding="utf-8")


def test_steps_json_follows_the_schema_in_docs(scenario: Path) -> None:
    listed = look(["steps", "seed", "--json"], scenario)
    assert listed.code == 0, listed.stderr
    entries = json.loads(listed.stdout)
    jsonschema.validate(entries, _schema())
    seqs = [e["seq"] for e in entries]
    assert seqs == sorted(seqs)
    fetch = [e for e in entries if e["kind"] == "await" and "items" in e["value"]]
    assert len(fetch) == 1  # data = await FetchData(), with its value
    ledger = (scenario / "ledger.txt").read_text().split()
    assert ledger[1] == "seed/" + fetch[0]["key"]  # the key FetchData saw, without the run id


def test_steps_filters_by_frame_kind_and_time(scenario: Path) -> None:
    def entries(*args: str) -> list[dict[str, object]]:
        listed = look(["steps", "seed", "--json", *args], scenario)
        assert listed.code == 0, listed.stderr
        return json.loads(listed.stdout)  # type: ignore[no-any-return]

    everything = entries()
    stmts = entries("--kind", "stmt")
    assert stmts == [e for e in everything if e["kind"] == "stmt"]
    both = entries("--kind", "ask", "--kind", "turn")
    assert both == [e for e in everything if e["kind"] in ("ask", "turn")]
    helper = entries("--frame", "main/1.1.0")
    assert helper
    assert helper == [e for e in everything if e["frame"] == "main/1.1.0"]
    assert entries("--since", "1h") == everything
    assert entries("--since", "2999-01-01T00:00") == []
    chunks = entries("--kind", "chunk")
    assert chunks
    assert all(e["kind"] == "chunk" for e in chunks)


def test_steps_of_an_unknown_run_or_with_a_bad_since_is_one_line_exit_2(scenario: Path) -> None:
    for args, word in (
        (["steps", "nope"], "nope"),
        (["steps", "seed", "--since", "later"], "later"),
    ):
        listed = look(args, scenario)
        assert listed.code == 2
        assert listed.stdout == ""
        assert len(listed.stderr.splitlines()) == 1
        assert word in listed.stderr
