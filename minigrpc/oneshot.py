"""One unary call on a fresh connection, blocking, for a process that makes one call and exits.

:func:`unary_call` dials the target (:func:`minigrpc.net.sockets.open_socket`, with the full
client's dial errors), runs :class:`minigrpc.protocol.oneshot_protocol.OneShotCall` over the socket
and returns the status and the response payload.  It loads neither the full client's HTTP/2
connection (:mod:`minigrpc.http2.connection`) nor the channel machinery (threads,
connectivity, interceptors), which is the point: the CNI plugin's cold start is its speed
(docs/benchmarks.md).  A long-lived program uses
``minigrpc.insecure_channel``; both end a call with the same status for the same server
behaviour, because they share every rule (:mod:`minigrpc.protocol.client_outcome`).

A call the server provably never processed (REFUSED_STREAM, a GOAWAY below the call, a close
before the server's SETTINGS) is tried once more on a new connection, by the same
:class:`minigrpc.driver.attempts.Attempts` policy as the full client's (RFC 9113 §8.7).
"""

import _socket  # not socket: its module costs a cold start about 4 ms (enums, selectors)
import time

from .driver.attempts import RETRY_NOW, Attempts, deadline_status
from .http2 import streams
from .net import sockets
from .net.sockets import ConnectFailed, DeadlineReached, client_tracer, open_socket, os_error_text
from .protocol import headers, wire
from .protocol.codes import Code
from .protocol.oneshot_protocol import OneShotCall
from .protocol.status import CallStatus
from .protocol.targets import parse_target

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Optional, Tuple


def unary_call(
    target: str,
    method: str,
    request: bytes,
    *,
    timeout: "Optional[float]" = None,
    metadata: wire.MetadataLike = (),
    max_receive_message_length: "Optional[int]" = wire.DEFAULT_MAX_RECEIVE_MESSAGE_LENGTH,
    stream_window: int = streams.DEFAULT_STREAM_WINDOW,
    connection_window: int = streams.DEFAULT_CONNECTION_WINDOW,
) -> "Tuple[CallStatus, Optional[bytes]]":
    """Call ``method`` (``/package.Service/Method``) on ``target`` with one serialized request.

    Returns the call's status and, when it is OK, the response payload (decompressed, not
    deserialized).  ``metadata`` is checked and encoded as a channel does it
    (:func:`minigrpc.protocol.wire.encode_metadata`; ValueError when invalid).  ``timeout`` is the
    deadline in seconds (sent as ``grpc-timeout``); None waits as long as the server takes.
    The windows are what the connection advertises (RFC 9113 §6.9.2); the defaults are the
    full client's.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    parsed = parse_target(target)
    attempts = Attempts(deadline, False, 0.0, 0.0, 1.0, 0.0)
    framed = wire.encode_message(request)
    metadata_headers = wire.encode_metadata(metadata)
    while True:
        status = attempts.before_attempt(False)
        if status is not None:
            return status, None
        try:
            sock = open_socket(parsed, deadline, _socket.socket)
        except ConnectFailed as exc:
            return CallStatus(Code.UNAVAILABLE, exc.details), None
        except DeadlineReached:
            return deadline_status(), None
        left = None if deadline is None else deadline - time.monotonic()
        call = OneShotCall(
            headers.request_headers(
                path=method,
                authority=parsed.authority,
                user_agent=headers.USER_AGENT,
                timeout=left,
                metadata=metadata_headers,
            ),
            framed,
            deadline=deadline,
            max_receive_message_length=max_receive_message_length,
            stream_window=stream_window,
            connection_window=connection_window,
            peer=parsed.display,
        )
        try:
            _run(sock, call, client_tracer(parsed.display))
        finally:
            sock.close()
        assert call.status is not None
        if attempts.after_attempt(call, call.bytes_received, False) != RETRY_NOW:
            return call.status, call.response


def _run(sock: _socket.socket, call: OneShotCall, tracer: "Any") -> None:
    """Write and read until the call has its status, within its deadline; then say goodbye.

    A write that fails (the server closed or reset) does not end the call: the response may
    already be in our receive buffer, so reading goes on until EOF, which then names the cause,
    as on the full client.
    """
    write_error: Optional[OSError] = None
    call.initiate()
    received = 0
    while call.status is None:
        pending = call.data_to_send()
        try:
            if pending and write_error is None and _settimeout(sock, call):
                try:
                    sock.sendall(pending)
                    if tracer is not None:
                        tracer.sent(pending)
                except _socket.timeout:
                    raise
                except OSError as exc:
                    write_error = exc  # keep reading (see above)
            if call.status is not None or not _settimeout(sock, call):
                break
            data = sock.recv(sockets.next_read_size(received))
        except _socket.timeout:
            call.expire()
            break
        except OSError as exc:
            call.connection_lost(os_error_text(exc))
            break
        received = len(data)
        if not data:
            reset = write_error if isinstance(write_error, ConnectionResetError) else None
            call.connection_lost(None if reset is None else os_error_text(reset))
            break
        if tracer is not None:
            tracer.received(data)
        call.receive_data(data)
    call.close()
    goodbye = call.data_to_send()
    try:
        sock.settimeout(0)
        sent = sock.send(goodbye)
        if tracer is not None:
            tracer.sent(goodbye[:sent])
    except OSError:
        pass  # the status is known; how the server takes our goodbye does not matter


def _settimeout(sock: _socket.socket, call: OneShotCall) -> bool:
    """Bound the next socket operation by the deadline; False (and the call expired) if past."""
    if call.deadline is None:
        sock.settimeout(None)
        return True
    left = call.deadline - time.monotonic()
    if left <= 0:
        call.expire()
        return False
    sock.settimeout(left)
    return True

