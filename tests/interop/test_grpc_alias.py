"""``minigrpc.install_as_grpc()`` in the normal suite, where grpcio is installed.

* ``tests/interop/nogrpcio_suite.py`` (generated code of every grpcio-tools release in
  ``tests/generated_stubs/``, grpc_health, grpc_status, all on the alias) runs in a subprocess
  that cannot import grpcio (``-p tests.support.block_grpcio``): it must own its process's ``grpc``
  module, and this process has grpcio's.
* What needs grpcio itself is here: the alias refuses to shadow an imported grpcio, wins over an
  installed but not imported one, and its table (``GRPCIO_NAMES``, rendered into the README)
  covers every public name of the grpcio installed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import minigrpc
from minigrpc import experimental, grpc_alias

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args, "-c", textwrap.dedent(code)] if code else [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )


@pytest.mark.timeout(180)
def test_nogrpcio_suite_passes_with_grpcio_unimportable() -> None:
    result = _run(
        "",
        "-m",
        "pytest",
        "-q",
        "-p",
        "tests.support.block_grpcio",
        "-p",
        "no:cacheprovider",
        "-rxs",
        "tests/interop/nogrpcio_suite.py",
        timeout=170,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    summary = re.search(r"(\d+) passed", output)
    assert summary is not None and int(summary.group(1)) >= 30, output
    assert not re.search(r"\d+ (failed|errors?)\b", output.splitlines()[-1]), output


@pytest.mark.timeout(120)
def test_nogrpcio_addons_where_no_addon_package_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The suite's add-on tests with grpcio-health-checking, grpcio-reflection, grpcio-status
    and google.rpc blocked too: minigrpc's add-ons serve their module names, on their own
    message copies."""
    monkeypatch.setenv("MINIGRPC_TEST_BLOCK_ADDONS", "1")
    result = _run(
        "",
        "-m",
        "pytest",
        "-q",
        "-p",
        "tests.support.block_grpcio",
        "-p",
        "no:cacheprovider",
        "-rxs",
        "-k",
        "addons",
        "tests/interop/nogrpcio_suite.py",
        timeout=110,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert re.search(r"\b2 passed, 1 skipped\b", output.splitlines()[-1]), output


def test_block_grpcio_really_blocks_grpcio() -> None:
    """The subprocess above proves nothing if grpcio could still be imported there."""
    result = _run(
        """
        import tests.support.block_grpcio
        try:
            import grpc
        except ModuleNotFoundError as exc:
            print("blocked:", exc)
        """
    )
    assert result.returncode == 0 and result.stdout.startswith("blocked:"), result.stderr


def test_install_refuses_when_grpcio_is_already_imported() -> None:
    pytest.importorskip("grpc")
    result = _run(
        """
        import grpc, minigrpc
        try:
            minigrpc.install_as_grpc()
        except RuntimeError as exc:
            print(grpc.__file__)
            print(exc)
        import sys
        assert sys.modules["grpc"] is grpc and grpc.server is not minigrpc.server
        """
    )
    assert result.returncode == 0, result.stderr
    grpcio_file, message = result.stdout.splitlines()
    assert "a grpc module is already imported" in message
    assert "before the first `import grpc`" in message
    assert grpcio_file in message


def test_install_wins_over_an_installed_but_not_imported_grpcio() -> None:
    pytest.importorskip("grpc")
    result = _run(
        """
        import importlib.util, sys
        import minigrpc
        assert importlib.util.find_spec("grpc").origin.endswith("__init__.py")  # grpcio is there
        minigrpc.install_as_grpc()
        import grpc, grpc.experimental
        from grpc._utilities import first_version_is_lower
        assert grpc.insecure_channel is minigrpc.insecure_channel
        assert "grpc._cython" not in sys.modules
        print(grpc.__version__)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == grpc_alias.GRPCIO_VERSION


def test_the_alias_has_grpcios_logger_with_a_null_handler() -> None:
    """grpcio's ``grpc`` logger exists with one NullHandler once ``grpc`` is imported; the
    alias sets up the same logger, and the root logger stays unconfigured."""
    result = _run(
        """
        import logging
        import minigrpc
        minigrpc.install_as_grpc()
        minigrpc.install_as_grpc()
        import grpc
        handlers = logging.getLogger("grpc").handlers
        print(len(handlers), type(handlers[0]).__name__, len(logging.getLogger().handlers))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "NullHandler", "0"]


#: A server whose handler raises, called once; it prints the status the client got.
#: ``LIBRARY``: ``minigrpc``, ``alias`` (``import grpc`` on minigrpc.install_as_grpc()) or
#: ``grpcio``; ``LOGGING_SETUP``: ``configured`` (``logging.basicConfig()``) or not.
RAISING_HANDLER = """
    from concurrent import futures

    library, logging_setup = LIBRARY, LOGGING_SETUP
    if logging_setup == "configured":
        import logging
        logging.basicConfig()
    if library == "minigrpc":
        import minigrpc as grpc
    else:
        if library == "alias":
            import minigrpc
            minigrpc.install_as_grpc()
        import grpc

    def boom(request, context):
        raise ValueError("boom")

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "logging.Test", {"Boom": grpc.unary_unary_rpc_method_handler(boom)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            channel.unary_unary("/logging.Test/Boom")(b"", timeout=10)
        except grpc.RpcError as error:
            print(error.code().name, error.details())
    server.stop(None).wait(10)
"""


@pytest.mark.parametrize("library", ["minigrpc", "alias", "grpcio"])
@pytest.mark.parametrize("logging_setup", ["unconfigured", "configured"])
def test_a_raising_handler_is_logged_only_where_the_application_asks(
    library: str, logging_setup: str
) -> None:
    """The library convention grpcio follows (a NullHandler on its logger): a handler's
    exception goes to the client as UNKNOWN and to the application's logging if it set any up,
    never to stderr on the library's own initiative (Python's last-resort handler)."""
    if library == "grpcio" and importlib.util.find_spec("grpc") is None:
        pytest.skip("grpcio is not installed here")
    code = RAISING_HANDLER.replace("LIBRARY", repr(library))
    result = _run(code.replace("LOGGING_SETUP", repr(logging_setup)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "UNKNOWN Exception calling application: boom", result.stdout
    if logging_setup == "configured":
        assert "Exception calling application: boom" in result.stderr, result.stderr
        assert "ValueError: boom" in result.stderr, result.stderr
    else:
        assert "boom" not in result.stderr, result.stderr


def test_readme_opt_in_line_makes_generated_code_run_without_grpcio() -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text("utf-8"), re.S)
    (line,) = [block for block in blocks if block.strip().endswith("`import grpc` is minigrpc")]
    newest = _generate_stubs_tool().package_name(grpc_alias.GRPCIO_VERSION)
    result = _run(
        "import tests.support.block_grpcio\n"
        + line
        + textwrap.dedent(
            """
            from concurrent import futures
            import grpc
            from cni_client import cni_pb2
            from tests.generated_stubs.NEWEST_PACKAGE import cni_pb2_grpc

            class Cni(cni_pb2_grpc.CniServicer):
                def CmdAdd(self, request, context):
                    return cni_pb2.CniCmdResponse(cni_result=b"ok")

            server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
            cni_pb2_grpc.add_CniServicer_to_server(Cni(), server)
            port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                print(cni_pb2_grpc.CniStub(channel).CmdAdd(cni_pb2.CniCmdRequest()).cni_result)
            server.stop(None)
            """
        ).replace("NEWEST_PACKAGE", newest)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "b'ok'"


def _generate_stubs_tool() -> Any:
    script = ROOT / "tools" / "generate_stubs.py"
    spec = importlib.util.spec_from_file_location("generate_stubs", script)
    assert spec is not None and spec.loader is not None
    generate_stubs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate_stubs)
    return generate_stubs


def test_answered_version_is_the_newest_generated_release_and_no_tools_bound_remains() -> None:
    """GRPCIO_VERSION is the newest release tools/generate_stubs.py generates (and the suite
    runs); grpcio-tools and the add-ons whose generated code checks the version are not
    bounded by it anywhere, since newer generated code loads on the alias."""
    generate_stubs = _generate_stubs_tool()
    version = grpc_alias.GRPCIO_VERSION
    assert generate_stubs.VERSIONS[-1] == version
    assert (ROOT / "tests/generated_stubs" / generate_stubs.package_name(version)).is_dir()
    for path in ("setup.cfg", "tox.ini"):
        text = (ROOT / path).read_text(encoding="utf-8")
        for name in ("grpcio-tools", "grpcio-health-checking", "grpcio-reflection"):
            assert name in text, (path, name)
            bounded = re.search(rf"{name}[^\n;']*<", text)
            assert bounded is None, (path, bounded and bounded.group(0))


# -- the table ---------------------------------------------------------------------------------


def test_table_names_every_public_name_of_the_installed_grpcio() -> None:
    pytest.importorskip("grpc")
    import grpc
    import grpc._utilities
    import grpc.aio
    import grpc.experimental

    names = {entry.name for entry in grpc_alias.GRPCIO_NAMES}
    assert len(names) == len(grpc_alias.GRPCIO_NAMES), "a name is listed twice"
    # grpcio 1.62's experimental.__all__ lists some functions themselves instead of their names.
    experimental = [getattr(name, "__name__", name) for name in grpc.experimental.__all__]
    wanted = [*grpc.__all__, *(f"experimental.{name}" for name in experimental)]
    missing = [name for name in wanted if name not in names]
    assert missing == [], f"grpcio {grpc.__version__} has names the alias's table lacks"
    if grpc_alias.first_version_is_lower(grpc.__version__, grpc_alias.GRPCIO_VERSION):
        return  # an older grpcio (Python 3.7 gets 1.62) lacks names added since; that is fine
    for entry in grpc_alias.GRPCIO_NAMES:
        module_name, _, name = entry.name.rpartition(".")
        module = importlib.import_module(f"grpc.{module_name}") if module_name else grpc
        is_submodule = importlib.util.find_spec(f"grpc.{entry.name}") is not None
        assert hasattr(module, name) or is_submodule, f"grpc.{entry.name} is not a grpcio name"


def test_supported_names_exist_in_minigrpc_and_unsupported_ones_do_not() -> None:
    for entry in grpc_alias.GRPCIO_NAMES:
        if entry.source == "":
            continue  # module attributes, checked in nogrpcio_suite.py
        module_name, _, name = entry.name.rpartition(".")
        module = experimental if module_name == "experimental" else minigrpc
        if entry.supported:
            assert hasattr(module, entry.source or name), f"grpc.{entry.name}"
        else:
            # When minigrpc gains one (TLS, say), the table must say so.
            assert not hasattr(module, name), f"grpc.{entry.name} is in minigrpc: mark it yes"


def test_readme_holds_the_table_rendered_from_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rendered = grpc_alias.compatibility_markdown()
    assert (
        "<!-- generated:grpc-compatibility -->\n" + rendered + "<!-- /generated:grpc-compatibility"
    ) in readme, "README is stale; run `python tools/render_docs.py`"


# -- grpc_status against a grpcio server -------------------------------------------------------


def test_rpc_status_from_call_on_a_minigrpc_error_from_a_grpcio_server() -> None:
    """The client part of rich errors: grpcio's server sends ``grpc-status-details-bin``."""
    from concurrent import futures

    grpc = pytest.importorskip("grpc")

    try:
        from google.rpc import status_pb2
    except ImportError as exc:  # the `oldest` tox env's protobuf is older than its messages need
        pytest.skip(f"google.rpc.status_pb2 does not load on this protobuf: {exc}")
    from grpc_status import rpc_status

    from tests.interop import messages_pb2

    status = status_pb2.Status(code=grpc.StatusCode.ABORTED.value[0], message="try again")
    status.details.add().Pack(messages_pb2.Payload(body=b"conflict"))

    def fail(request: bytes, context: grpc.ServicerContext) -> bytes:
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
        with minigrpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(minigrpc.RpcError) as failed:
                channel.unary_unary("/minigrpc.Test/Fail")(b"", timeout=10)
    finally:
        server.stop(None).wait(10)
    assert failed.value.code() == minigrpc.StatusCode.ABORTED
    assert rpc_status.from_call(failed.value) == status
