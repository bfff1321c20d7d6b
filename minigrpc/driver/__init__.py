"""What the blocking and asyncio APIs share without doing I/O: decisions, options, API shapes.

Both transports carry out what is decided here: when a client call is tried again
(:mod:`.attempts`), what a server does with each call (:mod:`.server_dispatch`,
:mod:`.server_timers`), the server's options (:mod:`.server_options`), grpcio's abstract classes
and handler types (:mod:`.interfaces`, :mod:`.handlers`), the connectivity states
(:mod:`.connectivity`), and minigrpc's loggers (:mod:`.logs`).  Nothing here opens a socket,
starts a thread or awaits.

It may import: :mod:`minigrpc.protocol` and :mod:`minigrpc.http2`.
"""
