"""Reading frame headers as they arrive: the checks made on 9 octets, before a body is buffered.

"""

from typing import Optional

from . import frames
from .error_codes import FrameSizeError, HeaderBlockTooLarge, ServerPrefaceError

#: Frame types that carry a field block: HEADERS, PUSH_PROMISE, CONTINUATION (RFC 9113 §4.3).
_HEADER_BLOCK_TYPES = (frames.HEADERS, frames.PUSH_PROMISE, frames.CONTINUATION)


class FrameSplitter:
    """The one-shot client's check of the 9-byte frame headers it reads (RFC 9113 §4.1).

    :mod:`minigrpc.protocol.oneshot_protocol` feeds every read here before it parses the frames, so
    that what it must refuse is refused on a frame's header, before a byte of its body is buffered:

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
    (:mod:`minigrpc.http2.connection`). After any of these errors the connection is broken and
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
