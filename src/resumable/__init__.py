"""resumable: durable execution for LLM-written Python.

Run code statement by statement as it streams in, with a checkpoint at every await,
and resume it exactly after the process dies.
"""

import sys

if sys.platform == "win32":  # pragma: no cover - the stores need POSIX file locks and fsync
    raise ImportError(
        "resumable runs on Linux and macOS (its stores need POSIX file locks); "
        "on Windows, run it under WSL"
    )

from resumable.config import Config, load_config
from resumable.durability.checkpoints import CheckpointManager, CheckpointPolicy
from resumable.durability.embedded.executor import DurableExecutor
from resumable.durability.embedded.llm import DurableLLM, DurableStream
from resumable.durability.embedded.outcome import Failure, Outcome
from resumable.durability.embedded.run import DurableRun, RunInfo, open_run
from resumable.durability.keys import idempotency_key
from resumable.durability.recovery import RecoveryCoordinator
from resumable.durability.snapshot import register_external, register_reducer
from resumable.durability.steps import step
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
    StoreFailedError,
)
from resumable.exec.executor import ResponseResult, StreamingPythonExecutor
from resumable.exec.hooks import AwaitHook, DirectHook, HookBase
from resumable.exec.streaming import Statement, StatementSplitter

__all__ = [
    "AwaitHook",
    "CheckpointManager",
    "CheckpointPolicy",
    "CodeError",
    "Config",
    "ConfigError",
    "DirectHook",
    "DurableExecutor",
    "DurableLLM",
    "DurableRun",
    "DurableStream",
    "Failure",
    "FencedError",
    "HookBase",
    "IntegrityError",
    "LLMError",
    "LostVariableError",
    "NonDeterminismError",
    "Outcome",
    "ProgramError",
    "RecordError",
    "RecoveryCoordinator",
    "ResponseResult",
    "ResumableError",
    "RunBusyError",
    "RunInfo",
    "RunNotFoundError",
    "Statement",
    "StatementSplitter",
    "StoreError",
    "StoreFailedError",
    "StreamingPythonExecutor",
    "idempotency_key",
    "load_config",
    "open_run",
    "register_external",
    "register_reducer",
    "step",
]

# Registers the script and playbook drivers, so a RecoveryCoordinator can resume any run.
from resumable import drivers  # noqa: F401

__version__ = "0.1.0"
