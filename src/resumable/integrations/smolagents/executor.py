"""DurablePythonExecutor: smolagents' ``PythonExecutor`` contract on resumable's executor.

It behaves as ``LocalPythonExecutor`` does towards a ``CodeAgent``: ``send_tools`` and
``send_variables`` fill the namespace, ``__call__(code)`` returns
``CodeOutput(output, logs, is_final_answer)``, ``state["_print_outputs"]`` holds what the
code printed, errors are ``InterpreterError`` worded as smolagents words them, imports
outside ``BASE_BUILTIN_MODULES`` + ``additional_authorized_imports`` are refused with
smolagents' message. The difference: the code runs in real CPython (no AST
interpreter; any Python the model writes), and once :func:`durable_agent` binds it to a
run, every statement and tool call is checkpointed.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from smolagents.local_python_executor import (
    DEFAULT_MAX_LEN_OUTPUT,
    CodeOutput,
    FinalAnswerException,
    InterpreterError,
    PythonExecutor,
    check_import_authorized,
)
from smolagents.utils import BASE_BUILTIN_MODULES, truncate_content

from resumable.durability.embedded.executor import DurableExecutor
from resumable.durability.embedded.outcome import Failure
from resumable.durability.embedded.turn import OUTPUT

if TYPE_CHECKING:
    from resumable.durability.embedded.run import DurableRun


class DurablePythonExecutor(PythonExecutor):  # type: ignore[misc]
    """Runs a CodeAgent's code in CPython; durable once :func:`durable_agent` binds it."""

    def __init__(
        self,
        additional_authorized_imports: list[str] | None = None,
        max_print_outputs_length: int | None = None,
        additional_functions: dict[str, Callable[..., Any]] | None = None,
    ) -> None:
        self.additional_authorized_imports = list(additional_authorized_imports or [])
        self.authorized_imports = list(
            set(BASE_BUILTIN_MODULES) | set(self.additional_authorized_imports)
        )
        missing = [
            base
            for name in self.authorized_imports
            if name != "*" and find_spec(base := name.split(".")[0]) is None
        ]
        if missing:
            raise InterpreterError(
                f"Non-installed authorized modules: {', '.join(missing)}. "
                "Please install these modules or remove them from the authorized imports list."
            )
        self.max_print_outputs_length = max_print_outputs_length or DEFAULT_MAX_LEN_OUTPUT
        self.additional_functions = additional_functions or {}
        self.static_tools: dict[str, Any] | None = None
        self.custom_tools: dict[str, Any] = {}
        self.code = DurableExecutor(
            check_import=self._check_import,
            stop_signal=FinalAnswerException,
            final_tool="final_answer",
            assignment_values=True,
        )
        self.state = self.code.namespace

    def attach(self, run: DurableRun | None) -> None:
        """Checkpoint the following code actions in ``run`` (None: run plainly again)."""
        self.code.attach(run)

    def _check_import(self, name: str, from_import: bool) -> None:
        if not check_import_authorized(name, self.authorized_imports):
            how = "Import from" if from_import else "Import of"
            raise InterpreterError(
                f"{how} {name} is not allowed. Authorized imports are: {self.authorized_imports!s}"
            )

    # -- smolagents' PythonExecutor ---------------------------------------------------------
    def send_tools(self, tools: dict[str, Any]) -> None:
        self.static_tools = {**tools, **self.additional_functions}
        self.code.bind_tools(self.static_tools)

    def send_variables(self, variables: dict[str, Any]) -> None:
        self.state.update(variables)

    def __call__(self, code_action: str) -> CodeOutput:
        outcome = self.code.run_code(code_action)
        logs = truncate_content(outcome.output, max_length=self.max_print_outputs_length)
        self.state[OUTPUT].value = logs
        if outcome.error is not None:
            raise InterpreterError(_worded(outcome.error))
        return CodeOutput(output=outcome.value, logs=logs, is_final_answer=outcome.final)

    def cleanup(self) -> None:
        self.code.close()


def _worded(failure: Failure) -> str:
    """The error as smolagents' LocalPythonExecutor words it, so the model sees the same."""
    if failure.syntax:
        return (
            f"Code parsing failed on line {failure.line} due to: {failure.exc_type}: "
            f"{failure.message}\n{failure.text}{' ' * failure.offset}^"
        )
    return (
        f"Code execution failed at line '{failure.statement}' due to: "
        f"{failure.exc_type}: {failure.message}"
    )
