"""resumable: durable execution for LLM-written Python.

Run code statement by statement as it streams in, with a checkpoint at every await,
and resume it exactly after the process dies.
"""

from resumable.checkpoints import CheckpointManager, CheckpointPolicy
from resumable.config import Config, load_config
from resumable.errors import (
    CodeError,
    ConfigError,
    FencedError,
    IntegrityError,
    LLMError,
    LostVariableError,
    NonDeterminismError,
    ProgramError,
    RecordError,
    ResumableError,
    RunBusyError,
    RunNotFoundError,
    StoreError,
)
from resumable.executor import ResponseResult, StreamingPythonExecutor
from resumable.hooks import AwaitHook, DirectHook, HookBase
from resumable.journal import idempotency_key
from resumable.recovery import RecoveryCoordinator
from resumable.snapshot import register_external, register_reducer
from resumable.streaming import Statement, StatementSplitter

__all__ = [
    "AwaitHook",
    "CheckpointManager",
    "CheckpointPolicy",
    "CodeError",
    "Config",
    "ConfigError",
    "DirectHook",
    "FencedError",
    "HookBase",
    "IntegrityError",
    "LLMError",
    "LostVariableError",
    "NonDeterminismError",
    "ProgramError",
    "RecordError",
    "RecoveryCoordinator",
    "ResponseResult",
    "ResumableError",
    "RunBusyError",
    "RunNotFoundError",
    "Statement",
    "StatementSplitter",
    "StoreError",
    "StreamingPythonExecutor",
    "idempotency_key",
    "load_config",
    "register_external",
    "register_reducer",
]
__version__ = "0.1.0"
