"""The string hash seed of a run: recorded when it starts, the same again when it resumes.

Set iteration order depends on ``PYTHONHASHSEED``, which only takes effect when an interpreter
starts. A run records the seed it was started with (when ``PYTHONHASHSEED`` says it) and a probe,
the hash of a fixed string, so a resume can tell whether its own process hashes the same. The
``resumable`` command starts itself again with the recorded seed when it does not (and, for a new
run, with a random pinned seed when none is set); an embedded program must start its process with
``PYTHONHASHSEED`` set to the value :func:`run_fields` recorded, and is warned when it did not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["ENV", "mismatch", "run_fields", "seed_from_env", "seed_to_apply"]

ENV: Final = "PYTHONHASHSEED"
_PROBE: Final = "resumable: which hash seed does this process use?"
_MAX: Final = 4294967295


def seed_from_env(env: Mapping[str, str]) -> int | None:
    """The seed ``PYTHONHASHSEED`` pins, or None (unset or ``random``: a seed nobody knows)."""
    value = env.get(ENV, "")
    if value.isdigit() and int(value) <= _MAX:
        return int(value)
    return None


def run_fields(env: Mapping[str, str]) -> dict[str, Any]:
    """What a new run records in its meta: the seed (if known) and this process's probe."""
    return {"hash_seed": seed_from_env(env), "hash_probe": hash(_PROBE)}


def _differs(extra: Mapping[str, Any]) -> bool:
    probe = extra.get("hash_probe")
    return probe is not None and probe != hash(_PROBE)


def seed_to_apply(extra: Mapping[str, Any]) -> int | None:
    """The seed a process must be started with to hash as the run did, or None if this one does."""
    seed = extra.get("hash_seed")
    return seed if _differs(extra) and isinstance(seed, int) else None


def mismatch(extra: Mapping[str, Any]) -> str | None:
    """Why set iteration order may differ in this process from the run's, or None."""
    if not _differs(extra):
        return None
    seed = extra.get("hash_seed")
    if seed is None:
        return (
            "this run was started without PYTHONHASHSEED, so this process orders sets and dicts "
            "of strings differently; start runs with PYTHONHASHSEED set (resumable exec/run do)"
        )
    return (
        f"this run hashes strings with PYTHONHASHSEED={seed} and this process does not: "
        f"iterating a set may give another order; start the process with PYTHONHASHSEED={seed}"
    )
