"""DurablePythonExecutor: smolagents' ``PythonExecutor`` contract on resumable's executor.

It behaves as ``LocalPythonExecutor`` does towards a ``CodeAgent``: ``send_tools``
(with smolagents' base helpers) and ``send_variables`` fill the namespace,
``__call__(code)`` returns ``CodeOutput(output, logs, is_final_answer)``,
``state["_print_outputs"]`` holds what the code printed, errors are ``InterpreterError``
worded as smolagents words them, and smolagents' guard rails hold (see guards.py;
``guards=False`` turns them off), ``timeout_seconds`` too. The difference: the code runs
in real CPython (no AST interpreter), and once :func:`durable_agent` binds it to a run,
every statement and tool call is checkpointed. Neither executor is a sandbox.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from smolagents.local_python_executor import (
    BASE_PYTHON_TOOLS,
    DEFAULT_MAX_LEN_OUTPUT,
    MAX_EXECUTION_TIME_SECONDS,
    CodeOutput,
    ExecutionTimeoutError,
    FinalAnswerException,
    InterpreterError,
    PythonExecutor,
    check_import_authorized,
)
from smolagents.utils import BASE_BUILTIN_MODULES, truncate_content

from resumable.durability.embedded.boundary import keeping_the_stop_signal
from resumable.durability.embedded.executor import DurableExecutor
from resumable.durability.embedded.outcome import Failure
from resumable.durability.embedded.turn import OUTPUT
from resumable.integrations.smolagents.guards import (
    DANGEROUS_BUILTINS,
    GUARD,
    RuntimeGuard,
    StatementCheck,
)
from resumable.integrations.smolagents.timeout import Deadline
from resumable.integrations.smolagents.wording import smolagents_wording

if TYPE_CHECKING:
    from resumable.durability.embedded.run import DurableRun


class DurablePythonExecutor(PythonExecutor):  # type: ignore[misc]
    """Runs a CodeAgent's code in CPython; durable once :func:`durable_agent` binds it."""

    def __init__(
        self,
        additional_authorized_imports: list[str] | None = None,
        max_print_outputs_length: int | None = None,
        additional_functions: dict[str, Callable[..., Any]] | None = None,
        timeout_seconds: float | None = MAX_EXECUTION_TIME_SECONDS,
        *,
        guards: bool = True,
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
        self.timeout_seconds = timeout_seconds
        self.guards = guards
        self.static_tools: dict[str, Any] | None = None
        self.custom_tools: dict[str, Any] = {}
        self.code = DurableExecutor(
            check_import=self._check_import,
            stop_signal=FinalAnswerException,
            final_tool="final_answer",
            assignment_values=True,
            check=self._check,
        )
        self.state = self.code.namespace
        self._protected: set[str] = set()
        if guards:
            # smolagents' rules: the dangerous builtins are not there, getattr refuses dunder
            # names, and the import hook is the builtins' __import__ its checks know.
            names = self.code.builtins
            for name in DANGEROUS_BUILTINS - {"__import__"}:
                names.pop(name, None)
            guard = RuntimeGuard(lambda: self.authorized_imports, lambda: self._protected)
            names["getattr"] = guard.getattr
            names["__import__"] = guard.importer(names["__import__"])
            self.code.hide(GUARD, guard)

    def _check(self, tree: ast.Module) -> None:
        if self.guards:
            # Like smolagents' executor, one that was not sent its tools offers no builtins.
            offered = self.static_tools is not None
            StatementCheck(self.state, self._protected, builtins_offered=offered).check(tree)
        _keep_sources(tree.body)

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
        """Bind the agent's tools, and smolagents' base helpers (``sqrt``, ``ceil`` ...)."""
        self.bind(tools, helpers=True)

    def bind(self, tools: dict[str, Any], *, helpers: bool) -> None:
        """Bind ``tools`` (with smolagents' base helpers, when ``helpers``): none can be
        assigned to by the code while the guards are on.

        A tool that is one of Python's builtins or of smolagents' base helpers is not a
        step (nothing to journal): the code calls it as a builtin.
        """
        given = {**tools, **self.additional_functions}
        self.static_tools = given
        steps = {
            name: tool
            for name, tool in given.items()
            if not _plain_builtin(name, tool) and BASE_PYTHON_TOOLS.get(name) is not tool
        }
        base = {k: v for k, v in BASE_PYTHON_TOOLS.items() if k not in ("print", "getattr")}
        for name, tool in given.items():
            if name in steps or name in ("__import__", "print", "getattr"):
                continue
            if name in base or self.guards:
                self.code.builtins[name] = tool  # a dangerous builtin given as a tool too
        self.code.bind_tools(steps)
        self._protected = set(given)
        if helpers:
            # The helpers are plain functions: builtins of the code, not steps to journal.
            self.code.builtins.update(base)
            self._protected |= set(BASE_PYTHON_TOOLS)

    def variables(self) -> list[str]:
        """The names of the code's variables (what a checkpoint holds)."""
        hidden = self.code.exclude()
        return [name for name in self.state if name not in hidden and name != OUTPUT]

    def send_variables(self, variables: dict[str, Any]) -> None:
        self.state.update(variables)

    def __call__(self, code_action: str) -> CodeOutput:
        deadline = Deadline(self.timeout_seconds)
        with deadline, keeping_the_stop_signal():
            outcome = self.code.run_code(code_action)
        logs = truncate_content(outcome.output, max_length=self.max_print_outputs_length)
        self.state[OUTPUT].value = logs
        if outcome.error is not None:
            if outcome.error.exc_type == ExecutionTimeoutError.__name__:
                raise ExecutionTimeoutError(deadline.message())
            raise InterpreterError(_worded(outcome.error))
        return CodeOutput(output=outcome.value, logs=logs, is_final_answer=outcome.final)

    def cleanup(self) -> None:
        self.code.close()


def _keep_sources(body: list[ast.stmt]) -> None:
    """Give each function the code defines its ``__source__``, as smolagents does."""
    at = 0
    while at < len(body):
        node = body[at]
        at += 1
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            source = ast.unparse(node)
            _keep_sources(node.body)
            target = ast.Attribute(ast.Name(node.name, ast.Load()), "__source__", ast.Store())
            body.insert(at, ast.copy_location(ast.Assign([target], ast.Constant(source)), node))
            at += 1
        elif isinstance(node, ast.If | ast.For | ast.While | ast.With | ast.Try):
            for inner in (node.body, getattr(node, "orelse", [])):
                _keep_sources(inner)


def _plain_builtin(name: str, tool: Any) -> bool:
    return getattr(builtins, name, None) is tool


def _worded(failure: Failure) -> str:
    """The error as smolagents' LocalPythonExecutor words it, so the model sees the same."""
    if failure.syntax:
        return (
            f"Code parsing failed on line {failure.line} due to: {failure.exc_type}: "
            f"{failure.message}\n{failure.text}{' ' * failure.offset}^"
        )
    kind, message = smolagents_wording(failure.exc_type, failure.message, failure.statement)
    return f"Code execution failed at line '{failure.statement}' due to: {kind}: {message}"
