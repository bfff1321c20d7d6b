"""``minigrpc health TARGET [SERVICE]``: a health probe with grpc_health_probe's exit codes.

One ``/grpc.health.v1.Health/Check`` call (gRPC's doc/health-checking.md).  The exit code and the
one line printed are grpc_health_probe's, so that a Kubernetes exec probe (or a script) written
for it works unchanged:

====  ==================================================================================
0     the service is SERVING (``status: SERVING`` on stdout)
1     bad arguments
2     no connection: the dial or the handshake failed, or nothing answered in time
3     the call failed: UNIMPLEMENTED (no health service), NOT_FOUND (an unknown service), the
      deadline, or any other status
4     the service answered, and not SERVING (``service unhealthy (responded with "...")``)
====  ==================================================================================

Why no protobuf: a probe runs every few seconds on every pod, so its cold start is its cost.
The two messages are tiny, and their wire format (the protobuf encoding guide: a key varint
``field << 3 | wire type``, then a varint or a length-prefixed value) is written and read here
by hand.  On a plaintext target the call runs on :func:`minigrpc.oneshot.unary_call`, the CNI
plugin's client: one connection, no threads, nothing of the channel machinery is loaded.  That
client has one deadline for the dial and the call together, so there the probe's deadline is
``--connect-timeout`` plus ``--max-time``.  With TLS, or ``--authority``, the probe runs on a
channel (:mod:`minigrpc.cli.connect`), which waits for the connection and the call separately.
"""

import sys

from .arguments import HEALTH_MAX_TIME, Options
from .exits import (
    DEADLINE_EXCEEDED,
    HEALTH_CONNECTION_FAILURE,
    HEALTH_RPC_FAILURE,
    HEALTH_SERVING,
    HEALTH_UNHEALTHY,
    OK,
    UNAVAILABLE,
    UNIMPLEMENTED,
    ToolError,
    UsageError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any, Optional, Tuple

#: PROTOCOL-HTTP2.md, Requests: ``:path`` is ``/`` service ``/`` method.
CHECK_PATH = "/grpc.health.v1.Health/Check"
SERVICE_NAME = "grpc.health.v1.Health"

#: ``HealthCheckResponse.ServingStatus`` (health.proto).
SERVING_STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
SERVING = 1

# The protobuf wire types (encoding guide, "Message Structure").
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def encode_request(service: str) -> bytes:
    """A serialized ``HealthCheckRequest{service}``: field 1, a length-delimited string; the
    empty string, proto3's default, is not written at all."""
    data = service.encode("utf-8")
    if not data:
        return b""
    return bytes((1 << 3 | _LEN,)) + _varint(len(data)) + data


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, position: int) -> "Tuple[int, int]":
    value = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise ValueError("a varint runs past the end of the message")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def decode_status(payload: bytes) -> int:
    """``HealthCheckResponse.status`` from its serialized form; ValueError when malformed.

    Unknown fields are skipped, as every protobuf parser does; the last ``status`` wins
    (the encoding guide, "Last One Wins"); an enum is an int32, so a negative value arrives
    as ten varint bytes and is folded back to its sign.
    """
    status = 0
    position = 0
    while position < len(payload):
        key, position = _read_varint(payload, position)
        field, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            value, position = _read_varint(payload, position)
            if field == 1:
                value &= 0xFFFFFFFF
                status = value - (1 << 32) if value & 0x80000000 else value
        elif wire_type == _LEN:
            length, position = _read_varint(payload, position)
            position += length
        elif wire_type in (_I64, _I32):
            position += 8 if wire_type == _I64 else 4
        else:
            raise ValueError(f"wire type {wire_type} is not one a HealthCheckResponse holds")
        if field == 0:
            raise ValueError("field number 0 is not allowed")
    if position > len(payload):
        raise ValueError("a field runs past the end of the message")
    return status


def status_name(number: int) -> str:
    """The ServingStatus name; a number the proto does not define is printed as a number."""
    return SERVING_STATUS_NAMES.get(number, str(number))


def duration(seconds: float) -> str:
    """Seconds as Go prints a duration (``1s``, ``250ms``, ``1.5s``), as the probe's messages."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"


class _Outcome:
    """How the Check call ended, whichever client made it."""

    def __init__(self, code: int, details: str, text: str, payload: "Optional[bytes]",
                 timeout: float, connect_timed_out: bool = False) -> None:
        self.code = code
        self.details = details
        #: grpc-go's text of the status (``rpc error: code = NotFound desc = ...``).
        self.text = text
        self.payload = payload
        #: The deadline the call had, for the timeout message.
        self.timeout = timeout
        #: No connection within ``--connect-timeout`` (the channel's separate wait).
        self.connect_timed_out = connect_timed_out


def _max_time(options: Options) -> float:
    """``health``'s ``--max-time``, which has a default (grpc_health_probe's 1 s)."""
    return HEALTH_MAX_TIME if options.max_time is None else options.max_time


def _one_shot(options: Options, request: bytes) -> _Outcome:
    from minigrpc import oneshot

    timeout = options.connect_timeout + _max_time(options)
    try:
        status, payload = oneshot.unary_call(options.target, CHECK_PATH, request,
                                             timeout=timeout, metadata=options.headers)
    except ValueError as exc:  # the target or the metadata
        raise UsageError(str(exc)) from None
    return _Outcome(status.code_number, status.details, str(status), payload, timeout)


def _on_channel(options: Options, request: bytes) -> _Outcome:
    import minigrpc

    from .connect import Deadline, open_channel, wait_for_connection

    channel = open_channel(options)
    try:
        wait_for_connection(channel, options, Deadline(None))
    except ToolError:  # not closed: its dial holds it (see commands.Session)
        return _Outcome(UNAVAILABLE, "", "", None, options.connect_timeout, True)
    try:
        check = channel.unary_unary(CHECK_PATH)
        try:
            payload = check(request, timeout=_max_time(options), metadata=options.headers)
        except minigrpc.RpcError as exc:
            code: Any = exc.code()
            return _Outcome(code.value[0], exc.details() or "", str(exc), None,
                            _max_time(options))
        except ValueError as exc:  # metadata a channel refuses
            raise UsageError(str(exc)) from None
        return _Outcome(OK, "", "", payload, _max_time(options))
    finally:
        channel.close()


def run(options: Options) -> int:
    """Probe, print one line, return the exit code."""
    request = encode_request(options.name or "")
    if options.tls or options.authority:
        outcome = _on_channel(options, request)
    else:
        outcome = _one_shot(options, request)
    return report(options, outcome)


def report(options: Options, outcome: _Outcome) -> int:
    """grpc_health_probe's line and exit code for ``outcome``."""
    if outcome.code == OK:
        try:
            status = decode_status(outcome.payload or b"")
        except ValueError as exc:
            _say(sys.stderr, f"error: health rpc failed: the response is not a "
                             f"HealthCheckResponse: {exc}")
            return HEALTH_RPC_FAILURE
        if status != SERVING:
            _say(sys.stdout, f'service unhealthy (responded with "{status_name(status)}")')
            return HEALTH_UNHEALTHY
        _say(sys.stdout, "status: SERVING")
        return HEALTH_SERVING
    if outcome.code == UNAVAILABLE:
        if outcome.connect_timed_out:
            _say(sys.stderr, f'timeout: failed to connect service "{options.target}" within '
                             f"{duration(outcome.timeout)}")
        else:
            _say(sys.stderr, f'error: failed to connect service at "{options.target}": '
                             f"{outcome.details}")
        return HEALTH_CONNECTION_FAILURE
    if outcome.code == DEADLINE_EXCEEDED:
        _say(sys.stderr, f"timeout: health rpc did not complete within {duration(outcome.timeout)}")
    elif outcome.code == UNIMPLEMENTED:
        _say(sys.stderr, "error: this server does not implement the grpc health protocol "
                         f"({SERVICE_NAME}): {outcome.details}")
    else:
        _say(sys.stderr, f"error: health rpc failed: {outcome.text}")
    return HEALTH_RPC_FAILURE


def _say(stream: "Any", line: str) -> None:
    stream.write(line + "\n")
    stream.flush()

