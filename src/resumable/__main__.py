"""``python -m resumable``: the same as the ``resumable`` command."""

from resumable.launcher import main

main()
