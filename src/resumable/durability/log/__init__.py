"""The log: records, their seal and encryption, the folded run state, the checkpoint manager.

Every record of a run is written through here; nothing here knows how a frame is replayed.
"""
