"""The Antrea side of the plugin: one unary RPC to antrea-agent and the mapping of its outcome.

This is ``pkg/cni/client.go`` (``Action.Request``) on minigrpc: build a ``CniCmdRequest`` from
the invocation, open one plaintext HTTP/2 connection to the agent's unix socket, call
``CmdAdd``/``CmdCheck``/``CmdDel`` with no deadline and no retry, and turn the outcome into
either the result bytes or a :class:`~cni_client.skel.CniError` (docs/cni-plugin-behaviour.md, "The
gRPC call").

minigrpc is imported inside the functions that need it, so that importing this module (and
running VERSION or an env error) stays cheap.  The two messages go through
:mod:`cni_client.messages`, a small codec tested byte for byte against the generated
``cni_pb2``, because importing protobuf would cost a quarter of every run (docs/benchmarks.md).
"""

import posix  # not os: see cni_client.skel

from cni_client.skel import CmdArgs, CniError, environment_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Optional, Tuple

#: Where the agent listens (antrea-agent's path; docs/cni-plugin-behaviour.md);
#: ``ANTREA_CNI_SOCKET`` overrides it.
DEFAULT_SOCKET_PATH = "/var/run/antrea/cni.sock"
SOCKET_PATH_ENV = "ANTREA_CNI_SOCKET"

#: The gRPC service (proto/cni.proto) and its unary methods, one per CNI command.
CNI_SERVICE = "antrea_io.antrea.pkg.apis.cni.v1beta1.Cni"
ACTION_ADD = "CmdAdd"
ACTION_CHECK = "CmdCheck"
ACTION_DEL = "CmdDel"

#: Version of the CNI gRPC API this client speaks (``AntreaCNIVersion`` in client.go).
ANTREA_CNI_API_VERSION = "1.0.0-beta.1"

# CNI codes of cni.proto's ErrorCode that the client produces itself.
TRY_AGAIN_LATER = 11
UNKNOWN_RPC_ERROR = 201
INCOMPATIBLE_API_VERSION = 202
#: CNI SPEC.md 1.1, STATUS: "the plugin is not available" (cannot serve ADD).
PLUGIN_NOT_AVAILABLE = 50

#: gRPC failure -> CNI error (Antrea's ``pkg/cni/client.go``; docs/mapping.md).  This is the one
#: place the mapping is written down; tests and docs read it.  Key: the gRPC status code name
#: (``minigrpc.protocol.codes.Code.<name>``), ``None`` for every code not listed.  Value: (CNI
#: code, msg, details), where ``{error}`` stands for the grpc-go style error text
#: ``rpc error: code = <Name> desc = <message>``.  A call that succeeds at the gRPC level but
#: carries ``CniCmdResponse.error`` yields that error's code and message (details dropped).
RPC_FAILURE_TO_CNI: "Dict[Optional[str], Tuple[int, str, str]]" = {
    "UNIMPLEMENTED": (
        INCOMPATIBLE_API_VERSION,
        "incompatible CNI API version between client (antrea-cni) and server (antrea-agent),"
        f" client is using version {ANTREA_CNI_API_VERSION}",
        "service or method unimplemented by gRPC server: {error}",
    ),
    "UNAVAILABLE": (TRY_AGAIN_LATER, "{error}", ""),
    "DEADLINE_EXCEEDED": (TRY_AGAIN_LATER, "{error}", ""),
    None: (UNKNOWN_RPC_ERROR, "{error}", ""),
}


def rpc_failure_to_cni(code_name: str, error_text: str) -> CniError:
    """Apply :data:`RPC_FAILURE_TO_CNI` to a failed call."""
    cni_code, msg, details = RPC_FAILURE_TO_CNI.get(code_name, RPC_FAILURE_TO_CNI[None])
    return CniError(cni_code, msg.replace("{error}", error_text),
                    details.replace("{error}", error_text))


def socket_path() -> str:
    """The agent socket: ``$ANTREA_CNI_SOCKET`` when set and non-empty, else the default."""
    return environment_text(SOCKET_PATH_ENV) or DEFAULT_SOCKET_PATH


def _check_utf8_fields(args: CmdArgs) -> None:
    """proto3 strings must be UTF-8.  grpc-go refuses to marshal anything else and fails the
    call locally with INTERNAL, which client.go maps to 201; we say the same before dialing."""
    for field in ("container_id", "netns", "ifname", "args", "path"):
        try:
            getattr(args, field).encode("utf-8")
        except UnicodeEncodeError:
            raise rpc_failure_to_cni(
                "INTERNAL",
                "rpc error: code = Internal desc = grpc: error while marshaling: proto: field"
                f" {CNI_SERVICE.rsplit('.', 1)[0]}.CniCmdArgs.{field} contains invalid UTF-8",
            ) from None


def build_request(args: CmdArgs) -> bytes:
    """``CniCmdRequest{cni_args}`` with the invocation verbatim (``proto/cni.proto``),
    serialized: the same bytes ``cni_pb2.CniCmdRequest.SerializeToString`` gives."""
    from cni_client import messages

    return messages.encode_request(
        container_id=args.container_id,
        netns=args.netns,
        ifname=args.ifname,
        args=args.args,
        path=args.path,
        network_configuration=args.stdin_data,
    )


def request(action: str, args: CmdArgs) -> bytes:
    """Run one CNI command on the agent; return the result bytes or raise :class:`CniError`.

    One connection, no deadline (the runtime's SIGKILL is the only timeout,
    docs/cni-plugin-behaviour.md), closed afterwards: :func:`minigrpc.oneshot.unary_call`, which
    ends the call exactly as a minigrpc channel would but loads a fraction of the modules.
    Mapping order as in client.go: gRPC failure by :data:`RPC_FAILURE_TO_CNI`, then
    ``response.error`` when present, else ``cni_result``.
    """
    _check_utf8_fields(args)
    from cni_client import messages
    from minigrpc import oneshot

    status, payload = oneshot.unary_call(
        "unix:" + socket_path(), f"/{CNI_SERVICE}/{action}", build_request(args)
    )
    if payload is None:
        raise rpc_failure_to_cni(status.code_name, str(status))
    try:
        response = messages.decode_response(payload)
    except Exception:
        # What a channel reports when the response deserializer raises.
        from minigrpc.protocol.client_outcome import DESERIALIZE_FAILED_DETAILS
        from minigrpc.protocol.codes import Code
        from minigrpc.protocol.status import CallStatus

        failed = CallStatus(Code.INTERNAL, DESERIALIZE_FAILED_DETAILS)
        raise rpc_failure_to_cni(failed.code_name, str(failed)) from None
    if response.error is not None:
        raise CniError(response.error.code, response.error.message)
    return response.cni_result


# --------------------------------------------------------------------------------------------
# STATUS: can the agent take ADDs right now?  The Go plugin's STATUS is a no-op; probing the
# socket is a deliberate improvement (docs/cni-plugin-behaviour.md, "Where cni_client deliberately
# differs").

#: How long STATUS waits for the agent's SETTINGS before calling it unavailable.  A healthy
#: agent answers at once; runtimes call STATUS periodically and must not hang on it.
PROBE_TIMEOUT_SECONDS = 5.0

def probe_agent(path: "Optional[str]" = None, timeout: float = PROBE_TIMEOUT_SECONDS) -> None:
    """Open the agent socket and do the HTTP/2 connection preface exchange (RFC 9113 §3.4).

    The agent is available when its first frame is a SETTINGS frame on stream 0; we then
    ACK it and say GOAWAY(NO_ERROR) so that the server sees a clean close.  Anything else
    (no socket, refused, closed, garbage, silence for ``timeout`` seconds) raises
    :class:`CniError` code 50.  Plain sockets suffice: nothing beyond the first frame is read.
    """
    import socket

    path = path or socket_path()
    failure = ""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as exc:
            failure = f"cannot connect to {path}: {_os_error_text(exc)}"
        else:
            failure = _exchange_preface(sock, path)
    finally:
        sock.close()
    if failure:
        raise CniError(PLUGIN_NOT_AVAILABLE, "antrea-agent is not available", failure)


def _exchange_preface(sock: "Any", path: str) -> str:
    """Returns "" when the server answered with SETTINGS, else why it is not available."""
    import socket

    from minigrpc.http2 import frames

    try:
        sock.sendall(frames.CLIENT_PREFACE + frames.settings_frame(()))  # RFC 9113 §3.4
        header = _recv_exactly(sock, 9)
    except OSError as exc:
        if isinstance(exc, socket.timeout):  # TimeoutError from Python 3.10 on
            return f"{path} accepted the connection but sent no HTTP/2 SETTINGS"
        return f"HTTP/2 handshake on {path} failed: {_os_error_text(exc)}"
    if len(header) < 9:
        return f"{path} closed the connection during the HTTP/2 handshake"
    # The header alone decides (RFC 9113 §4.1): type SETTINGS, no ACK, on stream 0.
    stream_id = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
    if header[3] != frames.SETTINGS or header[4] & frames.ACK or stream_id:
        return f"{path} did not answer the HTTP/2 handshake with SETTINGS"
    try:
        sock.sendall(frames.settings_ack() + frames.goaway_frame(0))
    except OSError:
        pass  # the answer is in; how the server handles our goodbye does not matter
    return ""


def _recv_exactly(sock: "Any", count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _os_error_text(exc: OSError) -> str:
    """``connect: no such file or directory`` style, like Go's syscall errors.

    The rule of :func:`minigrpc.net.sockets.os_error_text`, kept here because importing that
    module loads ``minigrpc.protocol.status`` (about 3 ms) on STATUS, which runtimes call often and
    which needs no RPC.
    """
    reason = posix.strerror(exc.errno) if exc.errno else str(exc)
    return reason[:1].lower() + reason[1:]
