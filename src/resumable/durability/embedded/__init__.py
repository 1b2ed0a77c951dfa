"""Runs opened by an embedding program: its code, its tools and its LLM calls, durably."""
