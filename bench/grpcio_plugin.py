"""The antrea-cni plugin with its RPC on grpcio: the baseline of the cold-start benchmark.

Why it exists: the issue compares the real plugin (``cni_client`` on minigrpc) with "the same
plugin logic written on grpcio".  Everything but the transport is shared with the real plugin
so the comparison isolates the gRPC library: the CNI shell (:mod:`cni_client.skel`: env, stdin,
version gates, output), the messages (:mod:`cni_client.messages`, no protobuf import) and the
status-to-CNI mapping (:mod:`cni_client.client`, docs/mapping.md).  Only the call
itself goes through ``grpc.insecure_channel`` here: one connection, no deadline, no retry,
closed afterwards, exactly as :func:`cni_client.client.request` does with minigrpc.

With the argument ``--cni-pb2`` it uses the generated protobuf classes instead, as a plugin on
grpcio would usually be written; the benchmark reports that variant for information.

Run it as a script (``python bench/grpcio_plugin.py``) with the environment and stdin a runtime
would give the plugin.  It is a benchmark baseline, not a supported plugin.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # Run as a script, sys.path[0] is bench/; the packages live one level up.  Replacing the
    # entry (not adding one) keeps the import search exactly as long as the real plugin's.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from cni_client.__main__ import about_text, ensure_foreign_netns
from cni_client.skel import CmdArgs, CniFuncs, plugin_main

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cni_client.messages import CniCmdResponse

# grpc-go's names for the codes (what ``rpc error: code = <Name>`` prints,
# docs/cni-plugin-behaviour.md); the real plugin gets them from minigrpc.protocol.status, which
# this baseline must not import.
_GO_CODE_NAMES = {
    "OK": "OK", "CANCELLED": "Canceled", "UNKNOWN": "Unknown",
    "INVALID_ARGUMENT": "InvalidArgument", "DEADLINE_EXCEEDED": "DeadlineExceeded",
    "NOT_FOUND": "NotFound", "ALREADY_EXISTS": "AlreadyExists",
    "PERMISSION_DENIED": "PermissionDenied", "RESOURCE_EXHAUSTED": "ResourceExhausted",
    "FAILED_PRECONDITION": "FailedPrecondition", "ABORTED": "Aborted",
    "OUT_OF_RANGE": "OutOfRange", "UNIMPLEMENTED": "Unimplemented", "INTERNAL": "Internal",
    "UNAVAILABLE": "Unavailable", "DATA_LOSS": "DataLoss",
    "UNAUTHENTICATED": "Unauthenticated",
}


def grpcio_request(action: str, args: CmdArgs) -> bytes:
    """:func:`cni_client.client.request` with grpcio as the transport."""
    from cni_client import client

    client._check_utf8_fields(args)
    import grpc

    from cni_client import messages

    decode = _decode_with_cni_pb2 if "--cni-pb2" in sys.argv[1:] else messages.decode_response
    message = client.build_request(args)
    channel = grpc.insecure_channel("unix:" + client.socket_path())
    try:
        call = channel.unary_unary(
            f"/{client.CNI_SERVICE}/{action}", response_deserializer=decode
        )
        response = call(message)
    except grpc.RpcError as exc:
        code = exc.code()
        name = code.name if code is not None else "UNKNOWN"
        text = f"rpc error: code = {_GO_CODE_NAMES.get(name, name)} desc = {exc.details() or ''}"
        raise client.rpc_failure_to_cni(name, text) from None
    finally:
        channel.close()
    if response.error is not None:
        from cni_client.skel import CniError

        raise CniError(response.error.code, response.error.message)
    return response.cni_result


def _decode_with_cni_pb2(data: bytes) -> CniCmdResponse:
    """The ``--cni-pb2`` variant: parse with the generated class, answer as cni_client.messages."""
    from cni_client import cni_pb2, messages

    parsed = cni_pb2.CniCmdResponse.FromString(data)
    error = None
    if parsed.HasField("error"):
        error = messages.Error(int(parsed.error.code), parsed.error.message)
    return messages.CniCmdResponse(bytes(parsed.cni_result), error)


def _add(args: CmdArgs) -> bytes:
    ensure_foreign_netns(args)
    from cni_client import client

    return grpcio_request(client.ACTION_ADD, args)


def _check(args: CmdArgs) -> bytes:
    from cni_client import client

    return grpcio_request(client.ACTION_CHECK, args)


def _delete(args: CmdArgs) -> bytes:
    ensure_foreign_netns(args)
    from cni_client import client

    return grpcio_request(client.ACTION_DEL, args)


def _nothing(args: CmdArgs) -> bytes:
    """STATUS and GC are not part of the benchmark; succeed without output."""
    return b""


GRPCIO_CNI_FUNCS = CniFuncs(add=_add, check=_check, delete=_delete, status=_nothing, gc=_nothing)


def main() -> int:
    return plugin_main(GRPCIO_CNI_FUNCS, about_text())


if __name__ == "__main__":
    sys.exit(main())
