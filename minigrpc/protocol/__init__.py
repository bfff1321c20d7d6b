"""gRPC over HTTP/2 (gRPC's PROTOCOL-HTTP2.md), sans-IO: messages, header blocks, status, calls.

What gRPC adds on top of an HTTP/2 connection: Length-Prefixed-Messages, compression and
metadata (:mod:`.wire`), the header blocks of a call (:mod:`.headers`), status codes and the
tables that map other things to them (:mod:`.codes`, :mod:`.status`, :mod:`.enums`), target
names (:mod:`.targets`), and the call protocols as state machines: what both sides share
(:mod:`.grpc_connection`), the client's (:mod:`.client_protocol`, :mod:`.client_outcome`), the
one-shot client's (:mod:`.oneshot_protocol`) and the server's (:mod:`.server_protocol` with
:mod:`.server_requests`, :mod:`.server_responses`, :mod:`.server_settings`,
:mod:`.server_events` and :mod:`.memory_budget`).  No sockets, threads or clocks: the callers
pass bytes in and ``now`` where time matters.

It may import: :mod:`minigrpc.http2` (and :mod:`minigrpc._version`, :mod:`minigrpc._records`).
"""
