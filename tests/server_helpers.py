"""Helpers for the minigrpc server tests: a running minigrpc server and a raw HTTP/2 client.

* :class:`MinigrpcServer` runs ``minigrpc.server()`` with the interop ``TestService`` (and any
  extra generic handlers) on one of the address kinds of grpc-wire.md §0 (``unix``,
  ``unix-abstract``, ``tcp``), so every test can run over all three.
* :class:`RawH2Client` speaks HTTP/2 with h2 directly on a real socket, so tests can send what a
  gRPC library never would (GET, text/plain, bad flags) and look at every frame of the answer.
* :func:`interop_callables` builds grpcio multi-callables for the interop methods.

Nothing here sleeps to synchronise: reads block with a timeout and fail the test on expiry.
"""

from __future__ import annotations

import socket
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import h2.config
import h2.connection
import h2.events
import h2.settings

import minigrpc
from minigrpc import http2, targets, wire
from minigrpc.descriptors import add_servicer
from tests.interop import empty_pb2, messages_pb2, test_pb2
from tests.interop.servicer import TestServiceServicer
from tests.peers import ADDRESS_KINDS, listen_address, short_temp_dir

__all__ = [
    "ADDRESS_KINDS",
    "MinigrpcServer",
    "RawH2Client",
    "RawResponse",
    "grpc_request_headers",
    "interop_callables",
]

UNARY_PATH = "/grpc.testing.TestService/UnaryCall"
EMPTY_PATH = "/grpc.testing.TestService/EmptyCall"
#: How long a raw read waits before the test fails (a hang is a failure, never a pass).
READ_TIMEOUT = 10.0


class MinigrpcServer:
    """A started minigrpc server with the interop servicer; stop it with :meth:`stop`.

    ``kind`` is an address kind; ``target`` is what a client dials.  ``handlers`` are extra
    generic handlers; ``server_kwargs`` go to ``minigrpc.server()``.
    """

    def __init__(
        self,
        kind: str,
        handlers: Sequence[Any] = (),
        with_interop: bool = True,
        **server_kwargs: Any,
    ) -> None:
        self.kind = kind
        self.directory = short_temp_dir() if kind == "unix" else None
        self.servicer = TestServiceServicer()
        self.server = minigrpc.server(**server_kwargs)
        if with_interop:
            add_servicer(
                self.server, test_pb2.DESCRIPTOR.services_by_name["TestService"], self.servicer
            )
        if handlers:
            self.server.add_generic_rpc_handlers(handlers)
        address = listen_address(kind, self.directory)
        port = self.server.add_insecure_port(address)
        self.target = f"127.0.0.1:{port}" if kind == "tcp" else address
        self.server.start()

    @property
    def socket_path(self) -> Optional[str]:
        return self.target[len("unix:") :] if self.kind == "unix" else None

    def stop(self, grace: Optional[float] = None) -> None:
        self.servicer.release_sleepers()
        assert self.server.stop(grace).wait(30), "the minigrpc server did not stop"

    def __enter__(self) -> MinigrpcServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        if self.directory:
            import shutil

            shutil.rmtree(self.directory, ignore_errors=True)


def connect(target: str, timeout: float = READ_TIMEOUT) -> socket.socket:
    """A connected blocking socket to a target string (unix, abstract or TCP)."""
    parsed = targets.parse_target(target)
    if parsed.family == socket.AF_UNIX:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # A blocking connect waits for room in a full backlog; with a timeout Linux says EAGAIN.
        sock.connect(parsed.address)
        sock.settimeout(timeout)
        return sock
    assert isinstance(parsed.address, tuple)
    sock = socket.create_connection(parsed.address, timeout=timeout)
    return sock


def grpc_request_headers(
    path: str = EMPTY_PATH,
    *,
    method: bytes = b"POST",
    content_type: Optional[bytes] = b"application/grpc",
    te: bool = True,
    extra: Sequence[Tuple[bytes, bytes]] = (),
) -> List[Tuple[bytes, bytes]]:
    """Request headers as a gRPC client sends them (grpc-wire.md §1.1), with knobs to break them."""
    headers = [
        (b":method", method),
        (b":scheme", b"http"),
        (b":path", path.encode("ascii")),
        (b":authority", b"localhost"),
    ]
    if content_type is not None:
        headers.append((b"content-type", content_type))
    if te:
        headers.append((b"te", b"trailers"))
    headers.extend(extra)
    return headers


class RawResponse:
    """Everything one stream received: headers, body, trailers, and any reset."""

    def __init__(self) -> None:
        self.headers: List[Tuple[bytes, bytes]] = []
        self.trailers: List[Tuple[bytes, bytes]] = []
        self.body = bytearray()
        self.reset_code: Optional[int] = None
        self.ended = False

    def header(self, name: bytes) -> Optional[bytes]:
        for key, value in self.headers + self.trailers:
            if key == name:
                return value
        return None

    @property
    def http_status(self) -> Optional[int]:
        value = self.header(b":status")
        return int(value) if value is not None else None

    @property
    def grpc_status(self) -> Optional[int]:
        value = self.header(b"grpc-status")
        return int(value) if value is not None else None

    @property
    def grpc_message(self) -> str:
        return wire.percent_decode(self.header(b"grpc-message") or b"")

    @property
    def trailers_only(self) -> bool:
        return not self.trailers and self.header(b"grpc-status") is not None

    def messages(self) -> List[Tuple[bool, bytes]]:
        return wire.MessageDecoder(None).feed(bytes(self.body))


class RawH2Client:
    """A minimal HTTP/2 client on h2 and a real socket, for requests gRPC libraries won't send."""

    def __init__(self, target: str, window: int = 4 * 1024 * 1024) -> None:
        self.sock = connect(target)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.conn.initiate_connection()
        self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        if window > 65535:
            self.conn.increment_flow_control_window(window - 65535)
        self.responses: Dict[int, RawResponse] = {}
        self.remote_settings: Dict[int, int] = {}
        self.goaways: List[h2.events.ConnectionTerminated] = []
        self.ping_acks: List[bytes] = []
        self.events: List[Any] = []
        self.closed = False
        self._splitter = http2.FrameSplitter()
        self.flush()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def send_request(
        self,
        headers: List[Tuple[bytes, bytes]],
        body: Optional[bytes] = None,
        end_stream: bool = True,
    ) -> int:
        stream_id = self.conn.get_next_available_stream_id()
        self.responses[stream_id] = RawResponse()
        self.conn.send_headers(stream_id, headers, end_stream=body is None and end_stream)
        if body is not None:
            self.send_body(stream_id, body, end_stream)
        self.flush()
        return stream_id

    def send_body(self, stream_id: int, body: bytes, end_stream: bool = True) -> None:
        """Send ``body``, waiting for window as needed (keeps reading while it waits, §6)."""
        view = memoryview(body)
        while view:
            window = self.conn.local_flow_control_window(stream_id)
            size = min(window, self.conn.max_outbound_frame_size, len(view))
            if size <= 0:
                self.flush()
                self.read_once()
                continue
            self.conn.send_data(stream_id, bytes(view[:size]))
            view = view[size:]
        if end_stream:
            self.conn.end_stream(stream_id)
        self.flush()

    def read_once(self) -> None:
        """Read one chunk (blocking, with the socket timeout) and process its events."""
        data = self.sock.recv(1 << 20)
        if not data:
            self.closed = True
            raise ConnectionError("the server closed the connection")
        # One chunk per GOAWAY, and h2 reopened after each, so that a graceful shutdown can be
        # watched to its end like a real client does (grpc-wire.md §7, GOAWAY in h2).
        for chunk in self._splitter.feed(data):
            for event in self.conn.receive_data(chunk):
                self.events.append(event)
                self._on_event(event)
                if isinstance(event, h2.events.ConnectionTerminated):
                    http2.reopen_after_goaway(self.conn)
        self.flush()

    def _on_event(self, event: Any) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            self.responses[event.stream_id].headers.extend(event.headers)
        elif isinstance(event, h2.events.TrailersReceived):
            self.responses[event.stream_id].trailers.extend(event.headers)
        elif isinstance(event, h2.events.DataReceived):
            self.responses[event.stream_id].body += event.data
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            self.responses[event.stream_id].ended = True
        elif isinstance(event, h2.events.StreamReset):
            response = self.responses.get(event.stream_id)
            if response is not None:
                response.reset_code = event.error_code
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            for code, change in event.changed_settings.items():
                self.remote_settings[int(code)] = change.new_value
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaways.append(event)
        elif isinstance(event, h2.events.PingAckReceived):
            self.ping_acks.append(event.ping_data)

    def read_until(self, predicate: Callable[[], bool]) -> None:
        """Read until ``predicate()`` holds; the socket timeout fails the test on a hang."""
        while not predicate():
            self.read_once()

    def wait_response(self, stream_id: int, until_reset: bool = False) -> RawResponse:
        response = self.responses[stream_id]
        if until_reset:
            self.read_until(lambda: response.reset_code is not None)
        else:
            self.read_until(lambda: response.ended or response.reset_code is not None)
        return response

    def call(self, headers: List[Tuple[bytes, bytes]], body: Optional[bytes] = None) -> RawResponse:
        return self.wait_response(self.send_request(headers, body))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> RawH2Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def interop_callables(channel: Any) -> Tuple[Any, Any]:
    """``(EmptyCall, UnaryCall)`` multi-callables on a grpcio or minigrpc channel."""
    empty = channel.unary_unary(
        EMPTY_PATH,
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=empty_pb2.Empty.FromString,
    )
    unary = channel.unary_unary(
        UNARY_PATH,
        request_serializer=messages_pb2.SimpleRequest.SerializeToString,
        response_deserializer=messages_pb2.SimpleResponse.FromString,
    )
    return empty, unary


def large_unary_request(**fields: Any) -> Any:
    """grpc-wire.md §9 large_unary: 271,828 request bytes, 314,159 response bytes."""
    return messages_pb2.SimpleRequest(
        response_size=314159, payload=messages_pb2.Payload(body=bytes(271828)), **fields
    )


def run_in_threads(count: int, function: Callable[[int], None]) -> List[BaseException]:
    """Run ``function(i)`` on ``count`` threads; return the exceptions they raised."""
    errors: List[BaseException] = []
    lock = threading.Lock()

    def runner(index: int) -> None:
        try:
            function(index)
        except BaseException as exc:  # collected and asserted on by the caller
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return errors


def iterate_kinds() -> Iterator[str]:
    yield from ADDRESS_KINDS
