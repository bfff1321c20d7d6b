"""What the blocking and asyncio APIs share without doing I/O: decisions, options, API shapes.

Both transports carry out what is decided here.  The client: a channel's target, options,
credentials and compression (:mod:`.channel_core`), a call's start-up and the decoding of its
responses (:mod:`.invocation`), the channel's connections, one per address, and its
connectivity state (:mod:`.subchannel`), and the reconnect and retry loop as steps
(:mod:`.call_steps`) over one call's deadline and backoff (:mod:`.attempts`).  The server: the
orchestration of its calls and connections, written once for both servers
(:mod:`.server_driver`, over each call's state, :mod:`.server_call_state`), what it decides for
each call (:mod:`.server_dispatch`, :mod:`.server_timers`, :mod:`.server_accept`), its options
(:mod:`.server_options`).  Both:
grpcio's abstract classes and handler types (:mod:`.interfaces`, :mod:`.handlers`), the
connectivity states (:mod:`.connectivity`), and minigrpc's loggers (:mod:`.logs`).  Nothing
here opens a socket, starts a thread or awaits.

The decisions of channels that live for days (docs/long-lived-channels.md): the service config
(:mod:`.service_config`), retries and hedging (:mod:`.retries`, :mod:`.hedging`,
:mod:`.backoff`), keepalive (:mod:`.keepalive`), connection age (:mod:`.server_timers`), load
balancing (:mod:`.balancing`), and the table of every grpc argument (:mod:`.channel_args`).

It may import: :mod:`minigrpc.protocol` and :mod:`minigrpc.http2`.
"""
