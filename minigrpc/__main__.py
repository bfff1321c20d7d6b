"""``python -m minigrpc``: the command line of :mod:`minigrpc.cli` (list, describe, call,
health)."""

from minigrpc.cli.main import run

if __name__ == "__main__":
    run()
