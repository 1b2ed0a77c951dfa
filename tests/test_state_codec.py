"""A snapshot holds the folded run state whole: every field is read back as it was written."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

import msgpack

from resumable.durability.log.run_state import AwaitEntry, FrameState, RunState, TurnState
from resumable.durability.log.state_codec import state_from_dict, state_to_dict


def _entry(seq: int) -> AwaitEntry:
    return AwaitEntry("0:3:4", "ok", b"pickled", 2, seq, ("blob-1",), 7, False)


def _state() -> RunState:
    """A run in the middle of a playbook frame with its replay window open: no field at its
    default, so a field the snapshot drops or misreads shows."""
    frame = FrameState(
        "main/1.0",
        playbook="Ask",
        parent="main",
        args=b"args",
        args_blobs=["blob-2"],
        turns=[
            TurnState(0, ["await Step(", '"Ask:01")'], True, [["user", "go"]], [9, 4], 80.0, 1),
            TurnState(1, ["x = 1"], False, [["user", "on"]], [3, 1], 120.5, 1, 2, 3),
        ],
        turn=1,
        next_index=3,
        offset=40,
        ns=b"namespace",
        ns_blobs=["blob-1"],
        lost={"handle": "an open socket"},
        journal={4: _entry(30), "4:1": _entry(31)},
        journal_stmt=3,
        window={(1, 2): {0: _entry(28)}, (1, 3): {4: _entry(30)}},
        window_start=(1, 2, 31),
        marks={(1, 3): 29},
        task_names=2,
        output=12,
        files={"/srv/agents/notes.log": 40},
        errors=[{"message": "boom", "traceback": "..."}],
        returned=True,
        result=b"result",
        result_blobs=["blob-3"],
        last_seq=33,
        agent=b"agent of the frame",
    )
    return RunState(
        run_id="r-1",
        program="/srv/agents/p.pb",
        kind="playbook",
        source="# a program",
        entry="Main",
        frames={frame.frame_id: frame},
        status="waiting",
        detail={"key": "ask-1", "prompt": "Go on?"},
        answers={"ask-0": "yes"},
        asks={"ask-1": {"prompt": "Go on?"}},
        agent=b"agent of the run",
        seq=33,
        last_event_seq=32,
        output=12,
        files={"/srv/agents/notes.log": 52},
        last_await=31,
        windows={frame.frame_id},
        counted_output=True,
        time=1700000000.5,
    )


def _defaults(instance: Any) -> list[str]:
    """Fields of ``instance`` still at their default."""
    found = []
    for spec in fields(instance):
        default = spec.default_factory() if spec.default_factory is not MISSING else spec.default
        if getattr(instance, spec.name) == default:
            found.append(spec.name)
    return found


def test_the_state_covers_every_field() -> None:
    state = _state()
    assert _defaults(state) == []
    assert _defaults(state.frames["main/1.0"]) == []
    first, second = state.frames["main/1.0"].turns
    assert set(_defaults(first)) & set(_defaults(second)) == set()


def test_a_snapshot_reads_back_the_state_it_was_written_from() -> None:
    state = _state()
    packed = msgpack.packb(state_to_dict(state), use_bin_type=True)
    read = state_from_dict(msgpack.unpackb(packed, raw=False))  # as a resume reads it
    assert read == state
    assert read.frames["main/1.0"].turns[0].chunks == ['await Step("Ask:01")']


def test_a_snapshot_from_before_the_blobs_of_calls_and_returns_reads_them_as_none() -> None:
    data = state_to_dict(_state())
    for frame in data["frames"]:
        del frame["args_blobs"], frame["result_blobs"]
    read = state_from_dict(data)
    frame = read.frames["main/1.0"]
    assert (frame.args_blobs, frame.result_blobs) == ([], [])
    assert frame.result == b"result"
