"""TLS for channels and servers, with the standard library's ``ssl`` module only.

gRPC over TLS is HTTP/2 over TLS (PROTOCOL-HTTP2.md, Requests: ``:scheme`` is ``https``): the
client offers ALPN ``h2`` (RFC 9113 §3.2, RFC 7301) and the server must pick it; TLS 1.2 or
newer (RFC 9113 §9.2).  Certificates come as PEM bytes, as grpcio takes them.

Why a memory BIO instead of ``SSLContext.wrap_socket``: minigrpc's client reads and writes one
socket from two threads at once (a reader waits for responses while another thread sends), and
one OpenSSL connection object must not be used by two threads at a time.  :class:`TLSEngine`
keeps the TLS state apart from the socket: a thread holds the engine's lock only to encrypt or
decrypt bytes in memory, never while it waits on the socket.  The server, which is non-blocking
and single-threaded, feeds the same engine what it reads.

The public names are grpcio's: :func:`ssl_channel_credentials`, :func:`ssl_server_credentials`,
the call credentials helpers, and (in :mod:`minigrpc.blocking.channel`) ``secure_channel``.
Besides TLS:

* **Certificate reloading** (:func:`dynamic_ssl_server_credentials`): the server asks a fetcher
  for a new :class:`ServerCertificateConfiguration` before each TLS handshake, as grpc-core does,
  so certificates rotate without a restart; connections already open keep theirs.
* **Local credentials** (:func:`local_channel_credentials`, :func:`local_server_credentials`):
  plaintext HTTP/2 that grpcio counts as secure enough for call credentials, because the peer is
  on the same machine: a unix socket (``UDS``) or a loopback TCP address (``LOCAL_TCP``).
"""

import collections
import contextvars
import enum
import ipaddress
import os
import shutil
import socket
import ssl
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..driver.logs import get_logger
from ..protocol.targets import Target

__all__ = [
    "CallCredentials",
    "ChannelCredentials",
    "ClientTLS",
    "LocalConnectionType",
    "SSLSessionCache",
    "ServerCertificateConfiguration",
    "ServerCredentials",
    "TLSEngine",
    "TLSSocket",
    "access_token_call_credentials",
    "composite_call_credentials",
    "composite_channel_credentials",
    "dynamic_ssl_server_credentials",
    "insecure_server_credentials",
    "local_channel_credentials",
    "local_server_credentials",
    "metadata_call_credentials",
    "ssl_channel_credentials",
    "ssl_server_certificate_configuration",
    "ssl_server_credentials",
    "ssl_session_cache_lru",
]

_LOGGER = get_logger("minigrpc.net.tls")

#: The one application protocol gRPC speaks over TLS (RFC 9113 §3.2).
ALPN_H2 = "h2"
#: Bytes read from the socket at a time while TLS needs more input.
_RAW_READ = 65536


def alpn_refusal(protocol: Optional[str]) -> Optional[str]:
    """Why a TLS peer's choice of application protocol is not gRPC's (RFC 9113 §3.2), or None
    for ``h2``, or for no choice at all (a peer without ALPN is taken at its word)."""
    if protocol is None or protocol == ALPN_H2:
        return None
    return f"the peer chose ALPN protocol {protocol!r}, not {ALPN_H2!r}"


class TLSFailure(OSError):
    """The TLS handshake failed or the peer is not a gRPC (``h2``) server; the text says why."""


class ClientTLS(NamedTuple):
    """TLS settings of a secure channel's connections, as both client transports dial them."""

    context: ssl.SSLContext
    #: The name the server's certificate must carry (SNI too): the target's host, or
    #: ``grpc.ssl_target_name_override``.
    server_hostname: str
    #: ``grpc.ssl_session_cache``: where sessions are kept to resume (an :class:`SSLSessionCache`).
    session_cache: Any = None


def _load_chain(context: ssl.SSLContext, certificate_chain: bytes, private_key: bytes) -> None:
    """``load_cert_chain`` reads files only: write both PEMs to a private directory, load them,
    and remove the directory at once."""
    directory = tempfile.mkdtemp(prefix="minigrpc-tls-")
    try:
        os.chmod(directory, 0o700)
        chain_path = os.path.join(directory, "chain.pem")
        key_path = os.path.join(directory, "key.pem")
        for path, data in ((chain_path, certificate_chain), (key_path, private_key)):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:
                file.write(data)
        context.load_cert_chain(chain_path, key_path)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _pem_text(data: bytes, what: str) -> str:
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"{what} must be PEM bytes, got {type(data).__name__}")
    return bytes(data).decode("ascii")


# -- credentials ------------------------------------------------------------------------------


class CallCredentials:
    """Metadata added to each call of a secure channel (grpcio's ``CallCredentials``).

    ``plugin(context, callback)`` is grpcio's ``AuthMetadataPlugin`` contract: ``context`` has
    ``service_url`` and ``method_name``; ``callback(metadata, error)`` answers.

    Each plugin runs in (a copy of) the ``contextvars`` context current when its credentials
    were made, as in grpcio, whose plugins run on threads of its own: a plugin reads the same
    context variables whichever thread makes the call.
    """

    def __init__(self, plugins: Sequence[Tuple[Any, contextvars.Context]]) -> None:
        #: (plugin, the context it runs in)
        self.plugins = tuple(plugins)

    def metadata(self, service_url: str, method_name: str, timeout: Optional[float]) -> list:
        """Ask every plugin, in order.  An error the plugin reports, or a plugin that never
        answers, ends the call UNAVAILABLE (:class:`minigrpc.driver.invocation.CallFailed`);
        an exception it raises goes on to the caller."""
        collected: list = []
        for plugin, context in self.plugins:
            answer = _PluginAnswer()
            # A copy per call: one Context cannot be entered by two threads at once.
            context.copy().run(plugin, _AuthContext(service_url, method_name), answer)
            if not answer.answered.wait(timeout):
                raise _plugin_failure("a call credentials plugin did not answer in time")
            if answer.error is not None:
                raise _plugin_failure(
                    f"getting metadata from plugin failed with error: {answer.error}"
                )
            collected.extend(answer.metadata or ())
        return collected


def _plugin_failure(details: str) -> Exception:
    from ..driver.invocation import CallFailed
    from ..protocol.codes import Code
    from ..protocol.status import CallStatus

    return CallFailed(CallStatus(Code.UNAVAILABLE, details))


class _PluginAnswer:
    """The ``callback`` an ``AuthMetadataPlugin`` answers through."""

    def __init__(self) -> None:
        self.answered = threading.Event()
        self.metadata: Any = None
        self.error: Optional[BaseException] = None

    def __call__(self, metadata: Any, error: Optional[BaseException]) -> None:
        self.metadata, self.error = metadata, error
        self.answered.set()


class _AuthContext:
    """What an ``AuthMetadataPlugin`` is told about the call (grpcio's ``AuthMetadataContext``)."""

    def __init__(self, service_url: str, method_name: str) -> None:
        self.service_url = service_url
        self.method_name = method_name


class _AccessToken:
    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, context: Any, callback: Callable[[Any, Any], None]) -> None:
        callback((("authorization", f"Bearer {self._token}"),), None)


def metadata_call_credentials(metadata_plugin: Any, name: Optional[str] = None) -> CallCredentials:
    return CallCredentials(((metadata_plugin, contextvars.copy_context()),))


def access_token_call_credentials(access_token: str) -> CallCredentials:
    return CallCredentials(((_AccessToken(access_token), contextvars.copy_context()),))


def composite_call_credentials(*call_credentials: CallCredentials) -> CallCredentials:
    return CallCredentials([p for credentials in call_credentials for p in credentials.plugins])


class ChannelCredentials:
    """What a secure channel needs: trusted roots, an optional client certificate, and call
    credentials added to every call (grpcio's ``ChannelCredentials``)."""

    def __init__(
        self,
        root_certificates: Optional[bytes] = None,
        private_key: Optional[bytes] = None,
        certificate_chain: Optional[bytes] = None,
        call_credentials: Optional[CallCredentials] = None,
        local: Optional["LocalConnectionType"] = None,
    ) -> None:
        if (private_key is None) != (certificate_chain is None):
            raise ValueError("private_key and certificate_chain go together: give both or neither")
        self._root_certificates = root_certificates
        self._private_key = private_key
        self._certificate_chain = certificate_chain
        self.call_credentials = call_credentials
        #: Set for :func:`local_channel_credentials`: plaintext, to a local peer of this kind.
        self.local = local
        self._context: Optional[ssl.SSLContext] = None
        self._lock = threading.Lock()

    def with_call_credentials(self, call_credentials: CallCredentials) -> "ChannelCredentials":
        combined = call_credentials
        if self.call_credentials is not None:
            combined = composite_call_credentials(self.call_credentials, call_credentials)
        return ChannelCredentials(
            self._root_certificates,
            self._private_key,
            self._certificate_chain,
            combined,
            self.local,
        )

    def client_tls(
        self, target: Target, name_override: Optional[str], session_cache: Any
    ) -> "Optional[ClientTLS]":
        """The TLS settings of a channel's connections to ``target``: None for local
        credentials (plaintext).  The name to verify (and send as SNI) is
        ``grpc.ssl_target_name_override`` if given, else the target's host; a unix socket has
        none, and grpc uses ``localhost`` there."""
        context = self.client_context()
        if context is None:
            return None
        if name_override is not None:
            hostname = name_override
        elif isinstance(target.address, tuple):
            hostname = str(target.address[0])
        else:
            hostname = "localhost"
        return ClientTLS(context, hostname, session_cache)

    def target_refusal(self, target: Target) -> str:
        """Why these credentials refuse ``target`` ("" if they take it): only local credentials
        refuse, a target that is not local (:func:`local_target_error`)."""
        if self.local is None:
            return ""
        host = str(target.address[0]) if isinstance(target.address, tuple) else None
        return local_target_error(self.local, target.is_unix, host)

    def client_context(self) -> Optional[ssl.SSLContext]:
        """The ``SSLContext`` (built once): verify the server, offer ALPN h2, TLS 1.2+; None
        for local credentials, which speak plaintext."""
        if self.local is not None:
            return None
        with self._lock:
            if self._context is None:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.minimum_version = ssl.TLSVersion.TLSv1_2
                if self._root_certificates is not None:
                    context.load_verify_locations(
                        cadata=_pem_text(self._root_certificates, "root_certificates")
                    )
                else:
                    context.load_default_certs(ssl.Purpose.SERVER_AUTH)
                if self._certificate_chain is not None and self._private_key is not None:
                    _load_chain(context, self._certificate_chain, self._private_key)
                context.set_alpn_protocols([ALPN_H2])
                self._context = context
            return self._context


def ssl_channel_credentials(
    root_certificates: Optional[bytes] = None,
    private_key: Optional[bytes] = None,
    certificate_chain: Optional[bytes] = None,
) -> ChannelCredentials:
    """TLS for a channel; ``root_certificates`` None trusts the system's roots (grpcio's API).

    A client key and chain make it mutual TLS.  The PEMs are checked here, so a bad one fails
    at once rather than at the first call.
    """
    credentials = ChannelCredentials(root_certificates, private_key, certificate_chain)
    try:
        credentials.client_context()
    except (ssl.SSLError, ValueError, OSError) as exc:
        raise ValueError(f"invalid TLS credentials: {exc}") from None
    return credentials


def composite_channel_credentials(
    channel_credentials: ChannelCredentials, *call_credentials: CallCredentials
) -> ChannelCredentials:
    for credentials in call_credentials:
        channel_credentials = channel_credentials.with_call_credentials(credentials)
    return channel_credentials


class LocalConnectionType(enum.Enum):
    """The kind of local connection local credentials accept (grpcio's enum and values)."""

    UDS = 0
    LOCAL_TCP = 1


def local_channel_credentials(
    local_connect_type: LocalConnectionType = LocalConnectionType.LOCAL_TCP,
) -> ChannelCredentials:
    """Credentials for a channel to a server on this machine (grpcio's function).

    The channel speaks plaintext, and call credentials work on it as on a TLS channel.  Its
    target must be local: a unix socket for ``UDS``; for ``LOCAL_TCP`` ``localhost`` or a
    loopback address.  Another target fails every call UNAVAILABLE, saying why.
    """
    if not isinstance(local_connect_type, LocalConnectionType):
        raise TypeError(f"expected a grpc.LocalConnectionType, got {local_connect_type!r}")
    return ChannelCredentials(local=local_connect_type)


def local_target_error(kind: LocalConnectionType, is_unix: bool, host: Optional[str]) -> str:
    """Why local credentials of ``kind`` refuse an address ("" if they accept it): a unix
    socket for UDS; ``localhost`` or a loopback address for LOCAL_TCP."""
    if kind is LocalConnectionType.UDS:
        return "" if is_unix else "UDS local credentials need a unix: target"
    if is_unix:
        return "LOCAL_TCP local credentials need a TCP target on loopback, not a unix socket"
    if host == "localhost":
        return ""
    try:
        if ipaddress.ip_address(host or "").is_loopback:
            return ""
    except ValueError:
        pass
    return f"LOCAL_TCP local credentials need localhost or a loopback address, not {host!r}"


class ServerCertificateConfiguration:
    """Server key/chain pairs and the roots that verify clients (grpcio's class, returned by
    :func:`ssl_server_certificate_configuration`); reusable, in any number of credentials."""

    def __init__(
        self, pairs: Sequence[Tuple[bytes, bytes]], root_certificates: Optional[bytes]
    ) -> None:
        self._pairs = tuple(pairs)
        self._root_certificates = root_certificates
        self._contexts: Dict[bool, ssl.SSLContext] = {}
        self._lock = threading.Lock()
        self.context(False)  # a bad PEM fails here, not at a client's handshake

    def context(self, require_client_auth: bool) -> ssl.SSLContext:
        """The server ``SSLContext`` (built once per ``require_client_auth``).

        Only the first pair is used: Python's ``ssl`` has one certificate per context (grpcio
        picks by SNI among several).
        """
        with self._lock:
            context = self._contexts.get(require_client_auth)
            if context is None:
                context = self._contexts[require_client_auth] = self._build(require_client_auth)
            return context

    def _build(self, require_client_auth: bool) -> ssl.SSLContext:
        roots = self._root_certificates
        if require_client_auth and roots is None:
            raise ValueError("require_client_auth needs root_certificates to verify clients with")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            private_key, certificate_chain = self._pairs[0]
            _load_chain(context, certificate_chain, private_key)
            if require_client_auth and roots is not None:
                context.load_verify_locations(cadata=_pem_text(roots, "root_certificates"))
                context.verify_mode = ssl.CERT_REQUIRED
        except (ssl.SSLError, OSError) as exc:
            raise ValueError(f"invalid TLS server credentials: {exc}") from None
        context.set_alpn_protocols([ALPN_H2])
        return context


def ssl_server_certificate_configuration(
    private_key_certificate_chain_pairs: Sequence[Tuple[bytes, bytes]],
    root_certificates: Optional[bytes] = None,
) -> ServerCertificateConfiguration:
    """One certificate configuration for :func:`dynamic_ssl_server_credentials` (grpcio's)."""
    pairs = list(private_key_certificate_chain_pairs)
    if not pairs:
        raise ValueError("at least one private key / certificate chain pair is required")
    return ServerCertificateConfiguration(pairs, root_certificates)


class _ReloadingContext:
    """What a port with dynamic credentials wraps each accepted connection with: before every
    handshake it asks the fetcher for a new configuration, as grpc-core does (a fetcher that
    returns None or raises keeps the current one), then wraps with that configuration."""

    def __init__(
        self,
        initial: ServerCertificateConfiguration,
        fetcher: Callable[[], Optional[ServerCertificateConfiguration]],
        require_client_auth: bool,
    ) -> None:
        self._current = initial
        self._fetcher = fetcher
        self._require_client_auth = require_client_auth
        self._lock = threading.Lock()

    def current(self) -> ssl.SSLContext:
        """The context for the next handshake, after asking the fetcher."""
        try:
            fetched = self._fetcher()
        except Exception:
            _LOGGER.exception("the certificate configuration fetcher raised; keeping the current")
            fetched = None
        with self._lock:
            if isinstance(fetched, ServerCertificateConfiguration):
                self._current = fetched
            elif fetched is not None:
                _LOGGER.error(
                    "the certificate configuration fetcher returned %r, not a "
                    "ServerCertificateConfiguration; keeping the current one",
                    fetched,
                )
            configuration = self._current
        return configuration.context(self._require_client_auth)

    def wrap_bio(self, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO, **kwargs: Any) -> Any:
        return self.current().wrap_bio(incoming, outgoing, **kwargs)


class ServerCredentials:
    """What a secure port needs (grpcio's ``ServerCredentials``).

    ``context`` wraps accepted connections in TLS (an ``SSLContext``, or the reloading wrapper
    of dynamic credentials); None for plaintext: local credentials, whose ``local`` says which
    addresses they serve, and :func:`insecure_server_credentials`.
    """

    def __init__(
        self,
        context: Any,
        require_client_auth: bool,
        local: Optional[LocalConnectionType] = None,
    ) -> None:
        self.context = context
        self.require_client_auth = require_client_auth
        self.local = local


def ssl_server_credentials(
    private_key_certificate_chain_pairs: Sequence[Tuple[bytes, bytes]],
    root_certificates: Optional[bytes] = None,
    require_client_auth: bool = False,
) -> ServerCredentials:
    """TLS for ``add_secure_port``: one or more (key, chain) pairs; with ``require_client_auth``
    a client must present a certificate that ``root_certificates`` verify.  Without it no
    client certificate is asked for, as in grpcio (``root_certificates`` are then unused).

    Only the first pair is used: Python's ``ssl`` has one certificate per context (grpcio picks
    by SNI among several).
    """
    configuration = ssl_server_certificate_configuration(
        private_key_certificate_chain_pairs, root_certificates
    )
    return ServerCredentials(configuration.context(require_client_auth), require_client_auth)


def dynamic_ssl_server_credentials(
    initial_certificate_configuration: ServerCertificateConfiguration,
    certificate_configuration_fetcher: Callable[[], Optional[ServerCertificateConfiguration]],
    require_client_authentication: bool = False,
) -> ServerCredentials:
    """TLS whose certificates can change while the server runs (grpcio's function).

    Before each new connection's handshake the server calls
    ``certificate_configuration_fetcher()``: a :class:`ServerCertificateConfiguration` replaces
    the current one from then on; None (or an exception, which is logged) keeps it.
    """
    if not isinstance(initial_certificate_configuration, ServerCertificateConfiguration):
        raise TypeError(
            "initial_certificate_configuration must be a grpc.ServerCertificateConfiguration "
            "(grpc.ssl_server_certificate_configuration()), got "
            f"{type(initial_certificate_configuration).__name__}"
        )
    if not callable(certificate_configuration_fetcher):
        raise TypeError(
            "certificate_configuration_fetcher must be callable, got "
            f"{type(certificate_configuration_fetcher).__name__}"
        )
    initial_certificate_configuration.context(require_client_authentication)
    reloading = _ReloadingContext(
        initial_certificate_configuration,
        certificate_configuration_fetcher,
        require_client_authentication,
    )
    return ServerCredentials(reloading, require_client_authentication)


def local_server_credentials(
    local_connect_type: LocalConnectionType = LocalConnectionType.LOCAL_TCP,
) -> ServerCredentials:
    """Credentials for a port that serves clients on this machine (grpcio's function):
    plaintext, on a unix socket for ``UDS`` or on a loopback address for ``LOCAL_TCP``;
    ``add_secure_port`` refuses any other address."""
    if not isinstance(local_connect_type, LocalConnectionType):
        raise TypeError(f"expected a grpc.LocalConnectionType, got {local_connect_type!r}")
    return ServerCredentials(None, False, local_connect_type)


def insecure_server_credentials() -> ServerCredentials:
    """No security: ``add_secure_port`` with these serves plaintext, as grpc-core does (grpcio
    offers them as the fallback of xDS server credentials)."""
    return ServerCredentials(None, False)


# -- the engine -------------------------------------------------------------------------------


#: Plaintext taken from a TLS engine at a time by :meth:`TLSEngine.decrypt`.
_DECRYPT_CHUNK = 256 * 1024


class TLSEngine:
    """One TLS connection in memory: ciphertext in, plaintext out, and back (module docstring).

    Not thread-safe by itself; :class:`TLSSocket` and the server serialise access.
    """

    def __init__(
        self,
        context: ssl.SSLContext,
        server_side: bool,
        server_hostname: Optional[str] = None,
        session: Optional[ssl.SSLSession] = None,
    ) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(
            self._incoming,
            self._outgoing,
            server_side=server_side,
            server_hostname=server_hostname,
            session=session,
        )
        self.established = False

    def handshake(self) -> bool:
        """Advance the handshake; True once done.  Raises :class:`TLSFailure`."""
        if self.established:
            return True
        try:
            self.tls.do_handshake()
        except ssl.SSLWantReadError:
            return False
        except ssl.SSLError as exc:
            raise TLSFailure(_ssl_error_text(exc)) from None
        refusal = alpn_refusal(self.tls.selected_alpn_protocol())
        if refusal is not None:
            raise TLSFailure(refusal)
        self.established = True
        return True

    def feed(self, data: bytes) -> None:
        """Ciphertext read from the socket; ``b""`` is the socket's EOF."""
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()

    def read(self, size: int) -> Optional[bytes]:
        """Plaintext; ``b""`` at the end of the TLS stream; None when more input is needed."""
        try:
            return self.tls.read(size)
        except ssl.SSLWantReadError:
            return None
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            return b""
        except ssl.SSLError as exc:
            raise TLSFailure(_ssl_error_text(exc)) from None

    def decrypt(self, data: bytes) -> bytes:
        """Feed ciphertext read from the socket; return the plaintext it completes (``b""``
        while the handshake runs or a record is incomplete).  Raises :class:`TLSFailure`."""
        self.feed(data)
        if not self.handshake():
            return b""
        chunks = []
        while True:
            chunk = self.read(_DECRYPT_CHUNK)
            if not chunk:  # None: needs more input; b"": the peer closed TLS
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def encrypt(self, data: bytes) -> bytes:
        """Ciphertext for ``data`` (plus anything TLS itself still had to send)."""
        if data:
            view = memoryview(data)
            while view:
                written = self.tls.write(view)
                view = view[written:]
        return self._outgoing.read()

    def outgoing(self) -> bytes:
        """Ciphertext TLS produced on its own (handshake, session tickets, alerts)."""
        return self._outgoing.read()

    def pending(self) -> bool:
        """Decrypted bytes or undecrypted input are waiting: a read need not wait on the socket."""
        return self.tls.pending() > 0 or self._incoming.pending > 0

    def auth_context(self) -> Dict[str, List[bytes]]:
        """grpcio's ``auth_context()`` keys for a TLS connection
        (:data:`minigrpc.driver.server_call_state.PLAINTEXT_AUTH_CONTEXT` is a plaintext
        one's)."""
        context: Dict[str, List[bytes]] = {
            "security_level": [b"TSI_PRIVACY_AND_INTEGRITY"],
            "transport_security_type": [b"ssl"],
            "ssl_session_reused": [b"true" if self.tls.session_reused else b"false"],
        }
        certificate: Any = self.tls.getpeercert()
        if certificate:
            names = [value.encode() for _kind, value in certificate.get("subjectAltName", ())]
            common = [
                value.encode()
                for rdn in certificate.get("subject", ())
                for key, value in rdn
                if key == "commonName"
            ]
            if common:
                context["x509_common_name"] = common
            if names:
                context["x509_subject_alternative_name"] = names
        return context


def _ssl_error_text(exc: ssl.SSLError) -> str:
    reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
    return f"tls: {reason}"


class SSLSessionCache:
    """TLS sessions a client keeps to resume, by server name, least recently used dropped
    beyond ``capacity`` (grpcio's ``grpc.experimental.session_cache.ssl_session_cache_lru``;
    give it to channels as the ``grpc.ssl_session_cache`` option).

    A resumed session skips the certificate exchange and its public-key operations (RFC 8446
    §2.2), which is most of a new connection's cost.  A server that cannot resume the offered
    session (another server with the same name, or one restarted with new ticket keys) makes
    a full handshake, whose session then replaces the cached one.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a session cache holds at least one session, not {capacity}")
        self._capacity = capacity
        self._sessions: collections.OrderedDict[str, ssl.SSLSession] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, server_name: str) -> Optional[ssl.SSLSession]:
        with self._lock:
            session = self._sessions.get(server_name)
            if session is not None:
                self._sessions.move_to_end(server_name)
            return session

    def keep(self, server_name: str, session: Optional[ssl.SSLSession]) -> bool:
        """Keep ``session`` once it can be resumed, that is once it carries a ticket: TLS 1.3
        sends tickets after the handshake (RFC 8446 §4.6.1), so a connection tries again as
        data arrives.  True once kept."""
        if session is None or not session.has_ticket:
            return False
        self.put(server_name, session)
        return True

    def put(self, server_name: str, session: ssl.SSLSession) -> None:
        with self._lock:
            self._sessions[server_name] = session
            self._sessions.move_to_end(server_name)
            while len(self._sessions) > self._capacity:
                self._sessions.popitem(last=False)


def ssl_session_cache_lru(capacity: int) -> SSLSessionCache:
    """grpcio's ``grpc.experimental.session_cache.ssl_session_cache_lru``."""
    return SSLSessionCache(capacity)


class TLSSocket:
    """A connected client socket with TLS on top, for one reader and one writer thread at once.

    It offers what :class:`minigrpc.blocking.client_connection.BlockingClientConnection` uses of a
    socket: ``recv``, ``sendall``, ``fileno``, ``shutdown``, ``close``, and ``pending`` (bytes
    already decrypted or received, which ``poll()`` on the descriptor cannot see).
    """

    def __init__(
        self,
        sock: socket.socket,
        engine: TLSEngine,
        session_cache: Optional[SSLSessionCache] = None,
        server_hostname: str = "",
    ) -> None:
        self._sock = sock
        self._engine = engine
        self._engine_lock = threading.Lock()
        self._send_lock = threading.Lock()
        #: Where this connection's session goes once it can be resumed (None: nowhere).
        self._session_cache = session_cache
        self._server_hostname = server_hostname
        self._keep_session()

    def _keep_session(self) -> None:
        """Put the session in the cache once it carries a ticket: TLS 1.3 sends tickets after
        the handshake (RFC 8446 §4.6.1), so this is tried again as data arrives."""
        cache = self._session_cache
        if cache is not None and cache.keep(self._server_hostname, self._engine.tls.session):
            self._session_cache = None

    @classmethod
    def connect(
        cls,
        sock: socket.socket,
        context: ssl.SSLContext,
        server_hostname: str,
        deadline: Optional[float],
        session_cache: Optional[SSLSessionCache] = None,
    ) -> "TLSSocket":
        """Run the client handshake on ``sock`` (blocking, bounded by ``deadline``), resuming
        the session ``session_cache`` holds for ``server_hostname`` if it has one.

        Raises :class:`TLSFailure`, or ``socket.timeout`` when the deadline passes.
        """
        session = session_cache.get(server_hostname) if session_cache is not None else None
        engine = TLSEngine(
            context, server_side=False, server_hostname=server_hostname, session=session
        )
        try:
            while True:
                done = engine.handshake()
                out = engine.outgoing()
                if out:
                    sock.sendall(out)
                if done:
                    break
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise socket.timeout("TLS handshake timed out")
                    sock.settimeout(left)
                data = sock.recv(_RAW_READ)
                if not data:
                    raise TLSFailure("tls: the server closed the connection during the handshake")
                engine.feed(data)
        finally:
            sock.settimeout(None)
        return cls(sock, engine, session_cache, server_hostname)

    @property
    def engine(self) -> TLSEngine:
        return self._engine

    def fileno(self) -> int:
        return self._sock.fileno()

    def pending(self) -> bool:
        with self._engine_lock:
            return self._engine.pending()

    def recv(self, size: int) -> bytes:
        while True:
            with self._engine_lock:
                data = self._engine.read(size)  # also takes in tickets that arrived
                if self._session_cache is not None:
                    self._keep_session()
                out = self._engine.outgoing()
            if out:
                with self._send_lock:
                    self._sock.sendall(out)
            if data is not None:
                return data
            raw = self._sock.recv(_RAW_READ)
            with self._engine_lock:
                self._engine.feed(raw)

    def sendall(self, data: bytes) -> None:
        with self._send_lock:
            with self._engine_lock:
                cipher = self._engine.encrypt(data)
            self._sock.sendall(cipher)

    def shutdown(self, how: int) -> None:
        self._sock.shutdown(how)

    def close(self) -> None:
        self._sock.close()
