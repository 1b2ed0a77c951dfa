"""Every driver this installation has, registered with the durability layer on import.

A driver continues a run of one kind (``script``, ``playbook``, ...). The durability layer
looks drivers up by kind and never imports them; whoever resumes runs of any kind (the CLI,
the fleet worker, :class:`resumable.RecoveryCoordinator` used from Python) imports this module.
"""

from resumable import script
from resumable.durability.embedded import run as embedded
from resumable.playbooks import runner

__all__ = ["embedded", "runner", "script"]
