"""Typing as users meet it: ``mypy --strict`` on code that uses minigrpc the way grpcio code
is written (``import minigrpc as grpc``, or ``import grpc`` on the alias with the one-line stub
the README gives) reports nothing for correct code and flags a misspelt name.

That needs a static ``__all__`` and no module ``__getattr__`` visible to the type checker
(which would make every misspelt name ``Any``), and ``abort``/``abort_with_status`` typed
``NoReturn`` (a handler that ends in ``abort`` needs no return after it).  One mypy run checks
all the files; its cache is private to the test, so nothing else's cache is reused or touched.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict

import pytest

import minigrpc

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parents[2]

CORRECT = '''
    from concurrent import futures
    from typing import Iterator, Optional, Tuple

    import minigrpc as grpc


    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        if request:
            return request
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "empty request")


    class TooMany(grpc.Status):
        def __init__(self, total: int) -> None:
            self.code = grpc.StatusCode.RESOURCE_EXHAUSTED
            self.details = f"{total} requests"
            self.trailing_metadata = (("limit", "100"),)


    def count(requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        total = sum(1 for _ in requests)
        if total <= 100:
            return str(total).encode()
        context.abort_with_status(TooMany(total))


    def serve() -> Tuple[grpc.Server, int]:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        handlers = {
            "Echo": grpc.unary_unary_rpc_method_handler(echo),
            "Count": grpc.stream_unary_rpc_method_handler(count),
        }
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("demo.Echo", handlers),)
        )
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        return server, port


    def call(port: int) -> Optional[bytes]:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            echo_rpc = channel.unary_unary("/demo.Echo/Echo")
            try:
                response, outcome = echo_rpc.with_call(b"x", timeout=5)
            except grpc.RpcError as error:
                print(error)
                return None
            assert outcome.code() is grpc.StatusCode.OK
            future = echo_rpc.future(b"y", timeout=5)
            future.add_done_callback(lambda done: print(done.result()))
            grpc.channel_ready_future(channel).result(timeout=5)
            reply: bytes = response
            return reply
'''

MISSPELT = '''
    import minigrpc as grpc

    channel = grpc.insecure_chanel("127.0.0.1:50051")
'''

#: The README's recipe for code that says ``import grpc`` and runs on install_as_grpc().
GRPC_STUB = "from minigrpc import *\n"

ALIASED = '''
    import grpc

    def open_channel(target: str) -> grpc.Channel:
        return grpc.insecure_channel(target)

    code: grpc.StatusCode = grpc.StatusCode.OK
    status = grpc.StatsCode.OK
'''


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """One ``mypy --strict`` run over the files; file name -> its lines of the report."""
    where = tmp_path_factory.mktemp("typing")
    (where / "stubs" / "grpc").mkdir(parents=True)
    (where / "stubs" / "grpc" / "__init__.pyi").write_text(GRPC_STUB)
    files = {"correct.py": CORRECT, "misspelt.py": MISSPELT, "aliased.py": ALIASED}
    for name, text in files.items():
        (where / name).write_text(textwrap.dedent(text))
    env = dict(os.environ, MYPYPATH=str(where / "stubs"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
            "--cache-dir", str(where / "cache"), *files,
        ],
        cwd=where, env=env, capture_output=True, text=True, timeout=240, check=False,
    )
    assert done.returncode in (0, 1) and not done.stderr, done.stdout + done.stderr
    report = {name: "" for name in files}
    for line in done.stdout.splitlines():
        name = line.split(":", 1)[0]
        report[name] = report.get(name, "") + line + "\n"
    return report


@pytest.mark.timeout(300)
def test_correct_user_code_type_checks_strictly(mypy_report: Dict[str, str]) -> None:
    assert mypy_report["correct.py"] == ""


@pytest.mark.timeout(300)
def test_a_misspelt_name_is_an_error(mypy_report: Dict[str, str]) -> None:
    assert re.search(
        r'misspelt\.py:\d+: error: Module has no attribute "insecure_chanel"',
        mypy_report["misspelt.py"],
    ), mypy_report["misspelt.py"]


@pytest.mark.timeout(300)
def test_code_that_imports_grpc_type_checks_with_the_readme_stub(
    mypy_report: Dict[str, str],
) -> None:
    lines = mypy_report["aliased.py"].splitlines()
    assert len(lines) == 1, lines
    assert re.search(r'aliased\.py:\d+: error: Module has no attribute "StatsCode"', lines[0])


def test_all_is_what_the_package_exports() -> None:
    """``__all__`` is written out for type checkers; it must name exactly the lazy exports."""
    assert minigrpc.__all__ == sorted(minigrpc._EXPORTS)
    assert not hasattr(minigrpc, "insecure_chanel")
