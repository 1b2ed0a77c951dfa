"""Every error a user of ``resumable`` can see.

The tree::

    ResumableError                  root of everything the runtime raises on purpose
    ├── ConfigError                 playbooks.toml / environment: unknown key, wrong type
    ├── UsageError                  bad CLI input: a file that does not exist, bad flags
    ├── ProgramError                a .pb program or script that cannot be loaded
    ├── RunNotFoundError            no run with that id in the store
    ├── RunBusyError                the run is owned by a live process / worker
    ├── StoreError                  a store cannot be reached, read or written
    │   ├── StoreUnavailableError   connection refused, path not writable, bad credentials
    │   ├── SchemaVersionError      the store was written by a newer resumable
    │   ├── FencedError             a write carried a stale lease epoch
    │   └── StoreFailedError        the store failed under an open run: it stopped, resumable
    ├── RecordError                 a checkpoint record that cannot be used
    │   ├── CorruptRecordError      CRC or framing wrong, torn tail
    │   ├── IntegrityError          MAC does not verify (never unpickled)
    │   ├── RecordVersionError      record schema or codec this version does not know
    │   ├── RecordTooLargeError     over the configured per-record size limit
    │   └── LostRecordsError        records the store acknowledged are gone (tail or middle)
    ├── DecryptionError             wrong or missing encryption key
    ├── NonDeterminismError         replay reached a different await site than recorded
    ├── LostVariableError           a variable that could not be checkpointed was used
    ├── LLMError                    provider failure: unreachable, bad key, malformed stream
    └── CodeError                   generated code raised or did not parse (carries the line)

Control signals that must pass through ``except Exception:`` in generated code
derive from ``BaseException`` and live next to the code that raises them.
Every error carries structured fields (``run_id``, ``seq``, ``site``) where
they apply, and survives pickling so it can be journaled.
"""

from __future__ import annotations

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the launcher loads this
if _TYPE_CHECKING:
    from typing import Any


class ResumableError(Exception):
    """Root of every error ``resumable`` raises on purpose.

    ``exit_code`` is what the CLI exits with when this error reaches it.
    """

    exit_code = 2

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_error, (type(self), self.message, self.fields))

    def __str__(self) -> str:
        return self.message


def _rebuild_error(cls: type[ResumableError], message: str, fields: dict[str, Any]) -> Any:
    error = cls.__new__(cls)
    ResumableError.__init__(error, message, **fields)
    return error


class ConfigError(ResumableError):
    """playbooks.toml or the environment holds a key that does not exist or has the wrong type."""


class UsageError(ResumableError):
    """The command line asked for something that cannot be done as asked."""


class ProgramError(ResumableError):
    """A program (a .pb file or a script) cannot be loaded: missing, unreadable, malformed."""


class RunNotFoundError(ResumableError):
    """No run with this id exists in the configured store."""


class RunBusyError(ResumableError):
    """The run is owned by a live process or worker; a second owner is refused."""


class StoreError(ResumableError):
    """The checkpoint store failed to read or write."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached: path not writable, connection refused, bad credentials."""


class SchemaVersionError(StoreError):
    """The store's schema is newer than this version of resumable understands."""


class FencedError(StoreError):
    """A write carried a lease epoch older than the run's current one: another owner took over."""


class StoreFailedError(StoreError):
    """The store failed under a run opened with ``open_run`` (disk full, read-only, server
    gone, lease lost): the run stopped where it stood and is ``interrupted``; nothing more
    of it runs in this process. Fix the store, then open the run again to continue it.

    ``run_id`` names the run, ``kind`` the fault (``full``, ``read-only``, ``unreachable``,
    ``fenced``, ``failed``).
    """

    exit_code = 75


class RecordError(ResumableError):
    """A checkpoint record cannot be used."""


class CorruptRecordError(RecordError):
    """A record's framing or CRC is wrong (a torn write or a flipped bit)."""


class IntegrityError(RecordError):
    """A record's MAC does not verify; it is refused before anything in it is unpickled."""


class RecordVersionError(RecordError):
    """A record, blob or store uses a schema version or codec this version does not know."""


class RecordTooLargeError(RecordError):
    """A record is larger than ``[durability] max_record_bytes``."""


class LostRecordsError(RecordError):
    """The log holds less than the store's high-water mark says was written; never guessed past."""


class DecryptionError(ResumableError):
    """Encrypted data cannot be decrypted: the key is wrong or missing."""


class NonDeterminismError(ResumableError):
    """On replay, the statement reached a different await than the one recorded."""

    exit_code = 1


class LostVariableError(ResumableError):
    """A variable that could not be checkpointed was used after a resume."""

    exit_code = 1


class LLMError(ResumableError):
    """The LLM provider failed: unreachable, refused the key, or sent a malformed stream."""


class CodeError(ResumableError):
    """Generated code did not parse or raised; ``line`` is the line in the LLM response."""

    exit_code = 1
