"""``python -m minigrpc``: the command line of :mod:`minigrpc.cli` (list, describe, call,
health)."""

import sys

from minigrpc.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
