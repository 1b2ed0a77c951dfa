"""Every driver this installation has, named for the durability layer by the kind of run it
continues; each is imported by the first resume of its kind.

A driver continues a run of one kind (``script``, ``playbook``, ...). The durability layer
looks drivers up by kind and never imports them: what resumes runs of any kind (``resume``,
the worker, ``resumable.RecoveryCoordinator``) imports this module first. A resume of a
script run so loads neither the playbooks' parser nor the embedded runtime.
"""

from resumable.durability.runs.kinds import register_driver_module

MODULES = {
    "script": "resumable.script",
    "playbook": "resumable.playbooks.runner",
    "embedded": "resumable.durability.embedded.run",
}
"""The module of each kind's driver: importing it registers the driver."""

for _kind, _module in MODULES.items():
    register_driver_module(_kind, _module)
