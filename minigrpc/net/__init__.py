"""The network, shared by both transports: sockets, TLS, read sizes and the frame trace.

Dialling, binding and how much a read asks for (:mod:`.sockets`), a server's ports and accepts
(:mod:`.server_listeners`), TLS on memory buffers with grpcio's credentials (:mod:`.tls`), and
the frame trace of the bytes a socket carries (:mod:`.trace`).  The blocking and asyncio
transports both use these; neither is imported here.

It may import: :mod:`minigrpc.driver`, :mod:`minigrpc.protocol` and :mod:`minigrpc.http2`.
"""
