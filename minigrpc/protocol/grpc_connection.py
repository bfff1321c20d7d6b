"""What both sides of gRPC do with an HTTP/2 connection, as a sans-IO state machine.

A gRPC call is one HTTP/2 stream.  Either side sends a sequence of Length-Prefixed-Messages on
it (PROTOCOL-HTTP2.md, "Length-Prefixed-Message"): one for a unary request or response, any
number for a streaming one.  Everything that is the same on both sides lives here, once:

* :class:`Outbound`: the messages one side still has to write on a stream, cut into DATA frames
  of ``min(stream window, connection window, peer's MAX_FRAME_SIZE, remaining)`` bytes (RFC 9113
  §5.2, §6.9), resumed when the peer opens its window again.
* :class:`Inbound`: the messages arriving on a stream, reassembled whatever the DATA frame
  boundaries, with the receive limit checked on each 5-byte prefix before the body is buffered,
  and with flow control that never lets a slow reader grow memory without bound (below).
* :class:`GrpcConnection`: one HTTP/2 connection state machine
  (:class:`minigrpc.http2.client.ClientHTTP2Connection` on the client,
  :class:`minigrpc.http2.server.ServerHTTP2Connection` on the server, both on
  :class:`minigrpc.http2.connection.HTTP2Connection`), the connection-level flow-control credit,
  and the bytes to send.
  :class:`minigrpc.protocol.client_protocol.ClientGrpcConnection` and
  :class:`minigrpc.protocol.server_protocol.ServerGrpcConnection` add what differs: who opens
  streams, which header blocks go where, and how a call ends.

Flow control, receiving.  Every DATA frame is acknowledged at once, with its
``flow_controlled_length`` (padding included), while the stream holds fewer than
``buffer_limit`` bytes of whole messages that the application has not taken yet; a unary call
never gets near the limit, so it costs nothing.  Beyond the limit the stream's window is
credited only as the application takes messages, which stops a peer that streams faster than
the application reads.  The connection window is always credited at once, so one slow stream
never stalls the others on its connection.  Bytes of a message still being assembled are always
acknowledged: they are bounded by the receive limit, and holding them back could deadlock a
message larger than the window.

Memory.  On a server, each connection has an account in the server's memory budget
(:mod:`minigrpc.protocol.memory_budget`): :class:`Inbound` and :class:`Outbound` charge what they
hold at its real cost (small messages are packed into shared byte arrays, so that a stream of tiny
messages costs about what it carried on the wire), and while the account is over budget the
window is withheld: a stream's as above, and the connection's too (it is returned by
:meth:`GrpcConnection.resume_credit` once the account is back under).  One partial message
at a time may still complete meanwhile (:attr:`GrpcConnection.lead_stream`), so that
streams each holding part of a large message cannot wait on each other forever.
"""

import collections
import enum
import struct
from typing import TYPE_CHECKING, Deque, Dict, List, Optional, Tuple, Union

from ..http2 import frames
from . import wire
from .memory_budget import MESSAGE_OVERHEAD, PACKED_OVERHEAD, VIEW_OVERHEAD, ConnectionMemory
from .status import CallError

if TYPE_CHECKING:
    from ..http2.connection import HTTP2Connection as HTTP2Connection


#: A message as it arrived: (compressed flag, payload).
Message = Tuple[bool, bytes]

#: DATA bytes handed to the connection at a time, by the client's request writer and the
#: server's flush.  What is queued is joined into one write, so a 4 MiB message written at once
#: meant fresh multi-MiB allocations, which the C library maps from the kernel page by page
#: (page faults and zeroing: about as much time as the copies themselves in a fresh process).
#: Batches of 64 KiB stay below glibc's first mmap threshold (128 KiB) and in the CPU's cache:
#: measured against 32, 128 and 256 KiB, a 4 MiB echo was fastest with 64.
DATA_BATCH = 64 * 1024

#: Bytes of whole, untaken messages a stream may hold before its window is credited only as
#: the application takes them (see the module docstring).
DEFAULT_BUFFER_LIMIT = 1024 * 1024
#: Messages smaller than this are packed into a shared ``bytearray`` (one object per
#: :data:`_PACKED_RUN` bytes instead of two per message), larger ones are kept as they came.
_PACK_BELOW = 1024
_PACKED_RUN = 64 * 1024
#: A packed message's prefix, as on the wire (PROTOCOL-HTTP2.md, Length-Prefixed-Message).
_PACKED_PREFIX = struct.Struct(">BI")


class _Run(bytearray):
    """Small framed messages packed together (:class:`Outbound`), and how many they are."""

    __slots__ = ("messages",)

    def __init__(self) -> None:
        super().__init__()
        self.messages = 0


class SendState(enum.Enum):
    """Where one side's half of a stream is."""

    #: More messages may follow.
    OPEN = "open"
    #: The last message is queued; the stream ends once the queue is written (END_STREAM on the
    #: client, the trailers on the server).
    CLOSING = "closing"
    #: This side's END_STREAM is out (or the stream is gone); nothing more is sent.
    CLOSED = "closed"


class Outbound:
    """The messages one side still has to write on one stream.

    With ``pack_small`` (a server's responses), a message framed in fewer than
    :data:`_PACK_BELOW` bytes that arrives behind others is appended to a shared byte array of
    up to :data:`_PACKED_RUN` bytes rather than queued as an object of its own: a handler that
    yields empty messages then queues five bytes each, not a ``memoryview`` of some four
    hundred (:mod:`minigrpc.protocol.memory_budget`), and they go out in the DATA frames they share
    anyway (PROTOCOL-HTTP2.md: messages need not align with frames).  Only the last array
    grows; once :meth:`write` starts on it, it is sealed and the next message starts another.
    A message alone in the queue (a unary response) is kept as it came: packing it would only
    copy it.
    """

    __slots__ = (
        "_offset",
        "_queue",
        "_tail",
        "memory",
        "pack_below",
        "queued_bytes",
        "queued_cost",
        "queued_messages",
        "state",
    )

    def __init__(self, memory: Optional[ConnectionMemory] = None, pack_small: bool = False) -> None:
        #: A whole framed message (``memoryview``), the prefix of a large one (``bytes``, its
        #: payload a view behind it), or small messages packed together (``_Run``).
        self._queue: Deque[Union[memoryview, bytes, _Run]] = collections.deque()
        #: The packed array still taking messages (the last in the queue), or None.
        self._tail: Optional[_Run] = None
        self._offset = 0
        #: Framed bytes queued and not yet handed to the connection.
        self.queued_bytes = 0
        #: What is queued costs in memory: its bytes and each piece's or packed message's
        #: overhead (what is charged to :attr:`memory`, counted the same without one).
        self.queued_cost = 0
        #: Messages queued and not yet wholly handed to the connection.
        self.queued_messages = 0
        self.pack_below = _PACK_BELOW if pack_small else 0
        self.state = SendState.OPEN
        #: The account charged for what is queued (a server's), or None.
        self.memory = memory

    @property
    def empty(self) -> bool:
        return not self._queue

    def add(self, framed: wire.Framed, last: bool = False) -> None:
        """Queue one framed message; ``last`` also closes this side once it is written.

        A large message comes as its prefix and payload apart
        (:func:`minigrpc.protocol.wire.frame_message`) and is queued as two pieces: only the DATA
        frame that carries the prefix joins them.
        """
        queue = self._queue
        if isinstance(framed, tuple):
            prefix, payload = framed
            queue.append(prefix)
            queue.append(memoryview(payload))
            size = len(prefix) + len(payload)
            cost = size + 2 * VIEW_OVERHEAD
            self._tail = None
        elif queue and len(framed) < self.pack_below:
            tail = self._tail
            if tail is None or len(tail) >= _PACKED_RUN:
                tail = self._tail = _Run()
                queue.append(tail)
            tail += framed
            tail.messages += 1
            size = len(framed)
            cost = size + PACKED_OVERHEAD
        else:
            queue.append(memoryview(framed))
            size = len(framed)
            cost = size + VIEW_OVERHEAD
            self._tail = None
        self.queued_messages += 1
        self.queued_bytes += size
        self.queued_cost += cost
        if self.memory is not None:
            self.memory.charge_outbound(cost)
        if last:
            self.state = SendState.CLOSING

    def close(self) -> None:
        """No more messages: end this side once the queue is written."""
        if self.state is SendState.OPEN:
            self.state = SendState.CLOSING

    def discard(self) -> None:
        """Drop what is queued; the stream is ending another way (reset, early trailers)."""
        if self.memory is not None and self.queued_cost:
            self.memory.release_outbound(self.queued_cost)
        self._queue.clear()
        self._tail = None
        self._offset = 0
        self.queued_bytes = 0
        self.queued_cost = 0
        self.queued_messages = 0
        self.state = SendState.CLOSED

    def write(
        self,
        conn: "HTTP2Connection",
        stream_id: int,
        room: Optional[int] = None,
        end_stream_on_last: bool = False,
    ) -> int:
        """Frame as much as the windows (and ``room`` bytes, when given) allow; bytes written.

        A window may be zero or negative (the peer lowered INITIAL_WINDOW_SIZE, RFC 9113
        §6.9.2); nothing is written then and the caller waits for a WINDOW_UPDATE.  With
        ``end_stream_on_last`` the last chunk carries END_STREAM once the side is CLOSING, so a
        small unary request is one DATA frame.  Queued messages share DATA frames: gRPC
        messages need not align with frames (PROTOCOL-HTTP2.md, Length-Prefixed-Message), and
        each frame has a fixed cost, so a stream of small messages goes out in as few frames
        as the window and frame size allow.  A lone message's payload is a view, not a copy:
        the DATA serializer (:func:`minigrpc.http2.frames.data_frame`) copies each byte once.
        """
        written = 0
        released = 0
        done = 0
        queue = self._queue
        while queue:
            size = min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size)
            if room is not None:
                size = min(size, room - written)
            if size <= 0:
                break
            pieces: List[Union[memoryview, bytes]] = []
            taken = 0
            while queue and taken < size:
                head = queue[0]
                offset = self._offset
                take = min(len(head) - offset, size - taken)
                end = offset + take
                if isinstance(head, _Run):
                    if head is self._tail:
                        self._tail = None  # sealed: a view of it must not see it grow
                    pieces.append(memoryview(head)[offset:end])
                else:
                    pieces.append(head[offset:end])
                taken += take
                if end == len(head):
                    queue.popleft()
                    self._offset = 0
                    if isinstance(head, _Run):
                        released += PACKED_OVERHEAD * head.messages
                        done += head.messages
                    else:
                        released += VIEW_OVERHEAD
                        if isinstance(head, memoryview):  # not a large message's prefix
                            done += 1
                else:
                    self._offset = end
            end_stream = end_stream_on_last and not queue and self.state is SendState.CLOSING
            payload = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            conn.send_data(stream_id, payload, end_stream=end_stream)
            written += taken
            if end_stream:
                self.state = SendState.CLOSED
        if written:
            self.queued_bytes -= written
            self.queued_messages -= done
            released += written
            self.queued_cost -= released
            if self.memory is not None:
                self.memory.release_outbound(released)
        return written

    def can_write(self, conn: "HTTP2Connection", stream_id: int) -> bool:
        """True when :meth:`write` could make progress now (or nothing waits for a window)."""
        if not self._queue:
            return True
        return min(conn.local_flow_control_window(stream_id), conn.max_outbound_frame_size) > 0


class Inbound:
    """The messages arriving on one stream, and the flow-control credit they owe."""

    __slots__ = (
        "_buffered",
        "_deferred",
        "_partial",
        "_queue",
        "_run_offset",
        "count",
        "decoder",
        "limit",
        "pack_below",
        "received",
    )

    def __init__(
        self, max_message_length: Optional[int], limit: int, pack_small: bool = False
    ) -> None:
        self.decoder = wire.MessageDecoder(max_message_length)
        #: Whole messages not yet taken: a large one as it came, small ones packed together
        #: (prefix and payload, as on the wire) into byte arrays of up to :data:`_PACKED_RUN`.
        self._queue: Deque[Union[Message, bytearray]] = collections.deque()
        #: Where the next message starts in the first packed array.
        self._run_offset = 0
        #: Whole messages not yet taken.
        self.count = 0
        #: Messages received so far, taken or not (for the unary cardinality checks).
        self.received = 0
        self.limit = limit
        #: Messages shorter than this are packed (a server's streams: a client that sends tiny
        #: messages must not cost the server a hundred bytes each; a client keeps its
        #: responses as they came, a little faster to take).
        self.pack_below = _PACK_BELOW if pack_small else 0
        #: What the untaken whole messages cost (:mod:`minigrpc.protocol.memory_budget`).
        self._buffered = 0
        #: What the partial message being assembled costs.
        self._partial = 0
        self._deferred = 0

    @property
    def at_boundary(self) -> bool:
        """No partial message is held (PROTOCOL-HTTP2.md: the stream must end on one)."""
        return self.decoder.at_boundary

    @property
    def messages(self) -> List[Message]:
        """The untaken messages, oldest first (without taking them)."""
        out: List[Message] = []
        offset = self._run_offset
        for entry in self._queue:
            if isinstance(entry, bytearray):
                while offset < len(entry):
                    length = int.from_bytes(entry[offset + 1 : offset + 5], "big")
                    out.append((entry[offset] == 1, bytes(entry[offset + 5 : offset + 5 + length])))
                    offset += 5 + length
            else:
                out.append(entry)
            offset = 0
        return out

    def data_received(
        self, connection: "GrpcConnection", stream_id: int, data: bytes, flow_controlled: int
    ) -> int:
        """Credit the bytes (now or later, see the module docstring), decode, queue.

        Returns how many messages this DATA payload completed.  Raises
        :class:`~minigrpc.protocol.status.CallError` when the payload breaks the framing or the
        receive limit; the stream is then ended by the caller.
        """
        memory = connection.memory
        packed = 0
        if self.pack_below and type(data) is bytes and self.decoder.at_boundary:
            packed, end = self._pack_whole(data)
            if packed:
                data = data[end:]
                cost = end + (PACKED_OVERHEAD - 5) * packed
                self._buffered += cost
                if memory is not None:
                    memory.charge_inbound(cost)
        try:
            complete = self.decoder.feed(data) if data else []
        except CallError as exc:
            if exc.completed:
                cost = self._queue_messages(list(exc.completed))
                if memory is not None:
                    memory.charge_inbound(cost)
            if flow_controlled:
                connection.acknowledge_later(stream_id, flow_controlled)
            raise
        except Exception:
            if flow_controlled:
                connection.acknowledge_later(stream_id, flow_controlled)
            raise
        if complete:
            cost = self._queue_messages(complete)
            if memory is not None:
                memory.charge_inbound(cost)
        if memory is not None:
            partial = self.decoder.buffered
            if partial != self._partial:
                memory.charge_inbound(partial - self._partial)
                self._partial = partial
        if flow_controlled:
            over = memory is not None and memory.over_budget
            if self._buffered < self.limit and (
                not over or connection.may_lead(stream_id, self.decoder)
            ):
                connection.acknowledge_later(stream_id, flow_controlled)
            else:
                self._deferred += flow_controlled
                connection.credit_connection(flow_controlled)
        if connection.lead_stream == stream_id and self.decoder.at_boundary:
            connection.lead_stream = connection._lead_decoder = None
        return packed + len(complete)

    def _pack_whole(self, data: bytes) -> Tuple[int, int]:
        """Queue the whole small messages at the start of ``data`` as they are, prefixes and
        all, without decoding each into a tuple first; return how many, and where they end.

        A client streaming tiny messages sends thousands in one DATA frame, and the packed
        queue keeps them in the wire's own format (PROTOCOL-HTTP2.md, Length-Prefixed-Message),
        so a run of them is one slice: reading each prefix is all the work per message. The
        first message that is not whole, not small, or not valid ends the run; the decoder
        takes it from there (and raises what it must)."""
        unpack = _PACKED_PREFIX.unpack_from
        small = self.pack_below
        max_length = self.decoder.max_length
        if max_length is not None and max_length < small:
            small = max_length + 1
        size = len(data)
        queue = self._queue
        pos = count = 0
        while True:
            run = queue[-1] if queue else None
            if type(run) is not bytearray or len(run) >= _PACKED_RUN:
                run = None
            start = pos
            limit = start + _PACKED_RUN - (len(run) if run is not None else 0)
            while pos < limit and size - pos >= 5:
                flag, length = unpack(data, pos)
                end = pos + 5 + length
                if flag > 1 or length >= small or end > size:
                    break
                pos = end
                count += 1
            if pos == start:
                break
            if run is None:
                queue.append(bytearray(data[start:pos]))
            else:
                run += data[start:pos]
            if pos < limit:
                break
        if count:
            self.count += count
            self.received += count
        return count, pos

    def _queue_messages(self, complete: List[Message]) -> int:
        """Queue whole messages; return what they cost."""
        queue = self._queue
        run = queue[-1] if queue else None
        if type(run) is not bytearray:
            run = None
        pack = _PACKED_PREFIX.pack
        pack_below = self.pack_below
        cost = 0
        for message in complete:
            payload = message[1]
            size = len(payload)
            if size < pack_below:
                if run is None or len(run) >= _PACKED_RUN:
                    run = bytearray()
                    queue.append(run)
                run += pack(message[0], size)
                run += payload
                cost += size + PACKED_OVERHEAD
            else:
                queue.append(message)
                run = None
                cost += size + MESSAGE_OVERHEAD
        self.count += len(complete)
        self.received += len(complete)
        self._buffered += cost
        return cost

    def take(self, connection: "GrpcConnection", stream_id: int) -> Optional[Message]:
        """The oldest untaken message, or None; credits deferred window once below the limit."""
        if not self.count:
            return None
        queue = self._queue
        head = queue[0]
        if isinstance(head, bytearray):
            offset = self._run_offset
            flag, length = _PACKED_PREFIX.unpack_from(head, offset)
            end = offset + 5 + length
            message: Message = (flag == 1, bytes(head[offset + 5 : end]))
            if end >= len(head):
                queue.popleft()
                end = 0
            self._run_offset = end
            cost = length + PACKED_OVERHEAD
        else:
            queue.popleft()
            message = head
            cost = len(message[1]) + MESSAGE_OVERHEAD
        self.count -= 1
        self._buffered -= cost
        memory = connection.memory
        if memory is not None:
            memory.release_inbound(cost)
        if self._deferred and self._buffered < self.limit:
            if memory is None or not memory.over_budget:
                self.return_deferred(connection, stream_id)
        return message

    def return_deferred(self, connection: "GrpcConnection", stream_id: int) -> None:
        """Give the stream the window held back for it (the connection's was returned already,
        or is returned by :meth:`GrpcConnection.resume_credit`)."""
        deferred, self._deferred = self._deferred, 0
        stream = connection.conn.streams.get(stream_id)
        if deferred and stream is not None and stream.open:
            connection.conn.increment_flow_control_window(deferred, stream_id)

    @property
    def waiting_for_window(self) -> bool:
        """Window is held back for the stream, and its own messages no longer justify it."""
        return bool(self._deferred) and self._buffered < self.limit

    def clear(self, connection: "GrpcConnection") -> None:
        """The stream is gone: drop what it holds and give its charge back."""
        memory = connection.memory
        if memory is not None and (self._buffered or self._partial):
            memory.release_inbound(self._buffered + self._partial)
        self._queue.clear()
        self._run_offset = 0
        self.count = 0
        self._buffered = self._partial = 0


class GrpcConnection:
    """One HTTP/2 connection of either side: its state machine (:class:`HTTP2Connection`), the
    frame splitter and the bytes to send.

    Not thread-safe: the socket layer serialises access (the state machines are not either).
    """

    def __init__(self, conn: "HTTP2Connection", connection_window: int) -> None:
        self.conn = conn
        #: Connection window owed for DATA whose stream window is held back, and the amount
        #: from which it is returned in one WINDOW_UPDATE.
        self._connection_credit = 0
        self._credit_threshold = max(1, connection_window // 4)
        #: DATA bytes to acknowledge per stream at the end of the chunk being read.
        self._unacknowledged: Dict[int, int] = {}
        #: The server's account in its memory budget (None on a client: nothing is withheld).
        self.memory: Optional[ConnectionMemory] = None
        #: Connection window withheld while the account is over budget.
        self._held_credit = 0
        #: The stream whose partial message may complete while the account is over budget,
        #: and its decoder (:meth:`may_lead`).
        self.lead_stream: Optional[int] = None
        self._lead_decoder: Optional[wire.MessageDecoder] = None
        #: How far beyond its limit the account may go for the lead stream (a server sets it to
        #: its largest request message).
        self.lead_allowance = 4 * 1024 * 1024

    def data_to_send(self) -> bytes:
        """Everything queued: frames for calls, ACKs, WINDOW_UPDATEs, PING replies."""
        return self.conn.data_to_send()

    def acknowledge_later(self, stream_id: int, flow_controlled: int) -> None:
        """Return window for DATA received on ``stream_id``, once the chunk being read is done.

        A large message can arrive as hundreds of DATA frames (grpc-go sends 16 KiB frames
        whatever size the receiver allows): one acknowledgement per stream per read instead of
        one per frame.  The WINDOW_UPDATEs go out in the same write as before, since the socket
        layer writes after each read.  A stream that ended meanwhile still returns its
        connection window (RFC 9113 §6.9: DATA on any stream spends it).
        """
        self._unacknowledged[stream_id] = self._unacknowledged.get(stream_id, 0) + flow_controlled

    def acknowledge_received(self) -> None:
        """Acknowledge what :meth:`acknowledge_later` collected (end of each chunk read).

        While the memory account is over budget only the stream windows are returned; the
        connection's is held back (except for the lead stream's bytes, see :meth:`may_lead`).
        """
        if self._unacknowledged:
            owed, self._unacknowledged = self._unacknowledged, {}
            memory = self.memory
            over = memory is not None and memory.over_budget
            for stream_id, size in owed.items():
                if not over or stream_id == self.lead_stream:
                    self.conn.acknowledge_received_data(size, stream_id)
                    continue
                if not self._stream_closed(stream_id):
                    self.conn.increment_flow_control_window(size, stream_id)
                self._hold_credit(size)
        if self.memory is not None and self.memory.over_budget:
            self._top_up_lead()

    def _hold_credit(self, size: int) -> None:
        self._held_credit += size
        assert self.memory is not None
        self.memory.holding_back()

    def may_lead(self, stream_id: int, decoder: wire.MessageDecoder) -> bool:
        """While over budget: may this stream's partial message still get window?

        One stream at a time (the first whose message is incomplete) may complete its message:
        at the end of each chunk read, the connection's and the stream's windows are raised to
        what that message still needs (:meth:`_top_up_lead`).  Without it, streams that each
        hold part of a large message while the connection window is spent would all wait for
        each other (RFC 9113 §5.2.2 warns of such deadlocks); with it, what is buffered beyond
        the budget is bounded by :attr:`lead_allowance`: a client that spends the lead's window
        on other streams gets it only until then.  The connection window is raised by at least
        :data:`DATA_BATCH`, so that a message missing a byte or two cannot be answered with a
        flood of tiny frames.
        """
        if decoder.at_boundary or self.lead_stream not in (None, stream_id):
            return False
        self.lead_stream = stream_id
        self._lead_decoder = decoder
        return True

    def _choose_lead(self) -> Optional[Tuple[int, wire.MessageDecoder]]:
        """A stream with a partial message to make the lead (a server knows its calls)."""
        return None

    def _top_up_lead(self) -> None:
        """Give the lead stream the window its message still needs (see :meth:`may_lead`)."""
        if self.lead_stream is None or self._lead_decoder is None:
            lead = self._choose_lead()
            if lead is None:
                return
            self.lead_stream, self._lead_decoder = lead
        stream_id, decoder = self.lead_stream, self._lead_decoder
        if decoder.at_boundary or self._stream_closed(stream_id):
            self.lead_stream = self._lead_decoder = None
            return
        memory = self.memory
        if memory is not None and memory.inbound >= memory.limit + self.lead_allowance:
            return  # what other streams took of the lead's window is all it may take
        missing = max(decoder.missing, wire.PREFIX_LENGTH)
        conn = self.conn
        window = conn.inbound_flow_control_window
        if window < missing:
            grant = max(missing, DATA_BATCH) - window
            if window + grant < 2**31 - 1:
                conn.increment_flow_control_window(grant)
        window = conn.streams[stream_id].inbound_flow_control_window
        if window < missing and window + missing < 2**31 - 1:
            conn.increment_flow_control_window(missing - window, stream_id)

    def resume_credit(self) -> None:
        """The account is back under budget: return the connection window held back."""
        held, self._held_credit = self._held_credit, 0
        if held:
            self.conn.increment_flow_control_window(held)

    def credit_connection(self, flow_controlled: int) -> None:
        """Return connection window for DATA whose stream window :class:`Inbound` holds back."""
        memory = self.memory
        if memory is not None and memory.over_budget:
            self._hold_credit(flow_controlled)
            return
        self._connection_credit += flow_controlled
        if self._connection_credit >= self._credit_threshold:
            credit, self._connection_credit = self._connection_credit, 0
            self.conn.increment_flow_control_window(credit)

    def _close_with(self, error_code: int, debug_data: bytes = b"") -> None:
        """Queue GOAWAY(``error_code``, ``debug_data``) unless one went out (RFC 9113 §5.4.1)."""
        self.conn.close_connection(error_code, debug_data)

    def _stream_closed(self, stream_id: int) -> bool:
        """True once the connection closed or forgot the stream: nothing more may be sent on it.

        A whole read is decoded before its events are handled, so a stream whose request is
        being answered may already be closed by a later frame of the same read: the peer's
        RST_STREAM, or the connection's own reset for a stream error such as a WINDOW_UPDATE
        overflowing the stream window (RFC 9113 §6.9.1) or DATA after END_STREAM (RFC 9113
        §5.1).  Such a stream gets nothing more (RFC 9113 §5.1, "closed"), and its error stays
        its own (RFC 9113 §5.4.2): the answer is dropped.
        """
        stream = self.conn.streams.get(stream_id)
        return stream is None or stream.closed

    def _reset(self, stream_id: int, error_code: int) -> None:
        """RST_STREAM, unless the stream is closed already (RFC 9113 §5.1, "closed")."""
        if not self._stream_closed(stream_id):
            self.conn.reset_stream(stream_id, error_code)


#: RST_STREAM codes both sides send (PROTOCOL_ERROR for a malformed header block: a stream
#: error, not a connection error, RFC 9113 §8.1.1); written once, in minigrpc.protocol.status.
NO_ERROR = frames.NO_ERROR
CANCEL = frames.CANCEL
REFUSED_STREAM = frames.REFUSED_STREAM
PROTOCOL_ERROR = frames.PROTOCOL_ERROR
INTERNAL_ERROR = frames.INTERNAL_ERROR
