"""``python -m attnlib``: the command line of :mod:`attnlib.cli`."""

import sys

from attnlib.cli import main

if __name__ == "__main__":
    sys.exit(main())
