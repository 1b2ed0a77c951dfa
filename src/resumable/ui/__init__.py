"""``resumable ui``: a read-only web inspector of the runs in the configured store.

Needs the ``ui`` extra (``pip install 'resumable-exec[ui]'``). :func:`create_app` builds the
application; :func:`serve` checks the address, binds it and serves until interrupted.
"""

from resumable.ui.app import create_app
from resumable.ui.server import serve

__all__ = ["create_app", "serve"]
