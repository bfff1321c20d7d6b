"""HTTP/2 (RFC 9113) and HPACK (RFC 7541), sans-IO: bytes in, events and bytes out.

This package knows nothing of gRPC and imports nothing else of minigrpc, so it reads on its own,
beside the RFCs.  A reading order:

1. :mod:`.frames`, the wire: error codes (RFC 9113 §7), the preface, frame types, flags and
   SETTINGS parameters, each frame type's payload read and checked (RFC 9113 §6), the frames we
   send, the one frame reader (the checks a frame header allows before its body is buffered,
   RFC 9113 §3.4, §4.2, §6.10) and header-block assembly (RFC 9113 §4.3).
2. :mod:`.hpack_codec`, header compression (RFC 7541).
3. :mod:`.streams`, everything that touches a stream's state: the states of RFC 9113 §5.1 as a
   table of transitions, which identifiers are idle (RFC 9113 §5.1.1), flow-control windows both
   ways (RFC 9113 §6.9), the SETTINGS we advertise and the peer's, checked and applied
   (RFC 9113 §6.5).
4. :mod:`.events`, what a connection reports.
5. :mod:`.connection`, :class:`~.connection.HTTP2Connection`: one handler per frame type,
   carrying out what the parts above decide, for either end; then the two ends it is made into,
   :mod:`.client` and :mod:`.server` (who opens which streams, the preface, what a header block
   means).
6. :mod:`.flood`, what frames that do no work may cost a server (RFC 9113 §10.5).

The one-shot call (:mod:`minigrpc.protocol.oneshot_protocol`) is made of the first three alone.

It may import: the standard library only.
"""
