"""The entry point: pick the command, run it, and turn every failure into a message and an exit
code (:mod:`minigrpc.cli.exits`), never a traceback.

Imports are made where a command needs them: ``health`` must not pay for protobuf, JSON or
the channel machinery it does not use (docs/benchmarks.md measures its cold start).
"""

import sys

from . import arguments
from .exits import (
    BROKEN_PIPE,
    HEALTH_BAD_ARGUMENTS,
    INTERRUPTED,
    SOFTWARE,
    USAGE,
    ToolError,
    UsageError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import List, Optional, Sequence


def main(argv: "Optional[Sequence[str]]" = None) -> int:
    """Run ``minigrpc COMMAND ...`` (``argv`` without the program name); the exit code."""
    args: List[str] = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stderr.write(arguments.usage())
        return USAGE
    command = args[0]
    if command in ("-h", "--help", "help"):
        sys.stdout.write(arguments.usage())
        return 0
    if command == "--version":
        from minigrpc import __version__

        sys.stdout.write(f"minigrpc {__version__}\n")
        return 0
    if command not in arguments.COMMANDS:
        sys.stderr.write(f"minigrpc: {command!r} is not a command\n\n{arguments.usage()}")
        return USAGE
    bad_arguments = HEALTH_BAD_ARGUMENTS if command == "health" else USAGE
    try:
        options = arguments.parse(command, args[1:])
    except arguments.HelpRequested:
        sys.stdout.write(arguments.help_text(command))
        return 0
    except UsageError as exc:
        _usage_error(command, str(exc))
        return bad_arguments
    try:
        if options.trace:
            _enable_trace()
        if command == "health":
            from . import probe

            return probe.run(options)
        from . import commands

        return commands.run(options)
    except UsageError as exc:  # found while running: a file, a PEM, a target, metadata
        if command == "health":
            sys.stderr.write(f"error: {exc}\n")  # grpc_health_probe's form
        else:
            _error(str(exc))
        return bad_arguments
    except ToolError as exc:
        _error(exc.message)
        if exc.status:
            sys.stderr.write(exc.status + "\n")
        return exc.exit_code
    except KeyboardInterrupt:
        _error("interrupted")
        return INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return BROKEN_PIPE
    except Exception as exc:  # a bug: still one line, with what it was
        _error(f"unexpected error (a bug in minigrpc): {type(exc).__name__}: {exc}")
        return SOFTWARE


def run() -> None:
    """``python -m minigrpc`` and the ``minigrpc`` script: :func:`main`, its output flushed,
    then the process ends without the interpreter's teardown.

    Freeing every module at exit costs a health probe about 3 ms of CPU on CPython 3.12, a
    quarter of a bare interpreter's start; once the output is out there is nothing left to do
    (the tool registers no atexit handler, and minigrpc's threads are daemons)."""
    import os

    code = main()
    if os.environ.get("MINIGRPC_TRACE"):
        _let_the_trace_finish()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            code = BROKEN_PIPE if stream is sys.stdout else code
        except (OSError, ValueError):
            pass
    os._exit(code)


def _let_the_trace_finish(limit: float = 1.0) -> None:
    """Wait, at most ``limit`` seconds in all, for the threads still running to end.

    A channel's frames are also written, and traced, by threads of its own (the connection's
    watch thread, once something waited for it to connect): the last lines of the trace may
    still be on their way when the command is done.  The channel is closed by then, so they end
    at once; a dial that never finished is the one that keeps the wait to ``limit``.
    """
    threading = sys.modules.get("threading")
    if threading is None:  # the one-shot client (health on a plaintext target) starts none
        return
    import time

    end = time.monotonic() + limit
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and thread.daemon:
            thread.join(max(0.0, end - time.monotonic()))


def _enable_trace() -> None:
    """``--trace``: the frame trace on stderr, the way ``MINIGRPC_TRACE=1`` turns it on for
    any minigrpc program (:mod:`minigrpc.net.trace`); set before the first connection exists."""
    import os

    os.environ["MINIGRPC_TRACE"] = "1"


def _usage_error(command: str, message: str) -> None:
    sys.stderr.write(arguments.usage_line(command))
    sys.stderr.write(f"minigrpc {command}: error: {message}\n"
                     f"Try 'minigrpc {command} --help' for more.\n")


def _error(message: str) -> None:
    try:
        sys.stderr.write(f"minigrpc: {message}\n")
        sys.stderr.flush()
    except OSError:
        pass


def _silence_stdout() -> None:
    """After EPIPE on stdout, point it at /dev/null so the interpreter's final flush does not
    print a second error (the Python docs, "Note on SIGPIPE")."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
