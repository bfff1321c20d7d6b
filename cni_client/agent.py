"""A stand-in antrea-agent: the ``Cni`` gRPC service on a unix socket, for tests and the demo.

``python -m cni_client.agent --socket PATH`` serves ``CmdAdd``/``CmdCheck``/``CmdDel`` on the
minigrpc server (``--server grpcio`` serves the very same servicer on grpcio, to prove interop).
It behaves like antrea-agent's cniserver where the plugin can tell (docs/cni-plugin-behaviour.md,
"The agent side"):

* validation in the agent's order: config JSON and ``CNI_ARGS`` (6), exact cniVersion (1),
  ``type``/``ipam.type`` (2);
* real address pools: ADD allocates per (container ID, ifname) and is idempotent, DEL frees and
  is idempotent, CHECK compares ``prevResult`` with what was allocated; an exhausted pool is
  101, like host-local;
* ADD results shaped per cniVersion (0.1.0/0.2.0 ``ip4``; 0.3.x/0.4.0 struct order with
  ``ips[].version`` and ``"dns": {}``; 1.x sorted keys, no empty ``dns``), Go's 4-space
  MarshalIndent, no trailing newline;
* one blocking lock per container ID, as the agent serialises calls for a container.

Flags make it misbehave on purpose: ``--fail-code`` (every call ends with that gRPC status),
``--cni-error`` (every call answers with that CNI ErrorCode) and ``--hang`` (calls never
return).  Once it listens it prints ``listening on <path>`` on stdout.
"""

import argparse
import hashlib
import ipaddress
import os
import signal
import sys
import threading
from concurrent import futures
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from cni_client.go_compat import decode_json_document, go_json_indent
from cni_client.skel import SUPPORTED_VERSIONS

CNI_SERVICE = "antrea_io.antrea.pkg.apis.cni.v1beta1.Cni"
READY_LINE_PREFIX = "listening on "

# cni.proto ErrorCode values the agent answers with (proto/cni.proto, ``ErrorCode``).
INCOMPATIBLE_CNI_VERSION = 1
UNSUPPORTED_FIELD = 2
DECODING_FAILURE = 6
INVALID_NETWORK_CONFIG = 7
IPAM_FAILURE = 101
CHECK_INTERFACE_FAILURE = 103

#: The agent's default host-proc mount prefix, put in front of CNI_NETNS in ``sandbox``.
HOST_PROC_PREFIX = "/host"
_KNOWN_CNI_ARGS = ("IgnoreUnknown", "K8S_POD_NAMESPACE", "K8S_POD_NAME",
                   "K8S_POD_INFRA_CONTAINER_ID", "K8S_POD_UID")

IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


class AgentError(Exception):
    """A CNI-level failure: the RPC succeeds and ``CniCmdResponse.error`` carries it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message


# --------------------------------------------------------------------------------------------
# Go's json.MarshalIndent(v, "", "    ") for the values results are made of.

def _sorted_keys(value: Any) -> Any:
    """1.x results are built from Go maps/structs whose JSON has alphabetical keys
    (docs/cni-plugin-behaviour.md)."""
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


# --------------------------------------------------------------------------------------------
# Request validation (docs/cni-plugin-behaviour.md, "The agent side").

class NetworkConfig:
    """The parts of the network configuration the agent looks at."""

    def __init__(self, cni_version: str, name: str, plugin_type: str, ipam_type: str,
                 prev_result: Optional[List[Tuple[str, Any]]], has_prev_result: bool) -> None:
        self.cni_version = cni_version
        self.name = name
        self.plugin_type = plugin_type
        self.ipam_type = ipam_type
        self.prev_result = prev_result
        self.has_prev_result = has_prev_result


class _DecodeError(ValueError):
    pass


def _lookup(pairs: Any, key: str, kinds: Tuple[type, ...]) -> Any:
    """Go ``encoding/json`` field lookup: case-insensitive, last non-null match wins, a value
    of the wrong JSON type is a decode error."""
    found = None
    for name, value in pairs:
        if name.lower() != key.lower() or value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise _DecodeError(f"{key}: unexpected type")
        found = value
    return found


def _is_object(value: Any) -> bool:
    return isinstance(value, list) and type(value).__name__ == "_JsonObject"


def parse_network_config(data: bytes) -> NetworkConfig:
    """Decode the config like the agent's ``types.NetworkConfig``; 6 on any failure."""
    try:
        document = decode_json_document(data)
        if document is None:
            document = []
        if not _is_object(document):
            raise _DecodeError("not an object")
        ipam = _lookup(document, "ipam", (list,))
        if ipam is not None and not _is_object(ipam):
            raise _DecodeError("ipam is not an object")
        prev = _lookup(document, "prevResult", (list,))
        if prev is not None and not _is_object(prev):
            raise _DecodeError("prevResult is not an object")
        return NetworkConfig(
            cni_version=_lookup(document, "cniVersion", (str,)) or "",
            name=_lookup(document, "name", (str,)) or "",
            plugin_type=_lookup(document, "type", (str,)) or "",
            ipam_type=(_lookup(ipam, "type", (str,)) or "") if ipam else "",
            prev_result=prev,
            has_prev_result=prev is not None,
        )
    except ValueError:
        raise AgentError(DECODING_FAILURE, "Failed to decode network config") from None


def parse_cni_args(text: str) -> Dict[str, str]:
    """``types.LoadArgs`` into Antrea's K8s args: ``K=V;K=V``; unknown keys fail unless
    ``IgnoreUnknown`` is true (CNI SPEC.md, "Parameters": ``CNI_ARGS``)."""
    pairs: Dict[str, str] = {}
    if not text:
        return pairs
    for item in text.split(";"):
        key, sep, value = item.partition("=")
        if not sep:
            raise AgentError(DECODING_FAILURE, "Failed to decode network config")
        pairs[key] = value
    ignore_unknown = pairs.get("IgnoreUnknown", "").lower() in ("1", "true")
    if not ignore_unknown and any(key not in _KNOWN_CNI_ARGS for key in pairs):
        raise AgentError(DECODING_FAILURE, "Failed to decode network config")
    return pairs


def validate_request(args: Any) -> Tuple[NetworkConfig, Dict[str, str]]:
    config = parse_network_config(bytes(args.network_configuration))
    cni_args = parse_cni_args(args.args)
    if config.cni_version not in SUPPORTED_VERSIONS:
        raise AgentError(
            INCOMPATIBLE_CNI_VERSION,
            f"Unsupported CNI version [{config.cni_version}],"
            f" supported versions [{' '.join(SUPPORTED_VERSIONS)}]")
    if config.plugin_type != "antrea":
        raise AgentError(UNSUPPORTED_FIELD,
                         f"Network configuration does not support type={config.plugin_type}")
    if config.ipam_type not in ("host-local", "antrea"):
        raise AgentError(UNSUPPORTED_FIELD,
                         f"Network configuration does not support ipam/type={config.ipam_type}")
    return config, cni_args


# --------------------------------------------------------------------------------------------
# Address pools and endpoint state.

class AddressPool:
    """One host-local style range: the first address is the gateway, the rest are handed out
    lowest first."""

    def __init__(self, cidr: str) -> None:
        self.network: IPNetwork = ipaddress.ip_network(cidr, strict=False)
        if self.network.num_addresses < 4:
            raise ValueError(f"pool {cidr} is too small")
        self.gateway: IPAddress = self.network.network_address + 1
        self.first: IPAddress = self.gateway + 1
        last_offset = 2 if self.network.version == 4 else 1  # v4 keeps its broadcast address
        self.last: IPAddress = self.network.network_address + (self.network.num_addresses
                                                               - last_offset)
        self.used: Dict[IPAddress, str] = {}

    def allocate(self, owner: str) -> IPAddress:
        for number in range(int(self.first), int(self.last) + 1):
            address = ipaddress.ip_address(number) if self.network.version == 4 else \
                ipaddress.IPv6Address(number)
            if address not in self.used:
                self.used[address] = owner
                return address
        raise LookupError(f"no IP addresses available in range set: {self.first}-{self.last}")

    def release(self, address: IPAddress) -> None:
        self.used.pop(address, None)


class Endpoint:
    """What ADD set up for one (container ID, ifname)."""

    def __init__(self, container_id: str, ifname: str, netns: str, host_ifname: str,
                 host_mac: str, container_mac: str,
                 addresses: List[Tuple[AddressPool, IPAddress]]) -> None:
        self.container_id = container_id
        self.ifname = ifname
        self.netns = netns
        self.host_ifname = host_ifname
        self.host_mac = host_mac
        self.container_mac = container_mac
        self.addresses = addresses


def _mac(seed: str) -> str:
    digest = bytearray(hashlib.sha256(seed.encode("utf-8", "replace")).digest()[:6])
    digest[0] = (digest[0] & 0xFE) | 0x02  # unicast, locally administered
    return ":".join(f"{byte:02x}" for byte in digest)


def _host_ifname(container_id: str, ifname: str, pod_name: str) -> str:
    """Antrea names the host veth after the Pod, with a hash suffix; 15 bytes at most."""
    suffix = hashlib.sha1(f"{container_id}/{ifname}".encode("utf-8", "replace")).hexdigest()[:8]
    prefix = "".join(ch for ch in (pod_name or container_id) if ch.isalnum())[:6] or "veth"
    return f"{prefix}-{suffix}"


def build_add_result(endpoint: Endpoint, cni_version: str) -> bytes:
    """The ADD result in ``cni_version``'s shape (docs/cni-plugin-behaviour.md, "The agent
    side")."""
    ips: List[Dict[str, Any]] = []
    routes: List[Dict[str, Any]] = []
    for pool, address in endpoint.addresses:
        ip = {"version": str(pool.network.version), "interface": 1,
              "address": f"{address}/{pool.network.prefixlen}", "gateway": str(pool.gateway)}
        ips.append(ip)
        default = "0.0.0.0/0" if pool.network.version == 4 else "::/0"
        routes.append({"dst": default, "gw": str(pool.gateway)})
    host = {"name": endpoint.host_ifname, "mac": endpoint.host_mac}
    container = {"name": endpoint.ifname, "mac": endpoint.container_mac,
                 "sandbox": HOST_PROC_PREFIX + endpoint.netns}
    result: Dict[str, Any]
    if cni_version in ("0.1.0", "0.2.0"):
        result = {"cniVersion": cni_version}
        for ip, route in zip(ips, routes):
            key = "ip4" if ip["version"] == "4" else "ip6"
            if key not in result:
                result[key] = {"ip": ip["address"], "gateway": ip["gateway"], "routes": [route]}
        result["dns"] = {}
    elif cni_version.startswith("0."):
        result = {"cniVersion": cni_version, "interfaces": [host, container], "ips": ips,
                  "routes": routes, "dns": {}}
    else:
        for ip in ips:
            del ip["version"]
        result = _sorted_keys({"cniVersion": cni_version, "interfaces": [host, container],
                               "ips": ips, "routes": routes})
    return go_json_indent(result).encode("utf-8")


class CniServicer:
    """The ``Cni`` service: plain methods taking (request, context), so that the same object
    serves on minigrpc and on grpcio.  Responses are built with the protobuf classes given."""

    def __init__(self, pools: Sequence[str], pb2: Any, cni_error: int = 0,
                 cni_error_message: str = "", hang: Optional[threading.Event] = None,
                 log_calls: bool = False) -> None:
        self.pb2 = pb2
        self.pools = [AddressPool(cidr) for cidr in pools]
        self.cni_error = cni_error
        self.cni_error_message = cni_error_message
        self.hang = hang
        self.endpoints: Dict[Tuple[str, str], Endpoint] = {}
        self._state_lock = threading.Lock()
        self._container_locks: Dict[str, threading.Lock] = {}
        self.calls: List[Tuple[str, str]] = []
        self.log_calls = log_calls

    def _container_lock(self, container_id: str) -> threading.Lock:
        with self._state_lock:
            return self._container_locks.setdefault(container_id, threading.Lock())

    def _serve(self, action: str, request: Any,
               run: Callable[[Any, NetworkConfig, Dict[str, str]], bytes]) -> Any:
        args = request.cni_args
        with self._state_lock:
            self.calls.append((action, args.container_id))
            if self.log_calls:  # lets a test or a watcher see the call arrive
                sys.stdout.write(f"call {action} {args.container_id}\n")
                sys.stdout.flush()
        if self.hang is not None:
            self.hang.wait()  # never set while serving: the plugin waits until it is killed
        try:
            if self.cni_error:
                raise AgentError(self.cni_error, self.cni_error_message)
            config, cni_args = validate_request(args)
            with self._container_lock(args.container_id):
                result = run(args, config, cni_args)
        except AgentError as exc:
            return self.pb2.CniCmdResponse(
                error=self.pb2.Error(code=exc.code, message=exc.message))
        return self.pb2.CniCmdResponse(cni_result=result)

    def CmdAdd(self, request: Any, context: Any) -> Any:
        return self._serve("CmdAdd", request, self._add)

    def CmdCheck(self, request: Any, context: Any) -> Any:
        return self._serve("CmdCheck", request, self._check)

    def CmdDel(self, request: Any, context: Any) -> Any:
        return self._serve("CmdDel", request, self._del)

    def _add(self, args: Any, config: NetworkConfig, cni_args: Dict[str, str]) -> bytes:
        key = (args.container_id, args.ifname)
        with self._state_lock:
            endpoint = self.endpoints.get(key)
            if endpoint is None:
                addresses: List[Tuple[AddressPool, IPAddress]] = []
                try:
                    for index, pool in enumerate(self.pools):
                        try:
                            addresses.append((pool, pool.allocate(args.container_id)))
                        except LookupError as exc:
                            raise AgentError(IPAM_FAILURE,
                                             f"failed to allocate for range {index}: {exc}"
                                             ) from None
                except AgentError:
                    for pool, address in addresses:  # a failed ADD is rolled back
                        pool.release(address)
                    raise
                seed = f"{args.container_id}/{args.ifname}"
                endpoint = Endpoint(
                    args.container_id, args.ifname, args.netns,
                    _host_ifname(args.container_id, args.ifname,
                                 cni_args.get("K8S_POD_NAME", "")),
                    _mac("host/" + seed), _mac("container/" + seed), addresses)
                self.endpoints[key] = endpoint
        return build_add_result(endpoint, config.cni_version)

    def _del(self, args: Any, config: NetworkConfig, cni_args: Dict[str, str]) -> bytes:
        with self._state_lock:
            endpoint = self.endpoints.pop((args.container_id, args.ifname), None)
            if endpoint is not None:
                for pool, address in endpoint.addresses:
                    pool.release(address)
        return b""

    def _check(self, args: Any, config: NetworkConfig, cni_args: Dict[str, str]) -> bytes:
        needs_prev = config.cni_version not in ("0.1.0", "0.2.0", "0.3.0", "0.3.1")
        if needs_prev and not config.has_prev_result:
            raise AgentError(UNSUPPORTED_FIELD,
                             "Network configuration does not support prevResult=")
        if config.prev_result is not None:
            interfaces = _lookup(config.prev_result, "interfaces", (list,)) or []
            names = [_lookup(item, "name", (str,)) for item in interfaces if _is_object(item)]
            if args.ifname not in names:
                raise AgentError(INVALID_NETWORK_CONFIG,
                                 "prevResult does not match network configuration")
        with self._state_lock:
            endpoint = self.endpoints.get((args.container_id, args.ifname))
        if endpoint is None:
            raise AgentError(CHECK_INTERFACE_FAILURE,
                             f"container {args.container_id} has no interface {args.ifname}")
        if config.prev_result is not None:
            prev_ips = _lookup(config.prev_result, "ips", (list,)) or []
            claimed = sorted(_lookup(ip, "address", (str,)) or "" for ip in prev_ips
                             if _is_object(ip))
            actual = sorted(f"{a}/{p.network.prefixlen}" for p, a in endpoint.addresses)
            if claimed != actual:
                raise AgentError(CHECK_INTERFACE_FAILURE,
                                 f"interface {args.ifname} of container {args.container_id}"
                                 f" has addresses {actual}, prevResult says {claimed}")
        return b""


# --------------------------------------------------------------------------------------------
# Serving.

def generic_handler(grpc_module: Any, servicer: Any, pb2: Any, service: str = CNI_SERVICE,
                    methods: Sequence[str] = ("CmdAdd", "CmdCheck", "CmdDel")) -> Any:
    """Register the servicer with the API minigrpc and grpcio share.  ``service`` and
    ``methods`` can differ from the real ones to play an agent of another API version."""
    handlers = {
        name: grpc_module.unary_unary_rpc_method_handler(
            getattr(servicer, name),
            request_deserializer=pb2.CniCmdRequest.FromString,
            response_serializer=pb2.CniCmdResponse.SerializeToString)
        for name in methods
    }
    return grpc_module.method_handlers_generic_handler(service, handlers)


class _StatusServicer:
    """Every call ends with one gRPC status (``--fail-code``)."""

    def __init__(self, code: Any, message: str) -> None:
        self.code = code
        self.message = message

    def _fail(self, request: Any, context: Any) -> Any:
        context.abort(self.code, self.message)

    CmdAdd = CmdCheck = CmdDel = _fail


def prepare_socket_path(path: str) -> None:
    """What the agent does before listening (docs/cni-plugin-behaviour.md, "The agent side"): remove
    a stale file and create the directory with mode 0750."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, mode=0o750, exist_ok=True)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def status_code(grpc_module: Any, text: str) -> Any:
    """A StatusCode from a name (``UNAVAILABLE``) or a number (``14``)."""
    if text.isdigit():
        for code in grpc_module.StatusCode:
            if code.value[0] == int(text):
                return code
        raise ValueError(f"no gRPC status code {text}")
    return grpc_module.StatusCode[text.upper()]


def serve_grpc(options: argparse.Namespace) -> Any:
    """Start the gRPC server (minigrpc or grpcio) and return it, listening."""
    if options.server == "grpcio":
        import grpc as grpc_module
    else:
        import minigrpc as grpc_module
    from cni_client import cni_pb2

    if options.fail_code:
        servicer: Any = _StatusServicer(status_code(grpc_module, options.fail_code),
                                        options.fail_message)
    else:
        servicer = CniServicer(options.pool or ["10.10.1.0/24"], cni_pb2,
                               cni_error=options.cni_error,
                               cni_error_message=options.cni_error_message,
                               hang=threading.Event() if options.hang else None,
                               log_calls=options.log_calls)
    server = grpc_module.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((generic_handler(grpc_module, servicer, cni_pb2),))
    prepare_socket_path(options.socket)
    server.add_insecure_port("unix:" + options.socket)
    server.start()
    os.chmod(options.socket, 0o750)
    return server


# --------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cni_client.agent",
        description="A stand-in antrea-agent serving the Cni gRPC service on a unix socket.")
    parser.add_argument("--socket", required=True, help="unix socket path to listen on")
    parser.add_argument("--pool", action="append", metavar="CIDR",
                        help="address pool (repeat for dual-stack); default 10.10.1.0/24")
    parser.add_argument("--server", choices=("minigrpc", "grpcio"), default="minigrpc",
                        help="gRPC implementation to serve with (grpcio: interop tests)")
    parser.add_argument("--fail-code", metavar="CODE",
                        help="end every call with this gRPC status (name or number)")
    parser.add_argument("--fail-message", default="injected failure",
                        help="status message for --fail-code")
    parser.add_argument("--cni-error", type=int, default=0, metavar="N",
                        help="answer every call with CniCmdResponse.error code N")
    parser.add_argument("--cni-error-message", default="injected CNI error")
    parser.add_argument("--hang", action="store_true", help="never answer any call")
    parser.add_argument("--log-calls", action="store_true",
                        help="print 'call <method> <container id>' on stdout for each call")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    options = build_parser().parse_args(argv)
    stopped = threading.Event()

    def _stop(signum: int, frame: Any) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        server = serve_grpc(options)
        stop: Callable[[], Any] = lambda: server.stop(None)  # noqa: E731
    except Exception as exc:
        sys.stderr.write(f"agent: cannot start: {type(exc).__name__}: {exc}\n")
        return 1
    sys.stdout.write(f"{READY_LINE_PREFIX}{options.socket}\n")
    sys.stdout.flush()
    while not stopped.wait(3600):
        pass
    try:
        stop()
        os.unlink(options.socket)
    except OSError:
        pass
    sys.stdout.flush()
    # Hung handlers (--hang) would keep the executor's threads, and so the process, alive.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
