"""The four multi-callables a channel hands out, one per RPC kind, with grpcio's signatures.

====================  =================================  ======================================
kind                  ``__call__`` takes / returns         also
====================  =================================  ======================================
unary-unary           a request / the response            ``with_call``, ``future``
unary-stream          a request / a response iterator     (the iterator is a Call and a Future)
stream-unary          a request iterator / the response   ``with_call``, ``future``
stream-stream         a request iterator / an iterator    (the iterator is a Call and a Future)
====================  =================================  ======================================

Every outcome other than OK raises :class:`minigrpc.RpcError`.  What all four do before a call
starts lives in :class:`_Method`: validate the metadata (before anything is sent), build the
header block for the time left, choose the compression, serialize and frame each message.
"""

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Tuple

from ..driver import interfaces
from ..http2.hpack_codec import Header
from ..protocol import wire
from ..protocol.client_protocol import ClientCall
from ..protocol.enums import StatusCode
from ..protocol.headers import malformed_path, request_headers
from ..protocol.status import CallStatus, MessageTooLarge
from .call import Call, CallFuture, InactiveRpcError, RequestSender, StreamingCall, decode_response
from .client_connection import BlockingClientConnection
from .transport import CallHandle

if TYPE_CHECKING:  # pragma: no cover
    from .channel import Channel

Serializer = Optional[Callable[[Any], bytes]]
Deserializer = Optional[Callable[[bytes], Any]]
MetadataArg = Optional[Iterable[Tuple[str, Any]]]


def _error(code: StatusCode, details: str) -> InactiveRpcError:
    return InactiveRpcError(CallStatus(code.number, details))


class _Invocation:
    """One call about to start: its deadline, header factory, compression and framing."""

    __slots__ = ("deadline", "encoding", "make_headers", "method")

    def __init__(self, method: "_Method", timeout: Optional[float], metadata: MetadataArg,
                 credentials: Any, compression: Optional[int]) -> None:
        channel = method.channel
        if channel.closed:
            raise ValueError("Cannot invoke RPC on closed channel!")
        if malformed_path(method.path):
            raise _error(StatusCode.INTERNAL, f"malformed method name: {method.path!r}")
        # Metadata is validated before anything is sent. As in grpcio, metadata of the wrong
        # shape or type raises TypeError; well-typed metadata the wire cannot carry (an upper-case
        # key, a non-ASCII value) ends the call INTERNAL "Invalid metadata", with the reason.
        try:
            metadata_headers = wire.encode_metadata(metadata)
        except wire.MetadataTypeError:
            raise
        except ValueError as exc:
            raise _error(StatusCode.INTERNAL, f"Invalid metadata: {exc}") from None
        metadata_headers.extend(
            channel.call_credentials_headers(credentials, method.path, timeout)
        )
        self.method = method
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.encoding = channel.request_encoding(compression)
        config = channel.config
        path, encoding, scheme = method.path, self.encoding, channel.scheme

        # String annotations: a nested def evaluates its annotations on every call otherwise.
        def make_headers(time_left: "Optional[float]") -> "List[Header]":
            return request_headers(
                path=path,
                authority=config.authority,
                user_agent=config.user_agent,
                timeout=time_left,
                encoding=encoding,
                metadata=metadata_headers,
                scheme=scheme,
            )

        self.make_headers = make_headers

    def frame(self, request: Any) -> wire.Framed:
        """Serialize, compress (when chosen) and length-prefix one request message."""
        method = self.method
        try:
            payload = method.serializer(request) if method.serializer is not None else request
            if not isinstance(payload, (bytes, bytearray, memoryview)):
                raise TypeError(f"serialized request must be bytes, not {type(payload).__name__}")
            payload = bytes(payload)
        except Exception:
            # grpcio's words; the request object is the caller's bug, not the server's.
            raise _error(StatusCode.INTERNAL, "Exception serializing request!") from None
        compressed = self.encoding is not None
        if self.encoding is not None:
            payload = wire.compress(self.encoding, payload)
        limit = method.channel.config.max_send
        if limit is not None and len(payload) > limit:
            raise _error(
                StatusCode.RESOURCE_EXHAUSTED, str(MessageTooLarge(len(payload), limit, True))
            )
        return wire.frame_message(payload, compressed)

    def new_call(self, request: Optional[wire.Framed], unary_response: bool) -> ClientCall:
        return ClientCall(
            deadline=self.deadline,
            header_factory=self.make_headers,
            request=request,
            unary_response=unary_response,
        )


class _Method:
    """What the four multi-callables share: the channel, the path and the (de)serializers."""

    def __init__(
        self,
        channel: "Channel",
        method: Any,
        request_serializer: Serializer,
        response_deserializer: Deserializer,
    ) -> None:
        self.channel = channel
        self.path: str = method.decode("ascii") if isinstance(method, bytes) else method
        self.serializer = request_serializer
        self.deserializer = response_deserializer

    def raise_if_no_target(self) -> None:
        """UNAVAILABLE when the channel's target did not parse or resolve (the error it saw)."""
        if self.channel.transport is None:
            raise _error(StatusCode.UNAVAILABLE, self.channel.target_error)

    def _stream(
        self,
        invocation: _Invocation,
        request: Optional[wire.Framed],
        requests: Any,
        unary_response: bool,
        wait_for_ready: Optional[bool],
    ) -> StreamingCall:
        """Open a call whose request or response streams, and start sending its requests."""
        transport = self.channel.transport
        assert transport is not None

        def open_call() -> Tuple[Optional[BlockingClientConnection], ClientCall]:
            return transport.open_stream(
                lambda: invocation.new_call(request, unary_response),
                invocation.deadline,
                bool(wait_for_ready),
            )

        connection, call = open_call()
        streaming = StreamingCall(
            connection,
            call,
            self.deserializer,
            self.channel.config.max_receive,
            unary_response=unary_response,
            reopen=open_call if request is not None else None,
        )
        if requests is not None and connection is not None and not call.done:
            RequestSender(connection, call, requests, invocation.frame).start()
        return streaming


class UnaryUnaryMultiCallable(_Method, interfaces.UnaryUnaryMultiCallable):
    """Invokes one unary method; what ``Channel.unary_unary`` returns."""

    def __call__(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> Any:
        response, _call = self._invoke(
            request, timeout, metadata, credentials, wait_for_ready, compression
        )
        return response

    def with_call(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> Tuple[Any, Call]:
        """Like calling it, but also return the :class:`Call` (status and both metadata)."""
        return self._invoke(request, timeout, metadata, credentials, wait_for_ready, compression)

    def future(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> CallFuture:
        """Start the call in a background thread; return a grpcio-style Future that is a Call.

        ``cancel()`` sends RST_STREAM(CANCEL) and ends the call CANCELLED. Only this method
        starts a thread; plain calls and ``with_call`` never do.
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
            future.resolve(outcome)

        threading.Thread(target=run, name="minigrpc-future", daemon=True).start()
        return future

    def _invoke(
        self,
        request: Any,
        timeout: Optional[float],
        metadata: MetadataArg,
        credentials: Any,
        wait_for_ready: Optional[bool],
        compression: Optional[int],
        handle: Optional[CallHandle] = None,
    ) -> Tuple[Any, Call]:
        invocation = _Invocation(self, timeout, metadata, credentials, compression)
        message = invocation.frame(request)
        self.raise_if_no_target()
        transport = self.channel.transport
        assert transport is not None
        call = transport.call(
            message, invocation.make_headers, invocation.deadline, bool(wait_for_ready), handle
        )
        status = call.status
        assert status is not None
        if status.code is not StatusCode.OK:
            raise InactiveRpcError(status)
        response = decode_response(
            call.messages[0],
            call.response_encoding,
            self.channel.config.max_receive,
            self.deserializer,
            call,
        )
        return response, Call(status, response)


class UnaryStreamMultiCallable(_Method, interfaces.UnaryStreamMultiCallable):
    """Invokes a server-streaming method; what ``Channel.unary_stream`` returns."""

    def __call__(
        self,
        request: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> StreamingCall:
        """Start the call; iterate the result for the responses (it is also a Call)."""
        invocation = _Invocation(self, timeout, metadata, credentials, compression)
        message = invocation.frame(request)
        self.raise_if_no_target()
        return self._stream(invocation, message, None, False, wait_for_ready)


class StreamUnaryMultiCallable(_Method, interfaces.StreamUnaryMultiCallable):
    """Invokes a client-streaming method; what ``Channel.stream_unary`` returns."""

    def __call__(
        self,
        request_iterator: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> Any:
        response, _call = self.with_call(
            request_iterator, timeout, metadata, credentials, wait_for_ready, compression
        )
        return response

    def with_call(
        self,
        request_iterator: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> Tuple[Any, Call]:
        """Send every request, then return the response and the :class:`Call`."""
        call = self._start(
            request_iterator, timeout, metadata, credentials, wait_for_ready, compression
        )
        response = call.result()
        return response, Call(call.status, response)

    def future(
        self,
        request_iterator: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> StreamingCall:
        """Start the call; ``result()`` waits for the response (the result is also a Call).

        A thread waits for the end, so that callbacks run and ``done()`` turns True without
        anybody waiting, as in grpcio.
        """
        call = self._start(
            request_iterator, timeout, metadata, credentials, wait_for_ready, compression
        )
        call.watch()
        return call

    def _start(
        self,
        request_iterator: Any,
        timeout: Optional[float],
        metadata: MetadataArg,
        credentials: Any,
        wait_for_ready: Optional[bool],
        compression: Optional[int],
    ) -> StreamingCall:
        invocation = _Invocation(self, timeout, metadata, credentials, compression)
        self.raise_if_no_target()
        return self._stream(invocation, None, request_iterator, True, wait_for_ready)


class StreamStreamMultiCallable(_Method, interfaces.StreamStreamMultiCallable):
    """Invokes a bidirectional-streaming method; what ``Channel.stream_stream`` returns."""

    def __call__(
        self,
        request_iterator: Any,
        timeout: Optional[float] = None,
        metadata: MetadataArg = None,
        credentials: Any = None,
        wait_for_ready: Optional[bool] = None,
        compression: Optional[int] = None,
    ) -> StreamingCall:
        """Start the call; a thread sends the requests while you iterate the responses."""
        invocation = _Invocation(self, timeout, metadata, credentials, compression)
        self.raise_if_no_target()
        return self._stream(invocation, None, request_iterator, False, wait_for_ready)
