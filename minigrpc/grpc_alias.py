"""``import grpc`` that resolves to minigrpc, for code generated for grpcio where grpcio is absent.

Every ``*_pb2_grpc.py`` module from grpcio-tools starts with ``import grpc``; recent ones also
read ``grpc.__version__`` and import ``grpc._utilities.first_version_is_lower``.  On a machine
without grpcio, one line before the first ``import grpc`` makes them run unchanged::

    import minigrpc; minigrpc.install_as_grpc()

(the idiom of PyMySQL's ``install_as_MySQLdb()``).  After it, ``import grpc`` gives this
module's alias: a module named ``grpc`` whose names are grpcio's (the table
:data:`GRPCIO_NAMES`), served by minigrpc, plus the submodules generated code and grpcio's own
pure-Python add-ons touch: ``grpc._utilities``, ``grpc.experimental`` (:mod:`minigrpc.
experimental`) and ``grpc.aio`` / ``grpc.experimental.aio`` (:mod:`minigrpc.aio`, so that
generated stubs run unchanged on an asyncio channel).

**When grpcio is there too.**  If ``grpc`` is already imported (grpcio, or anything else),
:func:`install_as_grpc` raises RuntimeError rather than have two ``grpc`` modules in one process
(objects of one are not accepted by the other).  If grpcio is installed but not yet imported,
the alias wins, for the whole process: the caller asked for it.  It is idempotent.

**The version it answers** is :data:`GRPCIO_VERSION`, the newest grpcio-tools release whose
generated code the test suite holds (``tests/generated_stubs/``); it is never a made-up high
number.  Generated code of 1.64 and later passes it, and its own release, to
``grpc._utilities.first_version_is_lower`` and refuses to load when that says the runtime is
older.  The alias answers that question by what minigrpc implements rather than by comparing
numbers: code from any release of a major version whose template the suite runs
(:data:`GENERATED_CODE_MAJORS`) loads, so that a new grpcio-tools release does not break every
new user until minigrpc makes one of its own.  Code from a release newer than
:data:`GRPCIO_VERSION` loads with one :class:`NewerGeneratedCodeWarning` per release, naming
both versions; code from another major version is refused, with grpcio's own message.  Any
other pair of versions is compared as grpcio compares them.

**Names minigrpc does not implement** are still there, as placeholders, so that modules which
merely mention them (annotations, base classes, ``isinstance`` checks) import; calling or
instantiating one, or reading an attribute of it, raises :class:`UnsupportedError` (a
NotImplementedError) naming it and saying why.  A name grpcio's table lacks (one that a newer
grpcio added, say) raises :class:`UnsupportedError` too, one that is also an AttributeError, so
that ``hasattr`` and ``getattr(grpc, name, default)`` still answer.  ``grpc.<anything else>``
submodules raise ModuleNotFoundError saying the alias does not have them.
"""

import concurrent.futures
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import threading
import types
import warnings
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

__all__ = [
    "ADDON_MODULES",
    "GENERATED_CODE_MAJORS",
    "GRPCIO_NAMES",
    "GRPCIO_VERSION",
    "AddonModule",
    "ApiName",
    "NewerGeneratedCodeWarning",
    "UnsupportedError",
    "compatibility_markdown",
    "first_version_is_lower",
    "install_as_grpc",
]

#: What ``grpc.__version__`` answers on the alias: the newest grpcio-tools release whose
#: generated code ``tests/generated_stubs/`` holds and the tests run (tools/generate_stubs.py).
GRPCIO_VERSION = "1.85.4"

#: The major versions of grpcio-tools whose generated code the alias loads, whatever the
#: release: those whose template the tests run (``tests/generated_stubs/``, and the output of
#: the grpcio-tools installed when they run).  A new major version may change the template in
#: ways minigrpc has not met, so its code is refused until the suite runs it.
GENERATED_CODE_MAJORS: Tuple[int, ...] = (1,)


class ApiName(NamedTuple):
    """One public name of grpcio and what the alias gives for it.

    ``name`` is the attribute of ``grpc`` (``experimental.X`` for ``grpc.experimental.X``);
    ``source`` the minigrpc attribute that provides it, when it is supported (the same name
    unless given; ``experimental.X`` means :mod:`minigrpc.experimental`); ``note`` says how it
    differs from grpcio, or why it is not supported.
    """

    name: str
    supported: bool
    note: str
    source: Optional[str] = None


_GOOGLE = "Google Cloud / xDS credentials are out of scope"
_RUNTIME_PROTOS = (
    "needs grpcio-tools' compiler (`grpc_tools`, which runs without grpcio), as grpcio does; "
    "else NotImplementedError"
)

#: grpcio's public names: ``grpc.__all__`` of grpcio 1.85, then the module attributes and the
#: ``grpc.experimental`` names that generated code and grpcio's add-on packages use.  The README's
#: compatibility table is rendered from this (tools/render_docs.py).
GRPCIO_NAMES: Tuple[ApiName, ...] = (
    # -- client ---------------------------------------------------------------------------------
    ApiName("insecure_channel", True, "targets: `unix:`, `unix-abstract:`, `host:port`, "
            "`dns:///` (every address it resolves to), `ipv4:` and `ipv6:` address lists"),
    ApiName("Channel", True, ""),
    ApiName("UnaryUnaryMultiCallable", True, "`__call__`, `with_call`, `future`"),
    ApiName("UnaryStreamMultiCallable", True, ""),
    ApiName("StreamUnaryMultiCallable", True, ""),
    ApiName("StreamStreamMultiCallable", True, ""),
    ApiName("Call", True, "abstract, as in grpcio; every call object minigrpc returns is one"),
    ApiName("Future", True, "abstract, as in grpcio; every future minigrpc returns is one"),
    ApiName("FutureTimeoutError", True, ""),
    ApiName("FutureCancelledError", True, ""),
    ApiName("RpcError", True, "the plain base class; what minigrpc raises is also a Call"),
    ApiName("StatusCode", True, "same members and values"),
    ApiName("Compression", True, "`NoCompression`, `Deflate`, `Gzip`"),
    ApiName("RpcContext", True, "abstract; minigrpc's calls and servicer contexts derive from it"),
    ApiName("ChannelConnectivity", True, "`Channel.subscribe` reports it"),
    ApiName("channel_ready_future", True, ""),
    ApiName("ClientCallDetails", True, ""),
    ApiName("UnaryUnaryClientInterceptor", True, "grpcio's order and short-circuit rules"),
    ApiName("UnaryStreamClientInterceptor", True, ""),
    ApiName("StreamUnaryClientInterceptor", True, ""),
    ApiName("StreamStreamClientInterceptor", True, ""),
    ApiName("intercept_channel", True, ""),
    # -- server ---------------------------------------------------------------------------------
    ApiName("server", True, "`xds=True` is refused with ValueError"),
    ApiName("Server", True, ""),
    ApiName("ServicerContext", True, ""),
    ApiName("Status", True, "for `abort_with_status`"),
    ApiName("GenericRpcHandler", True, ""),
    ApiName("ServiceRpcHandler", True, ""),
    ApiName("HandlerCallDetails", True, ""),
    ApiName(
        "RpcMethodHandler",
        True,
        "abstract, as in grpcio; the `*_rpc_method_handler` functions return a named tuple "
        "deriving from it",
    ),
    ApiName("method_handlers_generic_handler", True, ""),
    ApiName("unary_unary_rpc_method_handler", True, ""),
    ApiName("unary_stream_rpc_method_handler", True, ""),
    ApiName("stream_unary_rpc_method_handler", True, ""),
    ApiName("stream_stream_rpc_method_handler", True, ""),
    ApiName("ServerInterceptor", True, "`server(interceptors=...)`"),
    # -- credentials ----------------------------------------------------------------------------
    ApiName("secure_channel", True, "TLS 1.2+ with ALPN `h2`, on the standard `ssl` module"),
    ApiName("ssl_channel_credentials", True, ""),
    ApiName("ssl_server_credentials", True, "mutual TLS with `require_client_auth`"),
    ApiName("composite_channel_credentials", True, ""),
    ApiName("ChannelCredentials", True, ""),
    ApiName("ServerCredentials", True, ""),
    ApiName("CallCredentials", True, "on secure channels only, as in grpcio"),
    ApiName("metadata_call_credentials", True, ""),
    ApiName("access_token_call_credentials", True, ""),
    ApiName("composite_call_credentials", True, ""),
    ApiName("AuthMetadataPlugin", True, "for subclassing; any callable plugin works"),
    ApiName("AuthMetadataContext", True, "for subclassing and annotations"),
    ApiName("AuthMetadataPluginCallback", True, "for subclassing and annotations"),
    ApiName("ServerCertificateConfiguration", True, "for `dynamic_ssl_server_credentials`"),
    ApiName("ssl_server_certificate_configuration", True, "the first key/chain pair is served"),
    ApiName(
        "dynamic_ssl_server_credentials",
        True,
        "the fetcher is asked before each handshake, as in grpc-core",
    ),
    ApiName(
        "insecure_server_credentials",
        True,
        "`add_secure_port` with them serves plaintext, as grpc-core does",
    ),
    ApiName(
        "local_channel_credentials",
        True,
        "plaintext with call credentials; a target that is not local fails calls UNAVAILABLE",
    ),
    ApiName(
        "local_server_credentials",
        True,
        "`add_secure_port` refuses an address that is not local (grpc-core binds it and "
        "refuses remote peers)",
    ),
    ApiName("LocalConnectionType", True, "`UDS`, `LOCAL_TCP`"),
    ApiName("alts_channel_credentials", False, _GOOGLE),
    ApiName("alts_server_credentials", False, _GOOGLE),
    ApiName("compute_engine_channel_credentials", False, _GOOGLE),
    ApiName("xds_channel_credentials", False, _GOOGLE),
    ApiName("xds_server_credentials", False, _GOOGLE),
    # -- run-time .proto loading ----------------------------------------------------------------
    ApiName("protos", True, _RUNTIME_PROTOS),
    ApiName("services", True, _RUNTIME_PROTOS),
    ApiName("protos_and_services", True, _RUNTIME_PROTOS),
    # -- module attributes and submodules -------------------------------------------------------
    ApiName(
        "__version__",
        True,
        f"`{GRPCIO_VERSION}`: the newest grpcio-tools whose generated code the tests hold",
        "",
    ),
    ApiName(
        "_utilities",
        True,
        "`first_version_is_lower`: generated code's version check, answered by what minigrpc "
        f"implements (code of any {' or '.join(f'{m}.x' for m in GENERATED_CODE_MAJORS)} "
        "grpcio-tools release loads; one newer than `__version__` with one "
        "`NewerGeneratedCodeWarning`)",
        "",
    ),
    ApiName(
        "_channel",
        True,
        "`_InactiveRpcError`, `_MultiThreadedRendezvous` (which code catches by name) and "
        "`_USER_AGENT`",
        "",
    ),
    ApiName("_grpcio_metadata", True, "`__version__`", ""),
    ApiName("framework.foundation.logging_pool", True, "`pool(max_workers)`", ""),
    ApiName("experimental", True, "the names below", ""),
    ApiName(
        "aio",
        True,
        "`minigrpc.aio` (also as `grpc.experimental.aio`), on the same sans-IO core",
        "",
    ),
    ApiName(
        "aio.insecure_channel",
        True,
        "the blocking channel's targets and options; the four multi-callables (awaitable unary "
        "calls, `async for`, `read()`, `write()`, `done_writing()`), `channel_ready()`, "
        "`get_state()`, `close(grace)`, `async with`",
        "",
    ),
    ApiName(
        "aio.secure_channel",
        True,
        "TLS through asyncio's ssl with the blocking API's credentials: ALPN h2, mutual TLS, "
        "call credentials",
        "",
    ),
    ApiName(
        "aio.Channel",
        True,
        "abstract, with grpcio's abstract methods, as are `aio.RpcContext`, `aio.Call`, the four "
        "call classes and multi-callables, `aio.Server` and `aio.ServicerContext`: code may "
        "subclass them; minigrpc's channels, calls, servers and handler contexts are instances",
        "",
    ),
    ApiName(
        "aio.UnaryUnaryClientInterceptor",
        True,
        "and the other three kinds; an interceptor may change the call details, answer a unary "
        "call itself or wrap a response stream",
        "",
    ),
    ApiName(
        "aio.AioRpcError",
        True,
        "raised by a call that ends with an error; one the application cancelled (`cancel()`, "
        "or a cancelled task, which sends RST_STREAM CANCEL) raises `asyncio.CancelledError`, "
        "as in grpcio",
        "",
    ),
    ApiName(
        "aio.server",
        True,
        "`minigrpc.aio.server()` on the same sans-IO server core: `async def` handlers and async "
        "generators run on the event loop, plain functions on `migration_thread_pool`; TLS, unix "
        "and TCP ports; `stop(grace)` drains with two GOAWAYs",
        "",
    ),
    ApiName(
        "aio.ServerInterceptor",
        True,
        "`intercept_service` is a coroutine, as in grpcio; blocking interceptors are refused",
        "",
    ),
    # -- grpc.experimental ----------------------------------------------------------------------
    ApiName(
        "experimental.unary_unary",
        True,
        "generated code's static calls: one cached channel per target and credentials",
    ),
    ApiName("experimental.unary_stream", True, "as `unary_unary`"),
    ApiName("experimental.stream_unary", True, "as `unary_unary`"),
    ApiName("experimental.stream_stream", True, "as `unary_unary`"),
    ApiName("experimental.insecure_channel_credentials", True, "for the static calls"),
    ApiName("experimental.ChannelOptions", True, "accepted and ignored"),
    ApiName("experimental.ExperimentalApiWarning", True, "never raised"),
    ApiName("experimental.UsageError", True, ""),
    ApiName("experimental.wrap_server_method_handler", True, ""),
    ApiName(
        "experimental.session_cache",
        True,
        "`ssl_session_cache_lru(capacity)`, for the `grpc.ssl_session_cache` channel option: "
        "new TLS connections resume a cached session",
        "",
    ),
    ApiName(
        "experimental.ssl_channel_credentials_with_custom_signer",
        False,
        "a private key held outside the process (custom signer) is not implemented",
    ),
)


class AddonModule(NamedTuple):
    """A module of one of grpcio's pure-Python add-on packages, and minigrpc's stand-in for it.

    ``source`` is the minigrpc module served under ``name``; None for a package that only holds
    submodules.  The add-on packages themselves declare a dependency on grpcio, so ``pip``
    cannot install them where grpcio has no wheels; minigrpc ships what they are installed for.
    """

    name: str
    source: Optional[str]
    note: str = ""


#: The add-on modules :func:`install_as_grpc` makes importable where the add-on package is not
#: installed (an installed one is never shadowed).  The README's table is rendered from this.
ADDON_MODULES: Tuple[AddonModule, ...] = (
    AddonModule("grpc_health", "minigrpc.health"),
    AddonModule("grpc_health.v1", "minigrpc.health.v1"),
    AddonModule(
        "grpc_health.v1.health",
        "minigrpc.health.v1.health",
        "`HealthServicer`: `Check`, `List`, `Watch` (non-blocking; sends on change; ends on "
        "`enter_graceful_shutdown`), `set`, `enter_graceful_shutdown`; `OVERALL_HEALTH`; "
        "`aio.HealthServicer` for asyncio servers",
    ),
    AddonModule("grpc_health.v1.health_pb2", "minigrpc.health.v1.health_pb2"),
    AddonModule("grpc_health.v1.health_pb2_grpc", "minigrpc.health.v1.health_pb2_grpc"),
    AddonModule("grpc_reflection", "minigrpc.reflection"),
    AddonModule("grpc_reflection.v1alpha", "minigrpc.reflection.v1alpha"),
    AddonModule(
        "grpc_reflection.v1alpha.reflection",
        "minigrpc.reflection.v1alpha.reflection",
        "`SERVICE_NAME`, `ReflectionServicer`, `aio.ReflectionServicer`, "
        "`enable_server_reflection` (serves v1 and v1alpha, on blocking and asyncio servers; "
        "`minigrpc.reflection.v1` has the v1 names)",
    ),
    AddonModule(
        "grpc_reflection.v1alpha.reflection_pb2", "minigrpc.reflection.v1alpha.reflection_pb2"
    ),
    AddonModule(
        "grpc_reflection.v1alpha.reflection_pb2_grpc",
        "minigrpc.reflection.v1alpha.reflection_pb2_grpc",
    ),
    AddonModule(
        "grpc_reflection.v1alpha.proto_reflection_descriptor_database",
        "minigrpc.reflection.descriptor_database",
        "`ProtoReflectionDescriptorDatabase(channel)`: asks v1, then v1alpha",
    ),
    AddonModule("grpc_status", None),
    AddonModule(
        "grpc_status.rpc_status",
        "minigrpc.rpc_status",
        "`to_status`, `from_call`, `aio.from_call`; `google.rpc.Status` is "
        "googleapis-common-protos' where installed, else `minigrpc.rpc_status.status_pb2`",
    ),
)


def first_version_is_lower(version1: str, version2: str) -> bool:
    """grpcio's ``grpc._utilities.first_version_is_lower``, same results.

    Compares the first three dotted numbers; a version that does not parse is never lower,
    and on a tie the one with fewer parts (``1.60.1`` against ``1.60.1.dev0``) is lower.
    """
    parts1 = version1.split(".")
    parts2 = version2.split(".")
    try:
        for index in range(3):
            if int(parts1[index]) < int(parts2[index]):
                return True
            if int(parts1[index]) > int(parts2[index]):
                return False
    except (ValueError, IndexError):
        return False
    return len(parts1) < len(parts2)


class NewerGeneratedCodeWarning(RuntimeWarning):
    """Code generated by a grpcio-tools release newer than :data:`GRPCIO_VERSION` was loaded.

    It runs: its major version's template is one the tests run.  The warning says that this
    release's output is not among them yet; a grpcio name it uses that minigrpc lacks raises
    :class:`UnsupportedError` when used.
    """


#: The releases :func:`_runtime_version_check` has warned about (one warning each per process).
_WARNED_RELEASES: Set[str] = set()
_WARNED_LOCK = threading.Lock()


def _runtime_version_check(version1: str, version2: str) -> bool:
    """``grpc._utilities.first_version_is_lower`` as the alias serves it.

    Generated code asks ``first_version_is_lower(grpc.__version__, <its release>)``: "is the
    runtime too old for me?".  When the first version is the alias's own, that question is
    answered by what minigrpc implements: False (load) for a release of a major version in
    :data:`GENERATED_CODE_MAJORS`, with one :class:`NewerGeneratedCodeWarning` per release
    newer than :data:`GRPCIO_VERSION`; True (refuse) for any other major version.  Any other
    comparison is grpcio's (:func:`first_version_is_lower`).
    """
    if version1 != GRPCIO_VERSION:
        return first_version_is_lower(version1, version2)
    try:
        major = int(version2.split(".")[0])
    except ValueError:
        return False  # grpcio: a version that does not parse is never lower
    if major not in GENERATED_CODE_MAJORS:
        return True
    if first_version_is_lower(GRPCIO_VERSION, version2):
        with _WARNED_LOCK:
            first = version2 not in _WARNED_RELEASES
            _WARNED_RELEASES.add(version2)
        if first:
            caller = sys._getframe(1).f_globals.get("__name__", "a module")
            warnings.warn(
                f"{caller} was generated by grpcio-tools {version2}, newer than "
                f"{GRPCIO_VERSION}, the newest release whose generated code minigrpc's tests "
                f"run; minigrpc loads it (a grpcio name it lacks raises "
                f"minigrpc.grpc_alias.UnsupportedError when used)",
                NewerGeneratedCodeWarning,
                stacklevel=2,
            )
    return False


class UnsupportedError(NotImplementedError):
    """A grpcio name minigrpc does not implement was used; the message says which and why."""


class _UnknownNameError(UnsupportedError, AttributeError):
    """A name the alias's table lacks: an :class:`UnsupportedError` that names it, and an
    AttributeError, which is what ``hasattr`` and ``getattr`` with a default catch."""


def _unsupported_message(qualified_name: str, note: str) -> str:
    return f"{qualified_name} is not supported by minigrpc: {note}"


class _UnsupportedType(type):
    """Metaclass of the placeholders: a class can be named, subclassed and used in isinstance
    checks (no instance exists), but calling it or reading a missing attribute raises."""

    _qualified_name: str
    _note: str

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(_unsupported_message(cls._qualified_name, cls._note))

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedError(_unsupported_message(f"{cls._qualified_name}.{name}", cls._note))


def _placeholder(qualified_name: str, note: str) -> Any:
    short = qualified_name.rpartition(".")[2]
    return _UnsupportedType(
        short,
        (),
        {
            "__module__": qualified_name.rpartition(".")[0] or "grpc",
            "__doc__": _unsupported_message(qualified_name, note),
            "_qualified_name": qualified_name,
            "_note": note,
        },
    )


def _resolve(entry: ApiName) -> Any:
    """The object the alias serves for a supported name."""
    source = entry.source if entry.source is not None else entry.name.rpartition(".")[2]
    if entry.name.startswith("experimental."):
        return getattr(importlib.import_module(".experimental", __package__), source)
    return getattr(importlib.import_module(__package__), source)


_TOP_LEVEL: Dict[str, ApiName] = {
    entry.name: entry for entry in GRPCIO_NAMES if "." not in entry.name and entry.source != ""
}
_EXPERIMENTAL: Dict[str, ApiName] = {
    entry.name.partition(".")[2]: entry
    for entry in GRPCIO_NAMES
    if entry.name.startswith("experimental.") and entry.source != ""
}


class _GrpcModule(types.ModuleType):
    """The ``grpc`` module of the alias: grpcio's names, looked up lazily in minigrpc."""

    #: The names this module serves (``experimental.X`` entries are served by a subclass).
    _names: Dict[str, ApiName] = _TOP_LEVEL

    def __getattr__(self, name: str) -> Any:
        entry = self._names.get(name)
        if entry is None:
            if name.startswith("__"):  # what introspection probes (__file__, __wrapped__, ...)
                raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
            raise _UnknownNameError(
                _unsupported_message(
                    f"{self.__name__}.{name}",
                    f"not a name of grpcio {GRPCIO_VERSION}'s API that minigrpc serves "
                    "(minigrpc.grpc_alias.GRPCIO_NAMES)",
                )
            )
        if entry.supported:
            value = _resolve(entry)
        else:
            value = _placeholder(f"{self.__name__}.{name}", entry.note)
        setattr(self, name, value)
        return value

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self._names))


class _ExperimentalModule(_GrpcModule):
    """``grpc.experimental``: :mod:`minigrpc.experimental`'s functions, grpcio's other names."""

    _names = _EXPERIMENTAL


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Answers ``import grpc.<x>`` for submodules the alias does not have, with a clear error,
    instead of letting another finder look for them in grpcio's directory."""

    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]],
        target: Optional[types.ModuleType] = None,
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if not fullname.startswith("grpc."):
            return None
        if not isinstance(sys.modules.get("grpc"), _GrpcModule):
            return None
        raise ModuleNotFoundError(
            f"No module named {fullname!r}: minigrpc's grpc alias provides only grpc, "
            "grpc._utilities, grpc.experimental, grpc.aio and "
            + ", ".join(sorted(_PRIVATE_MODULES)),
            name=fullname,
        )


_ADDONS: Dict[str, AddonModule] = {entry.name: entry for entry in ADDON_MODULES}


class _AddonLoader(importlib.abc.Loader):
    """Serves a minigrpc module under an add-on module's name (an empty package where the
    table names none)."""

    def __init__(self, entry: AddonModule) -> None:
        self._entry = entry
        self._spec: Optional[importlib.machinery.ModuleSpec] = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        if self._entry.source is None:
            return None  # the default: an empty module, a package by its spec
        module = importlib.import_module(self._entry.source)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing runs (the minigrpc module is loaded); the import system has just given the
        module the add-on name's spec, and it gets its own back, so that it stays what it is."""
        if self._spec is not None:
            module.__spec__ = self._spec


def _is_stand_in(module: Optional[types.ModuleType]) -> bool:
    """True for a module :class:`_AddonFinder` served (minigrpc's, or an empty package)."""
    if module is None:
        return False
    loader = getattr(getattr(module, "__spec__", None), "loader", None)
    return isinstance(loader, _AddonLoader) or module.__name__.startswith("minigrpc.")


class _AddonFinder(importlib.abc.MetaPathFinder):
    """Answers ``import grpc_health.v1.health`` (and the other :data:`ADDON_MODULES`) with
    minigrpc's module, but only where the add-on package is not installed: it asks the other
    finders first, so an installed add-on (or an import hook that refuses one) decides."""

    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]],
        target: Optional[types.ModuleType] = None,
    ) -> Optional[importlib.machinery.ModuleSpec]:
        entry = _ADDONS.get(fullname)
        if entry is None:
            return None
        parent_name = fullname.rpartition(".")[0]
        if parent_name:
            if not _is_stand_in(sys.modules.get(parent_name)):
                return None  # the real add-on package is the parent
        elif self._installed(fullname):
            return None
        is_package = any(name.startswith(fullname + ".") for name in _ADDONS)
        return importlib.machinery.ModuleSpec(fullname, _AddonLoader(entry), is_package=is_package)

    def _installed(self, package: str) -> bool:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            try:
                if finder.find_spec(package, None) is not None:
                    return True
            except ImportError:
                return False  # a hook refuses it: not installed, as far as this process goes
        return False


# -- grpcio's modules beyond its API that code in the wild imports ---------------------------------


def _log_exceptions(behavior: Callable[..., Any]) -> Callable[..., Any]:
    def logged(*args: Any, **kwargs: Any) -> Any:
        try:
            return behavior(*args, **kwargs)
        except Exception:
            logging.getLogger("grpc").exception("%r raised in a logging pool", behavior)
            raise

    return logged


class _LoggingPool(concurrent.futures.ThreadPoolExecutor):
    """``grpc.framework.foundation.logging_pool.pool(n)``: a thread pool that logs what its
    tasks raise (grpcio's servers are often given one); ``map`` goes through ``submit``."""

    def submit(self, *args: Any, **kwargs: Any) -> Any:  # (fn, /, *args, **kwargs)
        return super().submit(_log_exceptions(args[0]), *args[1:], **kwargs)


def _logging_pool(max_workers: int) -> concurrent.futures.ThreadPoolExecutor:
    return _LoggingPool(max_workers)


#: grpcio modules outside ``grpc.__all__`` that code imports: name -> {attribute: (minigrpc
#: module, attribute)} (``None``: the value itself).  ``grpc._channel`` is where grpcio's error
#: and rendezvous classes live, which code catches by name; ``grpc._grpcio_metadata`` holds the
#: version; ``grpc.framework.foundation.logging_pool`` the thread pool grpcio's own tests and
#: examples give servers; ``grpc.experimental.session_cache`` the TLS session cache.
_AIO_CALL_CLASSES = ("UnaryUnaryCall", "UnaryStreamCall", "StreamUnaryCall", "StreamStreamCall")

_PRIVATE_MODULES: Dict[str, Dict[str, Tuple[Optional[str], Any]]] = {
    "grpc._channel": {
        "_USER_AGENT": ("protocol.headers", "USER_AGENT"),
        "_InactiveRpcError": ("blocking.call", "InactiveRpcError"),
        "_MultiThreadedRendezvous": ("blocking.call", "StreamingCall"),
        "_Rendezvous": ("blocking.call", "StreamingCall"),
        "Channel": ("blocking.channel", "Channel"),
    },
    "grpc._grpcio_metadata": {"__version__": (None, GRPCIO_VERSION)},
    "grpc.framework": {},
    "grpc.framework.foundation": {},
    "grpc.framework.foundation.logging_pool": {"pool": (None, _logging_pool)},
    "grpc.experimental.session_cache": {
        "ssl_session_cache_lru": ("net.tls", "ssl_session_cache_lru")
    },
    # grpcio's aio package keeps its classes in private modules that code (grpc's own tests
    # among it) imports them from: the metadata class and its type aliases, the error, the
    # calls, and the abstract classes (calls, channel, multi-callables, server, context).
    # (grpc._cython stays absent: its presence says grpcio is loaded.)
    "grpc.aio._metadata": {"Metadata": ("aio.metadata", "Metadata")},
    "grpc.aio._typing": {
        "MetadataKey": ("aio.metadata", "MetadataKey"),
        "MetadataValue": ("aio.metadata", "MetadataValue"),
        "MetadatumType": ("aio.metadata", "Metadatum"),
    },
    "grpc.aio._call": {
        "AioRpcError": ("aio.errors", "AioRpcError"),
        **{name: ("aio.call", name) for name in _AIO_CALL_CLASSES},
    },
    "grpc.aio._base_call": {
        name: ("aio.interfaces", name) for name in ("RpcContext", "Call", *_AIO_CALL_CLASSES)
    },
    "grpc.aio._base_channel": {
        name: ("aio.interfaces", name)
        for name in (
            "Channel",
            "UnaryUnaryMultiCallable",
            "UnaryStreamMultiCallable",
            "StreamUnaryMultiCallable",
            "StreamStreamMultiCallable",
        )
    },
    "grpc.aio._base_server": {
        name: ("aio.interfaces", name) for name in ("Server", "ServicerContext")
    },
}


class _LazyModule(types.ModuleType):
    """One of :data:`_PRIVATE_MODULES`: its attributes come from minigrpc on first use."""

    def __getattr__(self, name: str) -> Any:
        found = _PRIVATE_MODULES.get(self.__name__, {}).get(name)
        if found is None:
            raise AttributeError(f"module {self.__name__!r} (minigrpc's alias) has no {name!r}")
        module, attribute = found
        value = attribute
        if module is not None:
            value = getattr(importlib.import_module(f".{module}", __package__), attribute)
        setattr(self, name, value)
        return value


def _private_modules(
    grpc: types.ModuleType, experimental: types.ModuleType, aio: types.ModuleType
) -> Dict[str, types.ModuleType]:
    """:data:`_PRIVATE_MODULES` as modules, each set as an attribute of its parent."""
    modules: Dict[str, types.ModuleType] = {
        "grpc": grpc, "grpc.experimental": experimental, "grpc.aio": aio,
    }
    for name in sorted(_PRIVATE_MODULES):  # parents before children
        module = _new_module(_LazyModule, name, f"minigrpc's stand-in for grpcio's {name}.")
        parent, _, short = name.rpartition(".")
        # grpc.aio is minigrpc.aio itself: a stand-in never hides one of its own modules
        # (minigrpc.aio.call is not grpcio's), it is found by its grpc.aio name alone.
        own = modules[parent] is aio and importlib.util.find_spec(f"{aio.__name__}.{short}")
        if not own:
            setattr(modules[parent], short, module)
        modules[name] = module
    del modules["grpc"], modules["grpc.experimental"], modules["grpc.aio"]
    return modules


def _new_module(cls: type, name: str, doc: str) -> Any:
    module = cls(name, doc)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__path__ = []
    module.__package__ = name
    return module


def _build() -> Dict[str, types.ModuleType]:
    """The alias's modules, by the names they take in ``sys.modules``."""
    experimental = _new_module(
        _ExperimentalModule, "grpc.experimental", "grpcio's experimental API, on minigrpc."
    )
    experimental.__all__ = sorted(_EXPERIMENTAL)
    grpc = _new_module(
        _GrpcModule,
        "grpc",
        f"minigrpc's alias of grpcio {GRPCIO_VERSION}'s API (minigrpc.install_as_grpc()).",
    )
    grpc.__version__ = GRPCIO_VERSION
    grpc.__all__ = sorted(name for name in _TOP_LEVEL if not name.startswith("_"))
    utilities: Any = types.ModuleType("grpc._utilities", "grpcio's helpers for generated code.")
    utilities.__spec__ = importlib.machinery.ModuleSpec("grpc._utilities", None)
    utilities.__package__ = "grpc"
    # Generated code's version check, answered by what minigrpc implements.
    utilities.first_version_is_lower = _runtime_version_check
    # The asyncio API is minigrpc.aio itself (its names load on first use).
    aio = importlib.import_module("minigrpc.aio")
    experimental.aio = aio
    grpc._utilities = utilities
    grpc.experimental = experimental
    grpc.aio = aio
    return {
        "grpc": grpc,
        "grpc._utilities": utilities,
        "grpc.experimental": experimental,
        "grpc.experimental.aio": aio,
        "grpc.aio": aio,
        **_private_modules(grpc, experimental, aio),
    }


def install_as_grpc() -> types.ModuleType:
    """Make ``import grpc`` give minigrpc's alias of grpcio's API; returns that module.

    Call it before anything imports ``grpc``.  RuntimeError if another ``grpc`` (grpcio) is
    already imported; a second call returns the same module.
    """
    current = sys.modules.get("grpc")
    if isinstance(current, _GrpcModule):
        return current
    if current is not None:
        origin = getattr(current, "__file__", None) or repr(current)
        version = getattr(current, "__version__", "unknown version")
        raise RuntimeError(
            f"minigrpc.install_as_grpc(): a grpc module is already imported ({origin}, "
            f"{version}); call it before the first `import grpc`, or keep using that grpc"
        )
    modules = _build()
    # grpcio gives its "grpc" logger a NullHandler, the library convention (logging HOWTO,
    # "Configuring Logging for a Library"): nothing is printed until the application configures
    # logging, and code that inspects that logger finds it.
    grpc_logger = logging.getLogger("grpc")
    if not any(isinstance(handler, logging.NullHandler) for handler in grpc_logger.handlers):
        grpc_logger.addHandler(logging.NullHandler())
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
    if not any(isinstance(finder, _AddonFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AddonFinder())
    sys.modules.update(modules)
    return modules["grpc"]


def compatibility_markdown() -> str:
    """The README's table of grpcio's names, rendered from :data:`GRPCIO_NAMES`."""
    lines = [
        f"minigrpc answers `grpc.__version__` = `{GRPCIO_VERSION}`. Source: "
        "`minigrpc.grpc_alias.GRPCIO_NAMES`.",
        "",
        "| grpcio name | on minigrpc | notes |",
        "|---|---|---|",
    ]
    for entry in GRPCIO_NAMES:
        name = f"`grpc.{entry.name}`"
        if entry.supported:
            provided = "yes"
            if entry.source:
                provided += f" (`minigrpc.{entry.source}`)"
        else:
            provided = "no"
        lines.append(f"| {name} | {provided} | {entry.note} |")
    lines += [
        "",
        "grpcio's add-on modules, where their packages are not installed (after "
        "`install_as_grpc()`). Source: `minigrpc.grpc_alias.ADDON_MODULES`.",
        "",
        "| add-on module | on minigrpc | notes |",
        "|---|---|---|",
    ]
    for addon in ADDON_MODULES:
        provided = f"`{addon.source}`" if addon.source else "a package of the modules below"
        lines.append(f"| `{addon.name}` | {provided} | {addon.note} |")
    return "\n".join(lines) + "\n"
