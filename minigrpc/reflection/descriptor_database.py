"""The client side of server reflection: a protobuf descriptor database filled by a server.

grpcio-reflection's ``ProtoReflectionDescriptorDatabase``, on protobuf alone: given a channel
(minigrpc's or grpcio's), it answers a ``DescriptorPool``'s lookups by asking the server
(gRPC's doc/server-reflection.md), so a program can call services whose ``.proto`` files it
does not have::

    database = ProtoReflectionDescriptorDatabase(channel)
    pool = descriptor_pool.DescriptorPool(database)
    service = pool.FindServiceByName(database.get_services()[0])

It speaks v1 and, when the server answers UNIMPLEMENTED to that, v1alpha from then on (as
grpcurl does), so it works with servers of either age.  Each lookup is one short stream, as in
grpcio; what the server sent is kept, and asked for again only if not known.
"""

from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from google.protobuf import descriptor_database as _database
from google.protobuf import descriptor_pb2

from ..protocol.enums import StatusCode
from .v1 import reflection_pb2_grpc as v1
from .v1alpha import reflection_pb2_grpc as v1alpha

__all__ = ["ProtoReflectionDescriptorDatabase"]


class ProtoReflectionDescriptorDatabase(_database.DescriptorDatabase):
    """A ``DescriptorDatabase`` that asks the server behind ``channel`` for what it lacks.

    Lookups of something the server does not know raise KeyError, as a database must.
    """

    def __init__(self, channel: Any) -> None:
        super().__init__()
        # The versions to try, newest first: (messages, stub) pairs.
        self._versions: Sequence[Tuple[Any, Any]] = [
            (version.reflection_pb2, version.ServerReflectionStub(channel))
            for version in (v1, v1alpha)
        ]
        self._known_files: Set[str] = set()
        self._extension_files: Dict[Tuple[str, int], Any] = {}
        self._extension_numbers: Dict[str, List[int]] = {}

    def get_services(self) -> List[str]:
        """The names of the services the server lists."""
        response = self._ask({"list_services": ""}, "list_services")
        return [service.name for service in response.list_services_response.service]

    def FindFileByName(self, name: str) -> Any:
        try:
            return super().FindFileByName(name)
        except KeyError:
            pass
        self._files_of(self._ask({"file_by_filename": name}, name))
        return super().FindFileByName(name)

    def FindFileContainingSymbol(self, symbol: str) -> Any:
        try:
            return super().FindFileContainingSymbol(symbol)
        except KeyError:
            pass
        files = self._files_of(self._ask({"file_containing_symbol": symbol}, symbol))
        try:
            return super().FindFileContainingSymbol(symbol)
        except KeyError:
            # protobuf's database does not index methods (pkg.Service.Method): the server named
            # the file, the first it sent.
            return files[0]

    def FindAllExtensionNumbers(self, extendee_name: str) -> List[int]:
        numbers = self._extension_numbers.get(extendee_name)
        if numbers is None:
            response = self._ask({"all_extension_numbers_of_type": extendee_name}, extendee_name)
            numbers = list(response.all_extension_numbers_response.extension_number)
            self._extension_numbers[extendee_name] = numbers
        return list(numbers)

    def FindFileContainingExtension(self, extendee_name: str, extension_number: int) -> Any:
        key = (extendee_name, extension_number)
        if key not in self._extension_files:
            request = {
                "file_containing_extension": {
                    "containing_type": extendee_name,
                    "extension_number": extension_number,
                }
            }
            self._files_of(self._ask(request, key))
        try:
            return self._extension_files[key]
        except KeyError:
            raise KeyError(key) from None

    # -- the conversation --------------------------------------------------------------------

    def _ask(self, fields: Dict[str, Any], key: Any) -> Any:
        """One request on a stream of its own; the response, or KeyError(key) for NOT_FOUND."""
        for index, (messages, stub) in enumerate(self._versions):
            request = messages.ServerReflectionRequest(**_request_fields(messages, fields))
            try:
                (response,) = list(stub.ServerReflectionInfo(iter([request])))
            except Exception as exc:
                code = getattr(exc, "code", None)
                unimplemented = callable(code) and getattr(code(), "name", "") == "UNIMPLEMENTED"
                if unimplemented and index + 1 < len(self._versions):
                    continue  # an older server: v1alpha from now on
                raise
            self._versions = self._versions[index:]
            if response.HasField("error_response"):
                error = response.error_response
                if error.error_code == StatusCode.NOT_FOUND.number:
                    raise KeyError(key)
                raise ValueError(f"server reflection refused {key!r}: {error.error_message}")
            return response
        raise AssertionError("no reflection version to ask")  # there are two

    def _files_of(self, response: Any) -> List[Any]:
        """Add the files of a response to the database; return them as FileDescriptorProtos."""
        files = []
        for serialized in response.file_descriptor_response.file_descriptor_proto:
            file = descriptor_pb2.FileDescriptorProto.FromString(serialized)
            files.append(file)
            if file.name in self._known_files:
                continue
            self._known_files.add(file.name)
            self.Add(file)
            self._index_extensions(file, file.package, file.extension, file.message_type)
        return files

    def _index_extensions(self, file: Any, scope: str, extensions: Any, messages: Any) -> None:
        for extension in extensions:
            extendee = extension.extendee.lstrip(".")
            self._extension_files[(extendee, extension.number)] = file
        for message in messages:
            name = f"{scope}.{message.name}" if scope else message.name
            self._index_extensions(file, name, message.extension, message.nested_type)


def _request_fields(messages: Any, fields: Dict[str, Any]) -> Dict[str, Any]:
    """``fields`` with a nested ExtensionRequest built from its dict, for ``messages``."""
    wanted: Optional[Dict[str, Any]] = fields.get("file_containing_extension")
    if wanted is None:
        return fields
    return {"file_containing_extension": messages.ExtensionRequest(**wanted)}
