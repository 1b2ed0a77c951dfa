"""Every driver this installation has, registered with the durability layer on import.

A driver continues a run of one kind (``script``, ``playbook``, ...). The durability layer
looks drivers up by kind and never imports them: what resumes runs of any kind (``resume``,
the worker, ``resumable.RecoveryCoordinator``) imports this module first.
"""

from resumable import script
from resumable.durability.embedded import run as embedded
from resumable.playbooks import runner

__all__ = ["embedded", "runner", "script"]
