"""The cost of smolagents' guard rails in DurablePythonExecutor, per statement.

Runs the same code actions (typical model code: attribute and method calls, subscripts,
a loop, a comprehension) in a DurablePythonExecutor with the guards on (the default) and
with ``guards=False``, not bound to a run (so only the check and the runtime guard
differ), and prints the time per statement of each and the difference. The two
alternate within each round, so the difference holds on a loaded machine.

    python scripts/bench_guards.py [--rounds 7] [--actions 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

from resumable.integrations.smolagents import DurablePythonExecutor

ACTION = """\
import math
prices = {"apple": 1.25, "pear": 2.5, "fig": 0.75}
basket = ["apple", "fig", "fig", "pear"]
total = sum(prices[item] for item in basket)
names = sorted(prices.keys())
rounded = [round(prices[n] * 1.2, 2) for n in names]
label = ", ".join(n.upper() for n in names)
i = 0
while i < 10:
    i += 1
best = max(prices.items(), key=lambda kv: kv[1])[0]
root = math.sqrt(total)
"""
STATEMENTS = 11


def per_statement(guards: bool, actions: int) -> float:
    executor = DurablePythonExecutor(timeout_seconds=None, guards=guards)
    executor.send_tools({})
    start = time.perf_counter()
    for _ in range(actions):
        executor(ACTION)
    return (time.perf_counter() - start) / (actions * STATEMENTS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--actions", type=int, default=200)
    args = parser.parse_args()
    on: list[float] = []
    off: list[float] = []
    for _ in range(args.rounds):
        on.append(per_statement(True, args.actions))
        off.append(per_statement(False, args.actions))
    guarded, plain = statistics.median(on), statistics.median(off)
    print(f"guards on:  {guarded * 1e6:8.1f} us per statement")
    print(f"guards off: {plain * 1e6:8.1f} us per statement")
    print(f"the guards: {(guarded - plain) * 1e6:8.1f} us per statement ({guarded / plain:.2f}x)")


if __name__ == "__main__":
    main()
