"""The timed decisions both servers make, with no clock of their own: the caller passes ``now``.

The blocking server (:mod:`minigrpc.blocking.server_loop`, a heap of timers in its selector loop)
and the asyncio server (:mod:`minigrpc.aio.server_loop`, the event loop's ``call_later``) wait in
different ways, but decide alike when a wait is over:

* ``grpc.max_connection_idle_ms``: a connection without calls for that long is drained, and
  only calls count as activity, as in grpc-go's MaxConnectionIdle, so a client that merely
  pings, or sends SETTINGS, cannot keep an unused connection (and its socket) forever
  (:func:`idle_recheck`);
* ``minigrpc.request_stall_timeout_ms``: a call whose request stops arriving before it is
  whole is cancelled with RST_STREAM(CANCEL) (PROTOCOL-HTTP2.md, Errors), its handler never
  run, so a slowloris client cannot hold calls open with a byte now and then
  (:func:`stall_due`, :func:`cancel_stalled`);
* ``stop(grace)``: the calls still running when the grace ends are cancelled, and a later
  ``stop()`` may shorten the grace, never lengthen it, which is grpcio's rule
  (:func:`stop_deadline`);
* how long a drain waits for its PING's ACK, a failed connection for its GOAWAY to be written,
  and a drained one for the client to close its end (the ``*_TIMEOUT`` constants).
"""

from typing import List, Optional

from ..protocol.server_protocol import CallEvent, ServerGrpcConnection

__all__ = [
    "CLOSE_FLUSH_TIMEOUT",
    "DRAIN_PING_TIMEOUT",
    "LINGER_TIMEOUT",
    "cancel_stalled",
    "idle_recheck",
    "stall_due",
    "stop_deadline",
]

#: How long to wait for the ACK of the drain PING before sending the final GOAWAY anyway
#: (grpc-go waits 5 s, grpc-core 20 s; a refused late stream is retried, so shorter is safe).
DRAIN_PING_TIMEOUT = 1.0
#: How long a connection that failed may take to flush its GOAWAY before it is closed anyway.
CLOSE_FLUSH_TIMEOUT = 5.0
#: How long a drained connection waits, write side shut, for the client to close its end.
LINGER_TIMEOUT = 1.0


def idle_recheck(now: float, idle: float, idle_since: float, busy: bool) -> Optional[float]:
    """When to look at a connection's idleness again, or None to drain it now.

    ``idle_since`` is when the connection last started or ended a call (or was accepted);
    ``busy`` says it has calls now (the server's, or streams the protocol still counts).
    """
    if busy:
        return now + idle
    if now - idle_since < idle:
        return idle_since + idle
    return None


def stall_due(protocol: ServerGrpcConnection, stream_id: int, stall: float) -> Optional[float]:
    """When the still incomplete request of ``stream_id`` counts as stalled (its last progress
    plus ``stall``); None when it cannot stall: it is whole, streamed, or its call is gone."""
    progress = protocol.request_progress(stream_id)
    return None if progress is None else progress + stall


def cancel_stalled(protocol: ServerGrpcConnection, stream_id: int, stall: float) -> List[CallEvent]:
    """Cancel the call whose request made no progress for ``stall`` seconds; its events."""
    return protocol.cancel_call(stream_id, f"the request made no progress for {stall:g} s")


def stop_deadline(current: Optional[float], now: float, grace: Optional[float]) -> Optional[float]:
    """When the calls still running are cancelled, after ``stop(grace)`` at ``now``.

    ``current`` is the deadline an earlier ``stop()`` set (None if none did).  No grace (None
    or not positive) means now; otherwise ``now + grace``.  None when this ``stop()`` changes
    nothing, because an earlier one set a deadline as soon or sooner.
    """
    deadline = now if grace is None or grace <= 0 else now + grace
    if current is not None and deadline >= current:
        return None
    return deadline
