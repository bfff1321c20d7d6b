"""How many frames that do no work a connection may send: the answer to control-frame floods.

PING, SETTINGS, PRIORITY, RST_STREAM, a WINDOW_UPDATE on stream 0 and an empty DATA frame
cost the receiver work (decoding, an ACK to queue, a stream to tear down) and give it none in
return. RFC 9113 §10.5 lets an endpoint treat their excessive use as a connection error of type
ENHANCE_YOUR_CALM; unbounded, one connection sending them as fast as it can keeps the server's
I/O thread busy for everyone (PING and SETTINGS floods, the rapid reset of CVE-2023-44487).

The allowance is a token bucket per connection: it starts full (:data:`BURST` frames) and
refills at :data:`PER_SECOND` frames a second, so that a well-behaved client, which sends such
frames now and then, never comes near it, while a flood exhausts it within a few thousand
frames. As in grpc-go's server, whose "ping strikes" are forgiven whenever it sends data or
headers, PINGs and connection WINDOW_UPDATEs that follow response data are free: BDP probes
and window refills are what a client busy receiving sends, and must not count against it. Each
write of response data or headers earns a few such frames; the credit adds up (a client reading
many responses at once answers each) but only to :data:`MAX_EARNED`, so it is earned by work the
server did, never banked without limit.

I/O-free: the clock is the caller's, and the connection protocol decides what the answer is
(:mod:`minigrpc.server_protocol` sends GOAWAY(ENHANCE_YOUR_CALM) and closes).
"""

from typing import Callable

#: Frames that do no work a connection may send at once (the bucket's size).
BURST = 1000
#: How fast the allowance comes back, in frames a second.
PER_SECOND = 200.0
#: PINGs and connection WINDOW_UPDATEs that each write of response data or headers makes free
#: (one of each).
FREE_AFTER_RESPONSE = 2
#: The most such free frames a connection can have in hand.
MAX_EARNED = 1000


class FrameBudget:
    """A token bucket of frames that do no work; :meth:`spend` says when it is exhausted."""

    __slots__ = ("_clock", "_free", "_last", "_per_second", "_size", "_tokens")

    def __init__(
        self,
        clock: Callable[[], float],
        burst: int = BURST,
        per_second: float = PER_SECOND,
    ) -> None:
        self._clock = clock
        self._size = float(burst)
        self._per_second = per_second
        self._tokens = float(burst)
        self._last = clock()
        self._free = 0

    def earn(self) -> None:
        """The connection sent response data or headers: a PING and a connection
        WINDOW_UPDATE more are free (see :meth:`spend_unless_earned`)."""
        if self._free < MAX_EARNED:
            self._free += FREE_AFTER_RESPONSE

    def spend(self, frames: int = 1) -> bool:
        """Take ``frames`` frames' worth; False once the allowance is exhausted (a flood)."""
        if self._tokens >= frames:  # the common case needs no clock
            self._tokens -= frames
            return True
        now = self._clock()
        self._tokens = min(self._size, self._tokens + (now - self._last) * self._per_second)
        self._last = now
        if self._tokens >= frames:
            self._tokens -= frames
            return True
        return False

    def spend_unless_earned(self, frames: int = 1) -> bool:
        """:meth:`spend` for PINGs or connection WINDOW_UPDATEs: free right after the server
        sent data or headers (:meth:`earn`), else they cost as any other."""
        free = min(self._free, frames)
        self._free -= free
        return frames == free or self.spend(frames - free)
