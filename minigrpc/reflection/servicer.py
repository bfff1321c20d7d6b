"""The server reflection service, once for both protocol versions.

gRPC's doc/server-reflection.md: on one bidirectional stream, each request gets one response.
A client lists the services, then asks for the file that defines a symbol (a service, method,
message, field, enum or extension), or a file by name, and gets it as serialized
``FileDescriptorProto`` messages together with every file it imports, directly or not, so that
it can build the types and call the methods without the ``.proto`` files.  Imported files
already sent on the same stream are not sent again (a client keeps what it was given; grpc-go's
server does the same).  A lookup that finds nothing is answered with an ``ErrorResponse`` carrying
NOT_FOUND and the stream goes on; a request with nothing set is answered INVALID_ARGUMENT.

v1 and v1alpha differ only in the package name of their messages, so the classes here serve
both: each version's modules subclass them, setting ``messages`` to its ``reflection_pb2``.
The descriptors come from a protobuf ``DescriptorPool``, protobuf's default one unless another
is given.
"""

import sys
from typing import Any, AsyncIterator, Iterable, Iterator, List, Optional, Set

from google.protobuf import descriptor_pool

from .. import descriptors
from ..protocol.enums import StatusCode, code_for_context

__all__ = [
    "AsyncReflectionServicer",
    "ReflectionServicer",
    "ServerReflectionServicer",
    "ServerReflectionStub",
    "add_to_server",
    "enable_server_reflection",
    "file_containing_symbol",
    "files_to_send",
]


def file_containing_symbol(pool: Any, symbol: str) -> Any:
    """The ``FileDescriptor`` defining ``symbol``; KeyError if none does.

    protobuf's pools find services, messages, fields, enums, enum values and extensions, but
    not methods (``pkg.Service.Method``), which clients ask for too: those are found through
    their service.
    """
    try:
        return pool.FindFileContainingSymbol(symbol)
    except KeyError:
        service_name, _, method = symbol.rpartition(".")
        if service_name:
            try:
                service = pool.FindServiceByName(service_name)
            except KeyError:
                service = None
            if service is not None and method in service.methods_by_name:
                return service.file
        raise KeyError(symbol) from None


def files_to_send(file: Any, sent: Set[str]) -> List[bytes]:
    """``file`` and everything it imports, transitively, as serialized ``FileDescriptorProto``
    messages, breadth first.  ``file`` itself is always sent (it is what was asked for); the
    files it imports only if their names are not in ``sent``, to which every name sent is
    added (grpc-go's server does the same)."""
    serialized: List[bytes] = []
    queue = [file]
    while queue:
        current = queue.pop(0)
        if not serialized or current.name not in sent:
            sent.add(current.name)
            serialized.append(current.serialized_pb)
            queue.extend(current.dependencies)
    return serialized


class ServerReflectionStub(descriptors.ServiceStub):
    """A client of one version's ``ServerReflection`` (a subclass sets :attr:`messages`, that
    version's ``reflection_pb2``): ``ServerReflectionInfo``, a stream-stream multi-callable of
    the channel, minigrpc's or grpcio's."""

    messages: Any

    def __init__(self, channel: Any) -> None:
        super().__init__(self.messages.SERVER_REFLECTION_SERVICE, channel)


class ServerReflectionServicer:
    """The base class generated code gives: UNIMPLEMENTED until a subclass overrides it."""

    def ServerReflectionInfo(self, request_iterator: Iterator[Any], context: Any) -> Any:
        context.set_code(code_for_context(context, StatusCode.UNIMPLEMENTED))
        context.set_details("ServerReflectionInfo is not implemented")
        raise NotImplementedError("ServerReflectionInfo is not implemented")


def add_to_server(messages: Any, servicer: Any, server: Any) -> None:
    """Serve ``servicer``'s ``ServerReflectionInfo`` of the version of ``messages``."""
    descriptors.add_servicer(server, messages.SERVER_REFLECTION_SERVICE, servicer)


class ReflectionServicer(ServerReflectionServicer):
    """``ServerReflection`` of one version (a subclass sets :attr:`messages`, that version's
    ``reflection_pb2``, or the caller passes it) over ``pool`` (protobuf's default pool if
    None).

    ``service_names`` are what ``list_services`` answers (sorted, as grpcio does).
    """

    messages: Any

    def __init__(
        self, service_names: Iterable[str], pool: Optional[Any] = None, *, messages: Any = None
    ) -> None:
        self._messages = self.messages if messages is None else messages
        self._service_names = tuple(sorted(service_names))
        self._pool = descriptor_pool.Default() if pool is None else pool

    def ServerReflectionInfo(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
        sent: Set[str] = set()
        for request in request_iterator:
            yield self._respond(request, sent)

    def _respond(self, request: Any, sent: Set[str]) -> Any:
        """The response to one request of a stream that has been sent the files in ``sent``."""
        response = self._answer(request, sent)
        response.original_request.CopyFrom(request)
        response.valid_host = request.host
        return response

    def _answer(self, request: Any, sent: Set[str]) -> Any:
        kind = request.WhichOneof("message_request")
        try:
            if kind == "list_services":
                return self._list_services()
            if kind == "file_by_filename":
                return self._files(self._pool.FindFileByName(request.file_by_filename), sent)
            if kind == "file_containing_symbol":
                symbol = request.file_containing_symbol
                return self._files(file_containing_symbol(self._pool, symbol), sent)
            if kind == "file_containing_extension":
                wanted = request.file_containing_extension
                message = self._pool.FindMessageTypeByName(wanted.containing_type)
                extension = self._pool.FindExtensionByNumber(message, wanted.extension_number)
                return self._files(extension.file, sent)
            if kind == "all_extension_numbers_of_type":
                message = self._pool.FindMessageTypeByName(request.all_extension_numbers_of_type)
                return self._extension_numbers(message)
        except KeyError:
            return self._error(StatusCode.NOT_FOUND, f"{_asked(request, kind)} not found")
        return self._error(StatusCode.INVALID_ARGUMENT, "the request asks for nothing")

    def _list_services(self) -> Any:
        messages = self._messages
        return messages.ServerReflectionResponse(
            list_services_response=messages.ListServiceResponse(
                service=[messages.ServiceResponse(name=name) for name in self._service_names]
            )
        )

    def _files(self, file: Any, sent: Set[str]) -> Any:
        messages = self._messages
        return messages.ServerReflectionResponse(
            file_descriptor_response=messages.FileDescriptorResponse(
                file_descriptor_proto=files_to_send(file, sent)
            )
        )

    def _extension_numbers(self, message: Any) -> Any:
        messages = self._messages
        numbers = sorted(extension.number for extension in self._pool.FindAllExtensions(message))
        return messages.ServerReflectionResponse(
            all_extension_numbers_response=messages.ExtensionNumberResponse(
                base_type_name=message.full_name, extension_number=numbers
            )
        )

    def _error(self, code: StatusCode, message: str) -> Any:
        messages = self._messages
        return messages.ServerReflectionResponse(
            error_response=messages.ErrorResponse(error_code=code.number, error_message=message)
        )


def _asked(request: Any, kind: str) -> str:
    """What a request that found nothing asked for, in words."""
    if kind == "file_containing_extension":
        wanted = request.file_containing_extension
        return f"extension {wanted.extension_number} of {wanted.containing_type!r}"
    what = {"file_by_filename": "file", "file_containing_symbol": "symbol"}.get(kind, "type")
    return f"{what} {getattr(request, kind)!r}"


class AsyncReflectionServicer(ReflectionServicer):
    """The same service for asyncio servers (``grpc.aio``): its stream is an async generator."""

    async def ServerReflectionInfo(  # type: ignore[override]
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        sent: Set[str] = set()
        async for request in request_iterator:
            yield self._respond(request, sent)


def _is_asyncio_server(server: Any) -> bool:
    """True for ``grpc.aio`` servers: minigrpc's, or grpcio's where the application uses it."""
    from .. import aio

    if isinstance(server, aio.Server):
        return True
    grpc_aio = getattr(sys.modules.get("grpc"), "aio", None)
    server_class = getattr(grpc_aio, "Server", None)
    return isinstance(server_class, type) and isinstance(server, server_class)


def enable_server_reflection(
    service_names: Iterable[str], server: Any, pool: Optional[Any] = None
) -> None:
    """Serve reflection, v1 and v1alpha both, on ``server``: minigrpc's or grpcio's, blocking or
    asyncio (``grpc.aio``).

    ``service_names`` are the services to list; when it names one version's reflection service,
    the other's is listed too, since both are served.
    """
    # The versions' messages, not their ``reflection`` modules: those import this one.
    from .v1 import reflection_pb2 as v1
    from .v1alpha import reflection_pb2 as v1alpha

    names = list(service_names)
    versions = (v1, v1alpha)
    service_names_of = [version.SERVER_REFLECTION_SERVICE.full_name for version in versions]
    if any(name in names for name in service_names_of):
        names.extend(name for name in service_names_of if name not in names)
    kind = AsyncReflectionServicer if _is_asyncio_server(server) else ReflectionServicer
    for messages in versions:
        add_to_server(messages, kind(names, pool=pool, messages=messages), server)
