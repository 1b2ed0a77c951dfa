"""An embedded run whose store fails (a real full tmpfs): the application gets
``StoreFailedError`` (a ``ResumableError`` naming the fault and the fix) from the API it
called, never the run's internal stop signal; the run's code never sees the fault, no tool
starts while the store fails, and opening the run again once there is space finishes it
with every tool call made once."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

import resumable
from resumable.durability.embedded.boundary import host_facing, keeping_the_stop_signal
from resumable.durability.log.store_faults import StoreFailed
from resumable.errors import ResumableError, StoreFailedError

TURNS = 30


def _turn(i: int) -> str:
    return (
        "try:\n"
        f"    done.append(book({i}))\n"
        "except Exception as exc:\n"
        "    print('the code caught', type(exc).__name__)\n"
        "blocks.append(os.urandom(30000))\n"
    )


@contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _play(run: resumable.DurableRun, booked: list[int], outputs: list[str]) -> None:
    def book(i: int) -> int:
        booked.append(i)
        return i

    code = run.executor(tools={"book": book})
    outputs.append(code.run_code("import os\ndone = []\nblocks = []\n").output)
    for i in range(TURNS):
        outcome = code.run_code(_turn(i))
        assert outcome.error is None, outcome.error
        outputs.append(outcome.output)
    final = code.run_code("(len(done), sum(done), len(blocks))")
    run.complete(final.value)


def _stopped(
    store: Path, booked: list[int], outputs: list[str], asked: list[str]
) -> StoreFailedError:
    """Open the run and play it until the store stops it; the error the application got."""
    try:
        with resumable.open_run("full", store=store, program="ledger") as run:
            try:
                _play(run, booked, outputs)
            finally:
                with suppress(StoreFailedError):
                    run.llm(asked.append, name="model")("hello")
    except StoreFailedError as error:
        return error
    raise AssertionError("the run finished on a full disk")


def test_a_full_disk_is_a_public_error_and_opening_again_finishes(tmp_path: Path) -> None:
    booked: list[int] = []
    outputs: list[str] = []
    with _tmpfs(tmp_path / "store", "1m") as store:
        asked: list[str] = []
        error = _stopped(store, booked, outputs, asked)
        assert asked == []  # a model call after the fault is refused before the model runs
        assert isinstance(error, ResumableError)
        assert error.run_id == "full"
        assert error.kind == "full"
        assert "the store's disk is full" in error.message
        assert "open run full again (`resumable.open_run`) to continue it" in error.message
        assert "the code caught" not in "".join(outputs)  # the fault never reached the code
        assert booked  # it stopped mid-run, not before the first effect
        stopped_at = list(booked)

        # Still full: opening it again may be refused, and no tool starts meanwhile.
        _stopped(store, booked, outputs, asked)
        assert booked[: len(stopped_at)] == stopped_at
        assert len(booked) <= len(stopped_at) + 1  # at most the call in flight, again

        remounted = subprocess.run(["mount", "-o", "remount,size=1g", str(store)], check=False)
        assert remounted.returncode == 0
        with resumable.open_run("full", store=store, program="ledger") as run:
            if not run.finished:
                _play(run, booked, outputs)
            assert run.result == (TURNS, sum(range(TURNS)), TURNS)
    assert sorted(set(booked)) == list(range(TURNS))
    assert len(booked) - TURNS <= 2  # only a call in flight when the store failed, again
    assert "the code caught" not in "".join(outputs)


def test_inside_an_integration_the_stop_signal_passes_through() -> None:
    """An agent framework's `except Exception:` must not turn the fault into a message to
    the model: under `keeping_the_stop_signal` the API lets the run's signal through."""

    @host_facing
    def api() -> None:
        reason = "run r interrupted: the store's disk is full: x; free space and "
        raise StoreFailed("r", "full", reason + "`resumable resume r`")

    with pytest.raises(StoreFailedError, match="open run r again"):
        api()
    with keeping_the_stop_signal(), pytest.raises(StoreFailed):
        api()
    assert not issubclass(StoreFailed, Exception)
