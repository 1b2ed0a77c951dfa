"""The ``resumable`` command line.

:mod:`resumable.cli.commands` is the whole of it: the typer app with every command group
registered. Importing this package alone loads nothing, so that a plain ``exec``
(:mod:`resumable.cli.direct`) starts without typer, rich or the other commands.
"""
