"""Work other threads hand to the blocking server's I/O thread, and the wake-up that brings it.

The I/O thread (:mod:`minigrpc.blocking.server_loop`) owns every connection's protocol state, which
is not thread-safe; a handler thread that must touch the wire (its initial
metadata, a response, a cancel) or ``stop()`` queues a command here instead, and the I/O
thread runs the queue in its next pass.  The wake-up is a socket pair whose reading end sits in
the loop's selector: one byte makes ``select()`` return.  One byte is enough however many
commands are queued meanwhile, so a command only writes one when no wake-up is pending.
"""

import collections
import selectors
import socket
import threading
from typing import Any, Callable, Deque, Optional, Tuple

__all__ = ["CommandQueue"]

#: A queued call: ``function(*args)``.
Command = Tuple[Callable[..., None], Tuple[Any, ...]]


class CommandQueue:
    """Commands for the I/O thread, and its wake-up socket pair.

    ``post`` and ``wake`` may be called from any thread; ``open``, ``run``, ``refuse`` and
    ``close`` only by the thread that runs the loop (``open`` before it starts).
    """

    def __init__(self, on_error: Callable[[Tuple[Any, ...]], None]) -> None:
        #: Called with a command's arguments when the command raised.
        self._on_error = on_error
        self._reader: Optional[socket.socket] = None
        self._writer: Optional[socket.socket] = None
        #: A wake-up byte is on its way and not yet drained: others need not send one.
        self._wake_pending = False
        #: What the next pass runs, in order.  Read without the lock as a hint ("something
        #: posted earlier must go first"), as by a thread that then takes the I/O lock.
        self.queued: Deque[Command] = collections.deque()
        self._lock = threading.Lock()
        #: The loop has ended: commands and wake-ups are dropped.
        self.refused = False

    def open(self, selector: selectors.BaseSelector) -> None:
        """Make the socket pair and watch its reading end (key data None: a wake-up)."""
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        selector.register(self._reader, selectors.EVENT_READ, None)

    def post(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function(*args)`` on the I/O thread soon."""
        with self._lock:
            if self.refused:
                return
            self.queued.append((function, args))
            if self._wake_pending:
                return
            self._wake_pending = True
        self._send_wake_byte()

    def wake(self) -> None:
        """Make the I/O loop run once more (recompute its timeout, look at its state)."""
        with self._lock:
            if self.refused or self._wake_pending:
                return
            self._wake_pending = True
        self._send_wake_byte()

    def _send_wake_byte(self) -> None:
        writer = self._writer
        if writer is not None:
            try:
                writer.send(b"\0")
            except OSError:  # pragma: no cover - full pipe means a wake-up is pending anyway
                pass

    def run(self) -> None:
        """Run what was posted (the loop was woken); a command that raises is reported to
        ``on_error`` and the others still run."""
        # Drain the wake-up bytes *before* taking the commands: a command posted after this
        # point finds _wake_pending False and writes a new byte, so it is never left asleep.
        reader = self._reader
        if reader is not None:
            try:
                while reader.recv(4096):
                    pass
            except OSError:
                pass
        with self._lock:
            self._wake_pending = False
            if not self.queued:
                return
            commands = list(self.queued)
            self.queued.clear()
        for function, args in commands:
            try:
                function(*args)
            except Exception:
                self._on_error(args)

    def refuse(self) -> None:
        """The loop is ending: drop what is queued and whatever is posted from now on."""
        with self._lock:
            self.refused = True
            self.queued.clear()

    def close(self) -> None:
        """Close the socket pair (after :meth:`refuse`, once the selector is closed)."""
        for sock in (self._reader, self._writer):
            if sock is not None:
                sock.close()
