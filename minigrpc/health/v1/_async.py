"""The health servicer for asyncio servers (``grpc.aio``), grpcio-health-checking's
``health.aio.HealthServicer``: the same service as :mod:`minigrpc.health.v1.health`, its
setters coroutines that run on the server's event loop.

Each ``Watch`` is an async generator fed by a queue of its own, created on the loop, so nothing
here is bound to a loop before the server runs.  As in the blocking servicer, a watcher is sent
a message when the status changes, and its stream ends (OK) after
:meth:`HealthServicer.enter_graceful_shutdown`.
"""

import asyncio
from typing import Any, AsyncIterator, Dict, Optional, Set

from ...protocol.enums import StatusCode, code_for_context
from . import health_pb2, health_pb2_grpc

__all__ = ["HealthServicer"]


class HealthServicer(health_pb2_grpc.HealthServicer):
    """``grpc.health.v1.Health`` for an asyncio server; use it from the server's loop."""

    def __init__(self) -> None:
        self._statuses: Dict[str, int] = {"": health_pb2.HealthCheckResponse.SERVING}
        self._watchers: Dict[str, Set[asyncio.Queue[Optional[int]]]] = {}
        self._shutting_down = False

    async def Check(self, request: Any, context: Any) -> Any:
        status = self._statuses.get(request.service)
        if status is None:
            not_found = code_for_context(context, StatusCode.NOT_FOUND)
            await context.abort(not_found, f"unknown service {request.service!r}")
        return health_pb2.HealthCheckResponse(status=status)

    async def List(self, request: Any, context: Any) -> Any:
        response = health_pb2.HealthListResponse()
        for service, status in self._statuses.items():
            response.statuses[service].status = status
        return response

    async def Watch(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """The status now (SERVICE_UNKNOWN if not known), then at each change."""
        service = request.service
        unknown = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
        yield health_pb2.HealthCheckResponse(status=self._statuses.get(service, unknown))
        if self._shutting_down:
            return
        changes: asyncio.Queue[Optional[int]] = asyncio.Queue()
        self._watchers.setdefault(service, set()).add(changes)
        try:
            while True:
                status = await changes.get()
                if status is None:
                    return
                yield health_pb2.HealthCheckResponse(status=status)
        finally:
            watchers = self._watchers.get(service)
            if watchers is not None:
                watchers.discard(changes)
                if not watchers:
                    del self._watchers[service]

    def _update(self, service: str, status: int) -> None:
        previous = self._statuses.get(service)
        self._statuses[service] = status
        if previous != status:
            for changes in self._watchers.get(service, ()):
                changes.put_nowait(status)

    async def set(self, service: str, status: int) -> None:
        """Set ``service``'s status; its watchers hear of a change.  Ignored after
        :meth:`enter_graceful_shutdown`."""
        if not self._shutting_down:
            self._update(service, status)

    async def enter_graceful_shutdown(self) -> None:
        """Every service NOT_SERVING for good; the watchers are told, then their streams end."""
        if self._shutting_down:
            return
        self._shutting_down = True
        for service in list(self._statuses):
            self._update(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        for watchers in self._watchers.values():
            for changes in watchers:
                changes.put_nowait(None)
