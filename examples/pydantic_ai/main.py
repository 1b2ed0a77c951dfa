"""Run the trip planner: ``python main.py RUN_ID [STORE] [--script packer]``.

With ``ResumableCodeMode`` and ``ResumableDurability`` the run is ``RUN_ID`` in
``STORE`` (default ``.resumable``): kill the process at any moment, run the same
command again, and it finishes as if it had never been killed. ``--harness`` runs the
same agent on pydantic-ai-harness's own ``CodeMode`` (Monty, not durable) instead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trip import trip_agent

from resumable.integrations.pydantic_ai import ResumableCodeMode, ResumableDurability


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run_id", nargs="?", default="trip-1")
    parser.add_argument("store", nargs="?", default=".resumable")
    parser.add_argument("--script", default="trip", choices=["trip", "packer"])
    parser.add_argument("--harness", action="store_true", help="pydantic-ai-harness CodeMode")
    args = parser.parse_args()
    if args.harness:
        try:
            from pydantic_ai_harness import CodeMode
        except ImportError:
            print(
                "--harness needs pydantic-ai-harness: pip install 'pydantic-ai-harness[code-mode]'"
                " (it installs the pydantic-ai-slim version it was built for)",
                file=sys.stderr,
            )
            sys.exit(2)

        agent = trip_agent([CodeMode()], args.script)
        result = await agent.run("Plan and book the cheapest trip for ada.")
        print(f"answer: {result.output}", flush=True)
        # Monty's native runtime can abort the interpreter's shutdown (SIGABRT, about one
        # exit in eight here) after everything ran: leave without that teardown.
        os._exit(0)
    else:
        capabilities = [ResumableCodeMode(), ResumableDurability(store=args.store)]
        agent = trip_agent(capabilities, args.script)
        result = await agent.run("Plan and book the cheapest trip for ada.", run_id=args.run_id)
    print(f"answer: {result.output}")


if __name__ == "__main__":
    asyncio.run(main())
