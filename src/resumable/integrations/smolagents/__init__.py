"""smolagents with durable execution: ``pip install 'resumable-exec[smolagents]'``.

``DurablePythonExecutor`` runs a CodeAgent's code actions in real CPython, statement
by statement, every tool call a step; ``durable_agent`` journals the agent's model
responses and memory steps so that after a crash the same agent, built again with the
same ``run_id``, continues where it stopped. Like smolagents' own local executor, this
is not a sandbox: the code the model writes runs with the rights of your process.
"""

from resumable.integrations.smolagents.agent import durable_agent
from resumable.integrations.smolagents.executor import DurablePythonExecutor

__all__ = ["DurablePythonExecutor", "durable_agent"]
