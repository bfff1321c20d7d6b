"""How many frames that do no work a connection may send: the answer to control-frame floods.

PING, SETTINGS, PRIORITY, RST_STREAM, a WINDOW_UPDATE on stream 0 and an empty DATA frame
cost the receiver work (decoding, an ACK to queue, a stream to tear down) and give it none in
return. RFC 9113 §10.5 lets an endpoint treat their excessive use as a connection error of type
ENHANCE_YOUR_CALM; unbounded, one connection sending them as fast as it can keeps the server's
I/O thread busy for everyone (PING and SETTINGS floods, the rapid reset of CVE-2023-44487).

The allowance is a token bucket per connection of :data:`BURST` frames, refilled at
:data:`PER_SECOND` frames a second, so that a well-behaved client, which sends such frames now
and then, never comes near it, while a flood exhausts it within a few thousand frames. A new
connection starts with only :data:`START` of them: an attacker sent away reconnects at once, and
a full bucket with each connection would let it make the server do a thousand frames' work per
connect. The rest comes with time and with work: each response the server writes adds a token.
A peer that was sent away for a flood (or for too many PINGs: a server's keepalive policy)
starts its next connections with less still (:class:`PeerHistory`), and forgets it within a
minute; the floor, :data:`MIN_START`, is still
many times what a client's opening needs (its SETTINGS and a WINDOW_UPDATE), so a well-behaved
client that shares the attacker's address is never refused for it.

As in grpc-go's server, whose "ping strikes" are forgiven whenever it sends data or headers,
PINGs and connection WINDOW_UPDATEs that follow response data are free: BDP probes and window
refills are what a client busy receiving sends, and must not count against it. Each write of
response data or headers earns a few such frames; the credit adds up (a client reading many
responses at once answers each) but only to :data:`MAX_EARNED`, so it is earned by work the
server did, never banked without limit.

I/O-free: the clock is the caller's, and the connection protocol decides what the answer is
(:mod:`minigrpc.protocol.server_protocol` sends GOAWAY(ENHANCE_YOUR_CALM) and closes).
"""

import collections
from typing import TYPE_CHECKING, Callable, Hashable, MutableMapping, Optional, Tuple

if TYPE_CHECKING:
    from .connection import HTTP2Connection

#: What one connection's input may cost the I/O thread in one pass of a server's loop: frames,
#: each counting one more per KiB of body
#: (:attr:`minigrpc.http2.connection.HTTP2Connection.pass_limit`).
#: A read holds up to 256 KiB: of 20-byte HEADERS frames, thousands of requests to decode; of
#: 2-byte messages, tens of thousands to queue; and every other connection would wait for them.
#: A hundred-odd frames or about 100 KiB keeps a pass to a few milliseconds of work; what is
#: left waits for the next pass, after the others had theirs.
PASS_LIMIT = 128
#: Request messages a server moves to its handlers' queues in one pass, all calls together: a
#: handler's queue holds up to a megabyte, ten thousand 2-byte messages at some microseconds
#: each.
PASS_MESSAGES = 1024
#: Frames that do no work a connection may send at once (the bucket's size).
BURST = 1000
#: What a new connection may send at once (the bucket fills up to :data:`BURST` from there).
START = 100
#: The least a new connection starts with, however often its peer flooded.
MIN_START = 10
#: How fast the allowance comes back, in frames a second.
PER_SECOND = 200.0
#: Tokens each write of response data or headers adds to the bucket (up to :data:`BURST`).
EARNED_TOKENS = 1
#: A peer's flood record halves every this many seconds.
HISTORY_HALF_LIFE = 10.0
#: Peers remembered (the least recently seen are forgotten first).
HISTORY_PEERS = 4096
#: PINGs and connection WINDOW_UPDATEs that each write of response data or headers makes free
#: (one of each).
FREE_AFTER_RESPONSE = 2
#: The most such free frames a connection can have in hand.
MAX_EARNED = 1000
#: What a flood of each frame type the connection counts
#: (:attr:`~minigrpc.http2.connection.HTTP2Connection.control_frames`) is called in
#: the close reason (RFC 9113 §6).
FLOOD_NAMES = {
    0x2: "PRIORITY frames",
    0x3: "RST_STREAM frames (rapid reset)",
    0x4: "SETTINGS frames",
    0x6: "PING frames",
    0x8: "WINDOW_UPDATE frames on stream 0",
}
#: The close reason of a flood of frames without a payload that could do work.
EMPTY_FRAMES_FLOOD = "empty DATA or CONTINUATION frames"
#: PINGs and connection WINDOW_UPDATEs cost nothing right after a response write (:meth:`earn`).
_EARNED_FRAMES = frozenset((0x6, 0x8))


def flood_name(frame_type: Optional[int]) -> str:
    """What a flood of ``frame_type`` frames is called (None: empty DATA or CONTINUATION)."""
    return FLOOD_NAMES.get(frame_type or -1, EMPTY_FRAMES_FLOOD)


class FrameBudget:
    """A token bucket of frames that do no work; :meth:`spend` says when it is exhausted."""

    __slots__ = ("_clock", "_free", "_last", "_per_second", "_size", "_tokens")

    def __init__(
        self,
        clock: Callable[[], float],
        burst: int = BURST,
        per_second: float = PER_SECOND,
        start: int = START,
    ) -> None:
        self._clock = clock
        self._size = float(burst)
        self._per_second = per_second
        self._tokens = float(min(start, burst))
        self._last = clock()
        self._free = 0

    def earn(self) -> None:
        """The connection sent response data or headers: a PING and a connection
        WINDOW_UPDATE more are free (see :meth:`spend_unless_earned`), and the bucket grows by
        :data:`EARNED_TOKENS`."""
        if self._free < MAX_EARNED:
            self._free += FREE_AFTER_RESPONSE
        if self._tokens < self._size:
            self._tokens = min(self._size, self._tokens + EARNED_TOKENS)

    def available(self) -> int:
        """The most frames that do no work the connection may send now, earned ones included:
        a read that carries more is a flood whatever its frames are, and need not be walked to
        its end (:attr:`minigrpc.http2.connection.HTTP2Connection.allowance`)."""
        self._refill()
        return int(self._tokens) + self._free

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self._size, self._tokens + (now - self._last) * self._per_second)
        self._last = now

    def spend(self, frames: int = 1) -> bool:
        """Take ``frames`` frames' worth; False once the allowance is exhausted (a flood)."""
        if self._tokens >= frames:  # the common case needs no clock
            self._tokens -= frames
            return True
        self._refill()
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


    def charge(self, counts: "HTTP2Connection") -> str:
        """Spend what the frames the connection counted in the last read cost; the name of the
        flood once the allowance is exhausted, else "".

        Counted as the frames are read (RFC 9113 §10.5), whether or not they end up as events:
        joined header blocks and answered PINGs are frames all the same.
        """
        empty, counted = counts.take_counts()
        if empty and not self.spend(empty):
            return EMPTY_FRAMES_FLOOD
        for frame_type, count in counted.items():
            spend = self.spend_unless_earned if frame_type in _EARNED_FRAMES else self.spend
            if not spend(count):
                return FLOOD_NAMES[frame_type]
        return ""

class PeerHistory:
    """Floods by peer, remembered for a while: how much a new connection from a peer may start
    with (:meth:`start_for`).

    A peer is whatever the transport can tell apart (an IP address; on a unix socket, the
    client's process). Each connection sent away (a flood, too many PINGs) adds one to the
    peer's record, which halves every
    :data:`HISTORY_HALF_LIFE` seconds; a new connection starts with :data:`START` divided by one
    plus the record, and never less than :data:`MIN_START`. Only the opening allowance shrinks:
    a connection from such a peer earns and refills like any other, so a well-behaved client on
    the attacker's address is served as before. Bounded: :data:`HISTORY_PEERS` peers at most.
    """

    __slots__ = ("_clock", "_half_life", "_peers", "_size")

    def __init__(
        self,
        clock: Callable[[], float],
        half_life: float = HISTORY_HALF_LIFE,
        size: int = HISTORY_PEERS,
    ) -> None:
        self._clock = clock
        self._half_life = half_life
        self._size = size
        self._peers: MutableMapping[Hashable, Tuple[float, float]] = collections.OrderedDict()

    def _record(self, peer: Hashable, now: float) -> float:
        entry = self._peers.get(peer)
        if entry is None:
            return 0.0
        record, when = entry
        return record * 0.5 ** ((now - when) / self._half_life)

    def start_for(self, peer: Hashable) -> int:
        """The opening allowance of a new connection from ``peer``."""
        record = self._record(peer, self._clock())
        return max(MIN_START, round(START / (1.0 + record)))

    def sent_away(self, peer: Hashable) -> None:
        """A connection from ``peer`` was sent away with GOAWAY(ENHANCE_YOUR_CALM): for a
        flood, or (a server's keepalive policy, gRFC A8) for too many PINGs."""
        now = self._clock()
        peers = self._peers
        record = self._record(peer, now) + 1.0
        peers.pop(peer, None)
        peers[peer] = (record, now)
        while len(peers) > self._size:
            del peers[next(iter(peers))]
