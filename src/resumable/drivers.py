"""Every driver this installation has, registered with the durability layer on import.

A driver continues a run of one kind (``script``, ``playbook``, ...). The durability layer
looks drivers up by kind and never imports them by an import statement: a resume of a kind
that is not registered yet loads this module by name (``session.resume_session``).
"""

from resumable import script
from resumable.durability.embedded import run as embedded
from resumable.playbooks import runner

__all__ = ["embedded", "runner", "script"]
