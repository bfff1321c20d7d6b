"""minigrpc's loggers, silent until the application configures logging.

A library's loggers print nothing of their own accord: the logging HOWTO ("Configuring Logging
for a Library") has the library put a NullHandler on its top-level logger, and grpcio does so
for its ``grpc`` logger.  Without one, Python's last-resort handler writes every WARNING and
above to stderr, so a handler that raises would print its traceback on the server's stderr
where grpcio prints nothing (the client is told either way: UNKNOWN, "Exception calling
application: ...").  Records still propagate, so an application that configures logging
(``logging.basicConfig()``, or a handler of its own on ``minigrpc``) sees every one of them.

Only modules that log import this one: the plugin's import path loads no :mod:`logging`.
"""

import logging

#: The top of every minigrpc logger's name.
ROOT = "minigrpc"

_root = logging.getLogger(ROOT)
if not any(isinstance(handler, logging.NullHandler) for handler in _root.handlers):
    _root.addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """The logger ``name`` (``minigrpc.server``, ...), below minigrpc's NullHandler."""
    if name != ROOT and not name.startswith(ROOT + "."):
        raise ValueError(f"{name!r} is not one of minigrpc's loggers")
    return logging.getLogger(name)
