"""Capture: a frame's namespace and the process's state, pickled into a snapshot and restored.

Pickling, reducers, process resources, sets with their hash tables, caches, lost variables.
"""
