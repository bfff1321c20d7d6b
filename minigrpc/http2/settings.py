"""The values minigrpc's HTTP/2 connections advertise and assume: preface, SETTINGS, windows.

Both ends (:mod:`minigrpc.http2.client`, :mod:`minigrpc.http2.server`, on
:mod:`minigrpc.http2.connection`) and the one-shot client read their numbers here: the client
preface (RFC 9113 §3.4), the values we advertise in SETTINGS and in the connection
WINDOW_UPDATE (RFC 9113 §6.5.2, §6.9.2), and the limits on header lists and header blocks.
"""


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

