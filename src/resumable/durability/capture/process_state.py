"""Process-wide state the program changes outside its namespace: the random state, logging.

Design note. A :class:`ProcessState` takes a baseline when the run starts in this process (the
global ``random`` state, and per logger: level, ``propagate``, ``disabled`` and handlers with
their levels and formatters). At every checkpoint :meth:`ProcessState.capture` returns only what
differs from that baseline, as a dict pickled with the namespace - so a handler that is also a
variable stays one object, and a program that touches neither costs a ``getstate()``, a tuple
comparison and one pass over the loggers - and not even the ``getstate()`` while
:mod:`resumable.durability.effects.nondeterminism` is installed and says nothing drew from ``random``. :meth:`ProcessState.restore` applies such a dict:
the random state is set, each recorded logger gets its level, flags and handlers back (handlers
to ``sys.stdout``/``sys.stderr`` write to this process's streams, handlers to files reopen them
where they were, see :mod:`resumable.durability.capture.resources`).

Handlers a logger already had when the baseline was taken (a test runner's, an embedding
application's) are not pickled: they are saved by position and mean the restoring process's own.
Entries are keyed ``"random"`` and ``"logging:<logger name>"`` (root is ``"logging:"``); an
entry that cannot be pickled is left out with a warning naming it, like a variable.
"""

from __future__ import annotations

import logging
import random
import struct
from typing import Any, Final, NamedTuple

from resumable.durability.effects.nondeterminism import random_generation

__all__ = ["LOGGING_PREFIX", "RANDOM_KEY", "ProcessState"]

RANDOM_KEY: Final = "random"
LOGGING_PREFIX: Final = "logging:"
_STATE_WORDS: Final = struct.Struct("625I")
_DISABLE_KEY: Final = "logging.disable"

LoggerKey = tuple[int, bool, bool, tuple[tuple[int, int, int], ...]]
_UNCONFIGURED: Final[LoggerKey] = (logging.NOTSET, True, False, ())


def _loggers() -> dict[str, logging.Logger]:
    found: dict[str, logging.Logger] = {"": logging.getLogger()}
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            found[name] = logger
    return found


def _logger_key(logger: logging.Logger) -> LoggerKey:
    handlers = tuple((id(h), h.level, id(h.formatter)) for h in logger.handlers)
    return (logger.level, logger.propagate, logger.disabled, handlers)


class _Kept(NamedTuple):
    """A handler the logger had before the run started: this process's own, by position."""

    position: int


class ProcessState:
    """The baseline of this process, and what a program changed of it since."""

    def __init__(self) -> None:
        self._random = random.getstate()
        self._random_seen: int | None = None  # nondeterminism.random_generation() last read
        self._random_entry: tuple[int, bytes, float | None] | None = None
        loggers = _loggers()
        self._loggers = {name: _logger_key(lg) for name, lg in loggers.items()}
        self._handlers = {name: list(lg.handlers) for name, lg in loggers.items() if lg.handlers}
        self._disable = logging.root.manager.disable

    def capture(self) -> dict[str, Any]:
        """What differs from the baseline (empty when the program changed nothing)."""
        state: dict[str, Any] = {}
        generation = random_generation()
        if generation is None or generation != self._random_seen:
            self._random_seen = generation
            now = random.getstate()
            self._random_entry = None
            if now != self._random:
                version, words, gauss = now
                self._random_entry = (version, _STATE_WORDS.pack(*words), gauss)
        if self._random_entry is not None:
            state[RANDOM_KEY] = self._random_entry
        for name, logger in _loggers().items():
            if _logger_key(logger) != self._loggers.get(name, _UNCONFIGURED):
                before = self._handlers.get(name, ())
                handlers = [_Kept(before.index(h)) if h in before else h for h in logger.handlers]
                state[LOGGING_PREFIX + name] = (
                    logger.level,
                    logger.propagate,
                    logger.disabled,
                    handlers,
                )
        disable = logging.root.manager.disable
        if disable != self._disable:
            state[_DISABLE_KEY] = disable
        return state

    @staticmethod
    def restore(state: dict[str, Any]) -> None:
        """Apply what :meth:`capture` returned (in a new process, or rolling this one back)."""
        saved = state.get(RANDOM_KEY)
        if saved is not None:
            version, words, gauss = saved
            random.setstate((version, _STATE_WORDS.unpack(words), gauss))
        if _DISABLE_KEY in state:
            logging.disable(state[_DISABLE_KEY])
        for key, value in state.items():
            if not key.startswith(LOGGING_PREFIX):
                continue
            name = key[len(LOGGING_PREFIX) :]
            logger = logging.getLogger(name or None)
            level, propagate, disabled, handlers = value
            logger.setLevel(level)
            logger.propagate = propagate
            logger.disabled = disabled
            present = list(logger.handlers)
            for handler in present:
                logger.removeHandler(handler)
            for handler in handlers:
                if isinstance(handler, _Kept):
                    if handler.position >= len(present):
                        continue
                    handler = present[handler.position]
                logger.addHandler(handler)
