"""``python -m pate_stab.cli``: the ``pate-stab`` command."""

import sys

from pate_stab.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
