"""h2 plumbing shared by the client and the server: configuration, SETTINGS and GOAWAY handling.

h2 is a sans-IO HTTP/2 state machine, which is exactly the layer gRPC needs, but a few of its
behaviours need care (docs/h2-notes.md). This module holds the workarounds so that each lives in
one place:

* :func:`client_config` / :func:`server_config`: headers are bytes; h2 validates what arrives.
* :func:`start_connection`: the preface, our SETTINGS and a large connection window, in the only
  order h2 gets right (docs/h2-notes.md, "Settings").
* :class:`FrameSplitter`: cut the inbound byte stream right after every GOAWAY frame, so that a
  GOAWAY and the frame after it never reach h2 in one ``receive_data()`` call (otherwise h2 raises
  and the ``ConnectionTerminated`` event is lost), and after the server's first SETTINGS frame;
  and reject an oversized frame or header block from its 9-byte header, before h2 buffers its
  body.
* :func:`reopen_after_goaway`: h2 enters its CLOSED state on GOAWAY and then refuses every frame,
  which would kill the calls the GOAWAY explicitly allows to finish (RFC 9113 §6.8;
  python-hyper/h2#1181).
* DATA frames (a measured cost, docs/benchmarks.md): hyperframe's ``repr`` of a received DATA frame
  hex-encodes the whole payload even with logging off, and its serializer copies a sent payload
  twice; both are replaced for :class:`hyperframe.frame.DataFrame` by versions that produce the same
  text and bytes.
* :func:`next_read_size`: how much each ``recv()`` asks for, on both sides.
* The splitter can also join consecutive DATA frames of one stream before h2 parses them
  (``merge_data_frames``), because h2's cost is per frame and grpc-go sends 16 KiB frames.
"""

from typing import TYPE_CHECKING, Dict, List, Optional, Tuple, Union

from . import frames
from .frames import FrameError
from .status import ENHANCE_YOUR_CALM, FRAME_SIZE_ERROR

if TYPE_CHECKING:
    import h2.config
    import h2.connection
    import h2.settings
    import hyperframe.frame

#: The client connection preface (RFC 9113 §3.4).
CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

#: Per-stream receive window we advertise (grpcio and grpclib use 4 MiB; docs/wire-rules.md).
DEFAULT_STREAM_WINDOW = 4 * 1024 * 1024
#: Connection receive window. Data is acknowledged as soon as it is buffered, so this only needs
#: to cover what is in flight between two reads, not every stream's full window.
DEFAULT_CONNECTION_WINDOW = 16 * 1024 * 1024
#: Largest frame we accept. Python pays per frame, so fewer, larger frames are cheaper.
DEFAULT_MAX_FRAME_SIZE = 1024 * 1024
#: Header-list size h2 enforces for the whole connection. Exceeding it kills the connection, so it
#: is kept well above the per-call limit that the call layers enforce themselves (docs/h2-notes.md,
#: "Header lists").
CONNECTION_MAX_HEADER_LIST_SIZE = 64 * 1024
#: An encoded header block may not grow past this before END_HEADERS (both clients): the decoded
#: limit we advertise, plus room for padding and for literals that encode longer than they decode.
MAX_HEADER_BLOCK = 2 * CONNECTION_MAX_HEADER_LIST_SIZE
#: Per-call header-list limit: PROTOCOL-HTTP2.md suggests 8 KiB; grpcio advertises 16 KiB.
CALL_MAX_HEADER_LIST_SIZE = 16 * 1024
#: Until the peer's SETTINGS arrive, h2 treats its stream limit as unlimited while grpc-go assumes
#: 100; cap ourselves at that (docs/h2-notes.md, "Streams").
DEFAULT_PEER_MAX_CONCURRENT_STREAMS = 100

#: ``recv()`` sizes, client and server (measured in docs/benchmarks.md). CPython allocates the
#: whole size before the kernel fills it, and glibc serves anything above 128 KiB with mmap, then
#: mremap and munmap when the bytes object shrinks and dies: three system calls and a page fault
#: for every read of a 300-byte response, about 35 µs per call. Reads start small; a read that
#: fills ``SMALL_READ`` means the peer is streaming, and the next reads take ``LARGE_READ``, so a
#: large message is still a handful of reads (and fewer partial frames for h2 to rebuffer).
SMALL_READ = 64 * 1024
LARGE_READ = 256 * 1024


def next_read_size(received: int) -> int:
    """The ``recv()`` size after a read that returned ``received`` bytes."""
    return LARGE_READ if received >= SMALL_READ else SMALL_READ


class ReadBuffers:
    """The buffers an ``asyncio.BufferedProtocol`` lends its transport to read into.

    asyncio's own ``data_received`` path reads up to 256 KiB into a new bytes object each
    time, which costs the mmap, mremap and munmap described at :data:`SMALL_READ` on every read
    of a small response.  Reading into a buffer kept for the connection costs none of that;
    only the bytes read are copied out.  The sizes follow :func:`next_read_size`: the large
    buffer exists only while reads fill the small one.
    """

    __slots__ = ("_large", "_lent", "_small")

    def __init__(self) -> None:
        self._small = memoryview(bytearray(SMALL_READ))
        self._large: Optional[memoryview] = None
        self._lent = self._small

    def get_buffer(self) -> memoryview:
        """Where the next read goes."""
        return self._lent

    def take(self, received: int) -> bytes:
        """The ``received`` bytes just read into the lent buffer; sizes the next one."""
        data = bytes(self._lent[:received])
        if next_read_size(received) > SMALL_READ:
            if self._large is None:
                self._large = memoryview(bytearray(LARGE_READ))
            self._lent = self._large
        else:
            self._large = None
            self._lent = self._small
        return data


#: The frame types :attr:`FrameSplitter.control_frames` counts: PRIORITY, RST_STREAM, SETTINGS
#: and PING (not their ACKs), WINDOW_UPDATE on stream 0.
COUNTED_FRAMES = frozenset(
    (frames.PRIORITY, frames.RST_STREAM, frames.SETTINGS, frames.PING, frames.WINDOW_UPDATE)
)
#: Frame types that carry a field block: HEADERS, PUSH_PROMISE, CONTINUATION (RFC 9113 §4.3).
_HEADER_BLOCK_TYPES = (frames.HEADERS, frames.PUSH_PROMISE, frames.CONTINUATION)


def client_config() -> "h2.config.H2Configuration":
    """h2 settings for a client: bytes headers (see :func:`_config`)."""
    return _config(client_side=True)


def server_config() -> "h2.config.H2Configuration":
    """h2 settings for a server: bytes headers (see :func:`_config`)."""
    return _config(client_side=False)


def _config(client_side: bool) -> "h2.config.H2Configuration":
    """Outbound validation and normalisation and both inbound steps off (docs/h2-notes.md,
    "Configuration", which also has what each step costs).

    *Inbound validation* is minigrpc's own: h2 turns every malformed block it receives into a
    connection error (GOAWAY, every call on the connection ends), where RFC 9113 §8.1.1 asks for
    a stream error. minigrpc checks each received block itself
    (:func:`minigrpc.headers.malformed_request`, ``malformed_response``, ``malformed_trailers``),
    resets only that stream, and spends less time doing it. tests/unit/test_received_headers.py
    compares those checks with h2's on generated blocks. *Inbound normalisation* only joins
    ``cookie`` fields (RFC 9113 §8.2.3); grpcio and grpc-go hand them to the application one by
    one, and so does minigrpc.

    *Outbound validation* checks only properties of header lists that minigrpc builds itself:
    ``te: trailers`` and no connection-specific field (application metadata may not use those
    keys, :func:`minigrpc.wire.is_reserved_key`), pseudo-headers first and valid for a request or
    a response (fixed in ``request_headers`` and the server's response builders), ``:authority``
    present and ``:path`` non-empty (checked per call, :func:`minigrpc.headers.malformed_path`).
    tests/unit/test_status_and_http2.py sends what our builders produce through a validating
    H2Connection too and compares the bytes.

    *Outbound normalisation* changes bytes: it strips surrounding whitespace from values
    (RFC 9113 §8.2.1) and sends ``authorization`` and short ``cookie`` values as never-indexed
    (RFC 7541 §7.1.3), keeping credentials out of HPACK tables.  Both sides apply the same rules
    to every block they send themselves (:func:`minigrpc.headers.sendable`,
    :func:`~minigrpc.headers.outbound_fields`, which the one-shot client's own HPACK encoder
    uses too): h2's version runs a chain of generators over every field of every block, which
    on a warm connection, where the block's encoding is remembered
    (:mod:`minigrpc.header_memo`), was most of the cost of sending the headers; ours passes a
    block that needs nothing, as nearly every block a server sends, through unchanged.
    """
    import h2.config  # h2 is loaded where a connection is built, not by the frame-level parts

    return h2.config.H2Configuration(
        client_side=client_side,
        header_encoding=None,
        validate_outbound_headers=False,
        validate_inbound_headers=False,
        normalize_inbound_headers=False,
        normalize_outbound_headers=False,
    )


def start_connection(
    conn: "h2.connection.H2Connection",
    *,
    stream_window: int = DEFAULT_STREAM_WINDOW,
    connection_window: int = DEFAULT_CONNECTION_WINDOW,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    max_concurrent_streams: Optional[int] = None,
    max_header_list_size: int = CONNECTION_MAX_HEADER_LIST_SIZE,
) -> None:
    """Queue the preface, one SETTINGS frame with our values and the connection WINDOW_UPDATE.

    h2's own ``initiate_connection()`` advertises its defaults, and ``update_settings()`` would
    then need a second SETTINGS frame that takes effect only on the peer's ACK. Instead our values
    become h2's initial local settings, so the first (and only) SETTINGS frame states them (RFC 9113
    §3.4, §6.5). The three places where h2 copied its defaults at construction are brought in line
    in this one function, which is what docs/h2-notes.md, "Settings", warns about: the inbound
    frame-size limit and the HPACK decoder's header-list limit. Accepting our advertised values
    before the peer's ACK is always safe: it cannot send more before it has read our SETTINGS.
    SETTINGS cannot change the connection window, hence the WINDOW_UPDATE on stream 0 (RFC 9113
    §6.9.2).
    """
    import h2.settings  # here, so that the frame-level parts of this module load without h2's
    # connection state machine (the one-shot client needs only those)

    values: Dict[h2.settings.SettingCodes, int] = {
        h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: stream_window,
        h2.settings.SettingCodes.MAX_FRAME_SIZE: max_frame_size,
        h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: max_header_list_size,
    }
    client_side = bool(conn.config.client_side)
    if client_side:
        values[h2.settings.SettingCodes.ENABLE_PUSH] = 0
    if max_concurrent_streams is not None:
        values[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = max_concurrent_streams
    conn.local_settings = h2.settings.Settings(client=client_side, initial_values=values)
    conn.max_inbound_frame_size = max_frame_size
    conn.decoder.max_header_list_size = max_header_list_size
    conn.initiate_connection()
    increment = connection_window - conn.inbound_flow_control_window
    if increment > 0:
        conn.increment_flow_control_window(increment)


class PrefaceError(FrameError):
    """The first bytes from a client are not the HTTP/2 connection preface (RFC 9113 §3.4)."""


class ServerPrefaceError(FrameError):
    """The server's first frame is not SETTINGS (its connection preface, RFC 9113 §3.4).

    A peer that is not HTTP/2 at all (``HTTP/1.1 400 ...`` reads as a 4.7 MB frame header) is
    caught here on its first 9 bytes, instead of leaving a call waiting for a body that never
    comes.
    """


class FrameSizeError(FrameError):
    """A frame header announced more than the MAX_FRAME_SIZE we advertised (RFC 9113 §4.2).

    Raised as soon as the 9-byte header is in, before a byte of the body is buffered: h2 checks
    the length only once the whole body has arrived, so a peer announcing 16 MiB would make us
    hold up to 16 MiB and keep the connection open while waiting for it. It is a connection
    error, answered with GOAWAY(FRAME_SIZE_ERROR) (RFC 9113 §4.2, §5.4.1).
    """

    error_code = FRAME_SIZE_ERROR

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"frame too large ({length} > {limit} bytes, FRAME_SIZE_ERROR)")
        self.length = length
        self.limit = limit


class AllowanceExceeded(FrameError):
    """A read carries more frames that do no work than the caller's allowance
    (:attr:`FrameSplitter.allowance`): a flood, answered with GOAWAY(ENHANCE_YOUR_CALM)
    (RFC 9113 §10.5). ``frame_type`` is the type of the frame past the allowance, or None for an
    empty DATA or CONTINUATION frame."""

    error_code = ENHANCE_YOUR_CALM

    def __init__(self, frame_type: Optional[int]) -> None:
        super().__init__("a flood of frames that do no work (ENHANCE_YOUR_CALM)")
        self.frame_type = frame_type


class HeaderBlockTooLarge(FrameError):
    """HEADERS/PUSH_PROMISE plus CONTINUATION frames grew past the limit before END_HEADERS.

    h2 collects a whole header block (up to 64 frames of our MAX_FRAME_SIZE) before it decodes
    and size-checks it; failing on the encoded size as it grows stops a CONTINUATION flood
    (CVE-2024-27316) without buffering it.  The answer is GOAWAY(ENHANCE_YOUR_CALM).
    """

    error_code = ENHANCE_YOUR_CALM


class FrameSplitter:
    """Walk the 9-byte frame headers of an inbound byte stream before h2 sees the bytes.

    Only the frame headers are read (RFC 9113 §4.1: 24-bit length, type, flags, stream id);
    bodies pass through untouched and partial frames are handed on to h2, which buffers them.
    In the common case a whole ``recv()`` therefore reaches h2 in one ``receive_data()`` call;
    a GOAWAY frame is cut out into a chunk of its own, so the caller can handle
    ``ConnectionTerminated`` (and :func:`reopen_after_goaway`) before h2 sees the next frame,
    and can collect what h2 queued for the frames before it (ACKs, WINDOW_UPDATEs): h2 empties
    its output buffer when it receives a GOAWAY.  On the client the server's first frame (its
    SETTINGS, the server preface of RFC 9113 §3.4) ends a chunk too: h2 reports nothing for a
    chunk it raises on, so without the cut a broken frame that arrived in the same ``recv()``
    as the SETTINGS would hide that the preface had been read, and the error's text (grpc-go's
    "error reading server preface" or "error reading from server") would depend on how the
    kernel happened to split the bytes.

    Since every header is parsed here anyway, the checks h2 makes too late happen here, at the
    cost of one comparison per frame:

    * ``expect_preface=True`` (server side): the 24-byte client preface is checked first, so that
      garbage is rejected before h2 is involved (:class:`PrefaceError`).
    * ``expect_settings_first=True`` (client side): the server's first frame must be a well-formed
      SETTINGS frame (:class:`ServerPrefaceError`).
    * ``max_frame_size``: the MAX_FRAME_SIZE the caller advertised; a header announcing more
      raises :class:`FrameSizeError` at once (RFC 9113 §4.2).
    * ``max_header_block``: the largest encoded header block (HEADERS or PUSH_PROMISE plus its
      CONTINUATION frames, padding included) accepted before END_HEADERS
      (:class:`HeaderBlockTooLarge`).

    With ``merge_data_frames=True`` (and a ``max_frame_size``), consecutive whole DATA frames of
    one stream in one read reach h2 as one frame (:class:`_DataFrameMerger`): h2's cost is per
    frame, and peers send large messages as many small frames.

    With ``take_connection_frames=True`` as well, well-formed PING frames (RFC 9113 §6.7, not
    ACKs) and WINDOW_UPDATE frames on stream 0 (RFC 9113 §6.9) that lie whole in the read never
    reach h2: their opaque data goes to :attr:`pings` and their increments are added up in
    :attr:`connection_credit`, for the caller to answer and apply after the read.  grpc-go's and
    grpcio's clients send both with every response they read (their BDP estimate and the
    connection window), so with one call at a time on a connection they are half the frames of
    a call, and h2's cost is per frame.  Anything unusual (a wrong length, a stream id, a zero
    increment, a frame inside a header block, where RFC 9113 §6.10 allows only CONTINUATION)
    still goes to h2, which answers it as the RFC requires.

    After any of these errors the connection is broken and the splitter must not be fed again.
    """

    __slots__ = (
        "_block_bytes",
        "_block_open",
        "_ends_chunk",
        "_expect_settings",
        "_header",
        "_held",
        "_max_block",
        "_max_frame",
        "_merger",
        "_preface_left",
        "_remaining",
        "allowance",
        "connection_credit",
        "control_frames",
        "empty_frames",
        "pass_limit",
        "pings",
    )

    def __init__(
        self,
        expect_preface: bool = False,
        max_frame_size: Optional[int] = None,
        max_header_block: Optional[int] = None,
        expect_settings_first: bool = False,
        merge_data_frames: bool = False,
        take_connection_frames: bool = False,
    ) -> None:
        self._header = b""
        self._merger = (
            _DataFrameMerger(max_frame_size)
            if merge_data_frames and max_frame_size is not None
            else None
        )
        #: The opaque data of the PINGs taken out of the reads (``take_connection_frames``),
        #: in order, or None; the caller answers and clears them.
        self.pings: Optional[List[bytes]] = (
            [] if take_connection_frames and self._merger is not None else None
        )
        #: The sum of the increments of the WINDOW_UPDATEs on stream 0 taken out of the reads;
        #: the caller applies it and resets it.
        self.connection_credit = 0
        #: A header block has begun and not ended (END_HEADERS): only CONTINUATION may follow.
        self._block_open = False
        self._expect_settings = expect_settings_first
        self._remaining = 0
        self._ends_chunk = False
        self._preface_left = len(CLIENT_PREFACE) if expect_preface else 0
        self._max_frame = max_frame_size
        self._max_block = max_header_block
        self._block_bytes = 0
        #: Frames seen that carry nothing and end nothing (an empty DATA frame without
        #: END_STREAM, an empty CONTINUATION without END_HEADERS): the caller counts and resets
        #: it, since h2 never sees most of them (joined DATA frames, header blocks).
        self.empty_frames = 0
        #: Frames that ask for no work of the application, by type (:data:`COUNTED_FRAMES`),
        #: counted before h2 decodes the read that carries them; the caller takes and clears
        #: it. A flood read holds thousands of them (a rapid reset: HEADERS + RST_STREAM
        #: pairs), and decoding them all before the flood is noticed is the work the attack
        #: wants the server to do (RFC 9113 §10.5).
        self.control_frames: Dict[int, int] = {}
        #: How many more such frames (empty ones included) the caller will accept, or None.
        #: Past it the read is a flood whatever follows, and :meth:`feed` stops walking it and
        #: raises :class:`AllowanceExceeded`: walking a read of 17-byte PINGs to its end would
        #: be the bulk of what a flood costs the server.
        self.allowance: Optional[int] = None
        #: What one :meth:`feed` may hand on, in frames, each counting one more per KiB of
        #: body; or None. What lies past it waits, whole frames only, in :attr:`held`, for the
        #: next call (with no new data, or with data that follows it): the caller's way to
        #: bound what one connection's read costs it before it turns to other connections.
        self.pass_limit: Optional[int] = None
        self._held = b""

    @property
    def held(self) -> bool:
        """Input is waiting past :attr:`pass_limit` (feed again, new data or none)."""
        return bool(self._held)

    def feed(self, data: bytes) -> List[bytes]:
        """Return ``data`` as a list of chunks: each GOAWAY frame in a chunk of its own, and a
        chunk ending with the server's first SETTINGS frame (``expect_settings_first``).

        Raises :class:`PrefaceError`, :class:`ServerPrefaceError`, :class:`FrameSizeError`,
        :class:`HeaderBlockTooLarge` or :class:`AllowanceExceeded`.
        """
        cuts: List[int] = []  # offsets after which a chunk ends
        if self._held:
            data, self._held = self._held + data, b""
        merger = self._merger
        pos = 0
        size = len(data)
        left = self.allowance
        budget = self.pass_limit
        if self._preface_left:
            seen = len(CLIENT_PREFACE) - self._preface_left
            take = min(self._preface_left, size)
            if data[:take] != CLIENT_PREFACE[seen : seen + take]:
                raise PrefaceError("invalid HTTP/2 connection preface")
            self._preface_left -= take
            pos = take
        while pos < size:
            if self._remaining:
                take = min(self._remaining, size - pos)
                pos += take
                self._remaining -= take
                if not self._remaining and self._ends_chunk:
                    cuts.append(pos)
                    self._ends_chunk = False
                continue
            if budget is not None and not self._header:
                if budget <= 0:  # at a frame boundary, past the pass limit: the rest waits
                    self._held = data[pos:]
                    data = data[:pos]
                    size = pos
                    break
                if size - pos >= 3:
                    budget -= 1 + (data[pos] << 6 | data[pos + 1] >> 2)  # length >> 10
            start = -1  # where the frame starts when its header is read in place
            if not self._header and size - pos >= frames.FRAME_HEADER_LENGTH:
                # The whole header is in this read (the common case): read it in place.
                start = pos
                take = frames.FRAME_HEADER_LENGTH
                length = data[pos] << 16 | data[pos + 1] << 8 | data[pos + 2]
                frame_type, flags = data[pos + 3], data[pos + 4]
                on_connection = not (
                    data[pos + 5] & 0x7F or data[pos + 6] or data[pos + 7] or data[pos + 8]
                )
                header = data[pos : pos + take] if self._expect_settings else b""
                if merger is not None:
                    if frame_type == frames.DATA and pos + take + length <= size:
                        merger.add(data, pos, length, flags)
                    elif merger.run:
                        merger.end_run()
                pos += take
            else:
                take = min(frames.FRAME_HEADER_LENGTH - len(self._header), size - pos)
                self._header += data[pos : pos + take]
                pos += take
                if len(self._header) < frames.FRAME_HEADER_LENGTH:
                    break
                header, self._header = self._header, b""
                length = int.from_bytes(header[:3], "big")
                frame_type, flags = header[3], header[4]
                on_connection = not int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
            ends_chunk = frame_type == frames.GOAWAY
            if self._expect_settings:
                self._expect_settings = False
                if frame_type != frames.SETTINGS or length % 6:
                    raise ServerPrefaceError(
                        f"first frame received is not a SETTINGS frame ({header!r})"
                    )
                ends_chunk = True
            if self._max_frame is not None and length > self._max_frame:
                raise FrameSizeError(length, self._max_frame)
            if not length and (
                (frame_type == frames.DATA and not flags & frames.END_STREAM)
                or (frame_type == frames.CONTINUATION and not flags & frames.END_HEADERS)
            ):
                self.empty_frames += 1
                if left is not None:
                    left -= 1
                    if left < 0:
                        raise AllowanceExceeded(None)
            elif frame_type in COUNTED_FRAMES and not (
                flags & frames.ACK and frame_type in (frames.PING, frames.SETTINGS)
            ) and (frame_type != frames.WINDOW_UPDATE or on_connection):
                counts = self.control_frames
                counts[frame_type] = counts.get(frame_type, 0) + 1
                if left is not None:
                    left -= 1
                    if left < 0:
                        raise AllowanceExceeded(frame_type)
            if frame_type in _HEADER_BLOCK_TYPES:
                self._block_open = not flags & frames.END_HEADERS
                if self._max_block is not None:
                    self._count_header_block(frame_type, flags, length)
            elif (
                start >= 0
                and on_connection
                and self.pings is not None
                and not self._block_open
                and pos + length <= size
                and self._take(data, start, frame_type, flags, length)
            ):
                pos += length
                continue
            self._remaining = length
            self._ends_chunk = ends_chunk
            if ends_chunk and pos - take > (cuts[-1] if cuts else 0):
                cuts.append(pos - take)  # the frames before this one
            if not length and ends_chunk:
                cuts.append(pos)
                self._ends_chunk = False
        if merger is not None:
            merger.end_run()
            if merger.runs:
                return merger.rebuild(data, _chunk_bounds(cuts, size))
        if not cuts:
            return [data] if size else []  # the common case, without slicing
        bounds = _chunk_bounds(cuts, size)
        return [data[start:end] for start, end in zip(bounds, bounds[1:])]

    def _take(self, data: bytes, start: int, frame_type: int, flags: int, length: int) -> bool:
        """Take a whole frame on stream 0 out of the read if it is a well-formed PING or
        WINDOW_UPDATE (see the class docstring): True when it was taken."""
        body = start + frames.FRAME_HEADER_LENGTH
        if frame_type == frames.PING:
            if length != 8 or flags & frames.ACK:
                return False
            assert self.pings is not None
            self.pings.append(data[body : body + 8])
        elif frame_type == frames.WINDOW_UPDATE:
            if length != 4:
                return False
            increment = int.from_bytes(data[body : body + 4], "big") & 0x7FFFFFFF
            if not increment:
                return False  # a connection error h2 reports (RFC 9113 §6.9)
            self.connection_credit += increment
        else:
            return False
        assert self._merger is not None
        self._merger.runs.append((start, body + length, b"", []))  # replaced by nothing
        return True

    def _count_header_block(self, frame_type: int, flags: int, length: int) -> None:
        if frame_type != frames.CONTINUATION:
            self._block_bytes = 0  # HEADERS or PUSH_PROMISE start a new block
        self._block_bytes += length
        limit = self._max_block
        if limit is not None and self._block_bytes > limit:
            raise HeaderBlockTooLarge(
                f"a header block exceeds {limit} bytes before END_HEADERS (CONTINUATION flood)"
            )
        if flags & frames.END_HEADERS:
            self._block_bytes = 0


def _chunk_bounds(cuts: List[int], size: int) -> List[int]:
    """Offsets such that chunk ``i`` is ``data[bounds[i]:bounds[i + 1]]``, from the offsets
    after which :meth:`FrameSplitter.feed` ends a chunk."""
    bounds = [0, *cuts]
    if bounds[-1] < size:
        bounds.append(size)
    return bounds


class _DataFrameMerger:
    """Join runs of whole DATA frames of one stream, in one read, into one frame before h2.

    grpc-go sends a large message as 16 KiB DATA frames, whatever MAX_FRAME_SIZE the receiver
    advertised, and h2 has a fixed cost for each frame it parses (docs/h2-notes.md, "Per-frame
    cost"): a 4 MiB message is 256 frames. The boundaries between DATA frames mean nothing
    (RFC 9113 §6.1: the payload is a sequence of bytes; flow control counts bytes, RFC 9113
    §6.9), so unpadded frames that follow one another on one stream can reach h2 as one frame
    carrying the same bytes, with the last frame's END_STREAM, as long as it fits the
    MAX_FRAME_SIZE we advertised (h2's inbound limit). h2 then sees the same stream states, the
    same flow-controlled length and the same bytes; only the number of ``DataReceived`` events
    changes. Padded frames are left alone (their padding counts against the window), and so
    is any frame not wholly inside the read: only whole frames are joined, so what h2 buffers
    is unchanged.

    The frame trace reads the bytes from the socket, before this, so it still shows the frames
    as they were sent.
    """

    __slots__ = ("_length", "_stream_id", "limit", "run", "runs")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        #: The runs of two or more frames found in this read: their start and end offsets, the
        #: header of the merged frame and the offsets of each frame's payload.
        self.runs: List[Tuple[int, int, bytes, List[Tuple[int, int]]]] = []
        #: The current run: (header offset, payload length) of each frame.
        self.run: List[Tuple[int, int]] = []
        self._stream_id = 0
        self._length = 0

    def add(self, data: bytes, pos: int, length: int, flags: int) -> None:
        """A DATA frame whose header starts at ``pos`` and whose payload is all in ``data``."""
        if flags & frames.PADDED:
            self.end_run()
            return
        stream_id = int.from_bytes(data[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
        if self.run and (stream_id != self._stream_id or self._length + length > self.limit):
            self.end_run()
        if not self.run:
            self._stream_id = stream_id
            self._length = 0
        self.run.append((pos, length))
        self._length += length
        if flags & frames.END_STREAM:
            self.end_run(end_stream=True)

    def end_run(self, end_stream: bool = False) -> None:
        """The current run is over: keep it if it has more than one frame."""
        run = self.run
        if not run:
            return
        self.run = []
        if len(run) < 2:
            return
        length = self._length
        flags = frames.END_STREAM if end_stream else 0
        header = bytes((length >> 16, (length >> 8) & 0xFF, length & 0xFF, frames.DATA, flags))
        header += self._stream_id.to_bytes(4, "big")
        header_length = frames.FRAME_HEADER_LENGTH
        bodies = [(pos + header_length, pos + header_length + n) for pos, n in run]
        self.runs.append((run[0][0], bodies[-1][1], header, bodies))

    def rebuild(self, data: bytes, bounds: List[int]) -> List[bytes]:
        """The chunks ``data[bounds[i]:bounds[i + 1]]``, with each run replaced by its merged
        frame (a frame taken out is a run replaced by nothing).

        A run never spans a chunk boundary: chunks end next to GOAWAY and SETTINGS frames, which
        end runs.
        """
        runs, self.runs = self.runs, []
        view = memoryview(data)
        chunks: List[bytes] = []
        run_index = 0
        for start, end in zip(bounds, bounds[1:]):
            parts: List[Union[bytes, memoryview]] = []
            while run_index < len(runs) and runs[run_index][0] < end:
                run_start, run_end, header, bodies = runs[run_index]
                parts.append(view[start:run_start])
                parts.append(header)
                parts.extend(view[body_start:body_end] for body_start, body_end in bodies)
                start = run_end
                run_index += 1
            if not parts:
                chunks.append(data[start:end])
                continue
            parts.append(view[start:end])
            chunk = b"".join(parts)
            if chunk:  # empty when it held only frames taken out (FrameSplitter._take)
                chunks.append(chunk)
        return chunks


def _data_frame_body_repr(frame: "hyperframe.frame.DataFrame") -> str:
    """hyperframe's text for a DATA frame's body, without copying the body twice.

    h2 logs ``repr(frame)`` for every frame it receives, and builds that string even when
    logging is off. For DATA, hyperframe's generic version serializes the whole body (a copy)
    and hex-encodes all of it (a copy twice the size) to keep 20 characters: about 30% of a
    client's CPU when it receives 4 MiB messages. This gives the same string from the first ten
    body bytes (RFC 9113 §6.1: [pad length] data [padding]); tests compare both on many frames.
    """
    padded = "PADDED" in frame.flags
    pad_length = frame.pad_length if padded else 0
    length = len(frame.data) + (pad_length + 1 if padded else 0)
    if not length:
        return "None"
    head = (bytes((pad_length,)) if padded else b"") + bytes(frame.data[:10]) + bytes(10)
    return "<hex:" + head[: min(length, 10)].hex() + ("..." if length > 10 else "") + ">"





def _data_frame_serialize(frame: "hyperframe.frame.DataFrame") -> bytes:
    """hyperframe's bytes for a DATA frame, copying the payload once instead of twice.

    hyperframe joins the body (pad length, data, padding) into one bytes object, then adds the
    9-byte header in front of it: two copies of every payload byte we send, the largest cost of
    sending a 4 MiB message after the socket itself (docs/benchmarks.md). This builds the same bytes
    (RFC 9113 §4.1 header, §6.1 body) in one join, and accepts a ``memoryview`` of the payload
    without first turning it into bytes. Like hyperframe, it records ``body_len``. A hypothesis
    test compares it with hyperframe's own ``serialize`` on every h2/hyperframe in tox.
    """
    padding_data = frame.serialize_padding_data()
    padding = b"\0" * frame.pad_length
    body_len = len(padding_data) + len(frame.data) + len(padding)
    frame.body_len = body_len
    flags = 0
    for flag, bit in frame.defined_flags:
        if flag in frame.flags:
            flags |= bit
    # RFC 9113 §4.1: length (24 bits), type, flags, R bit and stream id (31 bits), one integer.
    header = (
        (body_len & 0xFFFFFF) << 48 | frame.type << 40 | flags << 32 | frame.stream_id & 0x7FFFFFFF
    ).to_bytes(9, "big")
    return b"".join((header, padding_data, frame.data, padding))


def speed_up_data_frames() -> None:
    """Replace two methods of :class:`hyperframe.frame.DataFrame`, for the whole process.

    h2 builds and parses DATA frames with hyperframe's class, so the only place to change how
    they are printed and serialized is the class itself.  The replacements
    (:func:`_data_frame_body_repr`, :func:`_data_frame_serialize`) produce exactly the text and
    bytes of hyperframe's own methods (tests compare them on every hyperframe version tox
    installs), copying a payload once instead of three times.  Every other user of hyperframe
    in the process therefore sees the same results, only faster.  minigrpc calls this when it
    creates its first connection; calling it again does nothing.
    """
    import hyperframe.frame  # h2 has loaded it already; the one-shot client never does

    frame_class = hyperframe.frame.DataFrame
    if frame_class.serialize is not _data_frame_serialize:
        frame_class._body_repr = _data_frame_body_repr  # type: ignore[method-assign,assignment]
        frame_class.serialize = _data_frame_serialize  # type: ignore[method-assign,assignment]


def goaway_frame(last_stream_id: int, error_code: int = 0, debug_data: bytes = b"") -> bytes:
    """A serialized GOAWAY frame (RFC 9113 §6.8), for the frames minigrpc writes past h2.

    h2 moves its connection to CLOSED as soon as *it* sends a GOAWAY, after which it refuses to
    send the trailers of the very calls that the GOAWAY lets finish (python-hyper/h2#1181).
    A server draining gracefully therefore writes its GOAWAY frames itself and keeps h2 open.
    """
    return frames.goaway_frame(last_stream_id, error_code, debug_data)


def reopen_after_goaway(conn: "h2.connection.H2Connection") -> None:
    """Let h2 keep processing frames for streams a GOAWAY allows to finish.

    RFC 9113 §6.8: streams at or below the GOAWAY's last-stream-id may still complete. h2 instead
    moves its connection state machine to CLOSED on any GOAWAY and then raises on every frame but
    another GOAWAY (python-hyper/h2#1181, open since 2019). We put the state machine back to OPEN;
    the caller must never open a new stream on this connection afterwards. This touches h2 internals
    (``state_machine.state``), which is why it lives in exactly this one function, tested on every
    h2 version setup.cfg admits (docs/h2-notes.md, "GOAWAY").
    """
    import h2.connection

    state_machine = conn.state_machine
    open_state = (
        h2.connection.ConnectionState.CLIENT_OPEN
        if conn.config.client_side
        else h2.connection.ConnectionState.SERVER_OPEN
    )
    if state_machine.state == h2.connection.ConnectionState.CLOSED:
        state_machine.state = open_state
