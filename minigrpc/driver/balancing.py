"""Load balancing: which connection a call goes out on, and the channel's connectivity state.

A channel whose target names several addresses (``ipv4:a,b``, or a DNS name with several
records: :class:`~minigrpc.protocol.targets.TargetAddresses`) keeps one *subchannel* per
address.  The policy (gRPC's ``doc/load-balancing.md``) decides, without I/O, which of them to
connect and which to send a call on; the transport dials, reports what happened, and carries
out the :class:`Action` lists the policy answers with:

* :class:`PickFirst` (``pick_first``, the default): tries the addresses in order, one at a time,
  and sticks to the first that connects.  When every address has failed it reports
  TRANSIENT_FAILURE and stays there ("sticky", gRFC A62, as grpc core does) while it tries the
  list again after a backoff, until one connects.  When its connection is lost it goes IDLE
  and reconnects only when a call or ``try_to_connect`` asks (gRFC A62).  With
  ``shuffleAddressList`` (gRFC A62) it shuffles the addresses it is given.
* :class:`RoundRobin` (``round_robin``): connects every address at once and spreads the calls
  over the READY ones in turn, starting at a random one.  A failed address is retried after its
  own backoff and counts as TRANSIENT_FAILURE until it connects again; a lost connection is
  redialled at once.

The waits between tries of an address are gRPC's connection backoff
(``doc/connection-backoff.md``: 1 s, times 1.6 each time, up to 120 s, ±20%), with the channel's
``grpc.initial_reconnect_backoff_ms`` and ``grpc.max_reconnect_backoff_ms``.

The channel's state (``doc/connectivity-semantics-and-api.md``) is the policy's:
:func:`aggregate_state` is gRPC's rule for many children (any READY: READY; else any
CONNECTING: CONNECTING; else any IDLE: IDLE; else TRANSIENT_FAILURE; grpc core's
``weighted_target`` applies it as such).  ``round_robin`` aggregates its subchannels so; it
dials an IDLE one at once, so none stays IDLE and the channel is never IDLE once started (grpc
core's ``round_robin`` counts IDLE as CONNECTING for the same reason).

:func:`choose_policy` picks the policy: the service config's ``loadBalancingConfig`` (or
``loadBalancingPolicy``), else the channel's ``grpc.lb_policy_name``, else ``pick_first``; an
unknown ``grpc.lb_policy_name`` falls back to ``pick_first``, as grpcio does (silently there;
:mod:`minigrpc.driver.channel_args` warns).
"""

from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ..protocol.targets import Target
from .backoff import ExponentialBackoff, new_random
from .channel_args import option_value
from .connectivity import ChannelConnectivity
from .service_config import SUPPORTED_LB_POLICIES, LoadBalancingConfig

if TYPE_CHECKING:
    import random

__all__ = [
    "CONNECT",
    "DISCONNECT",
    "FAIL",
    "QUEUE",
    "USE",
    "Action",
    "Pick",
    "PickFirst",
    "RoundRobin",
    "aggregate_state",
    "choose_policy",
    "new_policy",
]

IDLE = ChannelConnectivity.IDLE
CONNECTING = ChannelConnectivity.CONNECTING
READY = ChannelConnectivity.READY
TRANSIENT_FAILURE = ChannelConnectivity.TRANSIENT_FAILURE

#: ``doc/connection-backoff.md``'s multiplier; the first and longest waits are the channel's.
RECONNECT_MULTIPLIER = 1.6
#: Its defaults for ``grpc.initial_reconnect_backoff_ms`` and ``grpc.max_reconnect_backoff_ms``.
DEFAULT_INITIAL_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 120.0

#: What a transport does with an address (:class:`Action`).
CONNECT = "connect"
DISCONNECT = "disconnect"
#: What a pick says (:class:`Pick`).
USE = "use"
QUEUE = "queue"
FAIL = "fail"


class Action(NamedTuple):
    """Dial ``address`` (:data:`CONNECT`), or close and forget its connection
    (:data:`DISCONNECT`)."""

    kind: str
    address: Target


class Pick(NamedTuple):
    """Where a call goes: on ``address``'s connection (:data:`USE`); nowhere yet, wait for the
    state to change (:data:`QUEUE`); or nowhere: fail it UNAVAILABLE with ``details``
    (:data:`FAIL`)."""

    kind: str
    address: Optional[Target] = None
    details: str = ""


def aggregate_state(states: Iterable[ChannelConnectivity]) -> ChannelConnectivity:
    """The state of a whole from its parts' (see the module docstring); no parts is
    TRANSIENT_FAILURE."""
    seen = set(states)
    for state in (READY, CONNECTING, IDLE):
        if state in seen:
            return state
    return TRANSIENT_FAILURE


def choose_policy(from_service_config: Optional[LoadBalancingConfig],
                  options: Optional[Iterable[Tuple[Any, Any]]]) -> LoadBalancingConfig:
    """The policy of a channel with these options (see the module docstring)."""
    if from_service_config is not None:
        return from_service_config
    name = str(option_value(options, "grpc.lb_policy_name") or "").lower()
    return LoadBalancingConfig(name if name in SUPPORTED_LB_POLICIES else "pick_first")


def _all_failed(what: str, error: str, addresses: int) -> str:
    """Why calls fail when every address failed: with one address, its error alone (grpc-go's
    words, the same as a channel of one address always gave); with several, grpcio's."""
    return error if addresses == 1 else f"{what}; last error: {error}"


class _Subchannel:
    """One address: its state, and the backoff between its connection attempts."""

    __slots__ = ("address", "backoff", "last_error", "retry_at", "state")

    def __init__(self, address: Target, backoff: ExponentialBackoff) -> None:
        self.address = address
        self.state = IDLE
        self.backoff = backoff
        self.retry_at: Optional[float] = None
        self.last_error = ""


def _unique(addresses: Iterable[Target]) -> List[Target]:
    return list(dict.fromkeys(addresses))


class _Policy:
    """What both policies share: their subchannels, the backoff they make, the failure a
    TRANSIENT_FAILURE channel reports."""

    def __init__(self, initial_backoff: float, max_backoff: float,
                 rng: "Optional[random.Random]") -> None:
        self._initial = initial_backoff
        self._max = max_backoff
        self.random = rng if rng is not None else new_random()
        self.subchannels: Dict[Target, _Subchannel] = {}
        #: Why the channel is in TRANSIENT_FAILURE (the last connection error), for calls.
        self.failure = ""

    def _backoff(self) -> ExponentialBackoff:
        return ExponentialBackoff(self._initial, RECONNECT_MULTIPLIER, self._max,
                                  rng=self.random)

    def _subchannel(self, address: Target) -> _Subchannel:
        found = self.subchannels.get(address)
        if found is None:
            found = self.subchannels[address] = _Subchannel(address, self._backoff())
        return found

    def _connect(self, subchannel: _Subchannel) -> Action:
        if subchannel.state is not TRANSIENT_FAILURE:
            subchannel.state = CONNECTING
        subchannel.retry_at = None
        return Action(CONNECT, subchannel.address)

    def _failed_pick(self, wait_for_ready: bool, details: str) -> Pick:
        return Pick(QUEUE) if wait_for_ready else Pick(FAIL, details=details)


class PickFirst(_Policy):
    """``pick_first``: the first address that connects carries every call."""

    def __init__(self, addresses: Sequence[Target], shuffle: bool = False,
                 initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
                 max_backoff: float = DEFAULT_MAX_BACKOFF,
                 rng: "Optional[random.Random]" = None) -> None:
        super().__init__(initial_backoff, max_backoff, rng)
        self.shuffle = shuffle
        self.addresses: List[Target] = []
        self.state = IDLE
        #: The address whose connection carries the calls (READY).
        self.selected: Optional[Target] = None
        self._selected_pick = Pick(QUEUE)
        #: The address being tried in the current pass over the list.
        self._trying: Optional[int] = None
        #: One backoff for the passes over the whole list.
        self._pass_backoff = self._backoff()
        self._pass_at: Optional[float] = None
        self._set_addresses(addresses)

    def _set_addresses(self, addresses: Sequence[Target]) -> None:
        self.addresses = _unique(addresses)
        if self.shuffle:
            self.random.shuffle(self.addresses)
        self.subchannels = {a: self.subchannels.get(a) or _Subchannel(a, self._pass_backoff)
                            for a in self.addresses}

    def exit_idle(self, now: float) -> List[Action]:
        """A call (or ``try_to_connect``) wants a connection: start a pass when IDLE."""
        if self.state is not IDLE:
            return []
        if not self.addresses:
            self.state, self.failure = TRANSIENT_FAILURE, "empty address list"
            return []
        self.state = CONNECTING
        return self._try(0)

    def _try(self, index: int) -> List[Action]:
        self._trying = index
        return [self._connect(self.subchannels[self.addresses[index]])]

    def pick(self, wait_for_ready: bool = False) -> Pick:
        """Where a call goes; :data:`QUEUE` while IDLE (call :meth:`exit_idle`) or
        CONNECTING."""
        if self.state is READY:
            picked = self._selected_pick
            if picked.address is not self.selected:
                # Every call picks the selected address: one answer per selection, not per call.
                picked = self._selected_pick = Pick(USE, self.selected)
            return picked
        if self.state is TRANSIENT_FAILURE:
            return self._failed_pick(wait_for_ready, self.failure)
        return Pick(QUEUE)

    def on_connected(self, address: Target, now: float) -> List[Action]:
        """``address``'s connection is up: it carries every call from now on."""
        subchannel = self.subchannels.get(address)
        if subchannel is None or self.selected is not None:
            return [Action(DISCONNECT, address)]  # no longer wanted, or already chosen
        subchannel.state = READY
        self.selected, self.state, self._trying = address, READY, None
        self._pass_at = None
        self._pass_backoff.reset()
        return []

    def on_connect_failed(self, address: Target, now: float, error: str) -> List[Action]:
        """Dialling ``address`` failed: try the next address, or, after the last, report
        TRANSIENT_FAILURE and try the list again after the backoff."""
        subchannel = self.subchannels.get(address)
        if subchannel is None or self._trying is None or self.addresses[self._trying] != address:
            return []
        subchannel.state, subchannel.last_error = TRANSIENT_FAILURE, error
        if self._trying + 1 < len(self.addresses):
            return self._try(self._trying + 1)
        self._trying = None
        self.state = TRANSIENT_FAILURE
        self.failure = _all_failed("failed to connect to all addresses", error,
                                   len(self.addresses))
        self._pass_at = now + self._pass_backoff.next_delay()
        return []

    def on_disconnected(self, address: Target, now: float) -> List[Action]:
        """The chosen connection was lost or drained (GOAWAY): IDLE until the next call."""
        if address == self.selected:
            self.subchannels[address].state = IDLE
            self.selected, self.state = None, IDLE
        return []

    def next_wakeup(self) -> Optional[float]:
        return self._pass_at

    def on_timer(self, now: float) -> List[Action]:
        """The backoff after a failed pass is over: the next pass starts (still reporting
        TRANSIENT_FAILURE until an address connects)."""
        if self._pass_at is None or now < self._pass_at:
            return []
        self._pass_at = None
        return self._try(0)

    def update_addresses(self, addresses: Sequence[Target], now: float) -> List[Action]:
        """The resolver's new list.  The chosen connection stays if its address is still
        listed; otherwise it is closed and the channel goes IDLE (or starts a pass at once if
        it was trying already)."""
        was_trying = self._trying is not None or self._pass_at is not None
        old = set(self.addresses)
        self._set_addresses(addresses)
        actions = [Action(DISCONNECT, a) for a in old - set(self.addresses)
                   if a == self.selected]
        if self.selected is not None and self.selected in self.subchannels:
            return actions
        self.selected, self._trying, self._pass_at = None, None, None
        self.state = IDLE
        if was_trying:
            actions.extend(self.exit_idle(now))
        return actions


class RoundRobin(_Policy):
    """``round_robin``: every address connected, calls spread over the READY ones."""

    def __init__(self, addresses: Sequence[Target],
                 initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
                 max_backoff: float = DEFAULT_MAX_BACKOFF,
                 rng: "Optional[random.Random]" = None) -> None:
        super().__init__(initial_backoff, max_backoff, rng)
        self.addresses: List[Target] = _unique(addresses)
        self._next = 0
        self._started = False

    @property
    def state(self) -> ChannelConnectivity:
        if not self.subchannels:
            return TRANSIENT_FAILURE if self._started else IDLE
        return aggregate_state(s.state for s in self.subchannels.values())

    def exit_idle(self, now: float) -> List[Action]:
        """Start: dial every address (once; later calls need nothing)."""
        if self._started:
            return []
        self._started = True
        if not self.addresses:
            self.failure = "empty address list"
        self._next = self.random.randrange(len(self.addresses)) if self.addresses else 0
        return [self._connect(self._subchannel(a)) for a in self.addresses]

    def pick(self, wait_for_ready: bool = False) -> Pick:
        """The next READY address in turn; :data:`QUEUE` while none is READY but some may
        become so."""
        ready = [a for a in self.addresses if self.subchannels[a].state is READY] \
            if self.subchannels else []
        if ready:
            address = ready[self._next % len(ready)]
            self._next = (self._next + 1) % len(ready)
            return Pick(USE, address)
        if self.state is TRANSIENT_FAILURE:
            return self._failed_pick(wait_for_ready, self.failure)
        return Pick(QUEUE)

    def on_connected(self, address: Target, now: float) -> List[Action]:
        subchannel = self.subchannels.get(address)
        if subchannel is None:
            return [Action(DISCONNECT, address)]
        subchannel.state = READY
        subchannel.backoff.reset()
        return []

    def on_connect_failed(self, address: Target, now: float, error: str) -> List[Action]:
        """A failed address waits out its backoff, in TRANSIENT_FAILURE."""
        subchannel = self.subchannels.get(address)
        if subchannel is not None:
            subchannel.state, subchannel.last_error = TRANSIENT_FAILURE, error
            subchannel.retry_at = now + subchannel.backoff.next_delay()
            if self.state is TRANSIENT_FAILURE:
                self.failure = _all_failed("connections to all backends failing", error,
                                           len(self.addresses))
        return []

    def on_disconnected(self, address: Target, now: float) -> List[Action]:
        """A READY connection was lost or drained: dial the address again at once."""
        subchannel = self.subchannels.get(address)
        if subchannel is None or subchannel.state is not READY:
            return []
        subchannel.state = IDLE
        return [self._connect(subchannel)]

    def next_wakeup(self) -> Optional[float]:
        waits = [s.retry_at for s in self.subchannels.values() if s.retry_at is not None]
        return min(waits) if waits else None

    def on_timer(self, now: float) -> List[Action]:
        """Dial each address whose backoff is over."""
        return [self._connect(s) for s in self.subchannels.values()
                if s.retry_at is not None and now >= s.retry_at]

    def update_addresses(self, addresses: Sequence[Target], now: float) -> List[Action]:
        """The resolver's new list: new addresses are dialled, gone ones closed, the others
        kept as they are."""
        self.addresses = _unique(addresses)
        gone = [a for a in self.subchannels if a not in self.addresses]
        actions = [Action(DISCONNECT, a) for a in gone]
        for address in gone:
            del self.subchannels[address]
        if self._started:
            actions.extend(self._connect(self._subchannel(a)) for a in self.addresses
                           if a not in self.subchannels or self.subchannels[a].state is IDLE)
            if not self.addresses:
                self.failure = "empty address list"
        return actions


def new_policy(config: LoadBalancingConfig, addresses: Sequence[Target],
               initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
               max_backoff: float = DEFAULT_MAX_BACKOFF,
               rng: "Optional[random.Random]" = None) -> Union[PickFirst, RoundRobin]:
    """The policy ``config`` names, over ``addresses``."""
    if config.policy == "round_robin":
        return RoundRobin(addresses, initial_backoff, max_backoff, rng)
    return PickFirst(addresses, config.shuffle_address_list, initial_backoff, max_backoff, rng)
