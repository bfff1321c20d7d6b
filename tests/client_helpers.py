"""Helpers for the client tests: real HTTP/2 server peers built on h2, in memory and on sockets.

* :class:`MemoryServer`: a server-side ``H2Connection`` wired to a
  :class:`~minigrpc.client_protocol.ClientConnectionProtocol` through plain byte hand-overs, for
  unit tests of the sans-IO client (no sockets, no threads, no timing).
* :class:`ScriptedServer`: a real HTTP/2 server on a unix socket, one thread per connection, whose
  answer to each request a test scripts. It plays the misbehaving or unusual servers a grpcio
  server cannot be made to be: GOAWAY at a chosen moment, REFUSED_STREAM, a 404 page, EOF before
  SETTINGS.

Nothing here mocks minigrpc: both peers are h2 state machines speaking real HTTP/2.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings

from minigrpc import wire
from minigrpc.client_protocol import ClientCall, ClientConnectionProtocol
from minigrpc.headers import request_headers

Header = Tuple[bytes, bytes]

GRPC_RESPONSE_HEADERS: List[Header] = [(b":status", b"200"), (b"content-type", b"application/grpc")]


def server_connection(settings: Optional[Dict[int, int]] = None) -> h2.connection.H2Connection:
    """A server-side h2 connection with its SETTINGS queued (and changed, if asked)."""
    conn = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=False, header_encoding=None)
    )
    conn.initiate_connection()
    if settings:
        conn.update_settings(settings)
    return conn


def make_call(
    request: bytes = b"",
    *,
    path: str = "/test.Service/Method",
    metadata: Sequence[Header] = (),
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    compressed: bool = False,
    encoding: Optional[str] = None,
) -> ClientCall:
    """A ClientCall for ``request`` (framed as one Length-Prefixed-Message)."""
    headers = request_headers(
        path=path,
        authority="localhost",
        user_agent="grpc-python-minigrpc/test",
        timeout=timeout,
        encoding=encoding,
        metadata=metadata,
    )
    return ClientCall(
        request=wire.encode_message(request, compressed), headers=headers, deadline=deadline
    )


class MemoryServer:
    """A real server-side ``H2Connection`` exchanging bytes with a client protocol in memory."""

    def __init__(
        self,
        client: Optional[ClientConnectionProtocol] = None,
        settings: Optional[Dict[int, int]] = None,
        handshake: bool = True,
    ) -> None:
        self.client = client or ClientConnectionProtocol()
        self.client.initiate()
        self.conn = server_connection(settings)
        self.requests: Dict[int, List[Header]] = {}
        self.bodies: Dict[int, bytes] = {}
        self.ended: List[int] = []
        self.resets: Dict[int, int] = {}
        self.server_events: List[Any] = []
        if handshake:
            self.pump()

    def to_server(self) -> List[Any]:
        """Deliver the client's queued bytes to the server; return h2's server events."""
        data = self.client.data_to_send()
        if not data:
            return []
        events = self.conn.receive_data(data)
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.requests[event.stream_id] = list(event.headers)
                self.bodies[event.stream_id] = b""
            elif isinstance(event, h2.events.DataReceived):
                self.bodies[event.stream_id] = self.bodies.get(event.stream_id, b"") + event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.ended.append(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                self.resets[event.stream_id] = int(event.error_code)
        self.server_events.extend(events)
        return events

    def to_client(self, data: Optional[bytes] = None) -> List[Any]:
        """Deliver the server's queued bytes (or ``data``) to the client; return its events."""
        if data is None:
            data = self.conn.data_to_send()
        if not data:
            return []
        return self.client.receive_data(data)

    def pump(self) -> List[Any]:
        """Exchange bytes both ways until neither side has anything to say."""
        client_events: List[Any] = []
        for _ in range(100):
            moved = bool(self.to_server())
            more = self.to_client()
            client_events.extend(more)
            if not moved and not more and not self.conn.data_to_send():
                break
        return client_events

    def start(self, call: ClientCall) -> int:
        """Start ``call`` on the client and deliver its frames; return its stream id."""
        self.client.start_call(call)
        self.to_server()
        return call.stream_id

    # -- server answers -----------------------------------------------------------------

    def headers(self, stream_id: int, extra: Sequence[Header] = (), end: bool = False) -> None:
        self.conn.send_headers(stream_id, GRPC_RESPONSE_HEADERS + list(extra), end_stream=end)

    def message(self, stream_id: int, payload: bytes, compressed: bool = False) -> None:
        self.conn.send_data(stream_id, wire.encode_message(payload, compressed))

    def trailers(
        self,
        stream_id: int,
        code: int = 0,
        message: Optional[str] = None,
        extra: Sequence[Header] = (),
    ) -> None:
        block: List[Header] = [(b"grpc-status", str(code).encode())]
        if message is not None:
            block.append((b"grpc-message", wire.percent_encode(message).encode()))
        self.conn.send_headers(stream_id, block + list(extra), end_stream=True)

    def respond(
        self, stream_id: int, payload: bytes = b"", code: int = 0, message: Optional[str] = None
    ) -> List[Any]:
        """A complete normal response (headers, one message, trailers), delivered."""
        self.headers(stream_id)
        self.message(stream_id, payload)
        self.trailers(stream_id, code, message)
        return self.to_client()

    def trailers_only(
        self, stream_id: int, code: int, message: Optional[str] = None, extra: Sequence[Header] = ()
    ) -> List[Any]:
        block = [*GRPC_RESPONSE_HEADERS, (b"grpc-status", str(code).encode())]
        if message is not None:
            block.append((b"grpc-message", wire.percent_encode(message).encode()))
        self.conn.send_headers(stream_id, block + list(extra), end_stream=True)
        return self.to_client()


# -- a scripted server on a real socket -------------------------------------------------------


class ServerRequest:
    """One request as a :class:`ScriptedServer` handler sees it, with ways to answer it."""

    def __init__(
        self, server_conn: ServerConnection, stream_id: int, headers: List[Header], body: bytes
    ) -> None:
        self.connection = server_conn
        self.stream_id = stream_id
        self.headers = headers
        self.body = body

    @property
    def path(self) -> str:
        return dict(self.headers)[b":path"].decode()

    def header(self, name: str) -> Optional[str]:
        for key, value in self.headers:
            if key == name.encode():
                return value.decode("utf-8", "replace")
        return None

    @property
    def message(self) -> bytes:
        """The request payload (the body without its 5-byte prefix)."""
        return self.body[5:]

    def respond(self, payload: bytes = b"", code: int = 0, message: str = "") -> None:
        conn = self.connection.conn
        conn.send_headers(self.stream_id, GRPC_RESPONSE_HEADERS)
        conn.send_data(self.stream_id, wire.encode_message(payload))
        conn.send_headers(
            self.stream_id,
            [(b"grpc-status", str(code).encode()), (b"grpc-message", message.encode())],
            end_stream=True,
        )
        self.connection.flush()

    def respond_raw(
        self,
        data: bytes,
        extra_headers: Sequence[Header] = (),
        trailers: Sequence[Header] = ((b"grpc-status", b"0"),),
    ) -> None:
        """Response headers (plus ``extra_headers``), ``data`` as one DATA frame, ``trailers``."""
        with self.connection.lock:
            conn = self.connection.conn
            conn.send_headers(self.stream_id, GRPC_RESPONSE_HEADERS + list(extra_headers))
            conn.send_data(self.stream_id, data)
            conn.send_headers(self.stream_id, list(trailers), end_stream=True)
        self.connection.flush()

    def reset(self, error_code: int) -> None:
        self.connection.conn.reset_stream(self.stream_id, error_code)
        self.connection.flush()

    def send_raw_headers(self, headers: List[Header], end_stream: bool = True) -> None:
        self.connection.conn.send_headers(self.stream_id, headers, end_stream=end_stream)
        self.connection.flush()


class ServerConnection:
    """The server end of one accepted connection (one thread)."""

    def __init__(self, server: ScriptedServer, sock: socket.socket, index: int) -> None:
        self.server = server
        self.sock = sock
        self.index = index
        self.conn = server_connection(server.settings)
        self.lock = threading.RLock()
        self._bodies: Dict[int, bytes] = {}
        self._headers: Dict[int, List[Header]] = {}
        self.closed = False

    def flush(self) -> None:
        with self.lock:
            data = self.conn.data_to_send()
            if data and not self.closed:
                try:
                    self.sock.sendall(data)
                except OSError:
                    self.closed = True

    def goaway(self, last_stream_id: int, error_code: int = 0, then_ping: bool = False) -> None:
        """Send GOAWAY (optionally followed at once by a PING, as grpc-go's graceful stop does).

        h2 refuses to send anything after its own GOAWAY, hence the reopen for the PING.
        """
        from minigrpc.http2 import reopen_after_goaway

        with self.lock:
            self.conn.close_connection(error_code=error_code, last_stream_id=last_stream_id)
            reopen_after_goaway(self.conn)
            if then_ping:
                self.conn.ping(b"\x01\x06\x01\x08\x00\x03\x03\x09")
            self.flush()

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def serve(self) -> None:
        try:
            if self.server.on_connect is not None and self.server.on_connect(self) is False:
                return
            self.flush()
            while not self.closed:
                try:
                    data = self.sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                with self.lock:
                    try:
                        events = self.conn.receive_data(data)
                    except h2.exceptions.ProtocolError:
                        self.flush()
                        return
                    ready: List[ServerRequest] = []
                    for event in events:
                        if isinstance(event, h2.events.RequestReceived):
                            self._headers[event.stream_id] = list(event.headers)
                            self._bodies[event.stream_id] = b""
                        elif isinstance(event, h2.events.DataReceived):
                            self._bodies[event.stream_id] += event.data
                            self.conn.acknowledge_received_data(
                                event.flow_controlled_length, event.stream_id
                            )
                        elif isinstance(event, h2.events.StreamEnded):
                            ready.append(
                                ServerRequest(
                                    self,
                                    event.stream_id,
                                    self._headers.pop(event.stream_id),
                                    self._bodies.pop(event.stream_id),
                                )
                            )
                        elif isinstance(event, h2.events.StreamReset):
                            self.server.resets.append(
                                (self.index, event.stream_id, int(event.error_code))
                            )
                        elif isinstance(event, h2.events.ConnectionTerminated):
                            self.flush()
                            return
                    self.flush()
                for request in ready:
                    self.server.record(request)
                    self.server.on_request(request)
        finally:
            self.close()


class ScriptedServer:
    """An HTTP/2 server on a unix socket (or TCP on 127.0.0.1 with ``tcp=True``);
    ``on_request(ServerRequest)`` answers each request.

    ``on_connect(ServerConnection)`` runs first on every connection and may return False to
    close it before anything is sent (an "EOF before SETTINGS" peer). ``settings`` change the
    server's SETTINGS (e.g. MAX_CONCURRENT_STREAMS=1).
    """

    def __init__(
        self,
        on_request: Callable[[ServerRequest], None],
        *,
        settings: Optional[Dict[int, int]] = None,
        on_connect: Optional[Callable[[ServerConnection], Any]] = None,
        tcp: bool = False,
    ) -> None:
        self.on_request = on_request
        self.on_connect = on_connect
        self.settings = settings
        self._dir = tempfile.mkdtemp(prefix="mgc-")
        self.path = os.path.join(self._dir, "h2.sock")
        if tcp:
            self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._listener.bind(("127.0.0.1", 0))
            self.target = f"127.0.0.1:{self._listener.getsockname()[1]}"
        else:
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(self.path)
            self.target = "unix:" + self.path
        self._listener.listen(16)
        self.connections: List[ServerConnection] = []
        self.requests: List[ServerRequest] = []
        self.resets: List[Tuple[int, int, int]] = []
        self._lock = threading.Lock()
        self.request_seen = threading.Condition(self._lock)
        self._threads: List[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def record(self, request: ServerRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self.request_seen.notify_all()

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> bool:
        with self._lock:
            return self.request_seen.wait_for(lambda: len(self.requests) >= count, timeout)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                conn = ServerConnection(self, sock, len(self.connections))
                self.connections.append(conn)
            thread = threading.Thread(target=conn.serve, daemon=True)
            self._threads.append(thread)
            thread.start()

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for conn in list(self.connections):
            conn.close()
        for thread in self._threads:
            thread.join(5)
        self._acceptor.join(5)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


MAX_CONCURRENT_STREAMS = h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS
INITIAL_WINDOW_SIZE = h2.settings.SettingCodes.INITIAL_WINDOW_SIZE
MAX_HEADER_LIST_SIZE = h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE
ErrorCodes = h2.errors.ErrorCodes
