"""minigrpc's version, written once: the package, setup.cfg and the ``user-agent`` read it here.

A module of its own, importing nothing, so that any layer can read it without a cycle.
"""

__version__ = "0.1.0"
