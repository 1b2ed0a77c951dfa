"""``python -m resumable``: the same as the ``resumable`` command."""

from resumable.cli import main

main()
