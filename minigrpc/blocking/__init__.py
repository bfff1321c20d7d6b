"""The blocking API and its transport: grpcio's ``grpc`` names on sockets and threads.

The client: the channel and its multi-callables (:mod:`.channel`, :mod:`.multicallables`), the
call objects (:mod:`.call`), interceptors (:mod:`.interceptors`), connectivity callbacks
(:mod:`.connectivity`), and under them the transport (:mod:`.transport`, which carries out the
steps of :mod:`minigrpc.driver.call_steps`) and one connection's reader and writer
(:mod:`.client_connection`).  The server:
:mod:`.server_api` (grpcio's ``server()``), its I/O thread (:mod:`.server_loop`,
:mod:`.server_commands`), which carries out :mod:`minigrpc.driver.server_driver`'s decisions,
the handlers on the executor (:mod:`.server_handlers`, :mod:`.server_call`) and their context
(:mod:`.servicer_context`).  :mod:`minigrpc.aio` is the same for asyncio, file for file.

It may import: :mod:`minigrpc.net`, :mod:`minigrpc.driver`, :mod:`minigrpc.protocol` and
:mod:`minigrpc.http2`.
"""
