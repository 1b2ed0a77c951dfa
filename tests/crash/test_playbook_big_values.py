"""A playbook called with, and returning, a value over the blob threshold survives a kill.

Values over ``blob_threshold_bytes`` (64 KB) are stored as blobs, which the records that
hold them name. Main passes a 100 KB string to Echo and gets a longer one back. Killed
after Echo's ``frame`` record, its ``return`` record or any record after it, and
resumed, the run must say what the uninterrupted run said: after the ``return``, the
resume takes Echo's value from that record. A fork at the ``return`` record carries the
blob along, and finishes the run the same way.

Agent state is pickled whole into the records, never with blobs: a type registered with
``register_external`` is pickled there by value, so a resume reads it back.
"""

from __future__ import annotations

import signal
from pathlib import Path

from tests.playbooks_runtime import cli, kill_at_records, write_program
from tests.replay.state_harness import record_kinds

PROGRAM = """\
# Copier
Hands a long text to another playbook and gets a longer one back.

## Main
### Steps
- Make a long text, let Echo extend it, and report its size

## Echo($text)
### Steps
- Return the text with a tail
"""

RESPONSES = {
    "Main": [
        'await Step("Main:01:QUE")\n'
        'long = "y" * 100_000\n'
        "got = await Echo(long)\n"
        'await Say("user", f"len={len(got)} head={got[:3]} tail={got[-5:]}")\n'
        "await End()\n",
    ],
    "Echo": [
        'await Step("Echo:01:RET")\n'
        'await Say("user", f"echoing {len(text)} characters")\n'
        'await Return(text + "x" * 100_000 + "end")\n'
    ],
}

EXPECTED = [
    "Copier → user: echoing 100000 characters",
    "Copier → user: len=200003 head=yyy tail=xxend",
]


def _reference(folder: Path) -> list[str]:
    """Run the program whole; the kinds of its records (record N at index N - 1)."""
    write_program(folder, "copier", PROGRAM, RESPONSES)
    done = cli(["run", "copier.pb", "--run-id", "ref"], folder)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == EXPECTED
    return record_kinds(folder, "ref")


def test_a_playbook_value_stored_as_a_blob_survives_a_kill(tmp_path: Path) -> None:
    kinds = _reference(tmp_path)
    echo_called = [n for n, kind in enumerate(kinds, 1) if kind == "frame"][1]
    returned = kinds.index("return") + 1
    wrong = []
    for point in [echo_called, *range(returned, len(kinds))]:  # the last is the status
        run_id = f"k{point}"
        env = {"RESUMABLE_CRASH_AFTER": str(point)}
        crashed = cli(["run", "copier.pb", "--run-id", run_id], tmp_path, env=env)
        assert crashed.code == -signal.SIGKILL, (point, crashed.stderr)
        resumed = cli(["resume", run_id], tmp_path)
        said = (crashed.stdout + resumed.stdout).splitlines()
        if resumed.code != 0 or said != EXPECTED:
            wrong.append((point, kinds[point - 1], said, resumed.stderr.strip()[-200:]))
    assert not wrong, f"killed after these records the run said something else: {wrong}"


def test_a_fork_after_a_playbook_returned_a_blob_finishes_the_run(tmp_path: Path) -> None:
    returned = _reference(tmp_path).index("return") + 1
    forked = cli(["fork", "ref", "--at", str(returned)], tmp_path)
    assert forked.code == 0, forked.stderr
    resumed = cli(["resume", forked.stdout.strip()], tmp_path)
    assert resumed.code == 0, resumed.stderr
    assert resumed.stdout.splitlines() == EXPECTED[1:]


PRICER = """\
# Pricer
Keeps a price in agent state.

## Main
### Steps
- Keep a price
- Report it

```python
import decimal

import resumable

resumable.register_external(
    decimal.Decimal, lambda d: str(d).encode(), lambda b: decimal.Decimal(b.decode())
)


@playbook
async def Price() -> decimal.Decimal:
    "A price."
    return decimal.Decimal("1.50")
```
"""

PRICER_RESPONSES = {
    "Main": [
        'await Step("Main:01:ACT")\nagent["price"] = await Price()\n',
        'await Step("Main:02:ACT")\nawait Say("user", f"price={agent[\'price\']!r}")\nawait End()\n',
    ]
}


def test_agent_state_holding_a_registered_external_type_survives_a_kill(
    tmp_path: Path,
) -> None:
    write_program(tmp_path, "pricer", PRICER, PRICER_RESPONSES)
    done, wrong = kill_at_records(tmp_path, "pricer.pb", points=8)
    assert done.stdout.splitlines() == ["Pricer → user: price=Decimal('1.50')"]
    assert not wrong, f"killed after these records the run said something else: {wrong}"
