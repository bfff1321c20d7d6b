"""Channel connectivity on the blocking API: ``Channel.subscribe`` and ``channel_ready_future``.

The states, and when the channel is in which, are the subchannel's
(:mod:`minigrpc.driver.subchannel`); this module tells them to the subscribers.  Callbacks run
on one thread per channel, in the order the changes happened, as in grpcio; a new subscriber is
told the current state first.  minigrpc reads a connection while calls run on it, and, while
anyone is subscribed, also while it is idle (the transport's watch thread): a server that goes
away (EOF, a reset, a GOAWAY) is then reported at once, as by grpcio.  Without subscribers
nobody reads an idle connection, so a one-shot client starts no thread; a loss is then noticed
when the next call uses the connection.
"""

import collections
import threading
from typing import Any, Callable, Deque, List, Optional, Tuple

from ..driver.connectivity import ChannelConnectivity
from ..driver.logs import get_logger
from ..protocol.status import FutureCancelledError, FutureTimeoutError

__all__ = ["ChannelReadyFuture", "ConnectivityWatch"]

_LOGGER = get_logger(__name__)

Callback = Callable[["ChannelConnectivity"], None]


class ConnectivityWatch:
    """The callbacks subscribed to one channel's state, and the states they are still to hear.

    The channel's subchannel reports each change (:meth:`deliver`).  ``connect`` is called (on
    a thread of its own) when a subscriber asks ``try_to_connect`` while the channel is IDLE or
    in TRANSIENT_FAILURE; ``watch`` when the first subscriber arrives, so that the transport
    reads its idle connection.
    """

    def __init__(self, connect: Callable[[], None], watch: Callable[[], None]) -> None:
        self._connect = connect
        self._watch = watch
        self._lock = threading.Lock()
        #: The last state delivered, which a new subscriber hears first.
        self._state = ChannelConnectivity.IDLE
        self._subscribers: List[Callback] = []
        self._pending: Deque[Tuple[List[Callback], ChannelConnectivity]] = collections.deque()
        self._delivering = False
        self._connecting = False

    @property
    def watched(self) -> bool:
        """Someone is subscribed."""
        return bool(self._subscribers)

    def deliver(self, state: ChannelConnectivity) -> None:
        """The channel is now in ``state``: tell the subscribers."""
        with self._lock:
            self._state = state
            if self._subscribers:
                self._pending.append((list(self._subscribers), state))
                self._start_delivery_locked()

    def subscribe(self, callback: Callback, try_to_connect: bool = False) -> None:
        with self._lock:
            first = not self._subscribers
            self._subscribers.append(callback)
            self._pending.append(([callback], self._state))
            self._start_delivery_locked()
            connect = try_to_connect and self._state in (
                ChannelConnectivity.IDLE,
                ChannelConnectivity.TRANSIENT_FAILURE,
            )
        if first:
            self._watch()
        if connect:
            self.try_to_connect()

    def unsubscribe(self, callback: Callback) -> None:
        with self._lock:
            for index, subscriber in enumerate(self._subscribers):
                if subscriber == callback:
                    del self._subscribers[index]
                    break

    def try_to_connect(self) -> None:
        """Dial in the background (once at a time), as grpcio does for ``try_to_connect``."""
        with self._lock:
            if self._connecting or self._state is ChannelConnectivity.SHUTDOWN:
                return
            self._connecting = True
        threading.Thread(target=self._run_connect, name="minigrpc-connect", daemon=True).start()

    def _run_connect(self) -> None:
        try:
            self._connect()
        except Exception:  # pragma: no cover - the transport reports failures as states
            _LOGGER.exception("minigrpc: connecting in the background failed")
        finally:
            with self._lock:
                self._connecting = False

    def _start_delivery_locked(self) -> None:
        if not self._delivering:
            self._delivering = True
            threading.Thread(
                target=self._deliver, name="minigrpc-connectivity", daemon=True
            ).start()

    def _deliver(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._delivering = False
                    return
                callbacks, state = self._pending.popleft()
            for callback in callbacks:
                try:
                    callback(state)
                except Exception:
                    _LOGGER.exception("minigrpc: a connectivity callback raised")


class ChannelReadyFuture:
    """grpcio's ``channel_ready_future(channel)``: done once the channel is READY.

    It asks the channel to connect, and keeps trying (with gRPC's connection backoff) until it
    is READY, cancelled, or the channel is closed.
    """

    def __init__(self, channel: Any) -> None:
        self._channel = channel
        self._done = threading.Condition(threading.Lock())
        self._ready = False
        self._cancelled = False
        self._callbacks: List[Callable[[ChannelReadyFuture], None]] = []
        channel.subscribe(self._on_state, try_to_connect=True)

    def _on_state(self, state: ChannelConnectivity) -> None:
        if state is ChannelConnectivity.READY:
            self._finish(ready=True)

    def _finish(self, ready: bool) -> bool:
        with self._done:
            if self._ready or self._cancelled:
                return False
            if ready:
                self._ready = True
            else:
                self._cancelled = True
            callbacks, self._callbacks = self._callbacks, []
            self._done.notify_all()
        self._channel.unsubscribe(self._on_state)
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                _LOGGER.exception("minigrpc: a channel_ready_future callback raised")
        return True

    def cancel(self) -> bool:
        return self._finish(ready=False)

    def cancelled(self) -> bool:
        return self._cancelled

    def running(self) -> bool:
        return not self.done()

    def done(self) -> bool:
        return self._ready or self._cancelled

    def result(self, timeout: Optional[float] = None) -> None:
        """None once READY; raises ``FutureTimeoutError`` or ``FutureCancelledError``."""
        with self._done:
            if not self._done.wait_for(lambda: self._ready or self._cancelled, timeout):
                raise FutureTimeoutError()
        if self._cancelled:
            raise FutureCancelledError()

    def exception(self, timeout: Optional[float] = None) -> None:
        self.result(timeout)

    def traceback(self, timeout: Optional[float] = None) -> None:
        self.result(timeout)

    def add_done_callback(self, fn: Callable[["ChannelReadyFuture"], None]) -> None:
        with self._done:
            if not self.done():
                self._callbacks.append(fn)
                return
        fn(self)


def channel_ready_future(channel: Any) -> ChannelReadyFuture:
    """A future done when ``channel`` is READY (grpcio's ``grpc.channel_ready_future``)."""
    return ChannelReadyFuture(channel)
