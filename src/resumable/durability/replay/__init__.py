"""Replay: the journal of a frame's statements, recorded on the way and answered on a resume.

Await records, task order and interleaving, the replay window, and divergence from the log.
"""
