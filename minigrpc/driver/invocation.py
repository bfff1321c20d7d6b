"""A client call about to start and the responses it gets, once for both APIs.

What the multi-callables of the blocking and of the asyncio API do before a call has a stream
lives here: :class:`Invocation` refuses a call on a closed channel, checks the method path and
the metadata (before anything is sent), adds the call credentials' metadata, fixes the deadline,
chooses the compression and builds the header block for the time left; it frames each request
message (serialize, compress, length-prefix, the send limit) and decodes each response.

A call that fails here raises :class:`CallFailed` with its status; each API raises its own
error from it (``grpc.RpcError`` on the blocking API, ``grpc.aio.AioRpcError`` or a failed call
on the asyncio one).  The texts are grpcio's.
"""

import time
from typing import TYPE_CHECKING, Any, Callable, ContextManager, List, Optional, Tuple

from ..http2.hpack_codec import Header
from ..protocol import wire
from ..protocol.client_outcome import DESERIALIZE_FAILED_DETAILS
from ..protocol.client_protocol import ClientCall
from ..protocol.codes import Code
from ..protocol.grpc_connection import Message
from ..protocol.headers import PREVIOUS_ATTEMPTS_HEADER, malformed_path, request_headers
from ..protocol.status import CallError, CallStatus, MessageTooLarge
from .call_steps import CallSteps
from .hedged_steps import HedgedSteps
from .hedging import CallHedging
from .service_config import HedgingPolicy

if TYPE_CHECKING:  # pragma: no cover
    from .channel_core import ChannelCore, TransportOptions
    from .subchannel import Subchannels

__all__ = [
    "CANCELLED",
    "CANCELLED_DETAILS",
    "REQUESTS_FAILED",
    "CallFailed",
    "Invocation",
    "Method",
]

Serializer = Optional[Callable[[Any], bytes]]
Deserializer = Optional[Callable[[bytes], Any]]

#: What a call cancelled on the client reports, in grpcio's words.
CANCELLED_DETAILS = "Locally cancelled by application!"
CANCELLED = CallStatus(Code.CANCELLED, CANCELLED_DETAILS)

#: What a call ends with when its request iterator raises (grpcio's words).
REQUESTS_FAILED = CallStatus(Code.UNKNOWN, "Exception iterating requests!")

#: The message of a call on a closed channel (a ValueError, as in grpcio).
CLOSED_CHANNEL = "Cannot invoke RPC on closed channel!"


class CallFailed(Exception):
    """A call that ended before it had a stream, or a response the client cannot use:
    :attr:`status` says how."""

    def __init__(self, status: CallStatus) -> None:
        super().__init__(str(status))
        self.status = status


def _failed(code: int, details: str, call: Optional[ClientCall] = None) -> CallFailed:
    if call is None:
        return CallFailed(CallStatus(code, details))
    return CallFailed(CallStatus(code, details, call.initial_metadata, call.trailing_metadata))


def _smaller(limit: Optional[int], other: Optional[int]) -> Optional[int]:
    """The tighter of two message-size limits (None: no limit)."""
    if other is None:
        return limit
    return other if limit is None else min(limit, other)


class Method:
    """What the four multi-callables of either API share: the channel, the path, the
    (de)serializers, and what the channel's service config says about the method (its
    ``timeout``, ``waitForReady`` and message sizes, looked up once here; gRPC's
    ``doc/service_config.md``)."""

    __slots__ = (
        "config",
        "core",
        "deserializer",
        "max_receive",
        "max_send",
        "path",
        "serializer",
    )

    def __init__(
        self,
        core: "ChannelCore",
        method: Any,
        request_serializer: Serializer,
        response_deserializer: Deserializer,
    ) -> None:
        self.core = core
        self.path: str = method.decode("ascii") if isinstance(method, bytes) else method
        self.serializer = request_serializer
        self.deserializer = response_deserializer
        config = core.method_config(self.path) if isinstance(self.path, str) else None
        #: The method's service config (None without one).
        self.config = config
        limits = core.config
        #: The largest request and response messages: the channel's limit, or the service
        #: config's ``maxRequestMessageBytes`` / ``maxResponseMessageBytes`` when tighter (the
        #: smaller applies, as in grpc core).
        self.max_send = limits.max_send
        self.max_receive = limits.max_receive
        if config is not None:
            self.max_send = _smaller(self.max_send, config.max_request_message_bytes)
            self.max_receive = _smaller(self.max_receive, config.max_response_message_bytes)

    def with_path(self, path: Any) -> "Method":
        """The same method under another path (an interceptor changed it)."""
        if path == self.path:
            return self
        return Method(self.core, path, self.serializer, self.deserializer)

    def raise_if_no_target(self) -> None:
        """UNAVAILABLE when the channel's target did not parse or resolve (the error it saw)."""
        core = self.core
        if core.target is None:
            raise CallFailed(CallStatus(Code.UNAVAILABLE, core.target_error))


class Invocation:
    """One call about to start: its deadline, header factory, compression and framing."""

    __slots__ = ("deadline", "encoding", "hedging", "make_headers", "method", "wait_for_ready")

    def __init__(
        self,
        method: Method,
        timeout: Optional[float],
        metadata: Any,
        credentials: Any,
        compression: Optional[int],
        wait_for_ready: Optional[bool] = None,
    ) -> None:
        core = method.core
        if core.closed:
            raise ValueError(CLOSED_CHANNEL)
        method_config = method.config
        #: The method's hedging policy, when the call is hedged (:meth:`new_hedged_steps`).
        self.hedging: Optional[HedgingPolicy] = None
        if method_config is not None:
            if method_config.hedging_policy is not None and core.retry_options.enabled:
                self.hedging = method_config.hedging_policy
            # The service config's timeout caps the call's; its waitForReady applies unless the
            # call says otherwise (grpc core's order: an explicit wait_for_ready wins).
            limit = method_config.timeout
            if limit is not None and (timeout is None or limit < timeout):
                timeout = limit
            if wait_for_ready is None:
                wait_for_ready = method_config.wait_for_ready
        path = method.path
        if malformed_path(path):
            raise _failed(Code.INTERNAL, f"malformed method name: {path!r}")
        # Metadata is validated before anything is sent. As in grpcio, metadata of the wrong
        # shape or type raises TypeError; well-typed metadata the wire cannot carry (an upper-case
        # key, a non-ASCII value) ends the call INTERNAL "Invalid metadata", with the reason.
        try:
            metadata_headers = wire.encode_metadata(metadata)
        except wire.MetadataTypeError:
            raise
        except ValueError as exc:
            raise _failed(Code.INTERNAL, f"Invalid metadata: {exc}") from None
        if credentials is not None or core.credentials is not None:
            metadata_headers.extend(_call_credentials_headers(core, credentials, path, timeout))
        self.method = method
        self.wait_for_ready = bool(wait_for_ready)
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.encoding = encoding = core.request_encoding(compression)
        config, scheme = core.config, core.scheme

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

    def new_steps(
        self,
        subchannels: "Subchannels[Any]",
        options: "TransportOptions",
        request: Optional[wire.Framed],
        unary_response: bool,
    ) -> CallSteps:
        """This call's steps on a channel's subchannels: its deadline, readiness, retries and
        the making of its attempts (``request``: a unary request's message, else None)."""
        method = self.method
        core = method.core
        config = method.config
        retries = None
        if request is None or (config is not None and config.retry_policy is not None):
            retries = core.call_retries(config, request is None)
        return CallSteps(
            subchannels,
            options,
            self.deadline,
            self.wait_for_ready,
            retries=retries,
            new_call=self.new_call,
            request=request,
            unary_response=unary_response,
            retry_options=core.retry_options,
        )

    def new_hedged_steps(
        self,
        subchannels: "Subchannels[Any]",
        options: "TransportOptions",
        request: Optional[wire.Framed],
        unary_response: bool,
        guard: Optional[ContextManager[Any]] = None,
    ) -> HedgedSteps:
        """The steps of this call, hedged (:attr:`hedging` is set): its attempts, each made by
        :meth:`new_call`; ``guard`` is held while they are read or changed."""
        assert self.hedging is not None
        core = self.method.core
        return HedgedSteps(
            CallHedging(self.hedging, core.retry_options, core.retry_buffer, core.retry_throttle),
            subchannels,
            options,
            self.deadline,
            self.wait_for_ready,
            self.new_call,
            request,
            unary_response,
            core.retry_options,
            guard=guard,
        )

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
            raise _failed(Code.INTERNAL, "Exception serializing request!") from None
        compressed = self.encoding is not None
        if self.encoding is not None:
            payload = wire.compress(self.encoding, payload)
        limit = method.max_send
        if limit is not None and len(payload) > limit:
            raise _failed(Code.RESOURCE_EXHAUSTED, str(MessageTooLarge(len(payload), limit, True)))
        return wire.frame_message(payload, compressed)

    def new_call(
        self, request: Optional[wire.Framed], unary_response: bool, previous_attempts: int = 0
    ) -> ClientCall:
        """The protocol's state of one attempt of this call; from the second attempt on, its
        headers say how many came before (``grpc-previous-rpc-attempts``, gRFC A6)."""
        make_headers = self.make_headers
        if previous_attempts:
            extra = [(PREVIOUS_ATTEMPTS_HEADER, str(previous_attempts).encode("ascii"))]

            def make_headers(time_left: "Optional[float]") -> "List[Header]":
                return self.make_headers(time_left) + extra

        return ClientCall(
            deadline=self.deadline,
            header_factory=make_headers,
            request=request,
            unary_response=unary_response,
            max_receive_message_length=self.method.max_receive,
        )

    def decode(self, message: Message, call: ClientCall) -> Any:
        """Inflate and deserialize one response message of ``call``; a failure (the receive
        limit, compression, the deserializer) raises :class:`CallFailed` with the call's
        metadata."""
        compressed, payload = message
        method = self.method
        try:
            payload = wire.decode_message(
                compressed, payload, call.response_encoding, method.max_receive
            )
        except CallError as exc:
            raise _failed(exc.code_number, str(exc), call) from None
        deserializer = method.deserializer
        if deserializer is None:
            return payload
        try:
            return deserializer(payload)
        except Exception:
            raise _failed(Code.INTERNAL, DESERIALIZE_FAILED_DETAILS, call) from None


def _call_credentials_headers(
    core: "ChannelCore", credentials: Any, path: str, timeout: Optional[float]
) -> List[Tuple[bytes, bytes]]:
    """The metadata of the channel's and the call's call credentials (grpcio's order); they
    need a secure channel, as in grpcio."""
    channel_credentials = core.credentials
    if channel_credentials is None:
        raise ValueError(
            "Call credentials are only valid on secure channels (minigrpc.secure_channel)"
        )
    sources = [channel_credentials.call_credentials, credentials]
    plugins = [source for source in sources if source is not None]
    if not plugins:
        return []
    service, _, method_name = path.rpartition("/")
    service_url = f"https://{core.config.authority}{service}"
    metadata: list = []
    try:
        for source in plugins:
            metadata.extend(source.metadata(service_url, method_name, timeout))
    except CallFailed:
        raise
    except Exception as exc:
        details = f"Getting metadata from plugin failed with error: {exc}"
        raise _failed(Code.UNAVAILABLE, details) from None
    try:
        return wire.encode_metadata(metadata)
    except ValueError as exc:
        raise _failed(Code.INTERNAL, f"Invalid metadata: {exc}") from None
