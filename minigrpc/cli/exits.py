"""Exit codes of ``python -m minigrpc`` and the one exception that carries them to ``main``.

Why these numbers:

* a call, or a reflection lookup made for it, that ends with a gRPC status other than OK exits
  with that status's code (``doc/statuscodes.md``: 1 to 16), so a script can tell UNAVAILABLE
  (14: nothing listens, the connection was refused or reset) from DEADLINE_EXCEEDED (4) or a
  server's own NOT_FOUND (5) without reading the message;
* failures of the tool's own input use the BSD ``sysexits.h`` codes, above every status code:
  64 ``EX_USAGE`` (the command line), 65 ``EX_DATAERR`` (request JSON that does not parse or
  does not fit the request message), 69 ``EX_UNAVAILABLE`` (protobuf, which ``list``,
  ``describe`` and ``call`` need, is not installed), 70 ``EX_SOFTWARE`` (a bug);
* ``health`` keeps grpc_health_probe's codes (0 SERVING, 1 bad arguments, 2 connection failure,
  3 RPC failure, 4 not SERVING), because Kubernetes exec probes and the scripts around them
  were written for that tool.

This module imports nothing: ``health``'s start-up pays for what it uses only.
"""


TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Optional

#: The call ended OK (``health``: the service is SERVING).
OK = 0
#: The command line is wrong (``sysexits.h`` EX_USAGE).
USAGE = 64
#: The request data is wrong: JSON that does not parse or does not fit (EX_DATAERR).
DATA = 65
#: Something the command needs is not installed: protobuf (EX_UNAVAILABLE).
MISSING_DEPENDENCY = 69
#: An exception the tool did not foresee: a bug, said in one line (EX_SOFTWARE).
SOFTWARE = 70
#: Interrupted (SIGINT), as a shell reports a process killed by it: 128 + 2.
INTERRUPTED = 130
#: stdout was closed under us (``| head``): 128 + SIGPIPE, as a shell reports it.
BROKEN_PIPE = 141

#: gRPC's status codes that the tool itself produces (``doc/statuscodes.md``).
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
UNIMPLEMENTED = 12
UNAVAILABLE = 14

# grpc_health_probe's exit codes, which ``health`` keeps.
HEALTH_SERVING = 0
HEALTH_BAD_ARGUMENTS = 1
HEALTH_CONNECTION_FAILURE = 2
HEALTH_RPC_FAILURE = 3
HEALTH_UNHEALTHY = 4


class ToolError(Exception):
    """A failure to report in one message (no traceback) and exit with ``exit_code``.

    ``status`` is the ``status: NAME (n): details`` line of the gRPC status behind it, when
    there is one (a reflection lookup that failed), printed under the message.
    """

    def __init__(self, message: str, exit_code: int, status: "Optional[str]" = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.status = status


class UsageError(Exception):
    """The command line is wrong; :mod:`minigrpc.cli.main` prints the usage with it."""


def status_line(name: str, number: int, details: str) -> str:
    """How a call's status is printed on stderr: ``status: NOT_FOUND (5): details``.

    One line per status, with the number that is also the exit code; OK is just ``status: OK``.
    """
    if number == OK:
        return "status: OK"
    text = f"status: {name} ({number})"
    return f"{text}: {details}" if details else text
