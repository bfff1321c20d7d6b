"""Descriptors as ``.proto`` text, for ``describe``: one field, value or method per line.

The text is written from the descriptor protos (``CopyToProto``: ``DescriptorProto``,
``ServiceDescriptorProto``...), whose fields are the same in every protobuf release and backend,
following the protobuf language guides (proto2, proto3 and editions): a field reads ``[label]
type name = number [options];`` with message and enum types fully qualified (``.pkg.Message``);
map fields are written ``map<K, V>`` instead of their synthetic entry message; the fields of a
``oneof`` are grouped under it; a proto3 ``optional`` field is written with its label, not as
the synthetic oneof it is made of; nested messages and enums follow the fields.
"""

from typing import Any, Dict, List

#: ``FieldDescriptorProto.Type`` numbers of the scalar types, and their names in .proto text.
_SCALARS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64",
            7: "fixed32", 8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32",
            16: "sfixed64", 17: "sint32", 18: "sint64"}
_TYPE_STRING, _TYPE_BYTES = 9, 12
_LABEL_OPTIONAL, _LABEL_REQUIRED, _LABEL_REPEATED = 1, 2, 3
_INDENT = "  "


def describe(kind: str, article: str, descriptor: Any) -> str:
    """``<full name> is <article>:`` and the declaration of ``descriptor``."""
    lines = [f"{descriptor.full_name} is {article}:"]
    declared = declaration(kind, descriptor)
    if kind == "service":
        lines += service_lines(declared)
    elif kind == "method":
        lines.append(method_line(declared))
    elif kind == "message":
        lines += message_lines(declared, file_proto(descriptor).syntax or "proto2", 0)
    else:
        lines += enum_lines(declared, 0)
    return "\n".join(lines)


def file_proto(descriptor: Any) -> Any:
    """The FileDescriptorProto that declares ``descriptor``.

    Read from the file's serialized form, which every protobuf release and backend keeps:
    ``CopyToProto`` on a descriptor fails on protobuf 3.x's pure-Python backend (the last
    release for Python 3.6) when the pool built it from a database, and its method descriptors
    have no ``client_streaming`` until protobuf 4.22."""
    from google.protobuf import descriptor_pb2

    file = getattr(descriptor, "file", None)  # a method's is its service's
    if file is None:
        file = descriptor.containing_service.file
    return descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb)


def declaration(kind: str, descriptor: Any) -> Any:
    """The ``*DescriptorProto`` of a service, method, message or enum, found by its full name in
    its file's proto (nested messages and enums included)."""
    file = file_proto(descriptor)
    name = descriptor.full_name
    parts = (name[len(file.package) + 1:] if file.package else name).split(".")
    if kind in ("service", "method"):
        service = next(item for item in file.service if item.name == parts[0])
        if kind == "service":
            return service
        return next(item for item in service.method if item.name == parts[1])
    messages, enums = file.message_type, file.enum_type
    for part in parts[:-1]:
        outer = next(item for item in messages if item.name == part)
        messages, enums = outer.nested_type, outer.enum_type
    return next(item for item in (messages if kind == "message" else enums)
                if item.name == parts[-1])


def service_lines(service: Any) -> List[str]:
    return ([f"service {service.name} {{"]
            + [_INDENT + method_line(method) for method in service.method] + ["}"])


def method_line(method: Any) -> str:
    request = ("stream " if method.client_streaming else "") + method.input_type
    response = ("stream " if method.server_streaming else "") + method.output_type
    return f"rpc {method.name}({request}) returns ({response});"


def message_lines(message: Any, syntax: str, depth: int) -> List[str]:
    outer = _INDENT * depth
    inner = outer + _INDENT
    entries = {nested.name: nested for nested in message.nested_type if nested.options.map_entry}
    lines = [f"{outer}message {message.name} {{"]
    done_oneofs = set()
    for field in message.field:
        if field.HasField("oneof_index") and not field.proto3_optional:
            index = field.oneof_index
            if index in done_oneofs:
                continue
            done_oneofs.add(index)
            lines.append(f"{inner}oneof {message.oneof_decl[index].name} {{")
            lines += [inner + _INDENT + field_line(member, syntax, entries, in_oneof=True)
                      for member in message.field
                      if member.HasField("oneof_index") and member.oneof_index == index]
            lines.append(f"{inner}}}")
        else:
            lines.append(inner + field_line(field, syntax, entries))
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += message_lines(nested, syntax, depth + 1)
    for enum in message.enum_type:
        lines += enum_lines(enum, depth + 1)
    lines.append(f"{outer}}}")
    return lines


def _type_name(field: Any) -> str:
    return _SCALARS.get(field.type) or field.type_name


def field_line(field: Any, syntax: str, entries: Dict[str, Any], in_oneof: bool = False) -> str:
    """One field: ``[label] type name = number [options];``."""
    entry = entries.get(field.type_name.rpartition(".")[2]) if field.type_name else None
    if field.label == _LABEL_REPEATED and entry is not None:
        key, value = entry.field[0], entry.field[1]
        declaration = f"map<{_type_name(key)}, {_type_name(value)}> {field.name}"
    else:
        label = "" if in_oneof else _label(field, syntax)
        declaration = f"{label}{_type_name(field)} {field.name}"
    options = []
    if field.HasField("default_value"):
        default = field.default_value
        if field.type in (_TYPE_STRING, _TYPE_BYTES):
            default = '"' + default.replace("\\", "\\\\").replace('"', '\\"') + '"'
        options.append(f"default = {default}")
    if field.options.HasField("packed"):
        options.append(f"packed = {str(field.options.packed).lower()}")
    if field.options.deprecated:
        options.append("deprecated = true")
    suffix = f" [{', '.join(options)}]" if options else ""
    return f"{declaration} = {field.number}{suffix};"


def _label(field: Any, syntax: str) -> str:
    if field.label == _LABEL_REPEATED:
        return "repeated "
    if field.label == _LABEL_REQUIRED:
        return "required "
    if syntax == "proto2" or field.proto3_optional:
        return "optional "
    return ""  # proto3 and editions write no label on a singular field


def enum_lines(enum: Any, depth: int) -> List[str]:
    outer = _INDENT * depth
    inner = outer + _INDENT
    lines = [f"{outer}enum {enum.name} {{"]
    if enum.options.allow_alias:
        lines.append(f"{inner}option allow_alias = true;")
    for value in enum.value:
        suffix = " [deprecated = true]" if value.options.deprecated else ""
        lines.append(f"{inner}{value.name} = {value.number}{suffix};")
    lines.append(f"{outer}}}")
    return lines
