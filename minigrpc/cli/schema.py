"""Where a command's descriptors come from, and finding services, methods and symbols in them.

Three sources, as in grpcurl, each a descriptor database behind a pool of its own:

* **server reflection** (gRPC's doc/server-reflection.md) through
  :class:`minigrpc.reflection.descriptor_database.ProtoReflectionDescriptorDatabase`, which asks
  for v1 and falls back to v1alpha when the server answers UNIMPLEMENTED;
* **local files**: ``--protoset`` FileDescriptorSets and ``--proto-module`` ``*_pb2`` modules,
  for a server without reflection;
* **the tool's own protos** (:mod:`minigrpc.cli.known_protos`): Antrea's CNI service, health and
  reflection, which need no reflection at all.

Reflection servers differ in what they index.  ``file_containing_symbol`` for a method
(``pkg.Service.Method``) is answered by grpc-go, while grpcio's answers NOT_FOUND; so a symbol
that is not found is looked for again as a member of its parent (the service that holds the
method).  Every lookup that reaches the server can fail like any call: the failure becomes a
:class:`~minigrpc.cli.exits.ToolError` whose exit code is the status code (14 when nothing
listens), never a traceback.
"""

import importlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, TypeVar

from . import known_protos
from .exits import (
    MISSING_DEPENDENCY,
    NOT_FOUND,
    UNIMPLEMENTED,
    USAGE,
    ToolError,
    UsageError,
    status_line,
)

#: What :meth:`Schema.find_symbol` can answer, with the article grpcurl-style output uses.
KINDS = {"service": "a service", "method": "a method", "message": "a message", "enum": "an enum"}

#: The status code a reflection answer outside the status codes is reported with (UNKNOWN).
_UNKNOWN = 2

_T = TypeVar("_T")


class Schema:
    """Descriptors from one source: a pool, and the database that fills it on demand."""

    #: The exit code when the source's descriptors do not build (a file that names a type it
    #: does not define, ...): what the server sent is UNKNOWN; a file given is a usage error.
    broken_exit = _UNKNOWN

    def __init__(self, pool: Any, source: str) -> None:
        self.pool = pool
        #: Named in messages: "the server's reflection", "--protoset x.pb", ...
        self.source = source
        self._classes: List[Any] = []
        self._files_held: Set[str] = set()

    # -- what a source provides --------------------------------------------------------------

    def service_names(self) -> List[str]:
        """The services this source lists, sorted."""
        raise NotImplementedError

    def _ensure(self, symbol: str) -> bool:
        """Make ``symbol``'s file known to the pool if the source has it; whether it does."""
        raise NotImplementedError

    # -- lookups, the same for every source ----------------------------------------------------

    def find_service(self, name: str) -> Any:
        if not self._ensure(name):
            raise ToolError(f"{self.source} knows no service {name!r}", NOT_FOUND)
        service = self._find(self.pool.FindServiceByName, name)
        if service is None:
            raise ToolError(f"{name!r} is not a service ({self.source})", NOT_FOUND)
        return service

    def find_method(self, service_name: str, method_name: str) -> Any:
        service = self.find_service(service_name)
        method = service.methods_by_name.get(method_name)
        if method is None:
            methods = ", ".join(m.name for m in service.methods) or "none"
            raise ToolError(f"service {service_name} has no method {method_name!r} "
                            f"(its methods: {methods})", NOT_FOUND)
        self.hold_classes(method.input_type)
        self.hold_classes(method.output_type)
        return method

    def hold_classes(self, message: Any) -> None:
        """Make, and keep, the class of every message in ``message``'s file and the files it
        imports.

        protobuf 4.24's upb backend frees the classes of a pool other than the default one when
        nothing in Python holds them, and a message whose nested message's class went crashes
        the interpreter (ParseDict, ListFields); the schema outlives every message it makes."""
        from minigrpc.descriptors import message_class

        files = [message.file]
        while files:
            file = files.pop()
            if file.name in self._files_held:
                continue
            self._files_held.add(file.name)
            messages = list(file.message_types_by_name.values())
            while messages:
                descriptor = messages.pop()
                self._classes.append(message_class(descriptor))
                messages.extend(descriptor.nested_types)
            files.extend(file.dependencies)

    def find_symbol(self, name: str) -> Tuple[str, Any]:
        """(kind, descriptor) of a service, method, message or enum named ``name``."""
        if self._ensure(name):
            found = self._kind_of(name)
            if found is not None:
                return found
        parent, _, member = name.rpartition(".")
        if parent and self._ensure(parent):  # a method the server does not index by itself
            service = self._find(self.pool.FindServiceByName, parent)
            if service is not None and member in service.methods_by_name:
                return "method", service.methods_by_name[member]
        raise ToolError(f"{self.source} knows no symbol {name!r}", NOT_FOUND)

    def _kind_of(self, name: str) -> Optional[Tuple[str, Any]]:
        for kind, lookup in (("service", self.pool.FindServiceByName),
                             ("message", self.pool.FindMessageTypeByName),
                             ("enum", self.pool.FindEnumTypeByName)):
            descriptor = self._find(lookup, name)
            if descriptor is not None:
                return kind, descriptor
        parent, _, member = name.rpartition(".")
        service = self._find(self.pool.FindServiceByName, parent) if parent else None
        if service is not None and member in service.methods_by_name:
            return "method", service.methods_by_name[member]
        return None

    def load_message_type(self, full_name: str) -> bool:
        """Make a message type known (the type of an ``Any``, before it is printed)."""
        message = self._find(self.pool.FindMessageTypeByName, full_name) if self._ensure(
            full_name) else None
        if message is None:
            return False
        self.hold_classes(message)
        return True

    def _find(self, lookup: Callable[[str], _T], name: str) -> Optional[_T]:
        """``lookup(name)``; None when there is no such thing."""
        try:
            return lookup(name)
        except KeyError:
            return None
        except TypeError as exc:  # protobuf's word for descriptors that do not build
            raise ToolError(f"{self.source}: the descriptors do not build: {exc}",
                            self.broken_exit) from None


# ------------------------------------------------------------------------------------------------
# Server reflection


class ReflectionSchema(Schema):
    """The server's reflection service; every lookup may be a call (see the module docstring)."""

    def __init__(self, channel: Any, target: str) -> None:
        from google.protobuf import descriptor_pool

        try:
            from minigrpc.reflection.descriptor_database import (
                ProtoReflectionDescriptorDatabase,
            )
        except SyntaxError:  # pragma: no cover - Python 3.6: the generated messages need 3.7
            raise ToolError("server reflection needs Python 3.7 or newer here (minigrpc's "
                            "reflection messages); give the protos with --protoset FILE or "
                            "--proto-module NAME", MISSING_DEPENDENCY) from None

        self._database = ProtoReflectionDescriptorDatabase(channel)
        self._target = target
        self._known: Dict[str, bool] = {}
        super().__init__(descriptor_pool.DescriptorPool(self._database),
                         f"the server reflection of {target}")

    def service_names(self) -> List[str]:
        return sorted(self._ask(self._database.get_services))

    def _ensure(self, symbol: str) -> bool:
        known = self._known.get(symbol)
        if known is None:
            try:
                self._ask(self._database.FindFileContainingSymbol, symbol)
                known = True
            except KeyError:  # the server answered NOT_FOUND
                known = False
            self._known[symbol] = known
        return known

    def _ask(self, function: Callable[..., _T], *args: Any) -> _T:
        import minigrpc

        try:
            return function(*args)
        except minigrpc.RpcError as exc:
            raise reflection_failure(exc, self._target) from None
        except ValueError as exc:  # an error_response other than NOT_FOUND
            raise ToolError(f"{self.source}: {exc}", _UNKNOWN) from None


def reflection_failure(error: Any, target: str) -> ToolError:
    """A reflection call that ended with a status other than OK, as the tool reports it."""
    code = error.code()
    number: int = code.value[0]
    status = status_line(code.name, number, error.details() or "")
    if number == UNIMPLEMENTED:
        return ToolError(f"{target} does not offer server reflection (grpc.reflection.v1 nor "
                         "v1alpha): give the protos with --protoset FILE or --proto-module NAME",
                         number, status)
    return ToolError(f"server reflection on {target} failed", number, status)


# ------------------------------------------------------------------------------------------------
# The tool's own protos


class KnownSchema(Schema):
    """The protos the tool carries (:mod:`minigrpc.cli.known_protos`)."""

    def __init__(self) -> None:
        super().__init__(known_protos.pool(), "the tool's own protos")

    def service_names(self) -> List[str]:  # pragma: no cover - list always asks the server
        raise NotImplementedError

    def _ensure(self, symbol: str) -> bool:
        return known_protos.knows(symbol)


# ------------------------------------------------------------------------------------------------
# --protoset and --proto-module


class LocalSchema(Schema):
    """FileDescriptorSets and ``*_pb2`` modules given on the command line."""

    broken_exit = USAGE

    def __init__(self, pool: Any, services: List[str], source: str) -> None:
        super().__init__(pool, source)
        self._services = services

    def service_names(self) -> List[str]:
        return list(self._services)

    def _ensure(self, symbol: str) -> bool:
        return True  # the pool has all there is; a lookup that fails is a KeyError


def local_schema(protosets: Sequence[str], modules: Sequence[str]) -> LocalSchema:
    """A schema from ``--protoset`` files and ``--proto-module`` modules; UsageError when one
    cannot be read, is not what it should be, or imports a file that none of them holds."""
    from google.protobuf import descriptor_database, descriptor_pb2, descriptor_pool
    from google.protobuf.message import DecodeError

    files: Dict[str, Any] = {}
    listed: List[Any] = []
    for path in protosets:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise UsageError(f"--protoset {path}: {exc.strerror or exc}") from None
        try:
            file_set = descriptor_pb2.FileDescriptorSet.FromString(data)
        except DecodeError:
            file_set = None
        if file_set is None or not file_set.file or not all(f.name for f in file_set.file):
            raise UsageError(f"--protoset {path}: not a FileDescriptorSet (protoc "
                             "--descriptor_set_out=FILE --include_imports)")
        for file in file_set.file:
            _add_file(files, file, f"--protoset {path}")
        listed.extend(file_set.file)
    for name in modules:
        module_file = _module_file(name)
        listed.append(_add_module_files(files, module_file, f"--proto-module {name}"))
    _add_missing_imports(files)
    database = descriptor_database.DescriptorDatabase()
    for file in files.values():
        database.Add(file)
    services = sorted({f"{file.package}.{service.name}" if file.package else service.name
                       for file in listed for service in file.service})
    source = " and ".join([f"--protoset {path}" for path in protosets]
                          + [f"--proto-module {name}" for name in modules])
    pool = descriptor_pool.DescriptorPool(database)
    for name in files:  # built now: a file that does not build is said once, whatever is asked
        try:
            pool.FindFileByName(name)
        except (TypeError, KeyError) as exc:  # backends differ in how they say it
            raise UsageError(f"{source}: the descriptors do not build: {exc}") from None
    return LocalSchema(pool, services, source)


def _add_file(files: Dict[str, Any], file: Any, origin: str) -> None:
    known = files.get(file.name)
    if known is not None and known != file:
        raise UsageError(f"{origin}: {file.name} differs from another file of that name")
    files[file.name] = file


def _module_file(name: str) -> Any:
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # ImportError, or whatever the module raised while loading
        raise UsageError(f"--proto-module {name}: cannot import it: "
                         f"{type(exc).__name__}: {exc}") from None
    descriptor = getattr(module, "DESCRIPTOR", None)
    if descriptor is None or not hasattr(descriptor, "serialized_pb"):
        raise UsageError(f"--proto-module {name}: not a *_pb2 module (it has no file "
                         "DESCRIPTOR)")
    return descriptor


def _add_module_files(files: Dict[str, Any], descriptor: Any, origin: str) -> Any:
    """Add a module's file and, before it, every file it imports; return its proto."""
    from google.protobuf import descriptor_pb2

    for dependency in descriptor.dependencies:
        if dependency.name not in files:
            _add_module_files(files, dependency, origin)
    file = descriptor_pb2.FileDescriptorProto.FromString(descriptor.serialized_pb)
    _add_file(files, file, origin)
    return file


def _add_missing_imports(files: Dict[str, Any]) -> None:
    """protobuf's well-known types may be left out of a set (protoc without
    ``--include_imports``): the runtime has them.  Any other missing import is an error."""
    from google.protobuf import descriptor_pb2

    pending = sorted({dependency for file in files.values() for dependency in file.dependency})
    missing: Dict[str, List[str]] = {}
    while pending:
        name = pending.pop(0)
        if name in files or name in missing:
            continue
        found = _well_known_file(name)
        if found is None:
            missing[name] = sorted(file.name for file in files.values()
                                   if name in file.dependency)
            continue
        file = descriptor_pb2.FileDescriptorProto.FromString(found.serialized_pb)
        files[name] = file
        pending.extend(sorted(file.dependency))
    if missing:
        importers = sorted({importer for names in missing.values() for importer in names})
        raise UsageError(f"{', '.join(importers)} import {', '.join(sorted(missing))}, which "
                         "none of the given files holds (protoc --include_imports puts the "
                         "imports in the set)")


def _well_known_file(name: str) -> Any:
    """The runtime's copy of one of protobuf's own files (``google/protobuf/*.proto``)."""
    from google.protobuf import descriptor_pool

    if not (name.startswith("google/protobuf/") and name.endswith(".proto")):
        return None
    module = "google.protobuf." + name[len("google/protobuf/"):-len(".proto")] + "_pb2"
    try:
        importlib.import_module(module)
        return descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        return None
