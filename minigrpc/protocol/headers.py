"""The header blocks of a gRPC call, built and read in one place for both sides.

A gRPC call is three header blocks on one HTTP/2 stream (PROTOCOL-HTTP2.md, "Requests" and
"Responses"): the client's request headers, the server's response headers, and the server's
trailers, which carry the status.  A server that fails a call before sending anything merges
the last two into one block, *Trailers-Only*.  Each block has a writer, used by the side that
sends it, and a reader, used by the side that receives it; like h11's ``_readers`` and
``_writers``, they sit next to each other so that a rule is stated once:

==========================  ============================  ==================================
block                       written by (the sender)        read by (the receiver)
==========================  ============================  ==================================
request headers             :func:`request_headers`        :func:`read_request_headers`
response headers            :func:`response_headers`       :func:`read_response_headers`
trailers / Trailers-Only    :func:`status_headers`,        :func:`read_status`
                            :func:`trailers_only`
==========================  ============================  ==================================

Header names and values are bytes, as the HPACK codec (:mod:`minigrpc.http2.hpack_codec`) decodes
and encodes them.  Application metadata arrives here already validated and encoded
(:func:`minigrpc.protocol.wire.encode_metadata`).
"""

from .._version import __version__
from ..http2.hpack_codec import Header, find_header
from . import wire
from .codes import Code, status_from_http
from .status import DEADLINE_EXCEEDED_DETAILS, CallStatus, Metadata, parse_grpc_status

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple, Union
    from typing import NamedTuple as Record
else:
    from .._records import Record

if TYPE_CHECKING:  # pragma: no cover
    Headers = List[Header]
else:  # an alias at run time: only a name for other modules' annotations
    Headers = list

#: The ``user-agent`` product token (PROTOCOL-HTTP2.md: ``grpc-<lang>-<variant>/<version>``).
USER_AGENT = f"grpc-python-minigrpc/{__version__}"

#: Sent by every attempt of a retried or hedged call after the first: how many came before
#: (gRFC A6, "Exposed Retry Metadata").
PREVIOUS_ATTEMPTS_HEADER = b"grpc-previous-rpc-attempts"

#: The base content-type; ``+proto``, ``+json`` or ``;params`` may follow (PROTOCOL-HTTP2.md).
GRPC_CONTENT_TYPE = b"application/grpc"
_CONTENT_TYPE = (b"content-type", GRPC_CONTENT_TYPE)
#: ``te: trailers`` "to detect incompatible proxies" (PROTOCOL-HTTP2.md, Requests).
_TE = (b"te", b"trailers")
_ACCEPT_ENCODING = (b"grpc-accept-encoding", wire.ACCEPT_ENCODING.encode("ascii"))
#: The encodings a server accepts in a request's ``grpc-encoding``.
_DECODABLE_ENCODINGS = frozenset(wire.SUPPORTED_ENCODINGS)
#: What ``bytes.strip()`` removes, and so what :func:`outbound_fields` strips from values.
_ASCII_WHITESPACE = " \t\n\r\x0b\x0c"


def header_list_size(headers: "Iterable[Header]") -> int:
    """RFC 9113 §6.5.2: name + value + 32 octets per field, what MAX_HEADER_LIST_SIZE limits."""
    return sum(len(name) + len(value) + 32 for name, value in headers)


def is_grpc_content_type(value: "Optional[bytes]") -> bool:
    """``application/grpc``, optionally followed by ``+subtype`` or ``;params``.

    Media types are case-insensitive (RFC 9110 §8.3.1), so both sides compare in lower case.
    """
    if value is None:
        return False
    value = value.lower()
    if not value.startswith(GRPC_CONTENT_TYPE):
        return False
    rest = value[len(GRPC_CONTENT_TYPE) :]
    return not rest or rest[:1] in (b"+", b";")



# ------------------------------------------------------------------------------------------------
# Every received block: the HTTP/2 field rules
# ------------------------------------------------------------------------------------------------


#: Connection-specific fields, which HTTP/2 forbids (RFC 9113 §8.2.2).
_CONNECTION_SPECIFIC = frozenset(
    (b"connection", b"proxy-connection", b"keep-alive", b"transfer-encoding", b"upgrade")
)
#: Every byte a regular field name may hold (RFC 9113 §8.2.1): none of 0x00-0x20, 0x41-0x5a
#: (upper case), 0x7f-0xff, and no colon outside a pseudo-header's first byte.
_NAME_BYTES = bytes(b for b in range(0x21, 0x7F) if not 0x41 <= b <= 0x5A and b != 0x3A)
#: Regular names that every gRPC call carries and that need no check beyond being known: the
#: per-name checks below are skipped for them (``te`` and ``host`` have value rules).
_KNOWN_NAMES = frozenset(
    (b"content-type", b"user-agent", b"grpc-accept-encoding", b"grpc-encoding", b"grpc-timeout",
     b"grpc-status", b"grpc-message", b"accept-encoding", b"grpc-status-details-bin")
)
_REQUEST_PSEUDO = frozenset((b":method", b":scheme", b":authority", b":path", b":protocol"))
_RESPONSE_PSEUDO = frozenset((b":status",))
_TRAILER_PSEUDO: "FrozenSet[bytes]" = frozenset()
#: Optional whitespace around a value, which is not part of it (RFC 9110 §5.5).
_OWS = b" \t"


def malformed_request(headers: "Sequence[Header]") -> str:
    """Why a request header block is malformed (RFC 9113 §8.2 and §8.3.1), or "".

    A malformed request is a stream error of type PROTOCOL_ERROR (RFC 9113 §8.1.1): the server
    resets that stream and the connection lives on. tests/unit/test_received_headers.py compares
    these verdicts with h2's inbound validation, an independent implementation of the same
    rules, on generated blocks.
    """
    problem, pseudo, hosts = _field_problem(headers, _REQUEST_PSEUDO)
    if problem:
        return problem
    method = pseudo.get(b":method")
    if method is None:
        return "the request has no :method"
    connect = method.strip(_OWS) == b"CONNECT"
    if b":protocol" in pseudo and not connect:
        return ":protocol in a request that is not CONNECT"
    if connect and b":protocol" not in pseudo:
        if b":scheme" in pseudo or b":path" in pseudo:
            return "a CONNECT request with :scheme or :path"
    elif b":scheme" not in pseudo or b":path" not in pseudo:
        return "the request lacks :scheme or :path"
    if b":path" in pseudo and not pseudo[b":path"].strip(_OWS):
        return "an empty :path"
    authority = pseudo.get(b":authority")
    if len(hosts) > 1:
        return "more than one host field"
    if authority is None and not hosts:
        return "the request has neither :authority nor host"
    if authority is not None and hosts and authority.strip(_OWS) != hosts[0].strip(_OWS):
        return ":authority and host differ"
    return ""


def malformed_response(headers: "Sequence[Header]") -> str:
    """Why a response header block (or Trailers-Only block) is malformed, or "".

    RFC 9113 §8.3.2: ``:status`` is required and is the only pseudo-header. See
    :func:`malformed_request` for what a malformed block costs.
    """
    problem, pseudo, _ = _field_problem(headers, _RESPONSE_PSEUDO)
    if problem:
        return problem
    if b":status" not in pseudo:
        return "the response has no :status"
    return ""


def malformed_trailers(headers: "Sequence[Header]") -> str:
    """Why a trailer block is malformed (no pseudo-headers, RFC 9113 §8.1), or "".

    See :func:`malformed_request` for what a malformed block costs.
    """
    return _field_problem(headers, _TRAILER_PSEUDO)[0]


def _field_problem(
    headers: "Sequence[Header]", allowed_pseudo: "FrozenSet[bytes]"
) -> "Tuple[str, Dict[bytes, bytes], List[bytes]]":
    """The rules every block follows (RFC 9113 §8.2.1, §8.2.2, §8.3).

    Returns the first problem ("" if none), the pseudo-headers by name, and the ``host``
    values. A value with whitespace around it is accepted and passed on as it is: the RFC
    forbids sending one, but grpcio's client sends such metadata and grpcio's and grpc-go's
    servers accept it.
    """
    pseudo: Dict[bytes, bytes] = {}
    hosts: List[bytes] = []
    regular_seen = False
    for name, value in headers:
        if name in _KNOWN_NAMES:
            regular_seen = True
        elif name[:1] == b":":
            if regular_seen:
                return f"pseudo-header {_shown(name)} after a regular field", pseudo, hosts
            if name in pseudo:
                return f"pseudo-header {_shown(name)} twice", pseudo, hosts
            if name not in allowed_pseudo:
                return f"pseudo-header {_shown(name)} not allowed here", pseudo, hosts
            pseudo[name] = value
        else:
            regular_seen = True
            if not name or name.translate(None, _NAME_BYTES):
                return f"field name {_shown(name)} is empty or not lower-case", pseudo, hosts
            if name in _CONNECTION_SPECIFIC:
                return f"connection-specific field {_shown(name)}", pseudo, hosts
            if name == b"te" and value.strip(_OWS).lower() != b"trailers":
                return "te other than trailers", pseudo, hosts
            if name == b"host":
                hosts.append(value)
        if b"\0" in value or b"\r" in value or b"\n" in value:
            return f"NUL, CR or LF in the value of {_shown(name)}", pseudo, hosts
    return "", pseudo, hosts


def _shown(name: bytes) -> str:
    """A received field name for an error message, printable whatever its bytes."""
    return repr(name.decode("ascii", "backslashreplace"))


# ------------------------------------------------------------------------------------------------
# Request headers
# ------------------------------------------------------------------------------------------------


def malformed_path(path: str) -> bool:
    """True if ``path`` cannot be a ``:path`` value (RFC 9113 §8.3.1 and §8.2.1).

    The method name is the one request header the application chooses freely, and nothing
    else checks it before it is sent: an empty path is a protocol error (values go out without
    surrounding ASCII whitespace, :func:`outbound_fields`, so a path of only whitespace is empty
    too), and CR, LF or NUL would make an h2-based server kill the whole connection.
    """
    return not path.strip(_ASCII_WHITESPACE) or "\r" in path or "\n" in path or "\0" in path


#: The fixed start of request header blocks, by what it is built from (:func:`request_headers`).
_PREFIXES: "Dict[Tuple[str, str, str, Optional[str], str], Tuple[Header, ...]]" = {}
#: How many different starts are kept (more are not: the memory starts over).
_PREFIXES_KEPT = 64


def request_headers(
    *,
    path: str,
    authority: str,
    user_agent: str,
    timeout: "Optional[float]" = None,
    encoding: "Optional[str]" = None,
    metadata: "Sequence[Header]" = (),
    scheme: str = "http",
) -> Headers:
    """The request header block, in grpc-go's order (PROTOCOL-HTTP2.md, Requests), its values
    without surrounding whitespace, as they go out (RFC 9113 §8.2.1, :func:`outbound_fields`).

    ``:method :scheme :path :authority content-type user-agent te [grpc-encoding]
    grpc-accept-encoding [grpc-timeout] <metadata>``.  Receivers must not depend on the order, but
    pseudo-headers must come first (RFC 9113 §8.3) and a fixed order keeps traces comparable.
    ``scheme`` is ``https`` over TLS.  Everything up to ``grpc-accept-encoding`` is the same for
    every call of a method on a channel, and is built once.
    """
    key = (path, authority, user_agent, encoding, scheme)
    prefix = _PREFIXES.get(key)
    if prefix is None:
        prefix = _request_prefix(*key)
        if len(_PREFIXES) >= _PREFIXES_KEPT:
            _PREFIXES.clear()
        _PREFIXES[key] = prefix
    headers: Headers = list(prefix)
    if timeout is not None:
        headers.append((b"grpc-timeout", wire.encode_timeout(timeout).encode("ascii")))
    for name, value in metadata:
        headers.append((name, value.strip()))
    return headers


def _request_prefix(
    path: str, authority: str, user_agent: str, encoding: "Optional[str]", scheme: str
) -> "Tuple[Header, ...]":
    fields = [
        (b":method", b"POST"),
        (b":scheme", scheme.encode("ascii")),
        (b":path", path.encode("utf-8")),
        (b":authority", authority.encode("utf-8")),
        _CONTENT_TYPE,
        (b"user-agent", user_agent.encode("utf-8")),
        _TE,
    ]
    if encoding is not None:
        fields.append((b"grpc-encoding", encoding.encode("ascii")))
    fields.append(_ACCEPT_ENCODING)
    return tuple((name, value.strip()) for name, value in fields)


class RequestHead(Record):
    """A request header block a server accepted (see :func:`read_request_headers`)."""

    method: str
    authority: str
    #: Application metadata: ``user-agent`` included, transport and ``grpc-*`` headers left out,
    #: as grpcio's ``invocation_metadata()`` shows it.
    metadata: Metadata
    #: Seconds from ``grpc-timeout`` (always positive), or None without one.
    timeout: "Optional[float]"
    #: The request messages' compression, or None for ``identity`` / no ``grpc-encoding``.
    encoding: "Optional[str]"
    #: What the client lists in ``grpc-accept-encoding``.
    accept_encodings: "FrozenSet[str]"


class Rejection(Record):
    """Why a server refuses a request's headers, and the Trailers-Only answer that says so."""

    http_status: int
    #: The status code's number (:class:`minigrpc.protocol.codes.Code`).
    code: int
    details: str
    extra_headers: "Tuple[Header, ...]" = ()

    @property
    def not_grpc(self) -> bool:
        """The request is not gRPC at all (its ``:method`` or content-type), rather than a gRPC
        request with one bad field: such a request is answered once it is complete."""
        return self.http_status in (405, 415)


def read_request_headers(
    headers: "Sequence[Header]",
    max_header_list_size: int,
    enabled_encodings: "FrozenSet[str]" = _DECODABLE_ENCODINGS,
) -> "Union[RequestHead, Rejection]":
    """Check a request header block in the order grpc-go applies its checks.

    * a header list above the per-call limit: 431 and RESOURCE_EXHAUSTED (RFC 9113 §6.5.2);
    * ``:method`` other than POST: 405 and INTERNAL;
    * a content-type that is not ``application/grpc*``: 415 and INVALID_ARGUMENT (the
      PROTOCOL-HTTP2.md "SHOULD");
    * a malformed ``grpc-timeout``, or a ``-bin`` value that is not base64: 400 and INTERNAL;
    * a ``grpc-timeout`` that is already over: DEADLINE_EXCEEDED;
    * a ``grpc-encoding`` we cannot decode, or one the server disabled
      (``enabled_encodings``): UNIMPLEMENTED plus the ``grpc-accept-encoding`` we do take
      (doc/compression.md).

    A missing ``te`` is accepted, as grpc-go does.  With duplicate ``grpc-timeout`` headers the
    shortest wins.
    """
    method = path = content_type = timeout = encoding = accept = authority = None
    binary = False
    for name, value in headers:
        if name[:1] == b":":
            if name == b":method":
                method = value
            elif name == b":path":
                path = value
            elif name == b":authority":
                authority = value
        elif name == b"content-type":
            content_type = value
        elif name == b"grpc-timeout":
            timeout = value if timeout is None else min(timeout, value, key=_timeout_order)
        elif name == b"grpc-encoding":
            encoding = value
        elif name == b"grpc-accept-encoding":
            accept = value
        elif name.endswith(b"-bin"):
            binary = True
    size = header_list_size(headers)
    if size > max_header_list_size:
        return Rejection(
            431,
            Code.RESOURCE_EXHAUSTED,
            f"request header list size {size} exceeds the limit {max_header_list_size}",
        )
    if method != b"POST":
        shown = (method or b"").decode("ascii", "replace")
        return Rejection(
            405,
            Code.INTERNAL,
            f'Received a HEADERS frame with :method "{shown}" which should be POST',
        )
    if not is_grpc_content_type(content_type):
        shown = (content_type or b"").decode("ascii", "replace")
        return Rejection(
            415, Code.INVALID_ARGUMENT, f'invalid gRPC request content-type "{shown}"'
        )
    seconds: Optional[float] = None
    if timeout is not None:
        try:
            seconds = wire.decode_timeout(timeout)
        except ValueError as exc:
            return Rejection(400, Code.INTERNAL, str(exc))
        if seconds <= 0:
            return Rejection(200, Code.DEADLINE_EXCEEDED, DEADLINE_EXCEEDED_DETAILS)
    if binary:
        malformed = _malformed_binary_metadata(headers)
        if malformed:
            return Rejection(400, Code.INTERNAL, malformed)
    encoding_name: Optional[str] = None
    if encoding is not None:
        encoding_name = encoding.decode("ascii", "replace").strip()
        if encoding_name not in _DECODABLE_ENCODINGS or encoding_name not in enabled_encodings:
            return Rejection(
                200,
                Code.UNIMPLEMENTED,
                f'grpc: Decompressor is not installed for grpc-encoding "{encoding_name}"',
                (accept_encoding_header(enabled_encodings),),
            )
        if encoding_name == "identity":
            encoding_name = None
    return RequestHead(
        (path or b"").decode("utf-8", "replace"),
        (authority or b"").decode("utf-8", "replace"),
        _call_metadata(headers),
        seconds,
        encoding_name,
        wire.parse_accept_encoding(accept),
    )


class LastRequestHead:
    """The last well-formed request header block a connection read, and what it read as.

    Reading a block (:func:`read_request_headers`) is a function of the block and the
    connection's settings alone, and a client sends the same block call after call, but for
    the time left in its ``grpc-timeout`` (PROTOCOL-HTTP2.md, Requests) when it sets deadlines,
    as grpc-go's and grpcio's clients do.  :meth:`recall` answers for the same block, and for
    one that differs only in the value of its one ``grpc-timeout``, of the same length (so the
    same header list size) and a valid, positive time: the last reading with that timeout.
    Anything else is None, to be read afresh with every rule applied.
    """

    __slots__ = ("_head", "_headers", "_timeout_slot")

    def __init__(self) -> None:
        self._headers: Optional[Sequence[Header]] = None
        self._head: Union[RequestHead, Rejection, None] = None
        #: Where the block's one ``grpc-timeout`` is (None: it has none, or several).
        self._timeout_slot: Optional[int] = None

    def remember(self, headers: "Sequence[Header]", head: "Union[RequestHead, Rejection]") -> None:
        """``headers`` (well-formed, :func:`malformed_request`) read as ``head``."""
        self._headers, self._head = headers, head
        slots = [index for index, (name, _) in enumerate(headers) if name == b"grpc-timeout"]
        self._timeout_slot = slots[0] if len(slots) == 1 else None

    def recall(self, headers: "Sequence[Header]") -> "Union[RequestHead, Rejection, None]":
        """What ``headers`` read as, when that follows from the last block (class docstring)."""
        last = self._headers
        if last is None:
            return None
        if headers == last:
            return self._head
        slot = self._timeout_slot
        head = self._head
        if slot is None or not isinstance(head, RequestHead) or len(headers) != len(last):
            return None
        name, value = headers[slot]
        if (
            name != b"grpc-timeout"
            or len(value) != len(last[slot][1])
            or headers[:slot] != last[:slot]
            or headers[slot + 1 :] != last[slot + 1 :]
        ):
            return None
        try:
            seconds = wire.decode_timeout(value)
        except ValueError:
            return None
        return head._replace(timeout=seconds) if seconds > 0 else None


def _timeout_order(value: bytes) -> float:
    """Sort key for duplicate ``grpc-timeout`` headers: the shortest wins."""
    try:
        return wire.decode_timeout(value)
    except ValueError:
        return -1.0  # malformed sorts first, so it is reported


def _call_metadata(headers: "Sequence[Header]") -> Metadata:
    """Application metadata: transport headers and every reserved ``grpc-*`` key removed."""
    metadata = wire.decode_metadata(headers)
    if any(key.startswith("grpc-") for key, _ in metadata):
        metadata = tuple(item for item in metadata if not item[0].startswith("grpc-"))
    return metadata


def _malformed_binary_metadata(headers: "Sequence[Header]") -> str:
    """Why a ``-bin`` header is not base64, in grpc-go's words, or "" if all decode.

    grpc-go answers such a request with 400 and INTERNAL rather than dropping the value, so the
    client learns its metadata did not arrive.  Each comma-separated part must decode (duplicate
    keys may have been joined that way).  Reserved ``grpc-*`` keys are left to their own checks.
    """
    for name, value in headers:
        if not name.endswith(b"-bin") or name.startswith(b"grpc-"):
            continue
        for part in value.split(b","):
            try:
                wire.b64decode_lenient(part)
            except ValueError as exc:
                shown = value[:100].decode("ascii", "replace")
                key = name.decode("ascii", "replace")
                return f'malformed binary metadata "{shown}" in header "{key}": {exc}'
    return ""


# ------------------------------------------------------------------------------------------------
# Response headers
# ------------------------------------------------------------------------------------------------


def accept_encoding_header(enabled_encodings: "FrozenSet[str]" = _DECODABLE_ENCODINGS) -> Header:
    """``grpc-accept-encoding`` listing what we decode, less what the server disabled."""
    if enabled_encodings == _DECODABLE_ENCODINGS:
        return _ACCEPT_ENCODING
    names = [name for name in wire.SUPPORTED_ENCODINGS if name in enabled_encodings]
    return (b"grpc-accept-encoding", ",".join(names).encode("ascii"))


def response_headers(
    encoding: "Optional[str]",
    metadata: "Sequence[Header]" = (),
    enabled_encodings: "FrozenSet[str]" = _DECODABLE_ENCODINGS,
) -> Headers:
    """``:status 200``, content-type, [grpc-encoding], grpc-accept-encoding, metadata."""
    headers: Headers = [(b":status", b"200"), _CONTENT_TYPE]
    if encoding is not None:
        headers.append((b"grpc-encoding", encoding.encode("ascii")))
    headers.append(accept_encoding_header(enabled_encodings))
    headers.extend(metadata)
    return headers


class ResponseHead(Record):
    """What a client reads from response headers (or a Trailers-Only block)."""

    #: ``:status`` as a number; None when missing or not a number.
    http_status: "Optional[int]"
    content_type: "Optional[bytes]"
    #: The response messages' compression (``grpc-encoding``), or None.
    encoding: "Optional[str]"
    #: What the server lists in ``grpc-accept-encoding``, or None when it sent none.
    accept_encodings: "Optional[FrozenSet[str]]"

    @property
    def is_grpc(self) -> bool:
        """A gRPC response: ``:status`` present and a gRPC content-type.

        Anything else (a proxy's 404 page, an HTTP/1-ish server) is decided from ``:status``
        alone, as grpc-go does.
        """
        return self.http_status is not None and is_grpc_content_type(self.content_type)


def read_response_headers(headers: "Sequence[Header]") -> ResponseHead:
    """Read the fields of a response header block that the client acts on."""
    status_text: Optional[bytes] = None
    content_type: Optional[bytes] = None
    encoding: Optional[bytes] = None
    accept: Optional[bytes] = None
    for name, value in headers:
        if name == b":status":
            status_text = value
        elif name == b"content-type":
            content_type = value
        elif name == b"grpc-encoding":
            encoding = value
        elif name == b"grpc-accept-encoding":
            accept = value
    return ResponseHead(
        int(status_text) if status_text is not None and status_text.isdigit() else None,
        content_type,
        encoding.decode("ascii", "replace").strip() if encoding is not None else None,
        wire.parse_accept_encoding(accept) if accept is not None else None,
    )


# ------------------------------------------------------------------------------------------------
# Trailers
# ------------------------------------------------------------------------------------------------


def status_headers(code: int, details: str) -> Headers:
    """``grpc-status`` (code number ``code``) and ``grpc-message``; the message is sent even when
    empty, like grpc-go."""
    return [
        (b"grpc-status", str(code).encode("ascii")),
        (b"grpc-message", wire.percent_encode(details).encode("ascii")),
    ]


def trailers_only(
    code: int,
    details: str,
    metadata: "Sequence[Header]" = (),
    *,
    http_status: int = 200,
    extra_headers: "Sequence[Header]" = (),
) -> Headers:
    """One block for a call that fails before its response headers (PROTOCOL-HTTP2.md).

    ``:status``, content-type (also on the 4xx rejections, so that a client believes the
    ``grpc-status`` in it), any extra headers, the status and then the metadata.
    """
    headers: Headers = [(b":status", str(http_status).encode("ascii")), _CONTENT_TYPE]
    headers.extend(extra_headers)
    headers.extend(status_headers(code, details))
    headers.extend(metadata)
    return headers


def http_failure_status(
    http_status: "Optional[int]", content_type: "Optional[bytes]"
) -> CallStatus:
    """The status of a response that is not gRPC, from ``:status`` (http-grpc-status-mapping.md).

    The details read like grpc-go's, naming both the HTTP status and the content-type.
    """
    parts = []
    if http_status is None:
        code = Code.INTERNAL
        parts.append("malformed header: missing HTTP status")
    else:
        code = status_from_http(http_status)
        parts.append(
            "unexpected HTTP status code received from server: "
            f"{http_status} ({_reason(http_status)})"
        )
    if content_type is None:
        parts.append("malformed header: missing HTTP content-type")
    elif not is_grpc_content_type(content_type):
        parts.append(
            "transport: received unexpected content-type "
            f'"{content_type.decode("ascii", "replace")}"'
        )
    return CallStatus(code, "; ".join(parts))


def read_status(
    head: "Optional[ResponseHead]",
    trailers: "Sequence[Header]",
    initial_metadata: Metadata,
    trailing_metadata: Metadata,
) -> CallStatus:
    """The status a server's final block states (PROTOCOL-HTTP2.md, Responses).

    ``head`` is what the response headers said (the Trailers-Only block is both).  A response
    that is not gRPC, or has no ``grpc-status`` and a ``:status`` other than 200, is decided by
    :func:`http_failure_status`; otherwise ``grpc-status`` decides, UNKNOWN when it is missing or
    unparsable.  ``grpc-status-details-bin`` is kept undecoded, None when not base64.
    """
    grpc_status = find_header(trailers, b"grpc-status")
    http_status = head.http_status if head is not None else None
    content_type = head.content_type if head is not None else None
    if not is_grpc_content_type(content_type) or (
        grpc_status is None and http_status not in (None, 200)
    ):
        return http_failure_status(http_status, content_type)
    code, number = parse_grpc_status(grpc_status)
    message = find_header(trailers, b"grpc-message")
    details = wire.percent_decode(message) if message is not None else ""
    if grpc_status is None:
        details = details or "server closed the stream without sending a grpc-status"
    details_bin: Optional[bytes] = None
    raw_details_bin = find_header(trailers, b"grpc-status-details-bin")
    if raw_details_bin is not None:
        try:
            details_bin = wire.b64decode_lenient(raw_details_bin)
        except ValueError:
            details_bin = None
    return CallStatus(code, details, initial_metadata, trailing_metadata, number, details_bin)


def _reason(http_status: int) -> str:
    """The HTTP reason phrase, as grpc-go's ``http.StatusText`` prints it."""
    import http  # only on this error path

    try:
        return http.HTTPStatus(http_status).phrase
    except ValueError:
        return "unknown"
