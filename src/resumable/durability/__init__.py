"""Durability: the journal and its replay, snapshots, records, checkpoints, recovery, runs.

Built on :mod:`resumable.exec` (it provides the await hook and observes statements) and on
:mod:`resumable.store` (where records, blobs and snapshots go). It never imports a driver
(the script runner, playbooks, integrations): those register themselves in
:mod:`resumable.drivers`. Its subpackages import downwards only: ``embedded`` -> ``runs`` ->
``replay`` -> ``capture``, ``log`` (peers) -> ``effects``.
"""
