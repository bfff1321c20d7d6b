"""The channel a command talks over: TLS or not, the authority, the connect timeout, the
deadline of the whole operation.

Only minigrpc's public API is used here (``insecure_channel``, ``secure_channel``,
``ssl_channel_credentials``, ``Channel.subscribe``, ``intercept_channel``), so the tool is a
client like any other and shows what the library offers.

Two clocks bound a command, as in grpcurl:

* ``--connect-timeout`` bounds the wait for a connection (the dial and, with TLS, the handshake).
  The wait ends early when the dial fails: the call made next then fails at once with the dial's
  own words (UNAVAILABLE, ``connect: connection refused``), which say more than a timeout would;
* ``--max-time`` is one deadline for everything the command sends: reflection lookups and the
  call itself get what is left of it as their ``grpc-timeout`` (PROTOCOL-HTTP2.md, "Timeout").
"""

import threading
import time
from typing import Any, Callable, List, Optional, Tuple

import minigrpc

from .arguments import Options
from .exits import DEADLINE_EXCEEDED, UNAVAILABLE, ToolError, UsageError

#: Channels whose dial never finished, kept until the process ends: closing one, which its
#: ``__del__`` would do too, waits for a dial that has no deadline (see wait_for_connection).
_abandoned: List[Any] = []


class Deadline:
    """What is left of ``--max-time``: None when there is no limit."""

    def __init__(self, seconds: Optional[float]) -> None:
        self.seconds = seconds
        self._end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> Optional[float]:
        if self._end is None:
            return None
        return max(0.0, self._end - time.monotonic())


def _read(flag: str, path: Optional[str]) -> Optional[bytes]:
    if path is None:
        return None
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror or exc}") from None


def credentials(options: Options) -> Any:
    """``ssl_channel_credentials`` from ``--cacert``, ``--cert`` and ``--key`` (PEM files)."""
    try:
        return minigrpc.ssl_channel_credentials(
            root_certificates=_read("--cacert", options.cacert),
            private_key=_read("--key", options.key),
            certificate_chain=_read("--cert", options.cert),
        )
    except ValueError as exc:  # a PEM that does not load: said now, not at the first call
        raise UsageError(str(exc)) from None


def open_channel(options: Options) -> Any:
    """A channel to ``options.target``: TLS for a TCP target unless ``--plaintext``.

    ``--authority`` is sent as ``:authority`` (``grpc.default_authority``) and, with TLS, is
    also the name the server's certificate must carry (``grpc.ssl_target_name_override``), as
    grpcurl does; nothing is dialled until :func:`wait_for_connection` or the first call.
    """
    channel_options: List[Tuple[str, Any]] = []
    if options.authority:
        channel_options.append(("grpc.default_authority", options.authority))
        if options.tls:
            channel_options.append(("grpc.ssl_target_name_override", options.authority))
    if options.tls:
        return minigrpc.secure_channel(options.target, credentials(options), channel_options)
    return minigrpc.insecure_channel(options.target, channel_options)


def wait_for_connection(channel: Any, options: Options, deadline: Deadline) -> None:
    """Dial now and wait until the channel is READY, its dial failed, or the time is up.

    A failed dial returns at once (see the module docstring); no connection within
    ``--connect-timeout`` is UNAVAILABLE, within what is left of ``--max-time`` the deadline.
    The wait is a connectivity subscription (gRPC's doc/connectivity-semantics-and-api.md):
    READY or TRANSIENT_FAILURE ends it.  After a timeout the channel is left open and kept
    referenced (never collected, so never closed): its dial, which has no deadline, holds it
    until the peer answers, and the process is about to end anyway.
    """
    settled = threading.Event()
    ending = (minigrpc.ChannelConnectivity.READY, minigrpc.ChannelConnectivity.TRANSIENT_FAILURE)

    def watch(state: Any) -> None:
        if state in ending:
            settled.set()

    left = deadline.remaining()
    wait = options.connect_timeout if left is None else min(left, options.connect_timeout)
    channel.subscribe(watch, try_to_connect=True)
    try:
        if settled.wait(wait):
            return
    finally:
        channel.unsubscribe(watch)
    _abandoned.append(channel)
    if left is not None and left <= options.connect_timeout:
        raise ToolError(f"no connection to {options.target} before the deadline "
                        f"(--max-time {deadline.seconds:g})", DEADLINE_EXCEEDED)
    raise ToolError(f"no connection to {options.target} within --connect-timeout "
                    f"{options.connect_timeout:g} s", UNAVAILABLE)


class _CallDetails(minigrpc.ClientCallDetails):
    """The details of one intercepted call, with the tool's timeout and metadata."""

    def __init__(self, base: Any, timeout: Optional[float], metadata: Any) -> None:
        self.method = base.method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = base.credentials
        self.wait_for_ready = base.wait_for_ready
        self.compression = base.compression


class CallDefaults(minigrpc.StreamStreamClientInterceptor):
    """Gives the calls a library makes for us (the reflection client's streams) the ``-H``
    metadata and what is left of ``--max-time``, as grpcurl sends its headers with reflection
    requests too."""

    def __init__(self, metadata: List[Tuple[str, Any]], deadline: Deadline) -> None:
        self._metadata = metadata
        self._deadline = deadline

    def intercept_stream_stream(self, continuation: Callable[[Any, Any], Any],
                                client_call_details: Any, request_iterator: Any) -> Any:
        timeout = client_call_details.timeout
        if timeout is None:
            timeout = self._deadline.remaining()
        metadata = list(client_call_details.metadata or ()) + self._metadata
        details = _CallDetails(client_call_details, timeout, metadata or None)
        return continuation(details, request_iterator)


def with_call_defaults(channel: Any, options: Options, deadline: Deadline) -> Any:
    """``channel`` with :class:`CallDefaults` on its streams."""
    return minigrpc.intercept_channel(channel, CallDefaults(options.headers, deadline))
