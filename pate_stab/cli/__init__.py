"""The ``pate-stab`` command: its parser and subcommands, configuration flags and printed report.

Modules:

- ``commands``: The ``pate-stab`` command line: demo, transfer, compare, predict, release, plan,
  calibrate.
- ``config``: The ``pate-stab`` command line's configuration flags: the demo's settings, the flags
  of ``demo``, ``transfer`` and ``compare``, and the step from parsed flags (and a recipe YAML) to a
  :class:`~pate_stab.run.config.TransferConfig`. Used by :mod:`pate_stab.cli.commands`.
- ``output``: The ``pate-stab`` command line's printed lines: a transfer run's report and its parts
  (noise, query selection, privacy relation). Used by :mod:`pate_stab.cli.commands`.
"""

from pate_stab.cli.commands import build_parser, main

__all__ = ["main", "build_parser"]
