"""A channel's connections without I/O: one per address, which one a call goes to, when an
address is dialled or its name resolved, and the channel's connectivity state, for both client
transports.

gRPC calls the connection a channel keeps to one address a *subchannel*
(``doc/load-balancing.md``).  :class:`Subchannels` holds a channel's: the addresses its target
names (:func:`~minigrpc.protocol.targets.parse_target_addresses`; a DNS name's are resolved
first, every A and AAAA record), the load-balancing policy that decides which to dial and which
a call goes to (:mod:`minigrpc.driver.balancing`: ``pick_first`` by default, or
``round_robin``), and their connections.  Its connectivity state is gRPC's
(``doc/connectivity-semantics-and-api.md``), the policy's over every subchannel:

* IDLE: nothing connected, and nothing tried since the last connection was lost: the next call
  (or ``try_to_connect``) starts connecting;
* CONNECTING: a name is being resolved or an address dialled; calls wait;
* READY: calls go to a connection;
* TRANSIENT_FAILURE: the last try failed; calls fail at once (UNAVAILABLE, the last error)
  unless they wait for ready, while the policy tries again after its backoff;
* SHUTDOWN: the channel was closed, for good.

The transport asks :meth:`Subchannels.pick` for a call's connection (or :data:`WAIT`: wait for
the next change, :attr:`Subchannels.version`; or :data:`FAIL`: the call fails with
:attr:`Subchannels.failure`), reports what happened (:meth:`~Subchannels.dialled`,
:meth:`~Subchannels.dial_failed`, :meth:`~Subchannels.connection_lost`,
:meth:`~Subchannels.resolved`, :meth:`~Subchannels.resolve_failed`,
:meth:`~Subchannels.on_timer` when its one timer goes off), and carries out the :class:`Work`
each of these leaves (:meth:`~Subchannels.take_work`): dial an address (with its own I/O, off
any call's path), resolve the name, retire a connection; and (re)arms its timer when
:meth:`~Subchannels.timer_due` says so.

A connection is reused while it takes new calls and is not *stale*: one a call used that is idle
again although the server never sent its SETTINGS (a server that accepts but never speaks
HTTP/2; grpc-go would not have used it at all); a stale connection counts as lost.  A DNS name
is resolved again when a connection is lost or the policy fails, at most every
:data:`MIN_RESOLUTION_INTERVAL` seconds (grpc core's ``grpc.dns_min_time_between_resolutions_ms``
default).

It is not thread-safe: the blocking transport calls it under a lock, the asyncio one from the
event loop.
"""

from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Generic,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Set,
    Tuple,
    TypeVar,
    Union,
)

from ..protocol.targets import Target, TargetAddresses
from .backoff import ExponentialBackoff
from .balancing import (
    CONNECT,
    DEFAULT_INITIAL_BACKOFF,
    DEFAULT_MAX_BACKOFF,
    RECONNECT_MULTIPLIER,
    USE,
    Action,
    PickFirst,
    RoundRobin,
    new_policy,
)
from .connectivity import ChannelConnectivity
from .service_config import LoadBalancingConfig

if TYPE_CHECKING:  # pragma: no cover - what a transport's connection offers the subchannels
    import random
    from typing import Protocol

    from ..protocol.client_protocol import ClientGrpcConnection

    class ClientConnection(Protocol):
        """A client connection of either transport, as the subchannels read it."""

        protocol: ClientGrpcConnection

        @property
        def usable(self) -> bool:
            """New calls may start here: no GOAWAY, no failure, not closed or retired."""

        @property
        def started(self) -> bool:
            """A call has been started here."""

        def close(self) -> None: ...


Connection = TypeVar("Connection", bound="ClientConnection")

__all__ = [
    "CLOSE",
    "DIAL",
    "FAIL",
    "MIN_RESOLUTION_INTERVAL",
    "RESOLVE",
    "WAIT",
    "Subchannels",
    "Work",
    "reusable",
]

#: What :meth:`Subchannels.pick` answers when it has no connection to give: wait for the next
#: change, or fail the call with :attr:`Subchannels.failure`.
WAIT = "wait"
FAIL = "fail"

#: The work a transport carries out (:class:`Work`).
DIAL = "dial"
RESOLVE = "resolve"
CLOSE = "close"

#: The shortest time between two resolutions of a name (grpc core's default for
#: ``grpc.dns_min_time_between_resolutions_ms``).
MIN_RESOLUTION_INTERVAL = 30.0

#: The default policy.
PICK_FIRST = LoadBalancingConfig("pick_first")

_IDLE = ChannelConnectivity.IDLE
_CONNECTING = ChannelConnectivity.CONNECTING
_READY = ChannelConnectivity.READY
_TRANSIENT_FAILURE = ChannelConnectivity.TRANSIENT_FAILURE
_SHUTDOWN = ChannelConnectivity.SHUTDOWN


class Work(NamedTuple):
    """One thing for the transport to do: dial ``address`` (:data:`DIAL`; report
    :meth:`Subchannels.dialled` or :meth:`Subchannels.dial_failed`), resolve the channel's name
    (:data:`RESOLVE`; report :meth:`Subchannels.resolved` or :meth:`Subchannels.resolve_failed`),
    or retire ``connection`` (:data:`CLOSE`: no new calls; it closes once its calls are over)."""

    kind: str
    address: Optional[Target] = None
    connection: Any = None


def reusable(connection: "ClientConnection") -> bool:
    """New calls may go to ``connection``: it takes them and is not stale (module docstring)."""
    if not connection.usable:
        return False
    protocol = connection.protocol
    return not (connection.started and protocol.idle and not protocol.settings_received)


class Subchannels(Generic[Connection]):
    """One channel's connections and connectivity state; ``on_state`` hears every change.

    ``target`` is what the channel's target names (None: it did not parse, and the channel is
    in TRANSIENT_FAILURE for good); ``balancing`` the policy; ``initial_backoff`` and
    ``max_backoff`` the channel's reconnect backoff (``doc/connection-backoff.md``).
    """

    def __init__(
        self,
        on_state: Callable[[ChannelConnectivity], None],
        target: Optional[TargetAddresses],
        balancing: LoadBalancingConfig = PICK_FIRST,
        initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        rng: "Optional[random.Random]" = None,
    ) -> None:
        self._on_state = on_state
        self.state = _IDLE
        self.target = target
        self.closed = False
        self._balancing = balancing
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._rng = rng
        #: The policy, once the target's addresses are known.
        self.policy: Optional[Union[PickFirst, RoundRobin]] = None
        #: The connection of each address that has one.
        self.connections: Dict[Target, Connection] = {}
        self._address_of: Dict[Any, Target] = {}
        #: Addresses being dialled.
        self.dialling: Set[Target] = set()
        self._work: List[Work] = []
        #: When the transport's timer is armed to go off (None: it is not).
        self._timer_at: Optional[float] = None
        #: Bumped at every change a waiting call may care about (:data:`WAIT`).
        self.version = 0
        #: Why a call picked :data:`FAIL` fails (UNAVAILABLE with these details).
        self.failure = ""
        #: The name is being resolved; it failed with ``_resolve_failure``; the next try is due
        #: at ``_resolve_at``; the last one ended at ``_resolved_at``.
        self.resolving = False
        self._resolve_failure = ""
        self._resolve_at: Optional[float] = None
        self._resolved_at: Optional[float] = None
        self._resolve_backoff: Optional[ExponentialBackoff] = None
        #: A call or ``try_to_connect`` asked for a connection before the name was resolved.
        self._connect_when_resolved = False
        #: The target is a name to look up (not an address, nor a list of them).
        self._resolvable = target is not None and target.needs_resolution
        if target is None:
            self.failure = "the channel has no target"
            self._set(_TRANSIENT_FAILURE)
        elif not target.needs_resolution:
            self.policy = self._new_policy(target.addresses)

    def _new_policy(self, addresses: Iterable[Target]) -> Union[PickFirst, RoundRobin]:
        return new_policy(self._balancing, list(addresses), self._initial_backoff,
                          self._max_backoff, self._rng)

    # -- state ----------------------------------------------------------------------------------

    def _set(self, state: ChannelConnectivity) -> None:
        """Record a new state and report it; SHUTDOWN is final, and no state is told twice."""
        if state is self.state or self.state is _SHUTDOWN:
            return
        self.state = state
        self._on_state(state)

    def _changed(self) -> None:
        """Something happened: wake the waiting calls, and report the new state if it is one."""
        self.version += 1
        if self.closed:
            state = _SHUTDOWN
        elif self.policy is not None:
            state = self.policy.state
        elif self.target is None or (self._resolve_failure and not self.resolving):
            state = _TRANSIENT_FAILURE
        elif self.resolving:
            state = _CONNECTING
        else:
            state = _IDLE
        self._set(state)

    # -- calls ----------------------------------------------------------------------------------

    def pick(self, wait_for_ready: bool, now: float) -> Union[Connection, str]:
        """The connection for a new call, else :data:`WAIT` (wait for the next change of
        :attr:`version`) or :data:`FAIL` (:attr:`failure`).  Starts connecting an IDLE channel:
        carry out :meth:`take_work` afterwards."""
        policy = self.policy
        if policy is None:
            return self._pick_unresolved(wait_for_ready, now)
        for _ in range(len(self.connections) + 2):
            if policy.state is _IDLE:
                self._carry(policy.exit_idle(now), now)
                self._changed()
            picked = policy.pick(wait_for_ready)
            if picked.kind != USE:
                if picked.details:
                    self.failure = picked.details
                    return FAIL
                return WAIT
            assert picked.address is not None
            connection = self.connections.get(picked.address)
            if connection is not None and reusable(connection):
                return connection
            # Gone without a word (a stale connection, a loss not reported yet): lost.
            self._lost(picked.address, now)
            self._changed()
        return WAIT

    def _pick_unresolved(self, wait_for_ready: bool, now: float) -> str:
        if self.target is None:
            return FAIL
        if self.resolving:
            return WAIT
        if self._resolve_failure and self._resolve_at is not None:
            if wait_for_ready:
                self._connect_when_resolved = True
                return WAIT
            self.failure = self._resolve_failure
            return FAIL
        self._connect_when_resolved = True
        self._resolve()
        self._changed()
        return WAIT

    def exit_idle(self, now: float) -> None:
        """``try_to_connect``: start connecting an IDLE channel (nothing otherwise)."""
        if self.closed or self.target is None:
            return
        policy = self.policy
        if policy is None:
            self._connect_when_resolved = True
            if not self.resolving and self._resolve_at is None:
                self._resolve()
        elif policy.state is _IDLE:
            self._carry(policy.exit_idle(now), now)
        self._changed()

    def peer_accepts(self, encoding: str) -> bool:
        """False only when a server listed its encodings and ``encoding`` is not one of them
        (``doc/compression.md``: never compress with an algorithm the peer left out)."""
        for connection in self.connections.values():
            accepted = connection.protocol.peer_accept_encodings
            if accepted is not None:
                return encoding in accepted
        return True

    # -- work for the transport -----------------------------------------------------------------

    def take_work(self) -> List[Work]:
        """What the transport is to do now (and is told about no more)."""
        work, self._work = self._work, []
        return work

    def _carry(self, actions: Iterable[Action], now: float) -> None:
        """Turn the policy's actions into work: dial each address to connect (once at a time),
        retire the connection of each address to drop."""
        for action in actions:
            address = action.address
            if action.kind == CONNECT:
                if address not in self.dialling and not self.closed:
                    self.dialling.add(address)
                    self._work.append(Work(DIAL, address))
            else:
                connection = self.connections.pop(address, None)
                if connection is not None:
                    self._address_of.pop(connection, None)
                    self._work.append(Work(CLOSE, address, connection))

    def _resolve(self) -> None:
        self.resolving = True
        self._resolve_at = None
        self._work.append(Work(RESOLVE))

    def _resolve_again(self, now: float) -> None:
        """A DNS name is resolved again after a failure of its addresses, at most every
        :data:`MIN_RESOLUTION_INTERVAL` seconds."""
        if not self._resolvable or self.resolving:
            return
        due = now if self._resolved_at is None else self._resolved_at + MIN_RESOLUTION_INTERVAL
        if due <= now:
            self._resolve()
        elif self._resolve_at is None or due < self._resolve_at:
            self._resolve_at = due

    # -- what the transport reports -------------------------------------------------------------

    def dialled(self, address: Target, connection: Connection, now: float) -> bool:
        """``address`` connected: calls may go to ``connection``.  False when it is not wanted
        (the channel closed, or the policy chose another): the transport closes it."""
        self.dialling.discard(address)
        policy = self.policy
        if self.closed or policy is None:
            return False
        actions = policy.on_connected(address, now)
        wanted = all(action.address != address for action in actions)
        if wanted:
            self.connections[address] = connection
            self._address_of[connection] = address
        self._carry([action for action in actions if action.address != address], now)
        self._changed()
        return wanted

    def dial_failed(self, address: Target, details: str, now: float) -> None:
        """Dialling ``address`` failed (refused, unreachable, TLS, its timeout): ``details`` in
        grpc-go's words."""
        self.dialling.discard(address)
        policy = self.policy
        if self.closed or policy is None:
            return
        self._carry(policy.on_connect_failed(address, now, details), now)
        if policy.state is _TRANSIENT_FAILURE:
            self._resolve_again(now)
        self._changed()

    def connection_lost(self, connection: Connection, now: float) -> None:
        """``connection`` takes no new calls any more (GOAWAY, a failure, EOF, keepalive)."""
        address = self._address_of.get(connection)
        if address is None or self.closed:
            return
        self._lost(address, now)
        self._changed()

    def _lost(self, address: Target, now: float) -> None:
        connection = self.connections.pop(address, None)
        if connection is not None:
            self._address_of.pop(connection, None)
            if connection.protocol.idle:
                self._work.append(Work(CLOSE, address, connection))
        if self.policy is not None:
            self._carry(self.policy.on_disconnected(address, now), now)
        self._resolve_again(now)

    def resolved(self, records: List[Tuple[int, str]], now: float) -> None:
        """The name resolved to these ``(family, ip)`` records (every A and AAAA, in the
        resolver's order)."""
        self.resolving = False
        target = self.target
        if self.closed or target is None:
            return
        if not records:
            self.resolve_failed(f"no address for {target.host}", now)
            return
        self._resolved_at = now
        self._resolve_failure = ""
        if self._resolve_backoff is not None:
            self._resolve_backoff.reset()
        self.target = target = target.resolved(records)
        policy = self.policy
        if policy is None:
            policy = self.policy = self._new_policy(target.addresses)
        elif set(target.addresses) != set(policy.addresses):
            self._carry(policy.update_addresses(target.addresses, now), now)
        if self._connect_when_resolved:
            self._connect_when_resolved = False
            self._carry(policy.exit_idle(now), now)
        self._changed()

    def resolve_failed(self, details: str, now: float) -> None:
        """The name did not resolve (``details``, in grpc-go's words): TRANSIENT_FAILURE until a
        later try succeeds, unless addresses resolved before are still in use."""
        self.resolving = False
        if self.closed:
            return
        backoff = self._resolve_backoff
        if backoff is None:
            backoff = self._resolve_backoff = ExponentialBackoff(
                self._initial_backoff, RECONNECT_MULTIPLIER, self._max_backoff, rng=self._rng)
        self._resolve_at = now + backoff.next_delay()
        if self.policy is None:
            self._resolve_failure = details
        self._changed()

    def next_wakeup(self) -> Optional[float]:
        """When :meth:`on_timer` has something to do (a backoff ends), or None (nothing, or
        the channel is closed: a dial that ends after the close arms no timer)."""
        if self.closed:
            return None
        times = [self._resolve_at]
        if self.policy is not None:
            times.append(self.policy.next_wakeup())
        due = [time for time in times if time is not None]
        return min(due) if due else None

    def timer_due(self) -> Optional[float]:
        """When the transport's one timer is to go off, if it must be armed anew: the next
        wakeup when it comes before the timer armed now (the transport cancels that one), else
        None (the armed timer will do, or there is nothing to wake for)."""
        due = self.next_wakeup()
        if due is None or (self._timer_at is not None and self._timer_at <= due):
            return None
        self._timer_at = due
        return due

    def on_timer(self, now: float) -> None:
        """The transport's timer went off (:meth:`timer_due`): resolve or dial again what is
        due."""
        self._timer_at = None
        if self.closed:
            return
        if self._resolve_at is not None and now >= self._resolve_at and not self.resolving:
            self._resolve()
        if self.policy is not None:
            self._carry(self.policy.on_timer(now), now)
        self._changed()

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> List[Connection]:
        """The channel closed (SHUTDOWN); returns its connections, for the transport to close."""
        self.closed = True
        connections = list(self.connections.values())
        self.connections.clear()
        self._address_of.clear()
        self._work.clear()
        self._changed()
        return connections
