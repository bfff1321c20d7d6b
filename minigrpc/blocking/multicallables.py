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
starts is :class:`minigrpc.driver.invocation.Invocation`'s, shared with the asyncio API: validate
the metadata (before anything is sent), build the header block for the time left, choose the
compression, serialize and frame each message; the transport runs the call's steps.
"""

import threading
from typing import Any, Iterable, Optional, Tuple

from ..driver import interfaces
from ..driver.invocation import CallFailed, Invocation, Method
from ..protocol import wire
from ..protocol.client_protocol import ClientCall
from ..protocol.enums import StatusCode
from .call import Call, CallFuture, InactiveRpcError, RequestSender, StreamingCall
from .client_connection import BlockingClientConnection
from .hedge import BlockingHedge
from .transport import BlockingTransport, CallHandle

MetadataArg = Optional[Iterable[Tuple[str, Any]]]


class _MultiCallable:
    """What the four share: the method and the channel's transport (None: the channel has no
    target, and its calls fail UNAVAILABLE)."""

    def __init__(self, method: Method, transport: Optional[BlockingTransport]) -> None:
        self._method = method
        self._transport = transport

    def _invocation(
        self,
        timeout: Optional[float],
        metadata: MetadataArg,
        credentials: Any,
        wait_for_ready: Optional[bool],
        compression: Optional[int],
        request: Any = None,
        framed: bool = False,
    ) -> Tuple[Invocation, BlockingTransport, Optional[wire.Framed]]:
        """Start-up of a call: its invocation, the transport and (``framed``) its request
        framed; an :class:`InactiveRpcError` when it fails before it can start."""
        try:
            invocation = Invocation(
                self._method, timeout, metadata, credentials, compression, wait_for_ready
            )
            message = invocation.frame(request) if framed else None
            self._method.raise_if_no_target()
        except CallFailed as exc:
            raise InactiveRpcError(exc.status) from None
        assert self._transport is not None
        return invocation, self._transport, message

    def _stream(
        self,
        invocation: Invocation,
        transport: BlockingTransport,
        request: Optional[wire.Framed],
        requests: Any,
        unary_response: bool,
    ) -> StreamingCall:
        """Open a call whose request or response streams, and start sending its requests."""
        if invocation.hedging is not None:
            hedge = BlockingHedge(transport, invocation, request, unary_response)
            hedge.start()
            streaming = StreamingCall(
                None, hedge.placeholder(), invocation.decode, unary_response, hedge=hedge)
            if requests is not None:
                RequestSender(streaming, requests, invocation.frame).start()
            return streaming
        steps = transport.steps(invocation, request, unary_response)

        def open_call() -> Tuple[Optional[BlockingClientConnection], ClientCall]:
            return transport.open(steps)

        connection, call = open_call()
        streaming = StreamingCall(
            connection, call, invocation.decode, unary_response, steps, open_call,
            transport.guarded,
        )
        if requests is not None and connection is not None and not call.done:
            RequestSender(streaming, requests, invocation.frame).start()
        return streaming


class UnaryUnaryMultiCallable(_MultiCallable, interfaces.UnaryUnaryMultiCallable):
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
        invocation, transport, message = self._invocation(
            timeout, metadata, credentials, wait_for_ready, compression, request, True
        )
        if invocation.hedging is not None:
            call = _run_hedged(invocation, transport, message, handle)
        else:
            steps = transport.steps(invocation, message, True)
            call = transport.run(steps, handle)
        status = call.status
        assert status is not None
        if status.code is not StatusCode.OK:
            raise InactiveRpcError(status)
        try:
            response = invocation.decode(call.messages[0], call)
        except CallFailed as exc:
            raise InactiveRpcError(exc.status) from None
        return response, Call(status, response)


def _run_hedged(
    invocation: Invocation,
    transport: BlockingTransport,
    request: Optional[wire.Framed],
    handle: Optional[CallHandle],
) -> ClientCall:
    """Run a hedged unary call to its end (:mod:`minigrpc.blocking.hedge`): its winning
    attempt, or the attempt or status it ended with."""
    hedge = BlockingHedge(transport, invocation, request, True)
    if handle is not None:
        handle.on_cancel = hedge.cancel
        if handle.cancelled:
            hedge.cancel(handle.status)
    hedge.start()
    outcome = hedge.outcome()
    assert outcome is not None
    connection, call = outcome
    if connection is not None and not call.done:
        connection.wait_done(call, call.deadline)
    if call.status is not None:
        hedge.ended(call.status.code_number)
    return call


class UnaryStreamMultiCallable(_MultiCallable, interfaces.UnaryStreamMultiCallable):
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
        invocation, transport, message = self._invocation(
            timeout, metadata, credentials, wait_for_ready, compression, request, True
        )
        return self._stream(invocation, transport, message, None, False)


class StreamUnaryMultiCallable(_MultiCallable, interfaces.StreamUnaryMultiCallable):
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
        invocation, transport, _ = self._invocation(
            timeout, metadata, credentials, wait_for_ready, compression
        )
        return self._stream(invocation, transport, None, request_iterator, True)


class StreamStreamMultiCallable(_MultiCallable, interfaces.StreamStreamMultiCallable):
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
        invocation, transport, _ = self._invocation(
            timeout, metadata, credentials, wait_for_ready, compression
        )
        return self._stream(invocation, transport, None, request_iterator, False)
