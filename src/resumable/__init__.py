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

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads it so)

if _TYPE_CHECKING:
    from resumable.config import Config, load_config
    from resumable.durability.capture.snapshot import register_external, register_reducer
    from resumable.durability.effects.keys import idempotency_key
    from resumable.durability.effects.steps import step
    from resumable.durability.embedded.executor import DurableExecutor
    from resumable.durability.embedded.llm import DurableLLM, DurableStream
    from resumable.durability.embedded.outcome import Failure, Outcome
    from resumable.durability.embedded.run import DurableRun, RunInfo, open_run
    from resumable.durability.log.checkpoints import CheckpointManager, CheckpointPolicy
    from resumable.durability.runs.coordinator import RecoveryCoordinator
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

_WHERE: dict[str, str] = {
    "AwaitHook": "resumable.exec.hooks",
    "CheckpointManager": "resumable.durability.log.checkpoints",
    "CheckpointPolicy": "resumable.durability.log.checkpoints",
    "CodeError": "resumable.errors",
    "Config": "resumable.config",
    "ConfigError": "resumable.errors",
    "DirectHook": "resumable.exec.hooks",
    "DurableExecutor": "resumable.durability.embedded.executor",
    "DurableLLM": "resumable.durability.embedded.llm",
    "DurableRun": "resumable.durability.embedded.run",
    "DurableStream": "resumable.durability.embedded.llm",
    "Failure": "resumable.durability.embedded.outcome",
    "FencedError": "resumable.errors",
    "HookBase": "resumable.exec.hooks",
    "IntegrityError": "resumable.errors",
    "LLMError": "resumable.errors",
    "LostVariableError": "resumable.errors",
    "NonDeterminismError": "resumable.errors",
    "Outcome": "resumable.durability.embedded.outcome",
    "ProgramError": "resumable.errors",
    "RecordError": "resumable.errors",
    "RecoveryCoordinator": "resumable.durability.runs.coordinator",
    "ResponseResult": "resumable.exec.executor",
    "ResumableError": "resumable.errors",
    "RunBusyError": "resumable.errors",
    "RunInfo": "resumable.durability.embedded.run",
    "RunNotFoundError": "resumable.errors",
    "Statement": "resumable.exec.streaming",
    "StatementSplitter": "resumable.exec.streaming",
    "StoreError": "resumable.errors",
    "StoreFailedError": "resumable.errors",
    "StreamingPythonExecutor": "resumable.exec.executor",
    "idempotency_key": "resumable.durability.effects.keys",
    "load_config": "resumable.config",
    "open_run": "resumable.durability.embedded.run",
    "register_external": "resumable.durability.capture.snapshot",
    "register_reducer": "resumable.durability.capture.snapshot",
    "step": "resumable.durability.effects.steps",
}
"""Where each public name lives: imported on first use, so ``import resumable`` (and the
``resumable`` command) does not load the runtime before it is needed."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'resumable' has no attribute {name!r}")
    import importlib

    if name == "RecoveryCoordinator":  # it resumes runs of every kind: register their drivers
        importlib.import_module("resumable.drivers")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
