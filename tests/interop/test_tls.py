"""TLS between minigrpc and grpcio, in both directions: ALPN h2, server verification, mutual
TLS, ``grpc.ssl_target_name_override``, call credentials, and the failures a user meets.

Certificates are made per session by tests/support/tls_certs.py.  Each case runs for three pairs
(minigrpc client and grpcio server, grpcio client and minigrpc server, minigrpc on both sides)
over TCP to 127.0.0.1, the way a secure port is normally used.
"""

from __future__ import annotations

from concurrent import futures
from typing import Any, Iterator, List, Optional, Tuple

import pytest

import minigrpc
from minigrpc.descriptors import add_servicer, stub
from tests.interop import empty_pb2, messages_pb2, test_pb2
from tests.interop.servicer import TestServiceServicer
from tests.support.tls_certs import CLIENT_NAME, OVERRIDE_NAME, Certificates, make_certificates

grpc = pytest.importorskip("grpc")

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

PAIRS = [("minigrpc", "grpcio"), ("grpcio", "minigrpc"), ("minigrpc", "minigrpc")]
WAIT = 10.0


@pytest.fixture(scope="session")
def certs() -> Certificates:
    made = make_certificates()
    if made is None:
        pytest.skip("the openssl command is not installed")
    return made


def module_of(library: str) -> Any:
    return minigrpc if library == "minigrpc" else grpc


@pytest.fixture(params=PAIRS, ids=["-".join(pair) for pair in PAIRS])
def pair(request: pytest.FixtureRequest) -> Tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


class Seen:
    """What the server's handler saw of the connection: auth context, identities, metadata."""

    def __init__(self) -> None:
        self.auth: List[Any] = []
        self.identities: List[Any] = []
        self.metadata: List[Any] = []

    def handler(self, module: Any) -> Any:
        def look(request: bytes, context: Any) -> bytes:
            self.auth.append(context.auth_context())
            self.identities.append(context.peer_identities())
            self.metadata.append(dict(context.invocation_metadata()))
            return b"seen"

        return module.method_handlers_generic_handler(
            "test.Tls", {"Look": module.unary_unary_rpc_method_handler(look)}
        )


def start_server(
    library: str,
    certs: Certificates,
    seen: Seen,
    *,
    override_only: bool = False,
    require_client_auth: bool = False,
) -> Tuple[Any, str]:
    module = module_of(library)
    server = module.server(futures.ThreadPoolExecutor(max_workers=4))
    add_servicer(server, test_pb2.TEST_SERVICE, TestServiceServicer())
    server.add_generic_rpc_handlers([seen.handler(module)])
    key, chain = (
        (certs.override_key, certs.override_chain)
        if override_only
        else (certs.server_key, certs.server_chain)
    )
    credentials = module.ssl_server_credentials(
        [(key, chain)],
        root_certificates=certs.ca if require_client_auth else None,
        require_client_auth=require_client_auth,
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    return server, f"127.0.0.1:{port}"


@pytest.fixture
def seen() -> Seen:
    return Seen()


def client_channel(
    library: str,
    target: str,
    root: bytes,
    *,
    client_pair: Optional[Tuple[bytes, bytes]] = None,
    override: Optional[str] = None,
    call_credentials: Any = None,
) -> Any:
    module = module_of(library)
    credentials = module.ssl_channel_credentials(
        root_certificates=root,
        private_key=client_pair[0] if client_pair else None,
        certificate_chain=client_pair[1] if client_pair else None,
    )
    if call_credentials is not None:
        credentials = module.composite_channel_credentials(credentials, call_credentials)
    options = [("grpc.ssl_target_name_override", override)] if override else []
    return module.secure_channel(target, credentials, options=options)


@pytest.fixture
def tls_server(pair: Tuple[str, str], certs: Certificates, seen: Seen) -> Iterator[str]:
    server, target = start_server(pair[1], certs, seen)
    yield target
    server.stop(None).wait(30)


# -- working connections ----------------------------------------------------------------------


def test_unary_and_streaming_calls_over_tls(
    pair: Tuple[str, str], certs: Certificates, tls_server: str, seen: Seen
) -> None:
    with client_channel(pair[0], tls_server, certs.ca) as channel:
        service = stub(test_pb2.TEST_SERVICE, channel)
        assert service.EmptyCall(empty_pb2.Empty(), timeout=WAIT) == empty_pb2.Empty()
        response = service.UnaryCall(messages_pb2.SimpleRequest(response_size=271828), timeout=WAIT)
        assert len(response.payload.body) == 271828
        request = messages_pb2.StreamingOutputCallRequest(
            response_parameters=[messages_pb2.ResponseParameters(size=n) for n in (1, 70000, 3)]
        )
        sizes = [len(r.payload.body) for r in service.FullDuplexCall(iter([request]), timeout=WAIT)]
        assert sizes == [1, 70000, 3]
        assert channel.unary_unary("/test.Tls/Look")(b"", timeout=WAIT) == b"seen"
    assert seen.auth[0]["transport_security_type"] == [b"ssl"]
    assert seen.identities == [None]  # no client certificate


def test_mutual_tls(pair: Tuple[str, str], certs: Certificates, seen: Seen) -> None:
    api = module_of(pair[0])
    server, target = start_server(pair[1], certs, seen, require_client_auth=True)
    try:
        pair_of_client = (certs.client_key, certs.client_chain)
        with client_channel(pair[0], target, certs.ca, client_pair=pair_of_client) as channel:
            assert channel.unary_unary("/test.Tls/Look")(b"", timeout=WAIT) == b"seen"
        assert CLIENT_NAME.encode() in seen.identities[0]
        with client_channel(pair[0], target, certs.ca) as channel:
            with pytest.raises(api.RpcError) as caught:
                channel.unary_unary("/test.Tls/Look")(b"", timeout=WAIT)
        assert caught.value.code() is api.StatusCode.UNAVAILABLE
    finally:
        server.stop(None).wait(30)


def test_ssl_target_name_override(pair: Tuple[str, str], certs: Certificates, seen: Seen) -> None:
    api = module_of(pair[0])
    server, target = start_server(pair[1], certs, seen, override_only=True)
    try:
        with client_channel(pair[0], target, certs.ca, override=OVERRIDE_NAME) as channel:
            assert channel.unary_unary("/test.Tls/Look")(b"", timeout=WAIT) == b"seen"
        with client_channel(pair[0], target, certs.ca) as channel:  # 127.0.0.1 is not named
            with pytest.raises(api.RpcError) as caught:
                channel.unary_unary("/test.Tls/Look")(b"", timeout=WAIT)
        assert caught.value.code() is api.StatusCode.UNAVAILABLE
    finally:
        server.stop(None).wait(30)


def test_call_credentials_add_metadata(
    pair: Tuple[str, str], certs: Certificates, tls_server: str, seen: Seen
) -> None:
    module = module_of(pair[0])
    token = module.access_token_call_credentials("secret-token")
    with client_channel(pair[0], tls_server, certs.ca, call_credentials=token) as channel:
        assert channel.unary_unary("/test.Tls/Look")(b"", timeout=WAIT) == b"seen"
    assert seen.metadata[0]["authorization"] == "Bearer secret-token"


# -- failures ---------------------------------------------------------------------------------


def test_untrusted_server_is_unavailable(
    pair: Tuple[str, str], certs: Certificates, tls_server: str
) -> None:
    api = module_of(pair[0])
    with client_channel(pair[0], tls_server, certs.other_ca) as channel:
        with pytest.raises(api.RpcError) as caught:
            channel.unary_unary("/test.Tls/Look")(b"", timeout=WAIT)
    assert caught.value.code() is api.StatusCode.UNAVAILABLE


def test_plaintext_client_on_a_tls_port_fails(
    pair: Tuple[str, str], tls_server: str
) -> None:
    api = module_of(pair[0])
    with api.insecure_channel(tls_server) as channel:
        with pytest.raises(api.RpcError) as caught:
            channel.unary_unary("/test.Tls/Look")(b"", timeout=WAIT)
    assert caught.value.code() is api.StatusCode.UNAVAILABLE


def test_bad_credentials_fail_at_once() -> None:
    with pytest.raises(ValueError, match="invalid TLS credentials"):
        minigrpc.ssl_channel_credentials(root_certificates=b"not a certificate")
    with pytest.raises(ValueError, match="give both or neither"):
        minigrpc.ssl_channel_credentials(private_key=b"x")
    with pytest.raises(TypeError, match="ssl_server_credentials"):
        minigrpc.server().add_secure_port("127.0.0.1:0", object())
    with pytest.raises(ValueError, match="Call credentials are only valid on secure channels"):
        with minigrpc.insecure_channel("127.0.0.1:1") as channel:
            channel.unary_unary("/a/b")(
                b"", credentials=minigrpc.access_token_call_credentials("t"), timeout=1
            )
