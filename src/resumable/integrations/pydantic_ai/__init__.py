"""pydantic-ai on resumable: durable agent runs and code mode on real CPython.

``pip install 'resumable-exec[pydantic-ai]'``. :class:`ResumableDurability` journals an
agent's model requests and tool calls in a run; :class:`ResumableCodeMode` gives the
agent a ``run_code`` tool whose Python runs in CPython under resumable's executor, with
a namespace checkpointed at every statement.
"""

from resumable.integrations.pydantic_ai.code_mode import ResumableCodeMode
from resumable.integrations.pydantic_ai.durability import ResumableDurability, current_run

__all__ = ["ResumableCodeMode", "ResumableDurability", "current_run"]
