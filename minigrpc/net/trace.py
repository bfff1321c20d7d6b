"""Frame trace: one readable log line per HTTP/2 frame.

Turn it on with ``MINIGRPC_TRACE=1`` in the environment (the trace goes to stderr), or by
enabling the ``minigrpc.protocol.wire`` logger at DEBUG with a handler of your own.  The transports
hand every byte they write and read to a :class:`FrameTracer`; when the logger is off,
:func:`tracer_for` returns None and tracing costs nothing.

How to read a trace
-------------------
Each line is one HTTP/2 frame (RFC 9113 §4.1), in this column order::

    <role> <arrow> <peer>  <TYPE>  stream=<id>  len=<payload bytes>  <FLAGS>  <details>

* ``-->`` is a frame this side wrote, ``<--`` one it read.  The role (client or server) is
  this side of the connection; the peer is the other end.
* ``stream=0`` frames concern the whole connection (SETTINGS, PING, GOAWAY, connection
  WINDOW_UPDATE).  A gRPC call is one stream with an odd id (RFC 9113 §5.1.1).
* ``len`` is the frame payload, padding included; FLAGS shows the flag bits by name.
* A header block is decoded with HPACK and printed as indented ``name: value`` lines under
  the frame that completes it (a large block spans HEADERS + CONTINUATION).  The first block
  on a stream is labelled request headers, response headers or trailers-only; the last one,
  trailers (PROTOCOL-HTTP2.md, Requests and Responses).
* DATA frames carry gRPC Length-Prefixed-Messages (PROTOCOL-HTTP2.md, Requests): every message
  that starts in the frame is shown as ``grpc-message flag=<0|1> length=<n>`` with its first
  bytes in hex.  Frame boundaries mean nothing to gRPC, so a message (or even its 5-byte prefix) may
  continue in later frames: those frames say ``grpc-message continued``.

A unary call from a minigrpc client, as the client sees it.  Its one SETTINGS frame carries
minigrpc's values, a WINDOW_UPDATE then raises the connection window (SETTINGS cannot), each
side ACKs the other's SETTINGS, and closing the channel sends a GOAWAY::

    client --> localhost:50051  PREFACE        "PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" (client connection preface)
    client --> localhost:50051  SETTINGS       stream=0    len=36      -                       HEADER_TABLE_SIZE=4096 ENABLE_PUSH=0 INITIAL_WINDOW_SIZE=4194304 MAX_FRAME_SIZE=1048576 ENABLE_CONNECT_PROTOCOL=0 MAX_HEADER_LIST_SIZE=65536
    client --> localhost:50051  WINDOW_UPDATE  stream=0    len=4       -                       increment=16711681 (connection)
    client --> localhost:50051  HEADERS        stream=1    len=138     END_HEADERS             request headers
                                  :method: POST
                                  :scheme: http
                                  :path: /grpc.testing.TestService/UnaryCall
                                  :authority: localhost:50051
                                  content-type: application/grpc
                                  user-agent: grpc-python-minigrpc/0.1.0
                                  te: trailers
                                  grpc-accept-encoding: identity,deflate,gzip
                                  grpc-timeout: 999132u  (0.999132 s)
    client --> localhost:50051  DATA           stream=1    len=15      END_STREAM              grpc-message flag=0 length=10 [10 04 1a 06 12 04 61 62 63 64]
    client <-- localhost:50051  SETTINGS       stream=0    len=42      -                       HEADER_TABLE_SIZE=4096 ENABLE_PUSH=0 INITIAL_WINDOW_SIZE=4194304 MAX_FRAME_SIZE=1048576 ENABLE_CONNECT_PROTOCOL=0 MAX_HEADER_LIST_SIZE=16384 MAX_CONCURRENT_STREAMS=100
    client <-- localhost:50051  WINDOW_UPDATE  stream=0    len=4       -                       increment=16711681 (connection)
    client --> localhost:50051  SETTINGS       stream=0    len=0       ACK                     (acknowledges the peer's SETTINGS)
    client <-- localhost:50051  SETTINGS       stream=0    len=0       ACK                     (acknowledges our SETTINGS)
    client <-- localhost:50051  HEADERS        stream=1    len=47      END_HEADERS             response headers
                                  :status: 200
                                  content-type: application/grpc
                                  grpc-accept-encoding: identity,deflate,gzip
    client <-- localhost:50051  DATA           stream=1    len=13      -                       grpc-message flag=0 length=8 [0a 06 12 04 00 00 00 00]
    client <-- localhost:50051  HEADERS        stream=1    len=24      END_STREAM|END_HEADERS  trailers
                                  grpc-status: 0  (OK)
                                  grpc-message:
    client --> localhost:50051  GOAWAY         stream=0    len=8       -                       last_stream_id=0 error=NO_ERROR(0x0)

Notes marked ``!!`` point at something a conforming peer would reject.  If the bytes
stop making sense (no preface, a malformed frame), the trace says so once and stops tracing
that direction; the connection itself is never touched.
"""  # noqa: E501

import logging
import os
import struct
import sys
import threading
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from ..driver.logs import get_logger

if TYPE_CHECKING:  # pragma: no cover - typing only; the real imports are lazy (cheap import)
    from ..http2.frames import Frame, FrameHandler, FrameReader
    from ..http2.hpack_codec import Decoder

__all__ = [
    "WIRE_LOGGER",
    "FrameTracer",
    "enable_from_environment",
    "tracer_for",
]

WIRE_LOGGER = get_logger("minigrpc.protocol.wire")

_GRPC_PREFIX_LENGTH = 5  # PROTOCOL-HTTP2.md, Requests: 1-byte flag + 4-byte big-endian length
_DEFAULT_MAX_FRAME_SIZE = 16384  # RFC 9113 §6.5.2 initial SETTINGS_MAX_FRAME_SIZE
_HEX_BYTES_SHOWN = 16
_VALUE_CHARS_SHOWN = 100
_MIN_PEER_WIDTH = 15
_HUGE = 1 << 31  # limits for the mirror HPACK decoder: it must accept whatever the real one did
_PADDABLE = frozenset((0x0, 0x1, 0x5))  # DATA, HEADERS, PUSH_PROMISE (RFC 9113 §6.1, §6.2, §6.6)

#: The flags each frame type defines (RFC 9113 §6), in the order a trace line names them.  A
#: type not listed here is an extension (RFC 9113 §5.5): its flag octet is shown in hex.
_FLAG_NAMES: Dict[int, Tuple[Tuple[int, str], ...]] = {
    0x0: ((0x1, "END_STREAM"), (0x8, "PADDED")),  # DATA
    0x1: ((0x1, "END_STREAM"), (0x4, "END_HEADERS"), (0x8, "PADDED"), (0x20, "PRIORITY")),
    0x2: (),  # PRIORITY
    0x3: (),  # RST_STREAM
    0x4: ((0x1, "ACK"),),  # SETTINGS
    0x5: ((0x4, "END_HEADERS"), (0x8, "PADDED")),  # PUSH_PROMISE
    0x6: ((0x1, "ACK"),),  # PING
    0x7: (),  # GOAWAY
    0x8: (),  # WINDOW_UPDATE
    0x9: ((0x4, "END_HEADERS"),),  # CONTINUATION
    0xA: (),  # ALTSVC (RFC 7838 §4)
}


# PROTOCOL-HTTP2.md, Requests ("Timeout"): grpc-timeout units, in seconds.
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def tracer_for(role: str, peer: str) -> "Optional[FrameTracer]":
    """A tracer for one connection, or None unless ``minigrpc.protocol.wire`` is enabled for DEBUG.

    Transports call this once per connection and skip every tracing call on None, so a
    connection that is not traced pays one ``isEnabledFor`` check and nothing else. The first
    call also honours ``MINIGRPC_TRACE`` (:func:`enable_from_environment`), so the variable
    works for clients and servers alike.
    """
    global _environment_checked
    if not _environment_checked:
        _environment_checked = True
        enable_from_environment()
    if not WIRE_LOGGER.isEnabledFor(logging.DEBUG):
        return None
    return FrameTracer(role, peer)


_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_environment_checked = False
_enable_lock = threading.Lock()


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at emit time (pytest and others swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            if stream is not None:
                stream.write(self.format(record) + "\n")
                stream.flush()
        except Exception:
            self.handleError(record)


def enable_from_environment() -> None:
    """Send the frame trace to stderr when ``MINIGRPC_TRACE`` is 1, true, yes or on.

    Idempotent: the handler is attached once however often channels and servers call this.
    Records still propagate to the root logger, so an application's own logging setup works too.
    """
    if os.environ.get("MINIGRPC_TRACE", "").strip().lower() not in _TRUE_WORDS:
        return
    with _enable_lock:
        if any(isinstance(h, _StderrHandler) for h in WIRE_LOGGER.handlers):
            return
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.setLevel(logging.DEBUG)
        WIRE_LOGGER.addHandler(handler)
        WIRE_LOGGER.setLevel(logging.DEBUG)


class _MessageCursor:
    """Where one direction of one stream is inside the gRPC Length-Prefixed-Message sequence.

    DATA frame boundaries mean nothing to gRPC (PROTOCOL-HTTP2.md, Data Frames), so the cursor
    carries a split prefix and the number of message bytes still to come from one frame to the next.
    """

    __slots__ = ("prefix", "remaining")

    def __init__(self) -> None:
        self.prefix = b""  # 0-4 bytes of a prefix whose rest is in a later frame
        self.remaining = 0  # body bytes of the current message not seen yet

    def describe(self, payload: bytes) -> List[str]:
        """One description per message that starts or continues in ``payload``."""
        items: List[str] = []
        size = len(payload)
        pos = 0
        if self.remaining:
            pos = min(self.remaining, size)
            self.remaining -= pos
            rest = f"{self.remaining} still to come" if self.remaining else "message complete"
            items.append(f"grpc-message continued: {pos} bytes, {rest}")
        while pos < size:
            began_earlier = bool(self.prefix)
            taken = payload[pos : pos + _GRPC_PREFIX_LENGTH - len(self.prefix)]
            self.prefix += taken
            pos += len(taken)
            if len(self.prefix) < _GRPC_PREFIX_LENGTH:
                items.append(
                    f"grpc-message prefix split: {len(self.prefix)} of 5 bytes here "
                    f"[{_spaced_hex(self.prefix)}], the rest in the next frame"
                )
                break
            flag, length = struct.unpack(">BI", self.prefix)
            self.prefix = b""
            body = payload[pos : pos + length]
            pos += len(body)
            self.remaining = length - len(body)
            text = f"grpc-message flag={flag} length={length}"
            if flag == 1:
                text += " (compressed)"
            elif flag != 0:
                text += " !! flag must be 0 or 1"
            where = ["prefix began in the previous frame"] if began_earlier else []
            if self.remaining:
                where.append(f"{len(body)} bytes here, {self.remaining} in later frames")
            if where:
                text += f" ({'; '.join(where)})"
            shown = body[:_HEX_BYTES_SHOWN]
            if shown:
                more = " ..." if length > len(shown) else ""
                text += f" [{_spaced_hex(shown)}{more}]"
            items.append(text)
        return items

    def unfinished(self) -> Optional[str]:
        """Why the stream may not end here, or None when it sits on a message boundary."""
        if self.prefix:
            return f"!! stream ended inside a grpc-message prefix ({len(self.prefix)} of 5 bytes)"
        if self.remaining:
            return f"!! stream ended inside a grpc-message ({self.remaining} bytes missing)"
        return None


class _HeaderBlock:
    """A header block whose CONTINUATION frames are still coming (RFC 9113 §6.10)."""

    __slots__ = ("fragments", "kind", "stream_id")

    def __init__(self, stream_id: int, kind: str, first_fragment: bytes) -> None:
        self.stream_id = stream_id
        self.kind = kind
        self.fragments = [first_fragment]


class _Direction:
    """Everything the tracer knows about the bytes flowing one way on the connection."""

    def __init__(
        self, prefix: str, reader: "FrameReader", from_client: Optional[bool]
    ) -> None:
        self.prefix = prefix
        #: The frames of this direction, cut without checks (the magic read first where the
        #: client's preface is expected, RFC 9113 §3.4).
        self.reader = reader
        self.from_client = from_client  # None when the role is neither client nor server
        #: The preface line is still to be written, and the first bytes seen, to show if the
        #: preface is not there.
        self.preface_pending = reader.awaiting_magic
        self.start = b""
        #: The direction the other way (its SETTINGS say how large our frames may be).
        self.other = self
        self.stopped = False
        self.decoder: Optional[Decoder] = None
        self.hpack_lost: Optional[str] = None
        self.header_block: Optional[_HeaderBlock] = None
        # Streams on which this direction has sent headers and not yet END_STREAM.
        self.streams: Dict[int, _MessageCursor] = {}
        # The receiver's SETTINGS_MAX_FRAME_SIZE (the largest value seen, to stay lenient).
        self.max_frame_size = _DEFAULT_MAX_FRAME_SIZE


class FrameTracer:
    """Turns the raw byte streams of one connection into log lines, one per frame.

    The tracer parses the bytes itself (:func:`minigrpc.http2.frames.parse_frame`), apart from the
    connection's own reading of them, and keeps its own HPACK decoder per direction
    (:class:`minigrpc.http2.hpack_codec.Decoder`): HPACK is deterministic, so a second decoder fed
    the same blocks in the same order mirrors the peer's dynamic table (RFC 7541 §2.2).  Nothing
    here ever raises into the transport: a failure is logged and ends tracing of that direction.
    """

    def __init__(self, role: str, peer: str, logger: logging.Logger = WIRE_LOGGER) -> None:
        # Imported here, not at module level, so that importing minigrpc.net.trace stays cheap.
        from ..http2.frames import FRAME_TYPE_NAMES, SETTING_NAMES, FrameReader

        self._frame_type_names = FRAME_TYPE_NAMES
        self._setting_names = SETTING_NAMES
        self._logger = logger
        self._lock = threading.Lock()
        known_role = role in ("client", "server")
        # Escaped so that an odd address (an abstract socket's NUL byte) cannot break the line.
        padded_peer = _escape(peer.encode("utf-8", "backslashreplace")).ljust(_MIN_PEER_WIDTH)
        self._out = _Direction(
            f"{role} --> {padded_peer}  ",
            FrameReader(magic=role == "client"),
            from_client=(role == "client") if known_role else None,
        )
        self._in = _Direction(
            f"{role} <-- {padded_peer}  ",
            FrameReader(magic=role == "server"),
            from_client=(role == "server") if known_role else None,
        )
        self._out.other, self._in.other = self._in, self._out
        self._handlers = tuple(self._handler_of(type_code) for type_code in range(256))

    def sent(self, data: bytes) -> None:
        """Bytes this side wrote to the socket, in any chunking."""
        self._feed(self._out, self._in, data)

    def received(self, data: bytes) -> None:
        """Bytes this side read from the socket, in any chunking."""
        self._feed(self._in, self._out, data)

    # -- framing -------------------------------------------------------------------------

    def _feed(self, way: _Direction, other: _Direction, data: bytes) -> None:
        if way.stopped or not data:
            return
        with self._lock:
            try:
                self._consume(way, other, bytes(data))
            except Exception as exc:  # the tracer must never break the connection it watches
                self._stop(way, f"<tracer failure: {type(exc).__name__}: {exc}>")

    def _stop(self, way: _Direction, reason: str) -> None:
        way.stopped = True
        way.streams.clear()
        self._emit(way, f"{reason}; no further frames are traced in this direction")

    def _consume(self, way: _Direction, other: _Direction, data: bytes) -> None:
        """Every frame ``data`` completes, cut by the direction's
        :class:`~minigrpc.http2.frames.FrameReader`, after the client's magic where it is
        expected (RFC 9113 §3.4)."""
        from ..http2.frames import CLIENT_PREFACE, FrameError

        if way.preface_pending:
            way.start = (way.start + data)[: len(CLIENT_PREFACE)]
        try:
            way.reader.read(data, self._handlers, way)
        except FrameError:
            self._stop(way, f"!! not HTTP/2: expected the client preface, got {_quote(way.start)}")
            return
        self._preface_read(way)

    def _handler_of(self, type_code: int) -> "FrameHandler":
        """What a direction's reader hands a frame of ``type_code`` to (the direction is the
        reader's owner): :meth:`_frame`; it stops the read once the direction's trace
        stopped."""

        def handle(way: _Direction, flags: int, stream_id: int, payload: bytes) -> bool:
            self._preface_read(way)
            self._frame(way, way.other, type_code, flags, stream_id, payload)
            return way.stopped

        return handle

    def _preface_read(self, way: _Direction) -> None:
        """The line of the client's magic, once it has all arrived."""
        if way.preface_pending and not way.reader.awaiting_magic:
            from ..http2.frames import CLIENT_PREFACE

            way.preface_pending = False
            preface = _quote(CLIENT_PREFACE)
            self._emit(way, f"{'PREFACE':<15}{preface} (client connection preface)")

    def _emit(self, way: _Direction, text: str, extra: Tuple[str, ...] = ()) -> None:
        message = (way.prefix + text).rstrip()
        if extra:
            indent = " " * (len(way.prefix) + 2)
            message += "".join(f"\n{indent}{line}".rstrip() for line in extra)
        self._logger.debug("%s", message)

    def _line(
        self,
        way: _Direction,
        type_name: str,
        stream_id: int,
        length: int,
        flags: str,
        details: str,
        extra: Tuple[str, ...] = (),
    ) -> None:
        self._emit(
            way,
            f"{type_name:<15}stream={stream_id:<4} len={length:<7} {flags or '-':<24}{details}",
            extra,
        )

    # -- frames ---------------------------------------------------------------------------

    def _frame(
        self,
        way: _Direction,
        other: _Direction,
        type_code: int,
        flag_byte: int,
        stream_id: int,
        payload: bytes,
    ) -> None:
        """Read one whole frame (RFC 9113 §4.1) and log its line."""
        from ..http2 import frames

        length = len(payload)
        type_name = self._frame_type_names.get(type_code, f"0x{type_code:02x}")
        try:
            frame = frames.read_frame(type_code, flag_byte, stream_id, payload)
            altsvc = _altsvc(frame) if type_code == frames.ALTSVC else None
        except Exception as exc:
            self._line(way, type_name, stream_id, length, f"0x{flag_byte:02x}", "")
            self._stop(way, f"!! malformed {type_name} frame: {exc}")
            return

        flag_names = _FLAG_NAMES.get(type_code)
        if flag_names is None:  # an extension frame
            flags = f"0x{flag_byte:02x}" if flag_byte else ""
        else:
            flags = "|".join(name for bit, name in flag_names if flag_byte & bit)
        padded = bool(flag_byte & frames.PADDED) and type_code in _PADDABLE
        pad_length = payload[0] if padded else 0
        end_stream = bool(flag_byte & frames.END_STREAM)
        end_headers = bool(flag_byte & frames.END_HEADERS)
        notes: List[str] = []
        if length > way.max_frame_size:
            notes.append(f"!! larger than the receiver's MAX_FRAME_SIZE ({way.max_frame_size})")
        block = way.header_block
        if block is not None and type_code != frames.CONTINUATION:
            notes.append(f"!! the header block of stream {block.stream_id} was never finished")
            way.header_block = None
            way.hpack_lost = "an earlier header block was never finished"

        details = ""
        extra: List[str] = []
        if type_code == frames.DATA:
            details, extra = self._data(
                way, stream_id, frame.data, pad_length, padded, end_stream
            )
        elif type_code == frames.HEADERS:
            parts = []
            kind = self._block_kind(way, stream_id, end_stream)
            parts.append(kind)
            if flag_byte & frames.PRIORITY_FLAG:
                parts.append(_priority(payload[1 if padded else 0 :]))
            if padded:
                parts.append(f"padding={pad_length}")
            if stream_id not in way.streams and not end_stream:
                way.streams[stream_id] = _MessageCursor()
            extra = self._header_fragment(way, stream_id, kind, frame.data, end_headers, parts)
            if end_stream:
                self._end_stream(way, stream_id, extra)
            details = "  ".join(parts)
        elif type_code == frames.CONTINUATION:
            parts = []
            if block is None or block.stream_id != stream_id:
                parts.append("!! no header block in progress on this stream")
                way.hpack_lost = "a CONTINUATION frame arrived without its HEADERS"
                block = way.header_block = _HeaderBlock(stream_id, "headers", b"")
            block.fragments.append(frame.data)
            if end_headers:
                way.header_block = None
                fragment_bytes = sum(len(f) for f in block.fragments)
                parts.append(
                    f"end of {block.kind}: {len(block.fragments)} frames, "
                    f"{fragment_bytes} bytes of HPACK"
                )
                extra = self._decode(way, b"".join(block.fragments))
            else:
                parts.append(f"{block.kind} continue in the next CONTINUATION")
            details = "  ".join(parts)
        elif type_code == frames.SETTINGS:
            # Processed in order (RFC 9113 §6.5.3): of a setting sent twice, the last value holds.
            settings = dict(frame.settings)
            if flag_byte & frames.ACK:
                details = "(acknowledges " + (
                    "the peer's SETTINGS)" if way is self._out else "our SETTINGS)"
                )
            elif not settings:
                details = "(no changes: defaults stand)"
            else:
                details = " ".join(
                    f"{self._setting_names.get(k, f'0x{k:04X}')}={v}" for k, v in settings.items()
                )
                max_frame = settings.get(frames.MAX_FRAME_SIZE)
                if max_frame is not None:
                    # The sender will accept frames this large: they travel the other way.
                    other.max_frame_size = max(other.max_frame_size, max_frame)
        elif type_code == frames.WINDOW_UPDATE:
            details = f"increment={frame.window_increment}"
            if stream_id == 0:
                details += " (connection)"
        elif type_code == frames.PING:
            details = f"payload={frame.data.hex()}"
            if flag_byte & frames.ACK:
                details += " (reply)"
        elif type_code == frames.RST_STREAM:
            details = f"error={_error_name(frame.error_code)}"
            for direction in (way, other):
                direction.streams.pop(stream_id, None)
        elif type_code == frames.GOAWAY:
            details = f"last_stream_id={frame.last_stream_id} error={_error_name(frame.error_code)}"
            if frame.data:
                details += f" debug={_quote(frame.data)}"
        elif type_code == frames.PRIORITY:
            details = _priority(payload)
        elif type_code == frames.PUSH_PROMISE:
            parts = [f"promised_stream={frame.last_stream_id}"]
            if padded:
                parts.append(f"padding={pad_length}")
            extra = self._header_fragment(
                way, stream_id, "promised request headers", frame.data, end_headers, parts
            )
            details = "  ".join(parts)
        elif altsvc is not None:
            origin, field = altsvc
            details = f"origin={_quote(origin)} field={_quote(field)}"
        elif flag_names is None:
            details = f"(extension frame) [{_hex_start(frame.data)}]" if frame.data else ""
        if notes:
            details = "  ".join([details, *notes]) if details else "  ".join(notes)
        self._line(way, type_name, stream_id, length, flags, details, tuple(extra))

    def _data(
        self,
        way: _Direction,
        stream_id: int,
        data: bytes,
        pad_length: int,
        padded: bool,
        end_stream: bool,
    ) -> Tuple[str, List[str]]:
        """DATA (RFC 9113 §6.1) with the gRPC messages in it (PROTOCOL-HTTP2.md,
        Requests)."""
        parts: List[str] = []
        if padded:
            parts.append(f"data={len(data)} padding={pad_length}")
        cursor = way.streams.get(stream_id)
        items: List[str] = []
        if cursor is None:
            parts.append("!! stream not open in this direction")
        else:
            items = cursor.describe(data)
            if not items and not data:
                parts.append("(empty)")
        if end_stream:
            self._end_stream(way, stream_id, items)
        if len(items) == 1:
            parts.append(items[0])
            items = []
        elif items:
            starts = sum(item.startswith("grpc-message flag") for item in items)
            parts.append(f"{starts} grpc-messages start here")
        return "  ".join(parts), items

    def _end_stream(self, way: _Direction, stream_id: int, notes: List[str]) -> None:
        cursor = way.streams.pop(stream_id, None)
        problem = cursor.unfinished() if cursor is not None else None
        if problem:
            notes.append(problem)

    # -- header blocks --------------------------------------------------------------------

    def _block_kind(self, way: _Direction, stream_id: int, end_stream: bool) -> str:
        """What a header block means in gRPC (PROTOCOL-HTTP2.md, Requests and
        Responses)."""
        opened = stream_id in way.streams
        if way.from_client is None:
            return "trailers" if opened else "headers"
        if way.from_client:
            return "request trailers" if opened else "request headers"
        if opened:
            return "trailers"
        return "trailers-only" if end_stream else "response headers"

    def _header_fragment(
        self,
        way: _Direction,
        stream_id: int,
        kind: str,
        fragment: bytes,
        end_headers: bool,
        parts: List[str],
    ) -> List[str]:
        if end_headers:
            return self._decode(way, fragment)
        way.header_block = _HeaderBlock(stream_id, kind, fragment)
        parts.append("(block continues in CONTINUATION)")
        return []

    def _decode(self, way: _Direction, block: bytes) -> List[str]:
        """Decode a complete header block; a failure becomes a line, never an exception."""
        if way.hpack_lost is not None:
            return [f"<undecodable header block: HPACK state lost ({way.hpack_lost})>"]
        if way.decoder is None:
            from ..http2.hpack_codec import DEFAULT_TABLE_SIZE, Decoder

            # Any size update the peer sends is accepted, but the table starts at the size
            # both ends assume before one (RFC 7541 §4.2), so evictions mirror the peer's.
            way.decoder = Decoder(max_table_size=_HUGE)
            way.decoder.table_size = DEFAULT_TABLE_SIZE
        try:
            headers = way.decoder.decode(block)
        except Exception as exc:
            way.hpack_lost = f"{type(exc).__name__} in an earlier block"
            return [f"<undecodable header block: {type(exc).__name__}: {exc}>"]
        return [_render_header(bytes(name), bytes(value)) for name, value in headers]


# -- rendering helpers --------------------------------------------------------------------


def _escape(data: bytes) -> str:
    """Printable ASCII as is, everything else as a Python-style escape."""
    out = []
    for byte in data:
        if byte == 0x5C:
            out.append("\\\\")
        elif 0x20 <= byte <= 0x7E:
            out.append(chr(byte))
        elif byte == 0x09:
            out.append("\\t")
        elif byte == 0x0A:
            out.append("\\n")
        elif byte == 0x0D:
            out.append("\\r")
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def _shorten(data: bytes) -> str:
    if len(data) <= _VALUE_CHARS_SHOWN:
        return _escape(data)
    return f"{_escape(data[:_VALUE_CHARS_SHOWN])}... ({len(data)} bytes)"


def _quote(data: bytes) -> str:
    """A byte string in double quotes, escaped and truncated like header values."""
    if len(data) <= _VALUE_CHARS_SHOWN:
        return '"' + _escape(data).replace('"', '\\"') + '"'
    shown = _escape(data[:_VALUE_CHARS_SHOWN]).replace('"', '\\"')
    return f'"{shown}..." ({len(data)} bytes)'


def _spaced_hex(data: bytes) -> str:
    """``0a 06 12`` (``bytes.hex(" ")`` needs Python 3.8)."""
    return " ".join(f"{byte:02x}" for byte in data)


def _hex_start(data: bytes) -> str:
    shown = _spaced_hex(data[:_HEX_BYTES_SHOWN])
    return shown + (" ..." if len(data) > _HEX_BYTES_SHOWN else "")


def _error_name(code: int) -> str:
    from ..http2.frames import http2_error_name

    name = http2_error_name(code)
    return f"{'unknown' if name.startswith('0x') else name}({code:#x})"


def _priority(fields: bytes) -> str:
    """The Exclusive bit, Stream Dependency and Weight that start ``fields`` (RFC 9113 §6.3);
    the wire carries the weight minus one."""
    dependency = int.from_bytes(fields[:4], "big")
    exclusive = " exclusive" if dependency >> 31 else ""
    return f"depends_on={dependency & 0x7FFFFFFF} weight={fields[4] + 1}{exclusive}"


def _altsvc(frame: "Frame") -> Tuple[bytes, bytes]:
    """ALTSVC's Origin and Alt-Svc-Field-Value (RFC 7838 §4); ValueError when the Origin's
    length runs past the payload."""
    body = frame.data
    if len(body) < 2:
        raise ValueError("ALTSVC without an Origin-Len")
    origin_length = int.from_bytes(body[:2], "big")
    if 2 + origin_length > len(body):
        raise ValueError(f"ALTSVC Origin-Len {origin_length} runs past the payload")
    return body[2 : 2 + origin_length], body[2 + origin_length :]


def _render_header(name: bytes, value: bytes) -> str:
    """``name: value``, with a gloss for the gRPC headers a learner would otherwise look up.

    ``-bin`` values are shown as sent (base64 text, docs/wire-rules.md, "Metadata"); grpc-message is
    shown raw and, when it has escapes, percent-decoded as the receiver will see it
    (PROTOCOL-HTTP2.md, Responses).
    """
    line = f"{_escape(name)}: {_shorten(value)}"
    if name == b"grpc-message" and b"%" in value:
        from ..protocol.wire import percent_decode

        decoded = percent_decode(value)
        shown = repr(decoded[:_VALUE_CHARS_SHOWN])
        if len(decoded) > _VALUE_CHARS_SHOWN:
            shown += f"... ({len(decoded)} characters)"
        line += f"  (percent-decoded: {shown})"
    elif name.endswith(b"-bin") and value.startswith(b"\x00"):
        # grpc core's "true binary" metadata, used only when both sides sent SETTINGS 0xFE03=1.
        line += f"  (true binary metadata: {len(value) - 1} raw bytes, not base64)"
    elif name == b"grpc-status" and value.isdigit():
        from ..protocol.codes import CODE_NAMES

        if int(value) < len(CODE_NAMES):
            line += f"  ({CODE_NAMES[int(value)]})"
    elif name == b"grpc-timeout" and 2 <= len(value) <= 9 and value[:-1].isdigit():
        unit = _TIMEOUT_UNITS.get(chr(value[-1]))
        if unit is not None:
            line += f"  ({int(value[:-1]) * unit:g} s)"
    return line
