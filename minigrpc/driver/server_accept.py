"""When a server's listening socket accepts, and when it rests: one rule for both servers.

``accept()`` fails with EMFILE or ENFILE when the process or the system has no file descriptor
left, and with ENOBUFS or ENOMEM when the kernel has no memory for the socket.  The connection
it could not take stays in the listen queue, so the listener stays readable: a level-triggered
selector reports it again at once, and a loop that only logs and goes on spins at full CPU
(asyncio's own accept loop also logs a traceback per attempt, up to ``backlog`` attempts per
readiness event).  Nothing the server does in that loop frees a descriptor; only its
connections closing do.

So, on one of those errors, the listener rests: the server takes it out of its selector (or
the event loop's readers) and puts it back after :meth:`AcceptBackoff.failed`'s delay, which
doubles from :data:`ACCEPT_BACKOFF_MIN` to :data:`ACCEPT_BACKOFF_MAX` while the failures go on,
so that a server out of descriptors costs a wake-up now and then, and takes new connections
again within :data:`ACCEPT_BACKOFF_MAX` of descriptors coming free.  The failure is logged
once per episode (a warning), and the episode's end once (info); grpc-core logs "File
descriptor limit reached. Retrying." once a second.  Calls on the connections already
accepted go on throughout.

Other ``accept()`` errors (a connection reset before it was taken, ECONNABORTED) concern that
one connection: they are logged and the listener stays armed.

I/O-free: the servers call accept() and arm their timers; this module only decides.
"""

import errno
from typing import Optional

from .logs import get_logger

__all__ = [
    "ACCEPTS_PER_WAKEUP",
    "ACCEPT_BACKOFF_MAX",
    "ACCEPT_BACKOFF_MIN",
    "SHORTAGE_ERRNOS",
    "AcceptBackoff",
]

_LOGGER = get_logger("minigrpc.server")

#: Connections accepted per readiness event, so that a connection storm cannot starve the
#: connections already being served.
ACCEPTS_PER_WAKEUP = 64
#: The first rest of a listener that ran out of descriptors or buffers, and the longest.
ACCEPT_BACKOFF_MIN = 0.05
ACCEPT_BACKOFF_MAX = 0.5
#: ``accept()`` errors that mean a shortage of the process or the system, not of one
#: connection: retrying at once cannot succeed.
SHORTAGE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class AcceptBackoff:
    """One listener's episodes of ``accept()`` failing for want of resources."""

    __slots__ = ("display", "failures")

    def __init__(self, display: str) -> None:
        #: The listener's address, for the log.
        self.display = display
        #: Failed attempts in the current episode (0: accepting normally).
        self.failures = 0

    def failed(self, exc: OSError) -> Optional[float]:
        """``accept()`` raised ``exc``: the seconds the listener should rest before it is
        armed again, or None when ``exc`` concerns one connection only (logged; the listener
        stays armed).  The first failure of an episode is logged, the later ones are not."""
        if exc.errno not in SHORTAGE_ERRNOS:
            _LOGGER.warning("accept() on %s failed: %s", self.display, exc)
            return None
        self.failures += 1
        delay = min(ACCEPT_BACKOFF_MIN * 2 ** min(self.failures - 1, 16), ACCEPT_BACKOFF_MAX)
        if self.failures == 1:
            _LOGGER.warning(
                "accept() on %s failed: %s; not accepting for now, retrying every %.2f s at "
                "most until it succeeds",
                self.display,
                exc,
                ACCEPT_BACKOFF_MAX,
            )
        return delay

    def accepted(self) -> None:
        """``accept()`` succeeded: an episode of failures, if any, is over (logged once)."""
        if self.failures:
            _LOGGER.info(
                "accept() on %s succeeds again after %d failed attempts",
                self.display,
                self.failures,
            )
            self.failures = 0
