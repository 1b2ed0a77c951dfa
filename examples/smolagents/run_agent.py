"""Run the shop agent durably: ``python examples/smolagents/run_agent.py [RUN_ID [STORE]]``.

Kill it at any moment (or set RESUMABLE_CRASH_AFTER=N) and run the same command again:
it continues where it stopped, with no tool call made twice. ``--local`` runs the
same agent with smolagents' own LocalPythonExecutor, not durably, for comparison.
``SHOP_MEMORY=FILE`` writes what the agent's memory holds at the end, as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from shop import TASK, build_agent

from resumable.integrations.smolagents import durable_agent


def memory_of(agent: Any) -> list[dict[str, Any]]:
    """The agent's memory steps without their timings."""
    steps = []
    for step in agent.memory.steps:
        steps.append(
            {
                "type": type(step).__name__,
                "task": getattr(step, "task", None),
                "model_output": getattr(step, "model_output", None),
                "code": getattr(step, "code_action", None),
                "observations": getattr(step, "observations", None),
                "error": None if getattr(step, "error", None) is None else str(step.error),
                "output": repr(getattr(step, "action_output", None)),
            }
        )
    return steps


def main(argv: list[str]) -> None:
    if argv[:1] == ["--local"]:
        agent = build_agent(durable=False)
    else:
        run_id = argv[0] if argv else "shop-1"
        store = argv[1] if len(argv) > 1 else ".resumable"
        agent = durable_agent(build_agent(), run_id=run_id, store=store)
    answer = agent.run(TASK)
    print(f"answer: {answer}")
    memory = os.environ.get("SHOP_MEMORY")
    if memory:
        Path(memory).write_text(json.dumps(memory_of(agent), indent=1), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
