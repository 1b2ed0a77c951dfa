"""Runs: a run opened for writing, recovered, operated, inspected, forked and repaired.

The session, the recovery coordinator, control, history, explain, progress and owners.
"""
