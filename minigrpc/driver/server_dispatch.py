"""What a server decides for each call, apart from moving bytes: the part every server shares.

The sans-IO :mod:`minigrpc.protocol.server_protocol` turns bytes into call events and status into
bytes; a server's I/O loop (a selector thread and an executor in
:mod:`minigrpc.blocking.server_loop`, an event loop in :mod:`minigrpc.aio`) moves the bytes and
runs the handlers.  Between the two sit the decisions a server makes for every call, which do not
depend on how it waits, and which are therefore written once, here, with no I/O, no threads and no
clock:

* which handler serves a method: registered methods first, then the generic handlers, all
  behind the server interceptors (:class:`HandlerTable`); and the status of a call that cannot
  start (no such method, a handler without a callable of its shape, the concurrency limit), sent
  as a Trailers-Only response (PROTOCOL-HTTP2.md, "Responses");
* the request's bytes to the handler's argument and its response to bytes
  (:func:`deserialize_request`, :func:`serialize_response`);
* the status and details that end the call, from what the handler returned, raised, or set on
  its context (:func:`outcome_of_return` and its siblings), with grpcio's codes and wording,
  so code written for grpcio sees the same statuses on minigrpc.

The ``context`` these functions read is the handler's servicer context (blocking or asyncio):
anything with the attributes ``_method`` (the call's method path), ``_code`` (the status code
the handler set, or None), ``_details`` (its details, or None), ``_aborted`` (``abort()`` was
called) and ``_terminated`` (the call ended before the handler did): a
:class:`~minigrpc.driver.server_call_state.CallState`.
"""

from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ..protocol.enums import StatusCode
from ..protocol.memory_budget import OVER_BUDGET_DETAILS
from ..protocol.status import CallStatus, Metadata, RpcError
from . import handlers as _handlers
from .logs import get_logger

__all__ = [
    "BAD_REQUEST",
    "CONCURRENCY_LIMIT",
    "METHOD_NOT_FOUND",
    "OVER_BUDGET",
    "Admitted",
    "BadRequest",
    "CallEndedError",
    "HandlerTable",
    "Outcome",
    "deserialize_request",
    "intercept_handler_lookup",
    "log_bad_request",
    "lookup_failed",
    "outcome_of_exception",
    "outcome_of_return",
    "outcome_of_stream_end",
    "outcome_without_response",
    "record_bad_request",
    "serialize_response",
]

#: The server's logger (handler exceptions, failed lookups); named after the public API.
_LOGGER = get_logger("minigrpc.server")


class Outcome(NamedTuple):
    """How a call ends: its status, and for a unary response that succeeded, the message."""

    code: StatusCode
    details: str
    message: Optional[bytes] = None


class Admitted(NamedTuple):
    """A call the server can start: its handler and the callable of the handler's shape."""

    handler: Any
    behavior: Callable[..., Any]


#: grpcio's status for a request message that does not deserialize.
BAD_REQUEST = Outcome(StatusCode.INTERNAL, "Exception deserializing request!")
#: grpcio's status for a method nobody registered (grpc-go names the method instead).
METHOD_NOT_FOUND = Outcome(StatusCode.UNIMPLEMENTED, "Method not found!")
#: grpcio's status for a call past ``maximum_concurrent_rpcs``.
CONCURRENCY_LIMIT = Outcome(StatusCode.RESOURCE_EXHAUSTED, "Concurrent RPC limit exceeded!")
#: A unary response its connection's memory account cannot take
#: (:meth:`~minigrpc.protocol.memory_budget.ConnectionMemory.reserve`): both servers reserve it on
#: the handler's thread, before it is queued, so handlers that answer faster than the connection
#: writes cannot pile responses up unseen.
OVER_BUDGET = Outcome(StatusCode.RESOURCE_EXHAUSTED, OVER_BUDGET_DETAILS)


class CallEndedError(RpcError):
    """Raised by a request iterator whose call already ended (cancelled, expired, reset).

    grpcio's request iterator raises a ``grpc.RpcError`` then too; a handler that lets it
    propagate ends quietly, since nobody waits for its answer any more.
    """

    def __init__(self, code: StatusCode) -> None:
        super().__init__(CallStatus(code.number, "the call ended"))


class BadRequest(Exception):
    """A request message that did not deserialize; the call ends with :data:`BAD_REQUEST`."""


def intercept_handler_lookup(
    interceptors: Sequence[Any], lookup: Callable[[Any], Any], handler_call_details: Any
) -> Any:
    """Run ``handler_call_details`` through the server interceptors, then ``lookup``."""

    def step(index: int) -> Callable[[Any], Any]:
        if index == len(interceptors):
            return lookup
        interceptor = interceptors[index]
        following = step(index + 1)
        return lambda details: interceptor.intercept_service(following, details)

    return step(0)(handler_call_details)


class HandlerTable:
    """The server's handlers: ``add_registered_method_handlers``' paths, the generic handlers in
    the order they were added, and the server interceptors around the lookup."""

    def __init__(self, interceptors: Sequence[Any] = ()) -> None:
        self.registered: Dict[str, Any] = {}
        self.generic: List[Any] = []
        #: ``ServerInterceptor`` objects, the first one outermost (grpcio's order).
        self.interceptors: Tuple[Any, ...] = tuple(interceptors)

    def add_generic(self, generic_rpc_handlers: Iterable[Any]) -> None:
        """Add objects with a ``service(handler_call_details)`` method (grpcio's API: any such
        object, a ``grpc.GenericRpcHandler`` or not).  All are checked before any is added."""
        handlers = list(generic_rpc_handlers)
        for handler in handlers:
            if not callable(getattr(handler, "service", None)):
                raise AttributeError(
                    f"{handler!r} is not a grpc.GenericRpcHandler: it has no service() method"
                )
        self.generic.extend(handlers)

    def add_registered(self, service_name: str, method_handlers: Mapping[str, Any]) -> None:
        """Register ``{method: RpcMethodHandler}`` for a service (grpcio >= 1.62 generated code)."""
        for method, handler in method_handlers.items():
            path = f"/{service_name}/{method}"
            _handlers.check_handler(path, handler)
            self.registered[path] = handler

    def lookup(self, method: str, metadata: Metadata) -> Optional[Any]:
        """The handler registered for ``method``, without the interceptors; None if none is."""
        handler = self.registered.get(method)
        if handler is not None:
            return handler
        if self.generic:
            details = _handlers.HandlerCallDetails(method, metadata)
            for generic in self.generic:
                handler = generic.service(details)
                if handler is not None:
                    return handler
        return None

    def find(self, method: str, metadata: Metadata) -> Optional[Any]:
        """The handler for ``method`` as the interceptors leave it; None if there is none."""
        if self.interceptors:
            return intercept_handler_lookup(
                self.interceptors,
                lambda details: self.lookup(details.method, details.invocation_metadata),
                _handlers.HandlerCallDetails(method, metadata),
            )
        return self.lookup(method, metadata)

    def admit(
        self,
        method: str,
        handler: Optional[Any],
        active_calls: int,
        limit: Optional[int],
    ) -> Union[Admitted, Outcome]:
        """Whether a call to ``method`` that found ``handler`` may start, with ``active_calls``
        running on a server that allows ``limit``; if not, the status that rejects it."""
        if handler is None:
            return METHOD_NOT_FOUND
        behavior = _handlers.handler_behavior(handler)
        if behavior is None:
            # A handler whose flags name a shape it has no callable for: a registration bug.
            _LOGGER.error("%s: the handler has no callable for its shape", method)
            return Outcome(
                StatusCode.UNIMPLEMENTED,
                f"{method}: the registered handler has no "
                f"{_handlers.handler_shape(handler)} callable",
            )
        if limit is not None and active_calls >= limit:
            return CONCURRENCY_LIMIT
        return Admitted(handler, behavior)


def lookup_failed(method: str, exc: Exception) -> Outcome:
    """A generic handler or interceptor raised while the server looked for ``method``'s handler
    (logged): grpcio answers UNKNOWN."""
    _LOGGER.error("looking up the handler for %s failed", method, exc_info=exc)
    return Outcome(StatusCode.UNKNOWN, f"Exception servicing handler: {exc}")


def deserialize_request(method: str, handler: Any, data: bytes) -> Any:
    """The handler's request from the message's bytes; :class:`BadRequest` (logged) if the
    deserializer fails.  A handler without a deserializer gets the bytes."""
    deserializer = handler.request_deserializer
    if deserializer is None:
        return data
    try:
        return deserializer(data)
    except Exception as exc:
        _LOGGER.exception("%s: exception deserializing request", method)
        raise BadRequest(method) from exc


def log_bad_request(method: str) -> None:
    """Log, from inside the ``except`` block, a streamed request that did not deserialize."""
    _LOGGER.exception("%s: exception deserializing request", method)


def record_bad_request(context: Any) -> None:
    """A streamed request did not deserialize: log it (from inside the ``except`` block) and
    record :data:`BAD_REQUEST` on the context as an abort would; the caller then raises."""
    log_bad_request(context._method)
    context._record_failure(BAD_REQUEST.code, BAD_REQUEST.details)


def serialize_response(method: str, handler: Any, response: Any) -> Optional[bytes]:
    """The response's bytes, or None (logged) when the serializer fails or returns no bytes."""
    serializer = handler.response_serializer
    try:
        serialized = serializer(response) if serializer is not None else response
        if not isinstance(serialized, (bytes, bytearray, memoryview)):
            raise TypeError(f"a response must serialize to bytes, got {type(serialized).__name__}")
        return bytes(serialized)
    except Exception:
        _LOGGER.exception("%s: exception serializing response", method)
        return None


def outcome_of_return(context: Any, handler: Any, response: Any) -> Outcome:
    """A unary handler returned ``response``: the code it set (OK if none) with the response's
    bytes, which are sent only with OK; a response that is None or does not serialize is
    :func:`outcome_without_response`."""
    serialized = (
        None if response is None else serialize_response(context._method, handler, response)
    )
    if serialized is None:
        return outcome_without_response(context)
    set_code = context._code
    code = StatusCode.OK if set_code is None else set_code
    return Outcome(code, context._details or "", serialized if code is StatusCode.OK else None)


def outcome_without_response(context: Any) -> Outcome:
    """A response that is None or does not serialize: grpcio sends a code the handler set
    (other than OK), else INTERNAL, with the handler's details if it set any."""
    set_code = context._code
    code = StatusCode.INTERNAL
    if set_code is not None and set_code is not StatusCode.OK:
        code = set_code
    details = context._details if context._details is not None else "Failed to serialize response!"
    return Outcome(code, details)


def outcome_of_stream_end(context: Any) -> Outcome:
    """A response-streaming handler finished: the code it set, OK if none."""
    code = StatusCode.OK if context._code is None else context._code
    return Outcome(code, context._details or "")


def outcome_of_exception(context: Any, exc: BaseException) -> Optional[Outcome]:
    """The handler raised ``exc``: ``abort()``'s status, or UNKNOWN (logged) as grpcio reports
    it; None when the call had already ended, so nobody waits for an answer."""
    if context._aborted:
        return Outcome(context._code or StatusCode.UNKNOWN, context._details or "")
    if context._terminated or isinstance(exc, CallEndedError):
        return None
    message = f"Exception calling application: {exc}"
    _LOGGER.error("%s: %s", context._method, message, exc_info=exc)
    code = context._code or StatusCode.UNKNOWN
    details = context._details if context._details is not None else message
    return Outcome(code, details)
