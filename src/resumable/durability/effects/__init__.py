"""Effects: what the program does to the world, and the names that make each happen once.

Task keys and idempotency keys, steps, foreign awaits, clock and random calls, appended files.
"""
