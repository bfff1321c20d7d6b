"""HTTP/2 (RFC 9113) and HPACK (RFC 7541), sans-IO: bytes in, events and bytes out.

This package knows nothing of gRPC and imports nothing else of minigrpc, so it reads on its own,
beside the RFCs.  A reading order: :mod:`.frames` (the frame codec) and :mod:`.hpack_codec`
(header compression), :mod:`.error_codes`, :mod:`.settings` (what we advertise), :mod:`.reader`
(the checks made on a frame header before its body is buffered), :mod:`.events`, then
:mod:`.connection` (what both ends keep alike: streams, windows, SETTINGS, header blocks) with
its two ends, :mod:`.client` and :mod:`.server`, and :mod:`.flood` (what frames that do no work
may cost a server).

It may import: the standard library only.
"""
