"""h2's server connection, adapted where its defaults would fail a whole connection for one
stream's fault (docs/h2-notes.md, "Streams" and "Header lists").

These are the only places the server leans on h2 behaviour beyond its documented API, kept
apart so that an h2 upgrade has one module to check (``tests/unit/test_server_protocol.py``
covers both adaptations through the connection).
"""

import h2.connection
import hpack

from . import header_memo

__all__ = ["HEADER_BLOCK_SLACK", "HPACK_LIMIT_FACTOR", "FloorDecoder", "ServerH2Connection"]

#: How much larger than the advertised per-call limit h2's own header-list limit is kept.
HPACK_LIMIT_FACTOR = 4


class FloorDecoder(header_memo.MemoDecoder):
    """An HPACK decoder whose header-list limit never drops below a floor.

    h2 copies the MAX_HEADER_LIST_SIZE we advertise into its decoder once the client ACKs our
    SETTINGS, and a header block over it then kills the whole connection with
    GOAWAY(ENHANCE_YOUR_CALM) (docs/h2-notes.md, "Header lists").  We advertise the per-call limit
    (16 KiB) so well-behaved clients know it, but enforce it per call with a gRPC status; the
    decoder keeps a higher floor so that one oversized request only fails its own call.

    It remembers the small blocks it decoded (:mod:`minigrpc.header_memo`): a client sends the
    same request block, a few index bytes once warm, for every call of a method.  A larger block
    is decoded afresh, so what a client can make the server keep stays small (its memory is
    not charged to the connection's budget).
    """

    def __init__(self, floor: int, template: hpack.Decoder) -> None:
        self._floor = floor
        super().__init__(template.max_header_list_size, template.max_allowed_table_size)

    @property
    def max_header_list_size(self) -> int:
        return self._max_header_list_size

    @max_header_list_size.setter
    def max_header_list_size(self, value: int) -> None:
        self._max_header_list_size = max(value, self._floor)

    #: The largest request header block a connection remembers the decoding of. A warm
    #: client's block is a byte or two per field; each byte can stand for one field, so this
    #: also bounds what one remembered block holds. (A connection's first blocks are the
    #: opening memory's, :mod:`minigrpc.header_memo`.)
    remember_limit = 64


class ServerH2Connection(h2.connection.H2Connection):
    """h2's connection with its inbound stream limit left to us (docs/h2-notes.md, "Streams").

    When a client opens one stream more than the MAX_CONCURRENT_STREAMS h2 has advertised, h2
    raises ``TooManyStreamsError`` and answers GOAWAY(PROTOCOL_ERROR), failing every call on the
    connection, although the client merely raced a stream end.  gRPC servers refuse just that
    stream with RST_STREAM(REFUSED_STREAM), which clients retry.  h2 checks the limit against
    this property, so it reports no open streams;
    :class:`~minigrpc.server_protocol.ServerConnection` counts and refuses itself.  The
    property still runs h2's own bookkeeping, which forgets closed streams.
    """

    @property
    def open_inbound_streams(self) -> int:
        super().open_inbound_streams  # noqa: B018 - run h2's closed-stream cleanup
        return 0


#: Room for padding (at most 256 bytes per frame) above the decoder limit.
HEADER_BLOCK_SLACK = 64 * 256
