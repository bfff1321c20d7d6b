"""Code generated for grpcio, run on ``minigrpc.install_as_grpc()`` in a process without grpcio.

Run it explicitly (the name keeps it out of the normal collection, because it must own the
``grpc`` module of its process):

* ``tox -e nogrpcio``: a venv with minigrpc, pytest, protobuf and h2 and no grpcio, plus
  grpcio-health-checking and grpcio-status installed with ``--no-deps``;
* ``tests/interop/test_grpc_alias.py``, in the normal suite: a subprocess running this file with
  ``-p tests.support.block_grpcio``, which makes grpcio unimportable although it is installed.

For every grpcio-tools release in ``tests/generated_stubs/``, and for the output of the
grpcio-tools installed when it runs (the newest release, where tox made the venv: ``newest``),
it imports the generated modules, builds their stubs on a minigrpc channel, registers their
``add_*Servicer_to_server`` on a minigrpc server, and makes real calls, through the stubs and
through the generated "experimental" static methods.

All four call shapes run, client and server both minigrpc; the client half of a server stream
is also checked against a scripted HTTP/2 peer, so that a client fault is told from a server one.
"""

import atexit
import base64
import functools
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from concurrent import futures
from pathlib import Path
from typing import Any, Iterator, List, NamedTuple, Tuple

import pytest

import minigrpc
from minigrpc import grpc_alias

grpc = minigrpc.install_as_grpc()

from cni_client import cni_pb2  # noqa: E402
from tests.interop import empty_pb2, messages_pb2  # noqa: E402
from tests.interop.servicer import TestServiceServicer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STUBS_DIR = ROOT / "tests" / "generated_stubs"
VERSIONS = sorted(
    (path.name for path in STUBS_DIR.iterdir() if (path / "__init__.py").exists()),
    key=lambda name: tuple(int(part) for part in name[1:].split("_")),
)
#: The stubs the installed grpcio-tools generates when the suite runs (:func:`_newest`).
NEWEST = "newest"
#: Every set of stubs the calls below run through.
PACKAGES = [*VERSIONS, NEWEST]
CNI_SERVICE = "antrea_io.antrea.pkg.apis.cni.v1beta1.Cni"

#: Set by the ``nogrpcio`` tox env, where every package the suite can use is installed: a test
#: that would skip for want of one (grpcio-tools, an add-on) fails instead.
REQUIRE_ALL = os.environ.get("MINIGRPC_TEST_REQUIRE_ALL") == "1"


def _skip_or_fail(reason: str) -> None:
    if REQUIRE_ALL:
        pytest.fail(f"{reason} (MINIGRPC_TEST_REQUIRE_ALL=1: it must be installed here)")
    pytest.skip(reason)


class Newest(NamedTuple):
    """The installed grpcio-tools' output: its package, release, and what importing it warned."""

    package: str
    version: str
    caught: List[warnings.WarningMessage]


@functools.lru_cache(maxsize=None)
def _generate_newest() -> Newest:
    """Run the installed grpcio-tools' protoc (in a child process: this one must not import
    grpc_tools) on the suite's protos, rewritten as tools/generate_stubs.py rewrites the
    committed ones, into a temporary package; import it once, recording its warnings."""
    try:
        from importlib import metadata
    except ImportError:  # Python 3.7
        import importlib_metadata as metadata  # type: ignore[no-redef]
    try:
        version = metadata.version("grpcio-tools")
    except metadata.PackageNotFoundError:
        raise LookupError("grpcio-tools is not installed") from None
    spec = importlib.util.spec_from_file_location(
        "generate_stubs", ROOT / "tools" / "generate_stubs.py"
    )
    assert spec is not None and spec.loader is not None
    generate_stubs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate_stubs)
    where = Path(tempfile.mkdtemp(prefix="minigrpc-newest-stubs-"))
    atexit.register(shutil.rmtree, where, True)
    package = "newest_grpcio_tools_stubs"
    try:
        generate_stubs.write_stubs(sys.executable, where / package, version)
    except subprocess.CalledProcessError as exc:
        raise LookupError(f"grpcio-tools {version}'s protoc failed: {exc}") from None
    sys.path.insert(0, str(where))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for module in ("test_pb2_grpc", "cni_pb2_grpc"):
            importlib.import_module(f"{package}.{module}")
    return Newest(package, version, list(caught))


def _newest() -> Newest:
    try:
        return _generate_newest()
    except LookupError as exc:
        _skip_or_fail(f"no stubs of the installed grpcio-tools: {exc}")
        raise


def _version(package: str) -> str:
    if package == NEWEST:
        return _newest().version
    return package[1:].replace("_", ".")


def _stubs(package: str) -> Tuple[Any, Any]:
    base = _newest().package if package == NEWEST else f"tests.generated_stubs.{package}"
    return (
        importlib.import_module(f"{base}.test_pb2_grpc"),
        importlib.import_module(f"{base}.cni_pb2_grpc"),
    )


class CniServicer:
    """Made per version from that version's generated ``CniServicer`` (CmdDel left out)."""

    @staticmethod
    def for_module(module: Any) -> Any:
        class Servicer(module.CniServicer):  # type: ignore[misc,name-defined]
            def CmdAdd(self, request: Any, context: Any) -> Any:
                result = f"added {request.cni_args.container_id}".encode()
                return cni_pb2.CniCmdResponse(cni_result=result)

        return Servicer()


@pytest.fixture(scope="module", params=PACKAGES)
def served(request: pytest.FixtureRequest) -> Iterator[Tuple[str, Any, Any, str]]:
    """(version, test_pb2_grpc, cni_pb2_grpc, target) with both services on a minigrpc server
    registered by that version's ``add_*Servicer_to_server``."""
    test_grpc, cni_grpc = _stubs(request.param)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    # The interop servicer, on that version's generated base class (which answers the methods it
    # leaves out, UnimplementedCall, with UNIMPLEMENTED), as an application would write it.
    servicer_class = type("Servicer", (TestServiceServicer, test_grpc.TestServiceServicer), {})
    test_grpc.add_TestServiceServicer_to_server(servicer_class(), server)
    test_grpc.add_UnimplementedServiceServicer_to_server(
        test_grpc.UnimplementedServiceServicer(), server
    )
    cni_grpc.add_CniServicer_to_server(CniServicer.for_module(cni_grpc), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield request.param, test_grpc, cni_grpc, f"127.0.0.1:{port}"
    finally:
        server.stop(None).wait(10)


# -- the alias itself -------------------------------------------------------------------------


def test_import_grpc_gives_the_alias_not_grpcio() -> None:
    import grpc as imported

    assert imported is grpc is sys.modules["grpc"]
    assert imported.insecure_channel is minigrpc.insecure_channel
    assert imported.server is minigrpc.server
    assert imported.RpcError is minigrpc.RpcError
    assert imported.Future is minigrpc.Future
    assert imported.RpcMethodHandler is minigrpc.RpcMethodHandler
    assert not any(name == "grpc._cython" or name.startswith("grpc_tools") for name in sys.modules)
    assert minigrpc.install_as_grpc() is imported  # idempotent


def test_version_answered_is_the_newest_generated_code_the_suite_holds() -> None:
    assert grpc.__version__ == grpc_alias.GRPCIO_VERSION == _version(VERSIONS[-1])
    majors = sorted({int(_version(package).split(".")[0]) for package in VERSIONS})
    assert list(grpc_alias.GENERATED_CODE_MAJORS) == majors


def test_generated_codes_version_check_is_answered_by_what_minigrpc_implements() -> None:
    """``first_version_is_lower(grpc.__version__, release)``, generated code's question, is
    False for every release of a major version whose template the suite runs, newer ones
    included, and True for another major version; other comparisons are grpcio's."""
    from grpc._utilities import first_version_is_lower

    for package in VERSIONS:
        assert first_version_is_lower(grpc.__version__, _version(package)) is False, package
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert first_version_is_lower(grpc.__version__, "1.999.0") is False
        assert first_version_is_lower(grpc.__version__, "1.999.0") is False
    assert [w.category for w in caught] == [grpc_alias.NewerGeneratedCodeWarning]
    assert first_version_is_lower(grpc.__version__, "2.0.0") is True
    assert first_version_is_lower(grpc.__version__, "0.9.0") is True
    assert first_version_is_lower(grpc.__version__, "dev") is False  # grpcio: never lower
    assert first_version_is_lower("1.64.3", "1.85.1") is True
    assert first_version_is_lower("1.85.1", "1.64.3") is False


@pytest.mark.parametrize(
    ("first", "second", "lower"),
    [
        ("1.64.3", "1.85.1", True),
        ("1.85.1", "1.85.1", False),
        ("1.85.1", "1.64.3", False),
        ("1.9.0", "1.10.0", True),  # numbers, not strings
        ("2.0.0", "1.99.99", False),
        ("1.60.1", "1.60.1.dev0", True),  # grpcio: fewer parts is lower on a tie
        ("1.60.1.dev0", "1.60.1", False),
        ("dev0", "1.60.1", False),  # unparsable: never lower
        ("1.60", "1.60.1", False),
    ],
)
def test_first_version_is_lower_answers_as_grpcio(first: str, second: str, lower: bool) -> None:
    assert grpc_alias.first_version_is_lower(first, second) is lower


def _generated_as(version: str, module: str = "cni_pb2_grpc.py") -> str:
    """The newest committed output of ``module`` as if ``version`` had generated it."""
    source = (STUBS_DIR / VERSIONS[-1] / module).read_text(encoding="utf-8")
    changed = source.replace(
        f"GRPC_GENERATED_VERSION = '{grpc.__version__}'", f"GRPC_GENERATED_VERSION = '{version}'"
    )
    assert changed != source
    return changed


def _load(source: str, name: str) -> Any:
    module: Any = type(sys)(name)
    # A warning names the file from the module's __file__ on older Pythons (3.7), from the
    # code's file name on newer ones: both say the same.
    module.__file__ = f"{name}.py"
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def test_generated_code_from_a_newer_release_loads_with_one_warning_naming_both_versions() -> None:
    """A grpcio-tools release newer than any the suite holds (the day it ships): its modules
    load and run, and the first one warns once, naming both releases."""
    major, minor, _ = grpc.__version__.split(".")
    newer = f"{major}.{int(minor) + 1}.0"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cni_grpc = _load(_generated_as(newer), "newer_cni_pb2_grpc")
        _load(_generated_as(newer, "test_pb2_grpc.py"), "newer_test_pb2_grpc")
    assert [(w.category, w.filename) for w in caught] == [
        (grpc_alias.NewerGeneratedCodeWarning, "newer_cni_pb2_grpc.py")
    ]
    message = str(caught[0].message)
    assert f"newer_cni_pb2_grpc was generated by grpcio-tools {newer}, newer than " in message
    assert grpc.__version__ in message
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    cni_grpc.add_CniServicer_to_server(CniServicer.for_module(cni_grpc), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            request = cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(container_id=newer))
            reply = cni_grpc.CniStub(channel).CmdAdd(request, timeout=10)
    finally:
        server.stop(None).wait(10)
    assert reply.cni_result == f"added {newer}".encode()


def test_newer_generated_code_that_needs_a_name_minigrpc_lacks_fails_naming_it() -> None:
    source = _generated_as("1.998.0").replace(
        "grpc.method_handlers_generic_handler(", "grpc.method_handlers_generic_handler_v2("
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", grpc_alias.NewerGeneratedCodeWarning)
        cni_grpc = _load(source, "needs_more_pb2_grpc")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    with pytest.raises(
        grpc_alias.UnsupportedError,
        match=r"^grpc\.method_handlers_generic_handler_v2 is not supported by minigrpc: ",
    ):
        cni_grpc.add_CniServicer_to_server(cni_grpc.CniServicer(), server)
    # Still an AttributeError, for code that asks first.
    assert not hasattr(grpc, "method_handlers_generic_handler_v2")
    assert getattr(grpc.experimental, "new_thing", None) is None
    with pytest.raises(AttributeError, match="__wrapped__"):
        grpc.__wrapped__  # noqa: B018


def test_generated_code_from_another_major_version_is_refused_with_grpcios_message() -> None:
    with pytest.raises(RuntimeError, match=r"depends on grpcio>=2\.0\.0"):
        _load(_generated_as("2.0.0"), "next_major_pb2_grpc")


def test_the_installed_grpcio_tools_output_warns_only_if_newer_than_the_suites() -> None:
    newest = _newest()
    if grpc_alias.first_version_is_lower(grpc.__version__, newest.version):
        assert [w.category for w in newest.caught] == [grpc_alias.NewerGeneratedCodeWarning]
        assert newest.version in str(newest.caught[0].message)
        assert grpc.__version__ in str(newest.caught[0].message)
    else:
        assert [str(w.message) for w in newest.caught] == []


def test_every_supported_name_is_minigrpcs_and_every_other_raises_naming_itself() -> None:
    for entry in grpc_alias.GRPCIO_NAMES:
        if entry.source == "":
            continue
        module_name, _, name = entry.name.rpartition(".")
        module = grpc.experimental if module_name == "experimental" else grpc
        value = getattr(module, name)
        qualified = f"grpc.{entry.name}"
        if entry.supported:
            assert value is grpc_alias._resolve(entry), qualified
            continue
        with pytest.raises(grpc_alias.UnsupportedError, match=f"^{qualified} is not supported"):
            value()
        assert not isinstance(object(), value)


def test_unsupported_names_still_work_as_base_classes_and_annotations() -> None:
    class Credentials(grpc.alts_server_credentials):  # type: ignore[misc,name-defined]
        pass

    def server(credentials: grpc.xds_server_credentials) -> None:  # type: ignore[name-defined]
        pass

    assert server.__annotations__["credentials"] is grpc.xds_server_credentials
    with pytest.raises(NotImplementedError, match=r"^grpc\.alts_server_credentials is not"):
        Credentials()
    with pytest.raises(NotImplementedError, match=r"grpc\.xds_server_credentials\.fallback is not"):
        _ = grpc.xds_server_credentials.fallback


def test_grpc_aio_is_minigrpc_aio_and_other_submodules_do_not_import() -> None:
    import grpc.aio
    from grpc.experimental import aio

    import minigrpc.aio

    assert aio is grpc.aio is minigrpc.aio
    assert grpc.aio.insecure_channel is minigrpc.aio.insecure_channel
    # grpcio's private modules of the abstract classes, which code imports them from.
    from grpc.aio import _base_call, _base_channel, _base_server

    for module, names in (
        (_base_call, ("RpcContext", "Call", "UnaryUnaryCall", "StreamStreamCall")),
        (_base_channel, ("Channel", "UnaryUnaryMultiCallable", "StreamStreamMultiCallable")),
        (_base_server, ("Server", "ServicerContext")),
    ):
        for name in names:
            assert getattr(module, name) is getattr(minigrpc.aio, name), name
    with pytest.raises(ModuleNotFoundError, match=r"'grpc\.channelz'"):
        importlib.import_module("grpc.channelz")


def test_grpcios_other_modules_that_code_imports(caplog: pytest.LogCaptureFixture) -> None:
    """``grpc._channel`` (whose error classes code catches by name), ``grpc._grpcio_metadata``
    and ``grpc.framework.foundation.logging_pool``, as grpcio's own tests use them, and
    ``grpc.experimental.session_cache``, whose cache the ``grpc.ssl_session_cache`` option
    takes (tests/interop/test_grpcio_credentials.py resumes sessions with it)."""
    import logging

    from grpc import _channel, _grpcio_metadata
    from grpc.experimental import session_cache
    from grpc.framework.foundation import logging_pool

    from minigrpc.net.tls import SSLSessionCache, ssl_session_cache_lru

    assert session_cache.ssl_session_cache_lru is ssl_session_cache_lru
    assert isinstance(session_cache.ssl_session_cache_lru(1), SSLSessionCache)

    assert _grpcio_metadata.__version__ == grpc.__version__
    assert _channel._USER_AGENT.startswith("grpc-python")
    with grpc.insecure_channel("unix-abstract:minigrpc-nobody-listens-here") as channel:
        with pytest.raises(_channel._InactiveRpcError) as unary:
            channel.unary_unary("/a.B/C")(b"", timeout=10)
        with pytest.raises(_channel._MultiThreadedRendezvous) as stream:
            next(channel.unary_stream("/a.B/C")(b"", timeout=10))
    assert unary.value.code() is stream.value.code() is grpc.StatusCode.UNAVAILABLE
    pool = logging_pool.pool(2)
    try:
        with caplog.at_level(logging.ERROR, logger="grpc"):
            with pytest.raises(ZeroDivisionError):
                pool.submit(lambda: 1 // 0).result(timeout=10)
            assert list(pool.map(abs, [-1, -2])) == [1, 2]
    finally:
        pool.shutdown()
    assert "ZeroDivisionError" in caplog.text


# -- generated modules of every release -----------------------------------------------------


@pytest.mark.parametrize("package", VERSIONS)
def test_generated_modules_import_without_a_version_warning(package: str) -> None:
    names = [f"tests.generated_stubs.{package}.{m}" for m in ("test_pb2_grpc", "cni_pb2_grpc")]
    for name in names:
        sys.modules.pop(name, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        modules = [importlib.import_module(name) for name in names]
    assert [str(w.message) for w in caught] == []
    for module in modules:
        assert module.grpc is grpc


def test_unary_calls_through_generated_stubs(served: Tuple[str, Any, Any, str]) -> None:
    version, test_grpc, cni_grpc, target = served
    with grpc.insecure_channel(target) as channel:
        stub = test_grpc.TestServiceStub(channel)
        assert stub.EmptyCall(empty_pb2.Empty(), timeout=10) == empty_pb2.Empty()
        reply = stub.UnaryCall(messages_pb2.SimpleRequest(response_size=7), timeout=10)
        assert reply.payload.body == bytes(7)
        reply, call = stub.UnaryCall.with_call(
            messages_pb2.SimpleRequest(response_size=2), timeout=10
        )
        assert call.code() == grpc.StatusCode.OK and reply.payload.body == bytes(2)
        assert stub.EmptyCall.future(empty_pb2.Empty(), timeout=10).result() == empty_pb2.Empty()

        with pytest.raises(grpc.RpcError) as missing:
            stub.UnimplementedCall(empty_pb2.Empty(), timeout=10)
        assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert missing.value.details() == "Method not implemented!"

        # The generated servicer base class: set_code(UNIMPLEMENTED) then NotImplementedError.
        other = test_grpc.UnimplementedServiceStub(channel)
        with pytest.raises(grpc.RpcError) as base:
            other.UnimplementedCall(empty_pb2.Empty(), timeout=10)
        assert base.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert base.value.details() == "Method not implemented!"

        cni = cni_grpc.CniStub(channel)
        request = cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(container_id=version))
        assert cni.CmdAdd(request, timeout=10).cni_result == f"added {version}".encode()
        with pytest.raises(grpc.RpcError) as unimplemented:
            cni.CmdDel(request, timeout=10)
        assert unimplemented.value.code() == grpc.StatusCode.UNIMPLEMENTED


def _output_request(*sizes: int) -> Any:
    return messages_pb2.StreamingOutputCallRequest(
        response_parameters=[messages_pb2.ResponseParameters(size=size) for size in sizes]
    )


def _input_requests(*sizes: int) -> Iterator[Any]:
    for size in sizes:
        yield messages_pb2.StreamingInputCallRequest(payload=messages_pb2.Payload(body=bytes(size)))


def _sizes(responses: Any) -> List[int]:
    return [len(response.payload.body) for response in responses]


def test_streaming_calls_through_generated_stubs(served: Tuple[str, Any, Any, str]) -> None:
    _, test_grpc, _, target = served
    with grpc.insecure_channel(target) as channel:
        stub = test_grpc.TestServiceStub(channel)
        client_stream = stub.StreamingInputCall(_input_requests(3, 4), timeout=10)
        assert client_stream.aggregated_payload_size == 7
        server_stream = _sizes(stub.StreamingOutputCall(_output_request(1, 2, 3), timeout=10))
        assert server_stream == [1, 2, 3]
        both = _sizes(
            stub.FullDuplexCall(iter([_output_request(5), _output_request(6)]), timeout=10)
        )
        assert both == [5, 6]


def test_generated_stubs_on_an_asyncio_channel(served: Tuple[str, Any, Any, str]) -> None:
    """The same generated stubs, unchanged, with ``grpc.aio.insecure_channel``."""
    import asyncio

    version, test_grpc, cni_grpc, target = served

    async def main() -> None:
        async with grpc.aio.insecure_channel(target) as channel:
            stub = test_grpc.TestServiceStub(channel)
            assert await stub.EmptyCall(empty_pb2.Empty(), timeout=10) == empty_pb2.Empty()
            reply = await stub.UnaryCall(messages_pb2.SimpleRequest(response_size=7), timeout=10)
            assert reply.payload.body == bytes(7)
            client_stream = await stub.StreamingInputCall(_input_requests(3, 4), timeout=10)
            assert client_stream.aggregated_payload_size == 7
            call = stub.StreamingOutputCall(_output_request(1, 2, 3), timeout=10)
            assert [len(r.payload.body) async for r in call] == [1, 2, 3]
            both = stub.FullDuplexCall(iter([_output_request(5), _output_request(6)]))
            assert [len(r.payload.body) async for r in both] == [5, 6]
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await stub.UnimplementedCall(empty_pb2.Empty(), timeout=10)
            assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
            cni = cni_grpc.CniStub(channel)
            request = cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(container_id=version))
            assert (await cni.CmdAdd(request, timeout=10)).cni_result == f"added {version}".encode()

    asyncio.run(main())


def _async_servicers(test_grpc: Any, cni_grpc: Any) -> Tuple[Any, Any]:
    """``async def`` servicers on the version's generated base classes, as a ``grpc.aio``
    application writes them (UnimplementedCall is left to the generated base class)."""

    class AsyncTestService(test_grpc.TestServiceServicer):  # type: ignore[misc,name-defined]
        async def EmptyCall(self, request: Any, context: Any) -> Any:
            return empty_pb2.Empty()

        async def UnaryCall(self, request: Any, context: Any) -> Any:
            if request.response_status.code:
                await context.abort(grpc.StatusCode.NOT_FOUND, request.response_status.message)
            body = bytes(request.response_size)
            return messages_pb2.SimpleResponse(payload=messages_pb2.Payload(body=body))

        async def StreamingOutputCall(self, request: Any, context: Any) -> Any:
            for parameters in request.response_parameters:
                body = bytes(parameters.size)
                yield messages_pb2.StreamingOutputCallResponse(
                    payload=messages_pb2.Payload(body=body)
                )

        async def StreamingInputCall(self, request_iterator: Any, context: Any) -> Any:
            size = 0
            async for request in request_iterator:
                size += len(request.payload.body)
            return messages_pb2.StreamingInputCallResponse(aggregated_payload_size=size)

        async def FullDuplexCall(self, request_iterator: Any, context: Any) -> None:
            while True:
                request = await context.read()
                if request is grpc.aio.EOF:
                    return
                for parameters in request.response_parameters:
                    body = bytes(parameters.size)
                    await context.write(
                        messages_pb2.StreamingOutputCallResponse(
                            payload=messages_pb2.Payload(body=body)
                        )
                    )

    class AsyncCni(cni_grpc.CniServicer):  # type: ignore[misc,name-defined]
        async def CmdAdd(self, request: Any, context: Any) -> Any:
            result = f"added {request.cni_args.container_id}".encode()
            return cni_pb2.CniCmdResponse(cni_result=result)

    return AsyncTestService(), AsyncCni()


@pytest.mark.parametrize("package", PACKAGES)
def test_async_servicers_on_a_grpc_aio_server(package: str) -> None:
    """Generated ``add_*Servicer_to_server`` on ``grpc.aio.server()`` with ``async def``
    servicer methods, called through the generated stubs on asyncio and blocking channels."""
    import asyncio

    test_grpc, cni_grpc = _stubs(package)
    version = _version(package)

    async def main() -> None:
        server = grpc.aio.server()
        servicer, cni_servicer = _async_servicers(test_grpc, cni_grpc)
        test_grpc.add_TestServiceServicer_to_server(servicer, server)
        cni_grpc.add_CniServicer_to_server(cni_servicer, server)
        target = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                stub = test_grpc.TestServiceStub(channel)
                assert await stub.EmptyCall(empty_pb2.Empty(), timeout=10) == empty_pb2.Empty()
                reply = await stub.UnaryCall(messages_pb2.SimpleRequest(response_size=7))
                assert reply.payload.body == bytes(7)
                failing = messages_pb2.SimpleRequest(
                    response_status=messages_pb2.EchoStatus(code=5, message="gone")
                )
                with pytest.raises(grpc.aio.AioRpcError) as aborted:
                    await stub.UnaryCall(failing, timeout=10)
                assert aborted.value.code() == grpc.StatusCode.NOT_FOUND
                assert aborted.value.details() == "gone"
                total = await stub.StreamingInputCall(_input_requests(3, 4), timeout=10)
                assert total.aggregated_payload_size == 7
                call = stub.StreamingOutputCall(_output_request(1, 2, 3), timeout=10)
                assert [len(r.payload.body) async for r in call] == [1, 2, 3]
                both = stub.FullDuplexCall(iter([_output_request(5, 1), _output_request(6)]))
                assert [len(r.payload.body) async for r in both] == [5, 1, 6]
                with pytest.raises(grpc.aio.AioRpcError) as missing:
                    await stub.UnimplementedCall(empty_pb2.Empty(), timeout=10)
                assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
                request = cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(container_id=version))
                added = await cni_grpc.CniStub(channel).CmdAdd(request, timeout=10)
                assert added.cni_result == f"added {version}".encode()

            def blocking_calls() -> List[int]:
                with grpc.insecure_channel(target) as channel:
                    stub = test_grpc.TestServiceStub(channel)
                    return _sizes(stub.StreamingOutputCall(_output_request(4, 2), timeout=10))

            sizes = await asyncio.get_running_loop().run_in_executor(None, blocking_calls)
            assert sizes == [4, 2]
        finally:
            await server.stop(None)

    asyncio.run(main())


@pytest.mark.parametrize("package", PACKAGES)
def test_server_stream_through_generated_stub_and_static_call_from_an_h2_peer(
    package: str,
) -> None:
    """The client half of a server stream alone: a scripted HTTP/2 peer answers
    StreamingOutputCall with the messages the request asks for."""
    from minigrpc.protocol import wire
    from tests.support.scripted_peer import ScriptedServer

    test_grpc, _ = _stubs(package)

    def answer(request: Any) -> None:
        asked = messages_pb2.StreamingOutputCallRequest.FromString(request.message)
        request.respond_raw(
            b"".join(
                wire.encode_message(
                    messages_pb2.StreamingOutputCallResponse(
                        payload=messages_pb2.Payload(body=bytes(parameters.size))
                    ).SerializeToString()
                )
                for parameters in asked.response_parameters
            )
        )

    with ScriptedServer.h2(answer) as server:
        with grpc.insecure_channel(server.target) as channel:
            stub = test_grpc.TestServiceStub(channel)
            responses = stub.StreamingOutputCall(_output_request(3, 0, 2), timeout=10)
            assert _sizes(responses) == [3, 0, 2]
        static = test_grpc.TestService.StreamingOutputCall(
            _output_request(1, 4), server.target, insecure=True, timeout=10
        )
        assert _sizes(static) == [1, 4]
        assert [r.path for r in server.requests] == [
            "/grpc.testing.TestService/StreamingOutputCall"
        ] * 2


def test_experimental_static_unary_calls(served: Tuple[str, Any, Any, str]) -> None:
    _, test_grpc, cni_grpc, target = served
    service = test_grpc.TestService
    assert service.EmptyCall(empty_pb2.Empty(), target, insecure=True, timeout=10) == (
        empty_pb2.Empty()
    )
    reply = service.UnaryCall(
        messages_pb2.SimpleRequest(response_size=3), target, insecure=True, timeout=10
    )
    assert reply.payload.body == bytes(3)
    request = cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(container_id="static"))
    credentials = grpc.experimental.insecure_channel_credentials()
    reply = cni_grpc.Cni.CmdAdd(request, target, channel_credentials=credentials, timeout=10)
    assert reply.cni_result == b"added static"
    with pytest.raises(grpc.RpcError) as unimplemented:
        cni_grpc.Cni.CmdDel(request, target, insecure=True, timeout=10)
    assert unimplemented.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_experimental_static_streaming_calls(served: Tuple[str, Any, Any, str]) -> None:
    _, test_grpc, _, target = served
    service = test_grpc.TestService
    total = service.StreamingInputCall(_input_requests(2, 2), target, insecure=True, timeout=10)
    assert total.aggregated_payload_size == 4
    sizes = _sizes(
        service.StreamingOutputCall(_output_request(4, 1), target, insecure=True, timeout=10)
    )
    assert sizes == [4, 1]
    echoed = _sizes(
        service.FullDuplexCall(iter([_output_request(2)]), target, insecure=True, timeout=10)
    )
    assert echoed == [2]


def test_experimental_calls_share_one_cached_channel_per_target(
    served: Tuple[str, Any, Any, str],
) -> None:
    _, _, cni_grpc, target = served
    from minigrpc import experimental

    request = cni_pb2.CniCmdRequest(cni_args=cni_pb2.CniCmdArgs(container_id="cached"))
    experimental._CACHE.close()
    for _ in range(3):
        cni_grpc.Cni.CmdAdd(request, target, insecure=True, timeout=10)
    assert len(experimental._CACHE._channels) == 1
    options = [("grpc.primary_user_agent", "x")]
    cni_grpc.Cni.CmdAdd(request, target, options=options, insecure=True, timeout=10)
    assert len(experimental._CACHE._channels) == 2
    experimental._CACHE.close()


def test_experimental_calls_refuse_insecure_with_credentials_in_grpcios_words() -> None:
    _, cni_grpc = _stubs(VERSIONS[-1])
    credentials = grpc.ssl_channel_credentials()
    with pytest.raises(ValueError, match="insecure option is mutually exclusive"):
        cni_grpc.Cni.CmdAdd(
            cni_pb2.CniCmdRequest(), "127.0.0.1:1", insecure=True, channel_credentials=credentials
        )


@pytest.fixture(scope="module")
def certs() -> Any:
    from tests.support.tls_certs import make_certificates

    made = make_certificates()
    if made is None:
        pytest.skip("the openssl command is not installed")
    return made


def test_experimental_static_calls_over_tls_with_a_plugin_subclass(certs: Any) -> None:
    """Generated static calls with ``channel_credentials`` and ``call_credentials`` built from
    grpcio's names on the alias, a ``grpc.AuthMetadataPlugin`` subclass included."""
    _, cni_grpc = _stubs(VERSIONS[-1])
    seen: List[Any] = []

    class Cni(cni_grpc.CniServicer):  # type: ignore[misc,name-defined]
        def CmdAdd(self, request: Any, context: Any) -> Any:
            seen.append(dict(context.invocation_metadata()).get("x-method"))
            return cni_pb2.CniCmdResponse(cni_result=b"secure")

    class MethodPlugin(grpc.AuthMetadataPlugin):  # type: ignore[misc,name-defined]
        def __call__(self, context: Any, callback: Any) -> None:
            callback((("x-method", context.method_name),), None)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    cni_grpc.add_CniServicer_to_server(Cni(), server)
    credentials = grpc.ssl_server_credentials([(certs.server_key, certs.server_chain)])
    target = f"127.0.0.1:{server.add_secure_port('127.0.0.1:0', credentials)}"
    server.start()
    request = cni_pb2.CniCmdRequest()
    try:
        reply = cni_grpc.Cni.CmdAdd(
            request,
            target,
            channel_credentials=grpc.ssl_channel_credentials(root_certificates=certs.ca),
            call_credentials=grpc.metadata_call_credentials(MethodPlugin()),
            timeout=10,
        )
        assert reply.cni_result == b"secure" and seen == ["CmdAdd"]
        # Neither insecure=True nor credentials: grpcio's default, TLS with the system's roots,
        # which do not trust the test CA.
        with pytest.raises(grpc.RpcError) as untrusted:
            cni_grpc.Cni.CmdAdd(request, target, wait_for_ready=False, timeout=10)
        assert untrusted.value.code() == grpc.StatusCode.UNAVAILABLE
        assert seen == ["CmdAdd"]
    finally:
        server.stop(None).wait(10)


def test_experimental_call_credentials_need_a_secure_channel(
    served: Tuple[str, Any, Any, str],
) -> None:
    _, _, cni_grpc, target = served
    with pytest.raises(ValueError, match="Call credentials are only valid on secure channels"):
        cni_grpc.Cni.CmdAdd(
            cni_pb2.CniCmdRequest(), target, insecure=True, call_credentials=object(), timeout=5
        )


# -- grpcio's pure-Python add-ons -------------------------------------------------------------


def _addon(distribution_module: str, messages_module: str) -> None:
    """Skip when the add-on is not installed, or its *messages* need a newer protobuf (the
    ``oldest`` tox env); the module that imports grpc must then load, whatever happens."""
    if importlib.util.find_spec(distribution_module) is None:
        _skip_or_fail(f"{distribution_module} is not installed")
    try:
        messages = importlib.import_module(messages_module)
    except ImportError as exc:
        pytest.skip(f"{messages_module} does not load on this protobuf: {exc}")
    if messages.__name__ != messages_module:  # minigrpc's stand-in answers the add-on's name
        pytest.skip(f"{distribution_module} is not installed (minigrpc's add-on stands in)")


@pytest.fixture()
def health_target() -> Iterator[Tuple[Any, Any, str, Any]]:
    _addon("grpc_health", "grpc_health.v1.health_pb2")
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    servicer = health.HealthServicer()
    servicer.set("minigrpc.Test", health_pb2.HealthCheckResponse.NOT_SERVING)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield health_pb2, health_pb2_grpc, f"127.0.0.1:{port}", servicer
    finally:
        server.stop(None).wait(10)


def test_grpc_health_check_on_minigrpc_client_and_server(
    health_target: Tuple[Any, Any, str, Any],
) -> None:
    health_pb2, health_pb2_grpc, target, _ = health_target
    assert health_pb2_grpc.grpc is grpc
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest
        response = health_pb2.HealthCheckResponse
        assert stub.Check(request(service=""), timeout=10).status == response.SERVING
        assert stub.Check(request(service="minigrpc.Test"), timeout=10).status == (
            response.NOT_SERVING
        )
        with pytest.raises(grpc.RpcError) as unknown:
            stub.Check(request(service="no.such.Service"), timeout=10)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def test_grpc_health_watch_on_minigrpc_client_and_server(
    health_target: Tuple[Any, Any, str, Any],
) -> None:
    """Watch streams the current status, then every change (grpc_health's own servicer)."""
    health_pb2, health_pb2_grpc, target, servicer = health_target
    status = health_pb2.HealthCheckResponse
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        watch = stub.Watch(health_pb2.HealthCheckRequest(service="minigrpc.Test"), timeout=10)
        assert next(watch).status == status.NOT_SERVING
        servicer.set("minigrpc.Test", status.SERVING)
        assert next(watch).status == status.SERVING
        watch.cancel()
        assert watch.code() == grpc.StatusCode.CANCELLED


def _rich_status(code: int, message: str) -> Any:
    from google.rpc import status_pb2

    status = status_pb2.Status(code=code, message=message)
    status.details.add().Pack(messages_pb2.Payload(body=b"why"))
    return status


def test_grpc_status_from_call_reads_a_minigrpc_rpc_error() -> None:
    _addon("grpc_status", "google.rpc.status_pb2")
    from grpc_status import rpc_status

    from tests.support.scripted_peer import ScriptedServer

    status = _rich_status(grpc.StatusCode.FAILED_PRECONDITION.value[0], "not ready")
    details_bin = base64.b64encode(status.SerializeToString()).rstrip(b"=")

    def answer(request: Any) -> None:
        request.respond_raw(
            b"",
            trailers=[
                (b"grpc-status", b"9"),
                (b"grpc-message", b"not ready"),
                (b"grpc-status-details-bin", details_bin),
            ],
        )

    with ScriptedServer.h2(answer) as server, grpc.insecure_channel(server.target) as channel:
        with pytest.raises(grpc.RpcError) as failed:
            channel.unary_unary("/minigrpc.Test/Fail")(b"", timeout=10)
    assert rpc_status.from_call(failed.value) == status


def test_grpc_status_abort_with_status_on_a_minigrpc_server() -> None:
    _addon("grpc_status", "google.rpc.status_pb2")
    from grpc_status import rpc_status

    status = _rich_status(grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], "too many")

    def fail(request: bytes, context: Any) -> bytes:
        context.abort_with_status(rpc_status.to_status(status))
        raise AssertionError("abort_with_status returned")

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "minigrpc.Test", {"Fail": grpc.unary_unary_rpc_method_handler(fail)}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.RpcError) as failed:
                channel.unary_unary("/minigrpc.Test/Fail")(b"", timeout=10)
    finally:
        server.stop(None).wait(10)
    err = failed.value
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert err.details() == "too many"
    assert rpc_status.from_call(err) == status


# -- minigrpc's own add-ons (health, reflection, rich status), and their grpcio module names --

#: tests/support/block_grpcio.py's BLOCK_ADDONS_ENV (importing that module would install its
#: blocker), set by tests/interop/test_grpc_alias.py when the add-on packages (and
#: googleapis-common-protos) are blocked too: the case of a machine that has none of them.
ADDONS_BLOCKED = os.environ.get("MINIGRPC_TEST_BLOCK_ADDONS") == "1"


@pytest.fixture()
def addons_target() -> Iterator[Tuple[str, Any]]:
    """``(target, health servicer)``: a minigrpc server (on the alias) with minigrpc's health
    servicer, reflection, and a handler that aborts with a rich status."""
    from minigrpc import rpc_status
    from minigrpc.health.v1 import health, health_pb2_grpc
    from minigrpc.reflection.v1alpha import reflection

    def fail(request: bytes, context: Any) -> bytes:
        context.abort_with_status(rpc_status.to_status(_addons_status(rpc_status)))
        raise AssertionError("abort_with_status returned")

    servicer = health.HealthServicer()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    reflection.enable_server_reflection(("grpc.health.v1.Health", reflection.SERVICE_NAME), server)
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "minigrpc.Test", {"Fail": grpc.unary_unary_rpc_method_handler(fail)}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        server.stop(None).wait(10)


def _addons_status(rpc_status: Any) -> Any:
    status = rpc_status.status_pb2.Status(code=9, message="not ready")
    status.details.add().Pack(messages_pb2.Payload(body=b"why"))
    return status


def test_addons_health_reflection_and_rich_status_without_grpcio(
    addons_target: Tuple[str, Any],
) -> None:
    from minigrpc import rpc_status
    from minigrpc.health.v1 import health_pb2, health_pb2_grpc
    from minigrpc.reflection.v1 import reflection_pb2, reflection_pb2_grpc

    target, servicer = addons_target
    status = health_pb2.HealthCheckResponse
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert next(watch).status == status.SERVING
        servicer.set("", status.NOT_SERVING)
        assert next(watch).status == status.NOT_SERVING
        assert stub.Check(health_pb2.HealthCheckRequest(), timeout=10).status == (
            status.NOT_SERVING
        )
        watch.cancel()
        reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
        listed, files = reflect.ServerReflectionInfo(
            iter(
                [
                    reflection_pb2.ServerReflectionRequest(list_services=""),
                    reflection_pb2.ServerReflectionRequest(
                        file_containing_symbol="grpc.health.v1.Health"
                    ),
                ]
            ),
            timeout=10,
        )
        assert [s.name for s in listed.list_services_response.service] == [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        ]
        assert files.file_descriptor_response.file_descriptor_proto[0] == (
            health_pb2.DESCRIPTOR.serialized_pb
        )
        with pytest.raises(grpc.RpcError) as failed:
            channel.unary_unary("/minigrpc.Test/Fail")(b"", timeout=10)
    assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert rpc_status.from_call(failed.value) == _addons_status(rpc_status)


def test_addons_grpcio_module_names_are_minigrpcs_where_the_addons_are_absent(
    addons_target: Tuple[str, Any],
) -> None:
    """``grpc_health.v1.health``, ``grpc_reflection.v1alpha.reflection`` and
    ``grpc_status.rpc_status`` import on the alias as minigrpc's modules, with minigrpc's own
    copies of the messages."""
    if not ADDONS_BLOCKED:
        pytest.skip("the add-on packages are installed here (they are used, not shadowed)")
    import grpc_health.v1.health
    import grpc_reflection.v1alpha.reflection
    import grpc_status.rpc_status
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    import minigrpc.health.v1.health
    import minigrpc.reflection.v1alpha.reflection
    import minigrpc.rpc_status

    assert grpc_health.v1.health is minigrpc.health.v1.health
    assert grpc_reflection.v1alpha.reflection is minigrpc.reflection.v1alpha.reflection
    assert grpc_status.rpc_status is minigrpc.rpc_status
    assert grpc_status.rpc_status.status_pb2.__name__ == "minigrpc._pb.status_pb2"
    assert health_pb2.HealthCheckRequest.__module__ == "minigrpc._pb.health_pb2"
    # They stay minigrpc's modules under their own names.
    assert minigrpc.health.v1.health.__spec__.name == "minigrpc.health.v1.health"
    target, _ = addons_target
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        assert stub.Check(health_pb2.HealthCheckRequest(), timeout=10).status == (
            health_pb2.HealthCheckResponse.SERVING
        )
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("grpc_health.v2")


def test_addons_installed_addon_packages_are_not_shadowed() -> None:
    if ADDONS_BLOCKED:
        pytest.skip("the add-on packages are blocked here")
    _addon("grpc_health", "grpc_health.v1.health_pb2")
    import grpc_health.v1.health

    from minigrpc.health.v1 import health_pb2

    assert grpc_health.v1.health.__name__ == "grpc_health.v1.health"
    assert "site-packages" in (grpc_health.v1.health.__file__ or "")
    # One set of message classes in the process: the add-on's own.
    assert health_pb2.HealthCheckRequest.__module__ == "grpc_health.v1.health_pb2"


# -- third-party add-ons written for grpcio: OpenTelemetry, grpc-interceptor -----------------


def _require(module: str) -> None:
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if not found:
        _skip_or_fail(f"{module} is not installed")


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def _traced_servicers(test_grpc: Any) -> Tuple[Any, Any]:
    """(blocking, asyncio) servicers on the generated base class: UnaryCall answers, or aborts
    with ``response_status.code``; StreamingOutputCall streams the sizes asked for."""

    class Blocking(test_grpc.TestServiceServicer):  # type: ignore[misc,name-defined]
        def UnaryCall(self, request: Any, context: Any) -> Any:
            if request.response_status.code:
                context.abort(_CODES[request.response_status.code], "asked to fail")
            return messages_pb2.SimpleResponse()

        def StreamingOutputCall(self, request: Any, context: Any) -> Iterator[Any]:
            for parameters in request.response_parameters:
                body = bytes(parameters.size)
                yield messages_pb2.StreamingOutputCallResponse(
                    payload=messages_pb2.Payload(body=body)
                )

    class Async(test_grpc.TestServiceServicer):  # type: ignore[misc,name-defined]
        async def UnaryCall(self, request: Any, context: Any) -> Any:
            if request.response_status.code:
                await context.abort(_CODES[request.response_status.code], "asked to fail")
            return messages_pb2.SimpleResponse()

        async def StreamingOutputCall(self, request: Any, context: Any) -> Any:
            for parameters in request.response_parameters:
                body = bytes(parameters.size)
                yield messages_pb2.StreamingOutputCallResponse(
                    payload=messages_pb2.Payload(body=body)
                )

    return Blocking(), Async()


@functools.lru_cache(maxsize=None)
def _span_exporter() -> Any:
    """An in-memory exporter behind the process's tracer provider, which can be set only once
    (the blocking client instrumentor always uses the global one)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


@pytest.fixture()
def spans() -> Iterator[Any]:
    """OpenTelemetry's four gRPC instrumentors on the alias, turned on by the README's own
    lines, exporting to an in-memory exporter (yielded, empty); turned off afterwards."""
    _require("opentelemetry.instrumentation.grpc")
    _require("opentelemetry.sdk")
    from opentelemetry.instrumentation.grpc import (
        GrpcAioInstrumentorClient,
        GrpcAioInstrumentorServer,
        GrpcInstrumentorClient,
        GrpcInstrumentorServer,
    )

    exporter = _span_exporter()
    exporter.clear()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    (block,) = [b for b in blocks if "skip_dep_check" in b]
    exec(compile(block, "README.md", "exec"), {})
    # Each instrumentor class has one instance, the README's.
    instrumentors = [
        GrpcInstrumentorClient(),
        GrpcInstrumentorServer(),
        GrpcAioInstrumentorClient(),
        GrpcAioInstrumentorServer(),
    ]
    assert all(instrumentor.is_instrumented_by_opentelemetry for instrumentor in instrumentors)
    try:
        yield exporter
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()


def _outcomes(exporter: Any) -> Any:
    """Each finished span as ``(method, kind, span status, rpc.grpc.status_code)``, sorted;
    and every server span's parent is the client span of its call."""
    finished = exporter.get_finished_spans()
    clients = {span.context.span_id: span for span in finished if span.kind.name == "CLIENT"}
    for span in finished:
        if span.kind.name == "SERVER":
            assert span.parent is not None and span.parent.span_id in clients, span.name
            assert clients[span.parent.span_id].name == span.name
    return sorted(
        (
            span.name.rpartition("/")[2],
            span.kind.name,
            span.status.status_code.name,
            span.attributes.get("rpc.grpc.status_code"),
        )
        for span in finished
    )


#: What grpcio gives with the same instrumentors: OK leaves the status unset, UNAVAILABLE (an
#: error for client and server alike in OpenTelemetry's conventions) is ERROR on both spans.
TRACED = [
    ("StreamingOutputCall", "CLIENT", "UNSET", 0),
    ("StreamingOutputCall", "SERVER", "UNSET", 0),
    ("UnaryCall", "CLIENT", "ERROR", 14),
    ("UnaryCall", "CLIENT", "UNSET", 0),
    ("UnaryCall", "SERVER", "ERROR", 14),
    ("UnaryCall", "SERVER", "UNSET", 0),
]
_FAIL = messages_pb2.SimpleRequest(response_status=messages_pb2.EchoStatus(code=14))


def test_opentelemetry_traces_blocking_calls_on_the_alias(spans: Any) -> None:
    test_grpc, _ = _stubs(VERSIONS[-1])
    servicer, _ = _traced_servicers(test_grpc)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    test_grpc.add_TestServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = test_grpc.TestServiceStub(channel)
            stub.UnaryCall(messages_pb2.SimpleRequest(), timeout=10)
            with pytest.raises(grpc.RpcError) as failed:
                stub.UnaryCall(_FAIL, timeout=10)
            assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
            assert _sizes(stub.StreamingOutputCall(_output_request(1, 2), timeout=10)) == [1, 2]
    finally:
        server.stop(None).wait(10)
    assert _outcomes(spans) == TRACED
    # grpcio's abort raises a bare Exception, which the instrumentor does not record: the
    # failed server span has the one event the span itself records.
    (failed_server,) = [
        span for span in spans.get_finished_spans()
        if span.kind.name == "SERVER" and span.status.status_code.name == "ERROR"
    ]
    assert [event.name for event in failed_server.events] == ["exception"]


def test_opentelemetry_traces_asyncio_calls_on_the_alias(spans: Any) -> None:
    import asyncio

    test_grpc, _ = _stubs(VERSIONS[-1])
    _, servicer = _traced_servicers(test_grpc)

    async def main() -> None:
        server = grpc.aio.server()
        test_grpc.add_TestServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = test_grpc.TestServiceStub(channel)
                await stub.UnaryCall(messages_pb2.SimpleRequest(), timeout=10)
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await stub.UnaryCall(_FAIL, timeout=10)
                assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
                call = stub.StreamingOutputCall(_output_request(1, 2), timeout=10)
                assert [len(r.payload.body) async for r in call] == [1, 2]
        finally:
            await server.stop(None)

    asyncio.run(main())
    assert _outcomes(spans) == TRACED


def test_opentelemetry_without_skip_dep_check_instruments_nothing() -> None:
    """What the README warns about: no grpcio distribution is installed, so the instrumentor's
    dependency check fails and it does nothing (it logs that, and nothing else tells)."""
    _require("opentelemetry.instrumentation.grpc")
    from opentelemetry.instrumentation.grpc import GrpcInstrumentorClient

    before = grpc.insecure_channel
    instrumentor = GrpcInstrumentorClient()
    try:
        assert instrumentor.instrument() is None
        assert grpc.insecure_channel is before
    finally:
        instrumentor.uninstrument()


def test_grpc_interceptor_on_blocking_and_asyncio_servers_and_a_client() -> None:
    """grpc-interceptor's ExceptionToStatusInterceptor (both servers) turns its exceptions into
    statuses; its ClientInterceptor changes the call's metadata."""
    import asyncio

    _require("grpc_interceptor")
    from grpc_interceptor import (
        AsyncExceptionToStatusInterceptor,
        ClientCallDetails,
        ClientInterceptor,
        ExceptionToStatusInterceptor,
    )
    from grpc_interceptor.exceptions import NotFound

    test_grpc, _ = _stubs(VERSIONS[-1])

    class Caller(ClientInterceptor):  # type: ignore[misc]
        def intercept(self, method: Any, request: Any, details: Any) -> Any:
            metadata = [*(details.metadata or ()), ("x-caller", "interceptor")]
            return method(request, ClientCallDetails(details.method, details.timeout, metadata,
                                                     details.credentials, details.wait_for_ready,
                                                     details.compression))

    def reply(request: Any, context: Any) -> Any:
        if request.response_size:
            raise NotFound(f"no message of {request.response_size} bytes")
        caller = dict(context.invocation_metadata()).get("x-caller", "")
        return messages_pb2.SimpleResponse(username=caller)

    class Blocking(test_grpc.TestServiceServicer):  # type: ignore[misc,name-defined]
        def UnaryCall(self, request: Any, context: Any) -> Any:
            return reply(request, context)

    class Async(test_grpc.TestServiceServicer):  # type: ignore[misc,name-defined]
        async def UnaryCall(self, request: Any, context: Any) -> Any:
            return reply(request, context)

    def check(stub: Any) -> None:
        assert stub.UnaryCall(messages_pb2.SimpleRequest(), timeout=10).username == "interceptor"
        with pytest.raises(grpc.RpcError) as missing:
            stub.UnaryCall(messages_pb2.SimpleRequest(response_size=3), timeout=10)
        assert missing.value.code() is grpc.StatusCode.NOT_FOUND
        assert missing.value.details() == "no message of 3 bytes"

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=2), interceptors=[ExceptionToStatusInterceptor()]
    )
    test_grpc.add_TestServiceServicer_to_server(Blocking(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with grpc.intercept_channel(grpc.insecure_channel(f"127.0.0.1:{port}"), Caller()) as ch:
            check(test_grpc.TestServiceStub(ch))
    finally:
        server.stop(None).wait(10)

    async def main() -> None:
        server = grpc.aio.server(interceptors=[AsyncExceptionToStatusInterceptor()])
        test_grpc.add_TestServiceServicer_to_server(Async(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            def blocking_client() -> None:
                channel = grpc.insecure_channel(f"127.0.0.1:{port}")
                with grpc.intercept_channel(channel, Caller()) as intercepted:
                    check(test_grpc.TestServiceStub(intercepted))

            await asyncio.get_running_loop().run_in_executor(None, blocking_client)
        finally:
            await server.stop(None)

    asyncio.run(main())
