"""Channel connectivity: grpcio's five states, for both APIs.

gRPC's doc/connectivity-semantics-and-api.md defines five states.  A minigrpc channel has one
connection, so its state is that connection's:

==================  ========================================================================
IDLE                no connection: none was needed yet, or the last one was lost or drained
                    (GOAWAY); the next call (or ``try_to_connect``) dials again
CONNECTING          dialling the target
READY               connected; calls go out on this connection
TRANSIENT_FAILURE   the last dial failed; calls fail fast (UNAVAILABLE) unless wait_for_ready
SHUTDOWN            the channel was closed
==================  ========================================================================
"""

import enum

__all__ = ["ChannelConnectivity"]


class ChannelConnectivity(enum.Enum):
    """grpcio's ``grpc.ChannelConnectivity``: the same members and values."""

    IDLE = (0, "idle")
    CONNECTING = (1, "connecting")
    READY = (2, "ready")
    TRANSIENT_FAILURE = (3, "transient failure")
    SHUTDOWN = (4, "shutdown")
