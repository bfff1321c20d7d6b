"""grpcio's other credentials, against grpcio in the same run: local credentials (plaintext
with call credentials, to a local peer only), certificates reloaded while a server runs
(``dynamic_ssl_server_credentials``) and ``insecure_server_credentials``.

Each case runs with a minigrpc server and with a grpcio server (``api``), and grpcio's client
where the client is not what is tested, so that grpcio is the reference in the same run.
Certificates are made per session by tests/support/tls_certs.py.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from concurrent import futures
from pathlib import Path
from typing import Any, Iterator, List, Optional

import pytest

import minigrpc
from tests.support.tls_certs import OVERRIDE_NAME, Certificates, make_certificates

grpc = pytest.importorskip("grpc")

pytestmark = [pytest.mark.timeout(60), pytest.mark.grpcio_peer]

METHOD = "/credentials.Echo/Echo"


@pytest.fixture(scope="session")
def certs() -> Certificates:
    made = make_certificates()
    if made is None:
        pytest.skip("the openssl command is not installed")
    return made


@pytest.fixture(params=["minigrpc", "grpcio"])
def api(request: pytest.FixtureRequest) -> Any:
    return minigrpc if request.param == "minigrpc" else grpc


class Seen:
    """What the server saw: the ``authorization`` metadata of each call."""

    def __init__(self) -> None:
        self.authorization: List[Optional[str]] = []


def echo_handler(api: Any, seen: Seen) -> Any:
    def echo(request: bytes, context: Any) -> bytes:
        metadata = dict(context.invocation_metadata())
        seen.authorization.append(metadata.get("authorization"))
        return request

    return api.method_handlers_generic_handler(
        "credentials.Echo", {"Echo": api.unary_unary_rpc_method_handler(echo)}
    )


@contextlib.contextmanager
def secure_server(api: Any, address: str, credentials: Any, seen: Seen) -> Iterator[int]:
    pool = futures.ThreadPoolExecutor(max_workers=2)
    server = api.server(pool, handlers=[echo_handler(api, seen)])
    port = server.add_secure_port(address, credentials)
    server.start()
    try:
        yield port
    finally:
        server.stop(None).wait(10)


# -- local credentials --------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["minigrpc", "grpcio"])
@pytest.mark.parametrize("kind", ["LOCAL_TCP", "UDS"])
def test_local_credentials_carry_call_credentials_to_a_local_server(
    api: Any, client: str, kind: str, tmp_path: Path
) -> None:
    caller = minigrpc if client == "minigrpc" else grpc
    seen = Seen()
    address = "localhost:0" if kind == "LOCAL_TCP" else f"unix:{tmp_path}/local.sock"
    server_credentials = api.local_server_credentials(getattr(api.LocalConnectionType, kind))
    with secure_server(api, address, server_credentials, seen) as port:
        target = f"localhost:{port}" if kind == "LOCAL_TCP" else address
        credentials = caller.composite_channel_credentials(
            caller.local_channel_credentials(getattr(caller.LocalConnectionType, kind)),
            caller.access_token_call_credentials("token-1"),
        )
        with caller.secure_channel(target, credentials) as channel:
            assert channel.unary_unary(METHOD)(b"x", timeout=10, wait_for_ready=True) == b"x"
    assert seen.authorization == ["Bearer token-1"]


def test_local_channel_credentials_refuse_a_remote_target() -> None:
    """A LOCAL_TCP channel to an address that is not loopback fails its calls UNAVAILABLE and
    says why (grpc-core refuses it at the handshake); so does a UDS one to a TCP target."""
    for kind, target in (("LOCAL_TCP", "192.0.2.1:443"), ("UDS", "localhost:443")):
        local_type = getattr(minigrpc.LocalConnectionType, kind)
        credentials = minigrpc.local_channel_credentials(local_type)
        with minigrpc.secure_channel(target, credentials) as channel:
            with pytest.raises(minigrpc.RpcError) as failed:
                channel.unary_unary(METHOD)(b"x", timeout=5)
        assert failed.value.code() is minigrpc.StatusCode.UNAVAILABLE
        assert f"{kind} local credentials need" in failed.value.details()


def test_local_server_credentials_refuse_an_address_others_can_reach() -> None:
    server = minigrpc.server(futures.ThreadPoolExecutor(max_workers=1))
    tcp = minigrpc.local_server_credentials(minigrpc.LocalConnectionType.LOCAL_TCP)
    uds = minigrpc.local_server_credentials(minigrpc.LocalConnectionType.UDS)
    with pytest.raises(RuntimeError, match="loopback"):
        server.add_secure_port("[::]:0", tcp)
    with pytest.raises(RuntimeError, match="unix"):
        server.add_secure_port("127.0.0.1:0", uds)
    server.stop(None)


def test_insecure_server_credentials_serve_plaintext(api: Any) -> None:
    seen = Seen()
    with secure_server(api, "127.0.0.1:0", api.insecure_server_credentials(), seen) as port:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert channel.unary_unary(METHOD)(b"x", timeout=10) == b"x"


# -- certificates reloaded while the server runs ------------------------------------------------


class Fetcher:
    """grpcio's certificate configuration fetcher contract: called before each handshake; a
    configuration replaces the current one, None keeps it; an exception keeps it too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.answer: Any = None
        self.raise_next = False

    def __call__(self) -> Any:
        with self._lock:
            self.calls += 1
            if self.raise_next:
                self.raise_next = False
                raise ValueError("a fetcher failure the server must survive")
            return self.answer


def call_once(certs: Certificates, port: int, override: Optional[str] = None) -> Any:
    """One call on a new grpcio TLS channel trusting the test CA: the response or the error."""
    options = [("grpc.ssl_target_name_override", override)] if override else []
    credentials = grpc.ssl_channel_credentials(root_certificates=certs.ca)
    with grpc.secure_channel(f"localhost:{port}", credentials, options=options) as channel:
        try:
            return channel.unary_unary(METHOD)(b"x", timeout=10)
        except grpc.RpcError as error:
            return error.code()


def test_dynamic_credentials_take_new_certificates_at_the_next_handshake(
    api: Any, certs: Certificates
) -> None:
    """Start with the ``localhost`` certificate; switch to one valid only for
    ``foo.test.example``: new connections get the new one, an open connection keeps working
    and does not ask the fetcher again."""
    localhost = api.ssl_server_certificate_configuration([(certs.server_key, certs.server_chain)])
    foo_only = api.ssl_server_certificate_configuration(
        [(certs.override_key, certs.override_chain)]
    )
    fetcher = Fetcher()
    credentials = api.dynamic_ssl_server_credentials(localhost, fetcher)
    seen = Seen()
    with secure_server(api, "localhost:0", credentials, seen) as port:
        assert call_once(certs, port) == b"x"
        assert fetcher.calls == 1
        fetcher.raise_next = True  # a failing fetcher keeps the current certificate
        assert call_once(certs, port) == b"x"
        open_credentials = grpc.ssl_channel_credentials(root_certificates=certs.ca)
        with grpc.secure_channel(f"localhost:{port}", open_credentials) as open_channel:
            echo = open_channel.unary_unary(METHOD)
            assert echo(b"y", timeout=10) == b"y"
            fetcher.answer = foo_only
            calls_before = fetcher.calls
            assert call_once(certs, port) == grpc.StatusCode.UNAVAILABLE  # wrong name now
            assert call_once(certs, port, override=OVERRIDE_NAME) == b"x"
            assert echo(b"z", timeout=10) == b"z"  # the open connection kept its certificate
            assert fetcher.calls >= calls_before + 2
            fetcher.answer = localhost  # a configuration can be given again
            assert call_once(certs, port) == b"x"


def test_dynamic_credentials_check_their_arguments(api: Any, certs: Certificates) -> None:
    configuration = api.ssl_server_certificate_configuration(
        [(certs.server_key, certs.server_chain)], root_certificates=certs.ca
    )
    for initial, fetcher in ((None, str), (1, str), (configuration, None), (configuration, 1)):
        with pytest.raises(TypeError):
            api.dynamic_ssl_server_credentials(initial, fetcher)
    with pytest.raises(ValueError):
        api.ssl_server_certificate_configuration([])


# -- call credentials and client certificates ---------------------------------------------------

PLUGIN_VARIABLE: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar(
    "PLUGIN_VARIABLE", default=None
)


def test_a_plugin_sees_the_context_its_credentials_were_made_in(api: Any) -> None:
    """A call from a thread that never set the variable: the plugin still reads the value
    current when ``metadata_call_credentials`` was called (grpcio's plugins run on threads of
    its own and get that context the same way)."""

    def plugin(context: Any, callback: Any) -> None:
        callback((("authorization", f"value {PLUGIN_VARIABLE.get()}"),), None)

    seen = Seen()
    PLUGIN_VARIABLE.set("set where the credentials were made")
    credentials = api.composite_channel_credentials(
        api.local_channel_credentials(), api.metadata_call_credentials(plugin)
    )
    PLUGIN_VARIABLE.set("changed later")
    server_credentials = grpc.local_server_credentials()
    with secure_server(grpc, "localhost:0", server_credentials, seen) as port:

        def calls() -> None:
            with api.secure_channel(f"localhost:{port}", credentials) as channel:
                for _ in range(3):
                    channel.unary_unary(METHOD)(b"x", timeout=10, wait_for_ready=True)

        threads = [threading.Thread(target=calls) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert seen.authorization == ["value set where the credentials were made"] * 12


def test_without_require_client_auth_no_client_certificate_is_asked_for(
    api: Any, certs: Certificates
) -> None:
    """Roots that did not sign the client's certificate do not matter when client auth is not
    required: grpcio does not ask for a certificate at all, so it is not checked either."""
    seen = Seen()
    server_credentials = api.ssl_server_credentials(
        [(certs.server_key, certs.server_chain)], root_certificates=certs.other_ca
    )
    with secure_server(api, "localhost:0", server_credentials, seen) as port:
        credentials = grpc.ssl_channel_credentials(
            certs.ca, private_key=certs.client_key, certificate_chain=certs.client_chain
        )
        with grpc.secure_channel(f"localhost:{port}", credentials) as channel:
            assert channel.unary_unary(METHOD)(b"x", timeout=10) == b"x"


# -- TLS session resumption and the auth context ------------------------------------------------


def session_cache_of(library: str) -> Any:
    if library == "grpcio":
        from grpc.experimental import session_cache

        return session_cache.ssl_session_cache_lru(1)
    from minigrpc.net.tls import ssl_session_cache_lru

    return ssl_session_cache_lru(1)


class Reused:
    """What the server's ``auth_context()`` said of each call."""

    def __init__(self) -> None:
        self.contexts: List[Any] = []


def auth_handler(api: Any, reused: Reused) -> Any:
    def look(request: bytes, context: Any) -> bytes:
        reused.contexts.append(context.auth_context())
        return request

    return api.method_handlers_generic_handler(
        "credentials.Echo", {"Echo": api.unary_unary_rpc_method_handler(look)}
    )


@pytest.mark.parametrize("client", ["minigrpc", "grpcio"])
def test_a_session_cache_resumes_tls_sessions(
    api: Any, client: str, certs: Certificates
) -> None:
    """The first connection makes a full handshake and the next ones resume its session, as
    the server's ``auth_context()`` says; a second server of the same name cannot resume the
    first one's session, and its own then replaces it in the cache."""
    caller = minigrpc if client == "minigrpc" else grpc
    cache = session_cache_of(client)
    credentials = caller.ssl_channel_credentials(root_certificates=certs.ca)
    options = [("grpc.ssl_session_cache", cache)]

    def one_call(port: int) -> None:
        with caller.secure_channel(f"localhost:{port}", credentials, options=options) as channel:
            assert channel.unary_unary(METHOD)(b"x", timeout=10) == b"x"

    reused = Reused()
    pairs = [(certs.server_key, certs.server_chain)]
    servers = []
    try:
        for _ in range(2):
            server = api.server(futures.ThreadPoolExecutor(max_workers=2))
            server.add_generic_rpc_handlers((auth_handler(api, reused),))
            port = server.add_secure_port("localhost:0", api.ssl_server_credentials(pairs))
            servers.append((server, port))
            server.start()
        (_, first), (_, second) = servers
        for port in (first, first, first, second, second, first):
            one_call(port)
    finally:
        for server, _ in servers:
            server.stop(None)
    said = [context["ssl_session_reused"] for context in reused.contexts]
    assert said == [[b"false"], [b"true"], [b"true"], [b"false"], [b"true"], [b"false"]]
    for context in reused.contexts:
        assert context["transport_security_type"] == [b"ssl"]
        assert context["security_level"] == [b"TSI_PRIVACY_AND_INTEGRITY"]


def test_a_plaintext_auth_context_says_insecure(api: Any) -> None:
    reused = Reused()
    server = api.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((auth_handler(api, reused),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            channel.unary_unary(METHOD)(b"x", timeout=10)
    finally:
        server.stop(None)
    assert reused.contexts == [
        {"security_level": [b"TSI_SECURITY_NONE"], "transport_security_type": [b"insecure"]}
    ]
