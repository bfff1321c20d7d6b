"""The public client API: grpcio's unary subset, with the same names and semantics (issue 2 §2).

::

    import minigrpc as grpc

    with grpc.insecure_channel("unix:///run/agent.sock") as channel:
        call = channel.unary_unary("/pkg.Service/Method",
                                   request_serializer=Req.SerializeToString,
                                   response_deserializer=Resp.FromString)
        reply = call(Req(...), timeout=5, metadata=[("x-trace", "1")])
        reply, info = call.with_call(Req(...))   # info.code(), info.trailing_metadata(), ...

Every outcome other than OK raises :class:`minigrpc.RpcError` (``code()``, ``details()``, both
metadata tuples and the raw ``grpc-status-details-bin``). Code generated for grpcio
(``*_pb2_grpc.py`` stubs) works unchanged with a minigrpc channel.

Channel options (``options=[(name, value), ...]``); unknown names are ignored, as in grpcio:

* ``grpc.max_receive_message_length``: largest response message in bytes; default 4 MiB,
  -1 for no limit. Larger: RESOURCE_EXHAUSTED, decided on the length prefix.
* ``grpc.max_send_message_length``: largest request message; default -1 (no limit).
* ``grpc.max_metadata_size``: largest response header block (or trailers) of one call, bytes
  as HTTP/2 counts them; default 16 KiB, -1 for none. Larger: INTERNAL.
* ``grpc.default_authority``: the ``:authority`` to send instead of the target's.
* ``grpc.primary_user_agent``: prepended to ``user-agent`` (``<it> grpc-python-minigrpc/<v>``).
* ``grpc.initial_reconnect_backoff_ms`` / ``grpc.max_reconnect_backoff_ms``: the waits between
  connection attempts of a ``wait_for_ready`` call (defaults 1 s and 120 s,
  ``doc/connection-backoff.md``).
* ``minigrpc.initial_window_size``: per-stream receive window we advertise; default 4 MiB.
* ``minigrpc.connection_window_size``: connection receive window; default 16 MiB.
* ``minigrpc.max_frame_size``: largest frame we accept (16 KiB to 16 MiB); default 1 MiB.

The windows are large because every DATA frame is acknowledged as soon as it is read, and Python
pays per frame (grpc-wire.md §6).
"""

import threading
import time
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

from . import __version__, wire
from .client_protocol import ClientCall, Header, malformed_path, request_headers
from .status import FinishedCall, Metadata, RpcError, Status, StatusCode
from .targets import Target, parse_target
from .transport import CallHandle, Transport, TransportOptions

#: The ``user-agent`` product token (PROTOCOL-HTTP2.md: ``grpc-<lang>-<variant>/<version>``).
USER_AGENT = f"grpc-python-minigrpc/{__version__}"

_MAX_WINDOW = 2**31 - 1
_MIN_FRAME, _MAX_FRAME = 16384, 2**24 - 1

Serializer = Optional[Callable[[Any], bytes]]
Deserializer = Optional[Callable[[bytes], Any]]


def _limit_option(value: Any, name: str) -> Optional[int]:
    """grpcio's message-size options: a negative value means no limit."""
    number = int(value)
    if number < 0:
        return None
    return number


def _ranged_option(value: Any, name: str, low: int, high: int) -> int:
    number = int(value)
    if not low <= number <= high:
        raise ValueError(f"channel option {name!r} must be between {low} and {high}, got {number}")
    return number


class _ChannelConfig:
    """The parsed ``options`` of one channel."""

    def __init__(self, target: Optional[Target], options: Optional[Sequence[Tuple[str, Any]]]):
        self.max_receive: Optional[int] = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH
        self.max_send: Optional[int] = None
        self.authority = target.authority if target is not None else "localhost"
        self.user_agent = USER_AGENT
        transport: dict = {}
        for item in options or ():
            name, value = item
            if name == "grpc.max_receive_message_length":
                self.max_receive = _limit_option(value, name)
            elif name == "grpc.max_send_message_length":
                self.max_send = _limit_option(value, name)
            elif name == "grpc.default_authority":
                self.authority = str(value)
            elif name == "grpc.primary_user_agent":
                self.user_agent = f"{value} {USER_AGENT}"
            elif name == "grpc.max_metadata_size":
                transport["max_header_list_size"] = _limit_option(value, name)
            elif name == "grpc.initial_reconnect_backoff_ms":
                transport["initial_backoff"] = max(0.0, float(value) / 1000.0)
            elif name == "grpc.max_reconnect_backoff_ms":
                transport["max_backoff"] = max(0.0, float(value) / 1000.0)
            elif name == "minigrpc.initial_window_size":
                transport["stream_window"] = _ranged_option(value, name, 1, _MAX_WINDOW)
            elif name == "minigrpc.connection_window_size":
                transport["connection_window"] = _ranged_option(value, name, 65535, _MAX_WINDOW)
            elif name == "minigrpc.max_frame_size":
                transport["max_frame_size"] = _ranged_option(value, name, _MIN_FRAME, _MAX_FRAME)
            # Anything else (grpc.keepalive_time_ms, grpc.enable_retries, ...) is ignored, as
            # grpcio ignores arguments it does not know.
        self.transport = TransportOptions(max_receive_message_length=self.max_receive, **transport)


class Call(FinishedCall):
    """A finished call, as ``with_call`` returns it (grpcio's ``grpc.Call`` for a unary call)."""

    def __init__(self, status: Status) -> None:
        self.status = status

    def add_callback(self, callback: Callable[[], None]) -> bool:
        """grpcio returns False when the call has already ended, which a finished call has."""
        return False

    def __repr__(self) -> str:
        return f"<minigrpc.Call code={self.status.code.name}>"


class FutureTimeoutError(Exception):
    """``result()``/``exception()`` timed out (grpcio's ``grpc.FutureTimeoutError``)."""


class FutureCancelledError(Exception):
    """``result()`` of a cancelled call (grpcio's ``grpc.FutureCancelledError``)."""


class CallFuture(Call):
    """What ``future()`` returns: a ``grpc.Future`` that is also a ``grpc.Call`` (as in grpcio).

    Call methods (``code()``, ``details()``, metadata) block until the call has ended.
    """

    def __init__(self, handle: CallHandle, timeout: Optional[float]) -> None:
        super().__init__(Status(StatusCode.OK))
        self._handle = handle
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._exception: Optional[BaseException] = None
        self._cancelled = False
        self._callbacks: List[Callable[[Any], None]] = []

    def _resolve(self, outcome: Any) -> None:
        with self._lock:
            if self._done.is_set():
                return
            if isinstance(outcome, BaseException):
                self._exception = outcome
                if isinstance(outcome, RpcError):
                    self.status = outcome.status
                    self._cancelled = self._cancelled or (
                        outcome.code() is StatusCode.CANCELLED and self._handle.cancelled
                    )
            else:
                self._response, call = outcome
                self.status = call.status
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    # grpc.Future
    def cancel(self) -> bool:
        """Cancel a running call; False if it had already ended."""
        with self._lock:
            if self._done.is_set():
                return False
            self._cancelled = True
        self._handle.cancel()
        self._resolve(RpcError(self._handle.status))
        return True

    def cancelled(self) -> bool:
        return self._cancelled

    def running(self) -> bool:
        return not self._done.is_set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: Optional[float] = None) -> Any:
        if not self._done.wait(timeout):
            raise FutureTimeoutError()
        if self._cancelled:
            raise FutureCancelledError()
        if self._exception is not None:
            raise self._exception
        return self._response

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        if not self._done.wait(timeout):
            raise FutureTimeoutError()
        if self._cancelled:
            raise FutureCancelledError()
        return self._exception

    def traceback(self, timeout: Optional[float] = None) -> Any:
        error = self.exception(timeout)
        return None if error is None else error.__traceback__

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    # grpc.Call / grpc.RpcContext
    def is_active(self) -> bool:
        return not self._done.is_set()

    def time_remaining(self) -> Optional[float]:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def add_callback(self, callback: Callable[[], None]) -> bool:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(lambda _future: callback())
                return True
        return False

    def code(self) -> StatusCode:
        self._done.wait()
        return super().code()

    def details(self) -> str:
        self._done.wait()
        return super().details()

    def initial_metadata(self) -> Metadata:
        self._done.wait()
        return super().initial_metadata()

    def trailing_metadata(self) -> Metadata:
        self._done.wait()
        return super().trailing_metadata()

    def __repr__(self) -> str:
        state = "done" if self._done.is_set() else "running"
        return f"<minigrpc.CallFuture {state}>"


def _error(code: StatusCode, details: str, call: Optional[ClientCall] = None) -> RpcError:
    initial: Metadata = call.initial_metadata if call is not None else ()
    trailing: Metadata = call.trailing_metadata if call is not None else ()
    return RpcError(Status(code, details, initial, trailing))


class UnaryUnaryMultiCallable:
    """Invokes one unary method; what ``Channel.unary_unary`` returns (grpcio's class of the
    same name)."""

    def __init__(
        self,
        channel: "Channel",
        method: str,
        request_serializer: Serializer,
        response_deserializer: Deserializer,
    ) -> None:
        self._channel = channel
        self._method = method.decode("ascii") if isinstance(method, bytes) else method
        self._serialize = request_serializer
        self._deserialize = response_deserializer

    def __call__(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: Optional[Iterable[Tuple[str, Any]]] = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> Any:
        response, _call = self._invoke(
            request, timeout, metadata, credentials, wait_for_ready, compression
        )
        return response

    def future(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: Optional[Iterable[Tuple[str, Any]]] = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> CallFuture:
        """Start the call in a background thread; return a grpcio-style Future that is a Call.

        ``cancel()`` sends RST_STREAM(CANCEL) and ends the call CANCELLED (grpc-wire.md §5). Only
        this method starts a thread; plain calls and ``with_call`` never do.
        """
        handle = CallHandle()
        future = CallFuture(handle, timeout)

        def run() -> None:
            try:
                outcome: Any = self._invoke(
                    request, timeout, metadata, credentials, wait_for_ready, compression, handle
                )
            except BaseException as exc:  # delivered through the future
                outcome = exc
            future._resolve(outcome)

        threading.Thread(target=run, name="minigrpc-future", daemon=True).start()
        return future

    def with_call(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: Optional[Iterable[Tuple[str, Any]]] = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> Tuple[Any, Call]:
        """Like calling it, but also return the :class:`Call` (status and both metadata)."""
        return self._invoke(request, timeout, metadata, credentials, wait_for_ready, compression)

    def _invoke(
        self,
        request: Any,
        timeout: Optional[float],
        metadata: Optional[Iterable[Tuple[str, Any]]],
        credentials: Any,
        wait_for_ready: Optional[bool],
        compression: Optional[int],
        handle: Optional[CallHandle] = None,
    ) -> Tuple[Any, Call]:
        channel = self._channel
        if channel._closed:
            raise ValueError("Cannot invoke RPC on closed channel!")
        if credentials is not None:
            raise ValueError("call credentials need a secure channel; minigrpc is insecure only")
        if malformed_path(self._method):
            raise _error(StatusCode.INTERNAL, f"malformed method name: {self._method!r}")
        deadline = None if timeout is None else time.monotonic() + timeout
        # Metadata is validated before anything is sent (grpc-wire.md §1.3). grpcio reports
        # invalid metadata as INTERNAL "Invalid metadata"; we add the reason.
        try:
            metadata_headers = wire.encode_metadata(metadata)
        except ValueError as exc:
            raise _error(StatusCode.INTERNAL, f"Invalid metadata: {exc}") from None
        try:
            payload = self._serialize(request) if self._serialize is not None else request
            if not isinstance(payload, (bytes, bytearray, memoryview)):
                raise TypeError(f"serialized request must be bytes, not {type(payload).__name__}")
            payload = bytes(payload)
        except Exception:
            # grpcio's words; the request object is the caller's bug, not the server's.
            raise _error(StatusCode.INTERNAL, "Exception serializing request!") from None
        message, encoding = channel._frame_request(payload, compression)
        if channel._config.max_send is not None and len(message) - 5 > channel._config.max_send:
            raise _error(
                StatusCode.RESOURCE_EXHAUSTED,
                str(wire.MessageTooLarge(len(message) - 5, channel._config.max_send, sending=True)),
            )
        if channel._target is None:
            raise _error(StatusCode.UNAVAILABLE, channel._target_error)
        config = channel._config
        method = self._method

        def make_headers(time_left: Optional[float]) -> List[Header]:
            return request_headers(
                path=method,
                authority=config.authority,
                user_agent=config.user_agent,
                timeout=time_left,
                encoding=encoding,
                metadata=metadata_headers,
            )

        call = channel._transport_for_calls().call(
            message, make_headers, deadline, bool(wait_for_ready), handle
        )
        status = call.status
        assert status is not None
        if status.code is not StatusCode.OK:
            raise RpcError(status)
        response = self._decode_response(call)
        return response, Call(status)

    def _decode_response(self, call: ClientCall) -> Any:
        """Decompress and deserialize the one response message (grpc-wire.md §2, Compression)."""
        compressed, payload = call.messages[0]
        limit = self._channel._config.max_receive
        if compressed:
            encoding = call.response_encoding
            if not encoding or encoding == "identity":
                raise _error(
                    StatusCode.INTERNAL,
                    "grpc: compressed flag set with identity or empty encoding",
                    call,
                )
            try:
                payload = wire.decompress(encoding, payload, limit)
            except wire.UnsupportedEncoding:
                raise _error(
                    StatusCode.INTERNAL,
                    f'grpc: Decompressor is not installed for grpc-encoding "{encoding}"',
                    call,
                ) from None
            except wire.MessageTooLarge as exc:
                raise _error(StatusCode.RESOURCE_EXHAUSTED, str(exc), call) from None
            except wire.DecompressionError as exc:
                raise _error(StatusCode.INTERNAL, str(exc), call) from None
        if self._deserialize is None:
            return payload
        try:
            return self._deserialize(payload)
        except Exception:
            raise _error(StatusCode.INTERNAL, "Exception deserializing response!", call) from None


class Channel:
    """A client channel: one lazily opened HTTP/2 connection shared by every call (issue 2 §4).

    Thread-safe: calls from many threads are multiplexed on the connection. ``close()`` (or
    leaving a ``with`` block) closes it; calls still running end CANCELLED, as in grpcio.
    """

    def __init__(
        self,
        target: str,
        options: Optional[Sequence[Tuple[str, Any]]] = None,
        compression: Optional[int] = None,
    ) -> None:
        self._target_text = target
        self._target: Optional[Target]
        self._target_error = ""
        try:
            self._target = parse_target(target)
        except ValueError as exc:
            # grpcio accepts any target and fails each call UNAVAILABLE; so do we.
            self._target = None
            self._target_error = f"failed to parse target {target!r}: {exc}"
        self._config = _ChannelConfig(self._target, options)
        self._compression = compression
        self._closed = False
        self._transport: Optional[Transport] = None
        if self._target is not None:
            self._transport = Transport(self._target, self._config.transport)

    def _transport_for_calls(self) -> Transport:
        assert self._transport is not None
        return self._transport

    def _frame_request(
        self, payload: bytes, compression: Optional[int]
    ) -> Tuple[bytes, Optional[str]]:
        """Length-prefix the request, compressed when asked and the server accepts it (§2)."""
        choice = compression if compression is not None else self._compression
        name = wire.compression_name(choice)
        if name is not None and self._transport is not None and self._transport.peer_accepts(name):
            return wire.encode_message(wire.compress(name, payload), compressed=True), name
        return wire.encode_message(payload), None

    def unary_unary(
        self,
        method: str,
        request_serializer: Serializer = None,
        response_deserializer: Deserializer = None,
        _registered_method: Optional[bool] = False,
    ) -> UnaryUnaryMultiCallable:
        """A callable for the unary method ``method`` (``/package.Service/Method``).

        ``_registered_method`` is accepted (and ignored) because stubs generated by recent
        grpcio-tools pass it.
        """
        return UnaryUnaryMultiCallable(self, method, request_serializer, response_deserializer)

    def unary_stream(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("minigrpc supports unary-unary calls only")

    stream_unary = unary_stream
    stream_stream = unary_stream

    def subscribe(self, callback: Callable[..., None], try_to_connect: bool = False) -> None:
        raise NotImplementedError("minigrpc channels do not report connectivity")

    def unsubscribe(self, callback: Callable[..., None]) -> None:
        raise NotImplementedError("minigrpc channels do not report connectivity")

    def close(self) -> None:
        """Close the connection; running calls end CANCELLED ("Channel closed!")."""
        self._closed = True
        if self._transport is not None:
            self._transport.close()

    def __del__(self) -> None:
        # Like grpcio: a channel dropped without close() still releases its socket. Nothing else
        # can hold its locks then, since every running call keeps the channel alive.
        try:
            if not self._closed:
                self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<minigrpc.Channel target={self._target_text!r}>"


def insecure_channel(
    target: str,
    options: Optional[Sequence[Tuple[str, Any]]] = None,
    compression: Optional[int] = None,
) -> Channel:
    """A plaintext channel to ``target`` (``unix:path``, ``unix-abstract:name``, ``host:port``,
    ``dns:///host:port``); nothing is connected until the first call."""
    return Channel(target, options, compression)
