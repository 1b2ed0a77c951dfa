"""The benchmarks behind ``scripts/bench.py``, one module per subcommand.

They share report.py (the report and its timing) and harness.py (durable runs and baselines).
"""
