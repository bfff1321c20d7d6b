"""The interop ``grpc.testing.TestService``, written against grpcio's ServicerContext API only.

It implements the server side of gRPC's doc/interop-test-descriptions.md for the unary methods, so
the
same instance can be served by ``grpc.server`` (a real grpcio peer for minigrpc's client) and by
minigrpc's own server.  Register it with :func:`minigrpc.descriptors.add_servicer`;
``UnimplementedCall`` is absent so that calling it yields UNIMPLEMENTED.  The streaming methods
follow grpc's interop test descriptions (doc/interop-test-descriptions.md in grpc/grpc).

Two things a real interop server lacks, added for minigrpc's tests:

* ``x-test-sleep-ms: N`` in the request metadata makes the handler wait up to N ms before
  answering, or less if the call ends first (deadline or cancellation) or the test calls
  :meth:`TestServiceServicer.release_sleepers`.  That is a waiting handler, not a sleep used to
  synchronise: deadline tests need a server that is still busy when the deadline passes.
* Every call is recorded in :attr:`TestServiceServicer.calls` (method, metadata, deadline seen).

Request compression (``expect_compressed``, client_compressed_unary): a grpcio servicer *cannot*
see it.  grpcio 1.85 strips ``grpc-encoding`` from ``invocation_metadata()`` (checked: a gzip
request shows only ``user-agent`` and custom keys) and offers no other accessor.  The check is
therefore made only when the context can tell: ``grpc-encoding`` present in the metadata, or a
``request_compression()`` method on the context returning the encoding name (``None`` or
``"identity"`` meaning uncompressed).  Otherwise the field is ignored, as grpc-go's interop
server does.
"""

from __future__ import annotations

import importlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Sequence, Set, Tuple

from tests.interop import empty_pb2, messages_pb2

ECHO_INITIAL_KEY = "x-grpc-test-echo-initial"
ECHO_TRAILING_KEY = "x-grpc-test-echo-trailing-bin"
SLEEP_KEY = "x-test-sleep-ms"

# Seconds between is_active() checks, used only with a context lacking add_callback().
_POLL_INTERVAL = 0.05


@dataclass(frozen=True)
class RecordedCall:
    """What the servicer saw of one call, for tests that check what a client sent."""

    method: str
    metadata: Tuple[Tuple[str, Any], ...]
    time_remaining: Optional[float]
    peer: str


class _StatusApi:
    """The two enums the servicer needs from whichever library serves it."""

    def __init__(self, status_code: Any, compression: Any) -> None:
        self.status_code = status_code
        self.compression = compression

    @classmethod
    def from_module(cls, module: Any) -> _StatusApi:
        return cls(module.StatusCode, module.Compression)

    def code(self, number: int) -> Any:
        """The StatusCode member for a numeric code; unknown numbers become UNKNOWN."""
        for member in self.status_code:
            if member.value[0] == number:
                return member
        return self.status_code.UNKNOWN


def _api_for_context(context: Any) -> _StatusApi:
    """Pick grpcio's or minigrpc's enums from the module that defined the context's class."""
    top_package = type(context).__module__.partition(".")[0]
    if top_package == "minigrpc":
        enums = importlib.import_module("minigrpc.protocol.enums")
        return _StatusApi(enums.StatusCode, enums.Compression)
    return _StatusApi.from_module(importlib.import_module("grpc"))


class TestServiceServicer:
    """Unary methods of grpc.testing.TestService; see the module docstring.

    ``grpc_module``: the module whose ``StatusCode`` and ``Compression`` to use (``grpc`` or
    ``minigrpc``).  When ``None``, it is chosen per call from the context's type.
    """

    __test__ = False  # not a pytest test class despite its name

    def __init__(self, grpc_module: Any = None, server_id: str = "minigrpc-test-server") -> None:
        self._api = _StatusApi.from_module(grpc_module) if grpc_module is not None else None
        self.server_id = server_id
        self._lock = threading.Lock()
        self._no_sleepers = threading.Condition(self._lock)
        self._sleepers: Set[threading.Event] = set()
        self.calls: List[RecordedCall] = []

    # -- helpers -------------------------------------------------------------------------------

    def _status_api(self, context: Any) -> _StatusApi:
        return self._api if self._api is not None else _api_for_context(context)

    def _record(self, method: str, context: Any) -> Tuple[Tuple[str, Any], ...]:
        metadata = tuple((item[0], item[1]) for item in (context.invocation_metadata() or ()))
        time_remaining = getattr(context, "time_remaining", None)
        peer = getattr(context, "peer", None)
        call = RecordedCall(
            method,
            metadata,
            time_remaining() if callable(time_remaining) else None,
            str(peer()) if callable(peer) else "",
        )
        with self._lock:
            self.calls.append(call)
        return metadata

    def release_sleepers(self) -> None:
        """End every wait caused by ``x-test-sleep-ms`` now (tests call this in teardown)."""
        with self._lock:
            sleepers = list(self._sleepers)
        for event in sleepers:
            event.set()

    def _wait_if_asked(self, metadata: Sequence[Tuple[str, Any]], context: Any) -> None:
        """Honour ``x-test-sleep-ms``: wait until that much time passed or the call ended."""
        values = [value for key, value in metadata if key == SLEEP_KEY]
        if not values:
            return
        try:
            seconds = max(0.0, int(values[0]) / 1000.0)
        except ValueError:
            return
        self._wait(seconds, context)

    def _wait(self, seconds: float, context: Any) -> None:
        """Wait ``seconds``, or less if the call ends first or the test releases sleepers."""
        ended = threading.Event()
        with self._lock:
            self._sleepers.add(ended)
        try:
            add_callback = getattr(context, "add_callback", None)
            if add_callback is not None:
                if add_callback(ended.set) is False:
                    return  # the call already ended
                ended.wait(seconds)
                return
            # A context without add_callback: wait in slices, checking whether the call ended.
            deadline = time.monotonic() + seconds
            while context.is_active():
                left = deadline - time.monotonic()
                if left <= 0 or ended.wait(min(left, _POLL_INTERVAL)):
                    return
        finally:
            with self._lock:
                self._sleepers.discard(ended)
                if not self._sleepers:
                    self._no_sleepers.notify_all()

    def wait_for_no_sleepers(self, timeout: float) -> bool:
        """Block until no handler is waiting on ``x-test-sleep-ms``; False on timeout."""
        with self._lock:
            return self._no_sleepers.wait_for(lambda: not self._sleepers, timeout)

    @staticmethod
    def _echo_metadata(metadata: Sequence[Tuple[str, Any]], context: Any) -> None:
        """Echo Metadata (gRPC's doc/interop-test-descriptions.md): initial key in headers, -bin
        key in trailers.

        Called before any status decision, so the echo also happens on error, like grpc-go.
        """
        initial = tuple((k, v) for k, v in metadata if k == ECHO_INITIAL_KEY)
        trailing = tuple((k, v) for k, v in metadata if k == ECHO_TRAILING_KEY)
        if initial:
            context.send_initial_metadata(initial)
        if trailing:
            context.set_trailing_metadata(trailing)

    @staticmethod
    def _request_compressed(metadata: Sequence[Tuple[str, Any]], context: Any) -> Optional[bool]:
        """Whether the request message was compressed, or ``None`` when the context cannot say."""
        probe = getattr(context, "request_compression", None)
        if callable(probe):
            encoding = probe()
            return encoding not in (None, "", "identity")
        encodings = [value for key, value in metadata if key == "grpc-encoding"]
        if encodings:
            return encodings[0] not in ("", "identity")
        return None

    # -- RPCs ----------------------------------------------------------------------------------

    def EmptyCall(self, request: Any, context: Any) -> Any:
        """empty_unary: an empty response (gRPC's doc/interop-test-descriptions.md)."""
        metadata = self._record("EmptyCall", context)
        self._wait_if_asked(metadata, context)
        self._echo_metadata(metadata, context)
        return empty_pb2.Empty()

    def UnaryCall(self, request: Any, context: Any) -> Any:
        """UnaryCall as gRPC's doc/interop-test-descriptions.md describes it."""
        api = self._status_api(context)
        metadata = self._record("UnaryCall", context)
        self._wait_if_asked(metadata, context)
        self._echo_metadata(metadata, context)

        if request.HasField("expect_compressed") and request.expect_compressed.value:
            if self._request_compressed(metadata, context) is False:
                context.abort(
                    api.status_code.INVALID_ARGUMENT,
                    "expected a compressed request, but the message was not compressed",
                )
        if request.response_type != messages_pb2.COMPRESSABLE:
            context.abort(
                api.status_code.INVALID_ARGUMENT,
                f"unsupported response_type {request.response_type}",
            )
        if request.response_size < 0:
            context.abort(api.status_code.INVALID_ARGUMENT, "negative response_size")
        if request.HasField("response_status") and request.response_status.code != 0:
            context.abort(api.code(request.response_status.code), request.response_status.message)
        if request.HasField("response_compressed"):
            context.set_compression(
                api.compression.Gzip
                if request.response_compressed.value
                else api.compression.NoCompression
            )

        response = messages_pb2.SimpleResponse(
            payload=messages_pb2.Payload(
                type=messages_pb2.COMPRESSABLE, body=bytes(request.response_size)
            )
        )
        if request.fill_server_id:
            response.server_id = self.server_id
        return response

    # -- streaming RPCs --------------------------------------------------------------------------

    def _streamed_responses(self, request: Any, context: Any) -> Iterator[Any]:
        """One response per ``response_parameters`` entry, each after its ``interval_us``."""
        api = self._status_api(context)
        if request.HasField("response_status") and request.response_status.code != 0:
            context.abort(api.code(request.response_status.code), request.response_status.message)
        for parameters in request.response_parameters:
            if parameters.size < 0:
                context.abort(api.status_code.INVALID_ARGUMENT, "negative size")
            if parameters.interval_us > 0:
                self._wait(parameters.interval_us / 1e6, context)
            yield messages_pb2.StreamingOutputCallResponse(
                payload=messages_pb2.Payload(
                    type=messages_pb2.COMPRESSABLE, body=bytes(parameters.size)
                )
            )

    def StreamingOutputCall(self, request: Any, context: Any) -> Iterator[Any]:
        """server_streaming: the responses that ``response_parameters`` asks for."""
        metadata = self._record("StreamingOutputCall", context)
        self._wait_if_asked(metadata, context)
        self._echo_metadata(metadata, context)
        yield from self._streamed_responses(request, context)

    def StreamingInputCall(self, request_iterator: Iterator[Any], context: Any) -> Any:
        """client_streaming: the sum of the request payloads' sizes."""
        metadata = self._record("StreamingInputCall", context)
        self._wait_if_asked(metadata, context)
        self._echo_metadata(metadata, context)
        total = sum(len(request.payload.body) for request in request_iterator)
        return messages_pb2.StreamingInputCallResponse(aggregated_payload_size=total)

    def FullDuplexCall(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        """ping_pong and friends: each request answered as soon as it arrives."""
        metadata = self._record("FullDuplexCall", context)
        self._wait_if_asked(metadata, context)
        self._echo_metadata(metadata, context)
        for request in request_iterator:
            yield from self._streamed_responses(request, context)

    def HalfDuplexCall(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        """Every request read first, then all of them answered in order."""
        metadata = self._record("HalfDuplexCall", context)
        self._echo_metadata(metadata, context)
        requests = list(request_iterator)
        for request in requests:
            yield from self._streamed_responses(request, context)
