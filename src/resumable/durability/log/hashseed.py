"""The string hash seed of a run: recorded when it starts, the same again when it resumes.

Set iteration order depends on ``PYTHONHASHSEED``, which only takes effect when an interpreter
starts. A run records the seed it was started with (when ``PYTHONHASHSEED`` says it) and a probe,
the hash of a fixed string, so a resume can tell whether its own process hashes the same.

Every store has one seed, :func:`store_seed`, derived from its MAC key: each process that can
read the store's records holds that key, so all of them (``resumable exec``, ``submit``, every
worker of a fleet) agree on it without a setting, and nobody without the key can predict it.
The ``resumable`` command starts itself again with the store's seed for a new run (unless
``PYTHONHASHSEED`` pins one: the run records that) and with the recorded seed for a resume; a
worker drives a run recorded with another seed in a child process started with it. An embedded
program must start its process with the seed :func:`run_fields` recorded, and is warned when
it did not.
"""

from __future__ import annotations

import functools
import itertools
import os
import subprocess
import sys
import warnings
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any, Final

from resumable.durability.log.records import RecordCodec
from resumable.errors import UsageError

__all__ = [
    "ENV",
    "carried",
    "holds_hashed_set",
    "mismatch",
    "probe_for",
    "queued_fields",
    "run_fields",
    "seed_from_env",
    "seed_to_apply",
    "store_seed",
]

ENV: Final = "PYTHONHASHSEED"
_FIELDS: Final = ("hash_seed", "hash_probe")
"""The keys of a run's ``RunMeta.extra`` that say how it hashes."""
_PROBE: Final = "resumable: which hash seed does this process use?"
_MAX: Final = 4294967295
_LABEL: Final = b"resumable hash seed"
"""What the store's key authenticates to make its seed (no record is MAC'd over these bytes)."""


def seed_from_env(env: Mapping[str, str]) -> int | None:
    """The seed ``PYTHONHASHSEED`` pins, or None (unset or ``random``: a seed nobody knows)."""
    value = env.get(ENV, "")
    if value.isdigit() and int(value) <= _MAX:
        return int(value)
    return None


def store_seed(codec: RecordCodec) -> int:
    """The seed of the store whose records ``codec`` seals: 4 bytes of an HMAC of its key."""
    return int.from_bytes(codec.derive(_LABEL)[:4], "big")


def run_fields(env: Mapping[str, str]) -> dict[str, Any]:
    """What a new run records in its meta: the seed (if known) and this process's probe."""
    return {"hash_seed": seed_from_env(env), "hash_probe": hash(_PROBE)}


def queued_fields(seed: int) -> dict[str, Any]:
    """What a run queued for other processes records: the seed they start it with, its probe."""
    return {"hash_seed": seed, "hash_probe": probe_for(seed)}


def carried(extra: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a run's meta that a copy of its history (a fork) must keep."""
    return {name: extra[name] for name in _FIELDS if name in extra}


@functools.cache
def probe_for(seed: int) -> int | None:
    """The probe of a process started with ``PYTHONHASHSEED=seed``, as a fresh one reports it.

    No API gives the seed a process hashes with, so an interpreter started with it says. If
    none can be started (an embedding without ``sys.executable``) this warns and gives None:
    the run keeps its seed, and a resume cannot tell whether it hashes alike.
    """
    try:
        done = subprocess.run(
            [sys.executable, "-S", "-c", f"print(hash({_PROBE!r}))"],
            env={**os.environ, ENV: str(seed)},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return int(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        warnings.warn(
            f"cannot start {sys.executable or 'Python'} to learn how PYTHONHASHSEED={seed} "
            f"hashes ({error}); the run records its seed without a probe",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _differs(extra: Mapping[str, Any]) -> bool:
    probe = extra.get("hash_probe")
    return probe is not None and probe != hash(_PROBE)


def seed_to_apply(extra: Mapping[str, Any], env: Mapping[str, str]) -> int | None:
    """The seed a process must be started with to hash as the run did, or None.

    None too when this process was started with that seed and still hashes otherwise (another
    Python recorded the run): starting again would not help, and :func:`mismatch` says so.
    """
    seed = _recorded_seed(extra)
    if not _differs(extra) or seed is None or seed_from_env(env) == seed:
        return None
    return seed


def _recorded_seed(extra: Mapping[str, Any]) -> int | None:
    """The run's recorded seed; a value no process could have used is refused, never applied
    (a process started with it would die before it ran a line)."""
    seed = extra.get("hash_seed")
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _MAX:
        raise UsageError(
            f"the run's metadata holds hash_seed = {seed!r}, which no Python can hash with "
            f"(0 to {_MAX}); it was altered: restore it, or set it to the seed the run was "
            "started with",
            key="hash_seed",
        )
    return seed


def mismatch(extra: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """Why set iteration order may differ in this process from the run's, or None."""
    if not _differs(extra):
        return None
    seed = _recorded_seed(extra)
    if seed is None:
        return (
            "this run was started without PYTHONHASHSEED, so this process may iterate a set of "
            "strings in another order; start the program with PYTHONHASHSEED pinned "
            "(PYTHONHASHSEED=0 python app.py, each time; resumable exec/run pin it themselves)"
        )
    if seed_from_env(env) == seed:
        return (
            f"this run was recorded by a Python that hashes strings otherwise, even with "
            f"PYTHONHASHSEED={seed}: iterating a set may give another order; resume it with "
            "the Python version that started it"
        )
    return (
        f"this run hashes strings with PYTHONHASHSEED={seed} and this process does not: "
        f"iterating a set may give another order; start the process with PYTHONHASHSEED={seed}"
    )


def holds_hashed_set(values: Iterable[Any], depth: int = 4) -> bool:
    """Whether ``values`` hold a set whose iteration order depends on the hash seed.

    That is a set or frozenset with a string or bytes in it (alone or in a tuple); dict
    order is insertion order, and numbers hash the same under every seed. The walk goes
    ``depth`` containers (lists, tuples, dicts, objects' attributes) deep, and looks at the
    first 10,000 items of each.
    """
    for value in itertools.islice(values, 10_000):
        if isinstance(value, set | frozenset):
            if any(_seeded(item) for item in itertools.islice(value, 10_000)):
                return True
        elif depth > 0:
            inner: Iterable[Any] | None = None
            if isinstance(value, list | tuple):
                inner = value
            elif isinstance(value, dict):
                inner = value.values()
            elif hasattr(value, "__dict__") and not isinstance(value, type | ModuleType):
                found = getattr(value, "__dict__", None)
                inner = found.values() if isinstance(found, dict) else None
            if inner is not None and holds_hashed_set(inner, depth - 1):
                return True
    return False


def _seeded(item: Any) -> bool:
    if isinstance(item, str | bytes):
        return True
    return isinstance(item, tuple | frozenset) and any(_seeded(i) for i in item)
