"""Where the modules that older checkpoints name by path live now, for the unpickler.

A pickle names each class and function it holds by module and name: the ``_make_*``,
``_fill_*`` and ``_rebuild_*`` helpers of :mod:`~resumable.durability.capture.pickling`,
the reducers of :mod:`~resumable.durability.capture.resources`, ``LostVariable``, a cache
or a generator's stand-in. Checkpoints written before the subpackage layouts name them by
the flat paths they had then (``resumable.snapshot``, then ``resumable.durability.snapshot``):
:func:`current_module` maps each such path to where the name is today.
"""

from __future__ import annotations

from typing import Final

_PACKAGES: Final = {
    "effects": "tasks keys foreign steps nondeterminism call_sites written_files",
    "log": "crypto records state_codec checkpoint_hooks checkpoints stopping store_faults hashseed "
    "writer tail",
    "capture": "snapshot pickling reducers resources process_state lost live_frames caches "
    "finished set_order set_rebuild set_table",
    "replay": "recording journal generations order interleaving scopes divergence fast_forward "
    "boundaries task_exit",
    "runs": "session recovery control history explain fork repair progress owners interrupts",
}
_RENAMED: Final = {"state": "log.run_state", "runs": "runs.stored"}
_FLAT: Final = {
    **{name: f"{package}.{name}" for package, names in _PACKAGES.items() for name in names.split()},
    **_RENAMED,
}
MOVED: Final = {
    **{f"resumable.durability.{old}": f"resumable.durability.{new}" for old, new in _FLAT.items()},
    # before the durability package: resumable.<module>
    **{
        f"resumable.{old}": f"resumable.durability.{_FLAT[old]}"
        for old in ("snapshot", "lost", "reducers", "journal", "state", "records")
    },
    "resumable.hooks": "resumable.exec.hooks",
    "resumable.output": "resumable.exec.output",
}
"""Old module path -> the module of the same contents today."""

_SNAPSHOT: Final = "resumable.durability.capture.snapshot"
_PICKLING: Final = "resumable.durability.capture.pickling"
_PICKLING_HELPERS: Final = frozenset(
    {
        *("_make_function", "_fill_function", "_make_cell", "_fill_cell", "_make_module"),
        *("_make_lru_cache", "_rebuild_exception", "_fill_exception"),
    }
)
"""Helpers that pickles written before pickling.py existed name in the snapshot module."""


def current_module(module: str, name: str) -> str:
    """The module that holds ``name`` today, for a pickle that names it in ``module``."""
    module = MOVED.get(module, module)
    if module == _SNAPSHOT and name in _PICKLING_HELPERS:
        return _PICKLING
    return module
