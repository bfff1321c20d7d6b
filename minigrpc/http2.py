"""HTTP/2 pieces both ends share: our SETTINGS values, read sizes, frame-level errors.

Both connections are minigrpc's own (:mod:`minigrpc.connection_core`, with
:mod:`minigrpc.client_http2` and :mod:`minigrpc.server_http2` on top; the one-shot client's
:mod:`minigrpc.oneshot_protocol`). This module holds what they have in common and what must
load without them:

* the client preface (RFC 9113 §3.4) and the values we advertise in SETTINGS and in the
  connection WINDOW_UPDATE (RFC 9113 §6.5.2, §6.9.2), with the per-call header-list limit of
  PROTOCOL-HTTP2.md;
* :func:`next_read_size` and :class:`ReadBuffers`: how much each ``recv()`` asks for, and what
  an asyncio connection reads into;
* the frame-level errors (:class:`PrefaceError`, :class:`ServerPrefaceError`,
  :class:`FrameSizeError`, :class:`HeaderBlockTooLarge`), each a connection error with the code
  its GOAWAY carries (RFC 9113 §5.4.1);
* :class:`FrameSplitter`, the one-shot client's check of the frame headers it reads.
"""

from typing import Optional

from . import frames
from .frames import FrameError
from .status import ENHANCE_YOUR_CALM, FRAME_SIZE_ERROR

#: The client connection preface (RFC 9113 §3.4).
CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

#: Per-stream receive window we advertise (grpcio and grpclib use 4 MiB; docs/wire-rules.md).
DEFAULT_STREAM_WINDOW = 4 * 1024 * 1024
#: Connection receive window. Data is acknowledged as soon as it is buffered, so this only needs
#: to cover what is in flight between two reads, not every stream's full window.
DEFAULT_CONNECTION_WINDOW = 16 * 1024 * 1024
#: Largest frame we accept. Python pays per frame, so fewer, larger frames are cheaper.
DEFAULT_MAX_FRAME_SIZE = 1024 * 1024
#: The header-list size the connection's HPACK decoder accepts (RFC 9113 §6.5.2). A larger list
#: fails the whole connection, so it is kept well above the per-call limit that the call layers
#: enforce themselves, per stream.
CONNECTION_MAX_HEADER_LIST_SIZE = 64 * 1024
#: An encoded header block may not grow past this before END_HEADERS: the decoded limit we
#: advertise, plus room for padding and for literals that encode longer than they decode.
MAX_HEADER_BLOCK = 2 * CONNECTION_MAX_HEADER_LIST_SIZE
#: Per-call header-list limit: PROTOCOL-HTTP2.md suggests 8 KiB; grpcio advertises 16 KiB.
CALL_MAX_HEADER_LIST_SIZE = 16 * 1024
#: Until the server's SETTINGS arrive, the client opens at most this many streams: its
#: MAX_CONCURRENT_STREAMS is unknown (RFC 9113 §6.5.2 sets no initial limit) and grpc-go
#: assumes 100.
DEFAULT_PEER_MAX_CONCURRENT_STREAMS = 100

#: ``recv()`` sizes, client and server (measured in docs/benchmarks.md). CPython allocates the
#: whole size before the kernel fills it, and glibc serves anything above 128 KiB with mmap, then
#: mremap and munmap when the bytes object shrinks and dies: three system calls and a page fault
#: for every read of a 300-byte response, about 35 µs per call. Reads start small; a read that
#: fills ``SMALL_READ`` means the peer is streaming, and the next reads take ``LARGE_READ``, so a
#: large message is still a handful of reads (and fewer partial frames to buffer).
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

    Raised as soon as the 9-byte header is in, before a byte of the body is buffered: checked
    only once the whole body had arrived, a peer announcing 16 MiB would make us hold up to
    16 MiB and keep the connection open while waiting for it. It is a connection error,
    answered with GOAWAY(FRAME_SIZE_ERROR) (RFC 9113 §4.2, §5.4.1).
    """

    error_code = FRAME_SIZE_ERROR

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"frame too large ({length} > {limit} bytes, FRAME_SIZE_ERROR)")
        self.length = length
        self.limit = limit


class HeaderBlockTooLarge(FrameError):
    """HEADERS/PUSH_PROMISE plus CONTINUATION frames grew past the limit before END_HEADERS.

    Failing on the encoded size as the block grows, before it is decoded, stops a CONTINUATION
    flood (CVE-2024-27316) without buffering it.  The answer is GOAWAY(ENHANCE_YOUR_CALM)
    (RFC 9113 §10.5).
    """

    error_code = ENHANCE_YOUR_CALM


#: Frame types that carry a field block: HEADERS, PUSH_PROMISE, CONTINUATION (RFC 9113 §4.3).
_HEADER_BLOCK_TYPES = (frames.HEADERS, frames.PUSH_PROMISE, frames.CONTINUATION)


class FrameSplitter:
    """The one-shot client's check of the 9-byte frame headers it reads (RFC 9113 §4.1).

    :mod:`minigrpc.oneshot_protocol` feeds every read here before it parses the frames, so that
    what it must refuse is refused on a frame's header, before a byte of its body is buffered:

    * ``expect_settings_first=True``: the server's first frame must be a well-formed SETTINGS
      frame, its connection preface (RFC 9113 §3.4; :class:`ServerPrefaceError`). A peer that is
      not HTTP/2 at all (``HTTP/1.1 400 ...``) is caught on its first 9 bytes.
    * ``max_frame_size``: the MAX_FRAME_SIZE the caller advertised; a header announcing more
      raises :class:`FrameSizeError` at once (RFC 9113 §4.2).
    * ``max_header_block``: the largest encoded header block (HEADERS or PUSH_PROMISE plus its
      CONTINUATION frames, padding included) accepted before END_HEADERS
      (:class:`HeaderBlockTooLarge`).

    Only the headers are read; bodies are skipped, and a header split over reads is completed
    by the next. The full connections make the same checks in their own frame loop
    (:mod:`minigrpc.connection_core`). After any of these errors the connection is broken and
    the splitter must not be fed again.
    """

    __slots__ = (
        "_block_bytes",
        "_expect_settings",
        "_header",
        "_max_block",
        "_max_frame",
        "_remaining",
    )

    def __init__(
        self,
        max_frame_size: Optional[int] = None,
        max_header_block: Optional[int] = None,
        expect_settings_first: bool = False,
    ) -> None:
        self._header = b""
        self._expect_settings = expect_settings_first
        #: Body bytes of the current frame still to skip.
        self._remaining = 0
        self._max_frame = max_frame_size
        self._max_block = max_header_block
        self._block_bytes = 0

    def feed(self, data: bytes) -> None:
        """Check the frame headers that ``data`` completes.

        Raises :class:`ServerPrefaceError`, :class:`FrameSizeError` or
        :class:`HeaderBlockTooLarge`.
        """
        pos = 0
        size = len(data)
        while pos < size:
            if self._remaining:
                take = min(self._remaining, size - pos)
                pos += take
                self._remaining -= take
                continue
            if not self._header and size - pos >= frames.FRAME_HEADER_LENGTH:
                header = data[pos : pos + frames.FRAME_HEADER_LENGTH]  # the common case
                pos += frames.FRAME_HEADER_LENGTH
            else:
                take = min(frames.FRAME_HEADER_LENGTH - len(self._header), size - pos)
                self._header += data[pos : pos + take]
                pos += take
                if len(self._header) < frames.FRAME_HEADER_LENGTH:
                    break
                header, self._header = self._header, b""
            length = header[0] << 16 | header[1] << 8 | header[2]
            frame_type, flags = header[3], header[4]
            if self._expect_settings:
                self._expect_settings = False
                if frame_type != frames.SETTINGS or length % 6:
                    raise ServerPrefaceError(
                        f"first frame received is not a SETTINGS frame ({header!r})"
                    )
            if self._max_frame is not None and length > self._max_frame:
                raise FrameSizeError(length, self._max_frame)
            if frame_type in _HEADER_BLOCK_TYPES and self._max_block is not None:
                self._count_header_block(frame_type, flags, length)
            self._remaining = length

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
