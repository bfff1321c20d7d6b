"""A channel's connection without I/O: which connection a call goes to, when one is dialled,
and the channel's connectivity state, for both client transports.

gRPC calls the connection a channel keeps to one address a *subchannel*; a minigrpc channel has
one.  Its connectivity states are gRPC's (``doc/connectivity-semantics-and-api.md``):

* IDLE: no connection, or the last one was lost or drains (GOAWAY): the next call dials;
* CONNECTING: a call dials for the channel; the other calls wait for that dial, not beside it;
* READY: calls go to the connection;
* TRANSIENT_FAILURE: the last dial failed;
* SHUTDOWN: the channel was closed, for good.

A connection is reused while it takes new calls and is not *stale*: one a call used that is idle
again although the server never sent its SETTINGS (a server that accepts but never speaks
HTTP/2; grpc-go would not have used it at all), so the next call dials afresh.  A dial that
replaces a connection nobody calls on any more closes it.

:class:`Subchannel` is told what happened (:meth:`~Subchannel.dialled`,
:meth:`~Subchannel.dial_failed`, :meth:`~Subchannel.connection_unusable`,
:meth:`~Subchannel.close`) and answers :meth:`~Subchannel.pick`; a call's attempts
(:mod:`minigrpc.driver.call_steps`) ask it.  It is not thread-safe: the blocking transport calls
it under a lock, the asyncio one from the event loop.
"""

from typing import TYPE_CHECKING, Callable, Generic, Optional, TypeVar, Union

from .connectivity import ChannelConnectivity

if TYPE_CHECKING:  # pragma: no cover - what a transport's connection offers the subchannel
    from typing import Protocol

    from ..protocol.client_protocol import ClientGrpcConnection

    class ClientConnection(Protocol):
        """A client connection of either transport, as the subchannel reads it."""

        protocol: ClientGrpcConnection

        @property
        def usable(self) -> bool:
            """New calls may start here: no GOAWAY, no failure, not closed."""

        @property
        def started(self) -> bool:
            """A call has been started here."""

        def close(self) -> None: ...


Connection = TypeVar("Connection", bound="ClientConnection")

#: What :meth:`Subchannel.pick` answers when it has no connection to give.
DIAL = "dial"
WAIT = "wait"

_IDLE = ChannelConnectivity.IDLE
_CONNECTING = ChannelConnectivity.CONNECTING
_READY = ChannelConnectivity.READY
_TRANSIENT_FAILURE = ChannelConnectivity.TRANSIENT_FAILURE
_SHUTDOWN = ChannelConnectivity.SHUTDOWN


def reusable(connection: "ClientConnection") -> bool:
    """New calls may go to ``connection``: it takes them and is not stale (module docstring)."""
    if not connection.usable:
        return False
    protocol = connection.protocol
    return not (connection.started and protocol.idle and not protocol.settings_received)


class Subchannel(Generic[Connection]):
    """One channel's connection and connectivity state; ``on_state`` hears every change."""

    def __init__(
        self,
        on_state: Callable[[ChannelConnectivity], None],
        state: ChannelConnectivity = _IDLE,
    ) -> None:
        self._on_state = on_state
        self.state = _IDLE
        #: The connection calls go to while it is reusable; None before the first dial.
        self.connection: Optional[Connection] = None
        #: A call is dialling for the channel.
        self.dialling = False
        self.closed = False
        self._set(state)

    def _set(self, state: ChannelConnectivity) -> None:
        """Record a new state and report it; SHUTDOWN is final, and no state is told twice."""
        if state is self.state or self.state is _SHUTDOWN:
            return
        self.state = state
        self._on_state(state)

    def pick(self) -> Union[Connection, str]:
        """The connection for a new call, else :data:`WAIT` (another call dials) or
        :data:`DIAL` (dial, after :meth:`begin_dial`)."""
        connection = self.connection
        if connection is not None and reusable(connection):
            return connection
        return WAIT if self.dialling else DIAL

    def begin_dial(self) -> Optional[Connection]:
        """A call dials for the channel: CONNECTING.  The connection it replaces is the
        channel's no more (calls still running there finish, and it closes itself); it is
        returned when no call runs there, for the transport to close now."""
        self.dialling = True
        self._set(_CONNECTING)
        replaced, self.connection = self.connection, None
        if replaced is not None and replaced.protocol.idle:
            return replaced
        return None

    def dialled(self, connection: Connection) -> bool:
        """The dial succeeded: calls go to ``connection`` (READY).  False if the channel was
        closed meanwhile: the transport closes ``connection`` instead."""
        self.dialling = False
        if self.closed:
            return False
        self.connection = connection
        self._set(_READY)
        return True

    def dial_failed(self) -> None:
        """The dial failed (refused, unreachable, TLS): TRANSIENT_FAILURE."""
        self.dialling = False
        self._set(_TRANSIENT_FAILURE)

    def dial_abandoned(self) -> None:
        """The dial stopped unfinished (its call's deadline, or the call was cancelled): IDLE."""
        self.dialling = False
        self._set(_IDLE)

    def connection_unusable(self, connection: Connection) -> None:
        """``connection`` takes no new calls any more (GOAWAY, failure, loss): IDLE, if it is
        the channel's connection."""
        if connection is self.connection and not self.closed:
            self._set(_IDLE)

    def close(self) -> Optional[Connection]:
        """The channel closed (SHUTDOWN); returns its connection, for the transport to close."""
        self.closed = True
        connection, self.connection = self.connection, None
        self._set(_SHUTDOWN)
        return connection

    def peer_accepts(self, encoding: str) -> bool:
        """False only when the server listed its encodings and ``encoding`` is not one of them
        (``doc/compression.md``: never compress with an algorithm the peer left out)."""
        connection = self.connection
        accepted = connection.protocol.peer_accept_encodings if connection is not None else None
        return accepted is None or encoding in accepted
