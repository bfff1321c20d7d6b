"""A health servicer with grpcio-health-checking's API, on protobuf alone.

gRPC's doc/health-checking.md defines the service: ``Check`` answers a service's status now
(NOT_FOUND for a service the server does not know), ``Watch`` streams it now and then at every
change, and ``List`` (newer) answers every known service.  The server side sets statuses with
:meth:`HealthServicer.set` and, when it begins to stop, calls
:meth:`HealthServicer.enter_graceful_shutdown`, after which every service is NOT_SERVING for good.

Two choices differ from grpcio's servicer, both where the document leaves room:

* a watcher is sent a message when the status *changes* (the document's words); setting the
  status it already has sends nothing;
* :meth:`~HealthServicer.enter_graceful_shutdown` tells every watcher NOT_SERVING and then ends
  its stream with OK, so that ``server.stop(grace)`` is not held for the whole grace period by
  watch streams that would otherwise never end; a client that watches again is answered
  NOT_SERVING and its stream ends at once.

``Watch`` holds no thread while it waits: like grpcio's, it is a non-blocking streaming handler
(``experimental_non_blocking``) that pushes responses from :meth:`~HealthServicer.set`'s thread;
a server that does not offer that gets a blocking iterator instead.  ``health.aio.HealthServicer``
is the same service for asyncio servers (:mod:`minigrpc.health.v1._async`), as in grpcio.
"""

import queue
import threading
from concurrent.futures import Executor
from typing import Any, Callable, Dict, Iterator, List, Optional

from ...protocol.enums import StatusCode, code_for_context
from . import _async as aio
from . import health_pb2, health_pb2_grpc

__all__ = ["OVERALL_HEALTH", "HealthServicer", "aio"]

#: The service name that stands for the server as a whole.
OVERALL_HEALTH = ""

#: What a watcher is given: a response, or None when its stream is to end.
_Send = Callable[[Any], None]


class _BlockingWatch:
    """The responses of one ``Watch`` for a server that wants an iterator: a queue the servicer
    fills and the handler's thread drains, ended by None."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def send(self, response: Any) -> None:
        self._queue.put(response)

    def __iter__(self) -> Iterator[Any]:
        while True:
            response = self._queue.get()
            if response is None:
                return
            yield response


def _responses(blocking: Optional[_BlockingWatch]) -> Optional[Iterator[Any]]:
    """What ``Watch`` returns: an iterator for a blocking server, None for a non-blocking one."""
    return None if blocking is None else iter(blocking)


class HealthServicer(health_pb2_grpc.HealthServicer):
    """``grpc.health.v1.Health`` over a table of statuses; thread-safe.

    The overall status (service ``""``) starts SERVING, as in grpcio.  ``experimental_non_
    blocking`` and ``experimental_thread_pool`` are read by the server from the ``Watch``
    behaviour (grpcio's convention); they are this instance's own, not shared with other
    instances.
    """

    def __init__(
        self,
        experimental_non_blocking: bool = True,
        experimental_thread_pool: Optional[Executor] = None,
    ) -> None:
        self._lock = threading.RLock()
        self._statuses: Dict[str, int] = {
            OVERALL_HEALTH: health_pb2.HealthCheckResponse.SERVING
        }
        self._watchers: Dict[str, List[_Send]] = {}
        self._shutting_down = False
        watch = _WatchBehaviour(self)
        watch.experimental_non_blocking = experimental_non_blocking
        watch.experimental_thread_pool = experimental_thread_pool
        # An instance attribute shadows the method, so that the attributes are per instance.
        self.Watch = watch  # type: ignore[method-assign]

    # -- the service -----------------------------------------------------------------------

    def Check(self, request: Any, context: Any) -> Any:
        with self._lock:
            status = self._statuses.get(request.service)
        if status is None:
            not_found = code_for_context(context, StatusCode.NOT_FOUND)
            context.abort(not_found, f"unknown service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=status)

    def List(self, request: Any, context: Any) -> Any:
        with self._lock:
            statuses = dict(self._statuses)
        response = health_pb2.HealthListResponse()
        for service, status in statuses.items():
            response.statuses[service].status = status
        return response

    def Watch(
        self, request: Any, context: Any, send_response_callback: Optional[_Send] = None
    ) -> Optional[Iterator[Any]]:
        """The status of ``request.service`` now (SERVICE_UNKNOWN if it is not known), then at
        each change, until the call ends or the server shuts down.

        With ``send_response_callback`` (a non-blocking server) it returns at once and the
        responses are pushed through it; without, it returns the iterator of responses.
        """
        blocking: Optional[_BlockingWatch] = None
        send = send_response_callback
        if send is None:
            blocking = _BlockingWatch()
            send = blocking.send
        service = request.service
        with self._lock:
            status = self._statuses.get(service, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
            send(health_pb2.HealthCheckResponse(status=status))
            if self._shutting_down:
                send(None)
                return _responses(blocking)
            self._watchers.setdefault(service, []).append(send)
        watcher = send
        if not context.add_callback(lambda: self._forget(service, watcher)):
            self._forget(service, watcher)  # the call had already ended
        return _responses(blocking)

    def _forget(self, service: str, send: _Send) -> None:
        """The watch call ended (cancelled, deadline, server stop): drop it, end the stream."""
        with self._lock:
            watchers = self._watchers.get(service, [])
            if send not in watchers:
                return
            watchers.remove(send)
            if not watchers:
                del self._watchers[service]
        send(None)

    # -- the server's side -------------------------------------------------------------------

    def set(self, service: str, status: int) -> None:
        """Set ``service``'s status (a ``HealthCheckResponse.ServingStatus`` value) and tell its
        watchers if it changed.  Ignored after :meth:`enter_graceful_shutdown`."""
        with self._lock:
            if self._shutting_down:
                return
            self._update(service, status)

    def _update(self, service: str, status: int) -> None:
        previous = self._statuses.get(service)
        self._statuses[service] = status
        if previous == status:
            return
        for send in list(self._watchers.get(service, ())):
            send(health_pb2.HealthCheckResponse(status=status))

    def enter_graceful_shutdown(self) -> None:
        """Make every service NOT_SERVING for good, tell the watchers, and end their streams.

        Call it when the server starts to stop, before ``server.stop(grace)``: clients then
        move away while the calls in flight finish.  Later :meth:`set` calls are ignored.
        """
        with self._lock:
            if self._shutting_down:
                return
            self._shutting_down = True
            for service in list(self._statuses):
                self._update(service, health_pb2.HealthCheckResponse.NOT_SERVING)
            watchers, self._watchers = self._watchers, {}
        for sends in watchers.values():
            for send in sends:
                send(None)


class _WatchBehaviour:
    """``HealthServicer.Watch`` as a callable object, so that the two attributes a server reads
    from a streaming behaviour can be set per servicer instance."""

    experimental_non_blocking: bool
    experimental_thread_pool: Optional[Executor]

    def __init__(self, servicer: HealthServicer) -> None:
        self._servicer = servicer

    def __call__(
        self, request: Any, context: Any, send_response_callback: Optional[_Send] = None
    ) -> Optional[Iterator[Any]]:
        return HealthServicer.Watch(self._servicer, request, context, send_response_callback)
