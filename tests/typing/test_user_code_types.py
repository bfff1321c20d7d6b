"""Typing as users meet it: ``mypy --strict`` on code that uses minigrpc the way grpcio code
is written (``import minigrpc as grpc``, or ``import grpc`` on the alias with the one-line stub
the README gives), and the asyncio API (``from minigrpc import aio``), reports nothing for
correct code and flags a misspelt name.

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


#: An asyncio server and client (``from minigrpc import aio``): every name, the calls'
#: responses (typed by the deserializer, ``bytes`` without one) and ``await context.abort``,
#: which never returns.  It runs, too: see the last test.
ASYNC_CORRECT = '''
import asyncio
from typing import AsyncIterator, List, Optional, Tuple

import minigrpc as grpc
from minigrpc import aio


async def echo(request: bytes, context: aio.ServicerContext[bytes, bytes]) -> bytes:
    if request:
        return request
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "empty request")


async def count_up(
    request: bytes, context: aio.ServicerContext[bytes, bytes]
) -> AsyncIterator[bytes]:
    for number in range(int(request)):
        yield str(number).encode()


async def total(
    requests: AsyncIterator[bytes], context: aio.ServicerContext[bytes, bytes]
) -> bytes:
    return str(sum([int(request) async for request in requests])).encode()


async def serve() -> Tuple[aio.Server, int]:
    server = aio.server()
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(echo),
        "Count": grpc.unary_stream_rpc_method_handler(count_up),
        "Total": grpc.stream_unary_rpc_method_handler(total),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("demo.Echo", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def open_channel(target: str) -> aio.Channel:
    return aio.insecure_channel(target)


def number(data: bytes) -> int:
    return int(data)


async def call(port: int) -> Optional[bytes]:
    async with open_channel(f"127.0.0.1:{port}") as channel:
        await channel.channel_ready()
        try:
            reply: bytes = await channel.unary_unary("/demo.Echo/Echo")(b"x", timeout=5)
        except aio.AioRpcError as error:
            print(error.code(), error.details())
            return None
        stream = channel.unary_stream("/demo.Echo/Count")(b"3", timeout=5)
        counted: List[bytes] = [message async for message in stream]
        code: grpc.StatusCode = await stream.code()
        summed: int = await channel.stream_unary(
            "/demo.Echo/Total", response_deserializer=number
        )(iter([b"1", b"2"]), timeout=5)
        print(reply, counted, code.name, summed + 1)
        return reply


async def main() -> None:
    server, port = await serve()
    try:
        await call(port)
    finally:
        await server.stop(None)


if __name__ == "__main__":
    asyncio.run(main())
'''

ASYNC_WRONG = '''
    from minigrpc import aio


    def open_channel(target: str) -> aio.Chanel:
        return aio.insecure_chanel(target)


    async def call(channel: aio.Channel) -> str:
        reply: str = await channel.unary_unary("/demo.Echo/Echo")(b"x")
        return reply
'''


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """One ``mypy --strict`` run over the files; file name -> its lines of the report."""
    where = tmp_path_factory.mktemp("typing")
    (where / "stubs" / "grpc").mkdir(parents=True)
    (where / "stubs" / "grpc" / "__init__.pyi").write_text(GRPC_STUB)
    files = {
        "correct.py": CORRECT,
        "misspelt.py": MISSPELT,
        "aliased.py": ALIASED,
        "async_correct.py": ASYNC_CORRECT,
        "async_wrong.py": ASYNC_WRONG,
    }
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
    from minigrpc import aio

    assert minigrpc.__all__ == sorted(minigrpc._EXPORTS)
    assert not hasattr(minigrpc, "insecure_chanel")
    assert sorted(aio.__all__) == sorted(aio._EXPORTS)
    assert not hasattr(aio, "insecure_chanel")


@pytest.mark.timeout(300)
def test_asyncio_client_and_server_type_check_strictly(mypy_report: Dict[str, str]) -> None:
    assert mypy_report["async_correct.py"] == ""


@pytest.mark.timeout(300)
def test_asyncio_names_are_checked_and_responses_typed(mypy_report: Dict[str, str]) -> None:
    """``aio.<misspelt>`` is an error, not Any; a call's response is ``bytes`` without a
    deserializer, so assigning it to a ``str`` is an error."""
    lines = mypy_report["async_wrong.py"].splitlines()
    expected = [
        r'Name "aio\.Chanel" is not defined',
        r'Module has no attribute "insecure_chanel"',
        r'Incompatible types in assignment \(expression has type "bytes", variable has type '
        r'"str"\)',
    ]
    assert len(lines) == len(expected), lines
    for line, pattern in zip(lines, expected):
        assert re.match(r"async_wrong\.py:\d+: error: " + pattern, line), lines


def test_the_typed_asyncio_example_runs(tmp_path: Path) -> None:
    (tmp_path / "async_correct.py").write_text(textwrap.dedent(ASYNC_CORRECT))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "async_correct.py"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "b'x' [b'0', b'1', b'2'] OK 4\n"
