"""A live round trip: minigrpc's client against a real grpcio server, on a temporary unix socket.

``python tools/demo_roundtrip.py`` starts grpcio with the interop TestService
(tests/interop/servicer.py), makes a few calls with minigrpc, prints what happened and exits 0
when every call behaved as gRPC says it should (1 otherwise). Set ``MINIGRPC_TRACE=1`` to see
every HTTP/2 frame. grpcio is only the peer here; minigrpc itself never imports it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    try:
        import grpc  # the server peer
    except ImportError:
        print("the demo needs grpcio as a server peer: pip install -e '.[test]'", file=sys.stderr)
        return 1

    import minigrpc
    from tests.interop import empty_pb2, messages_pb2
    from tests.peers import GrpcioServer

    directory = tempfile.mkdtemp(prefix="mg-demo-")
    server = GrpcioServer("unix:" + str(Path(directory) / "demo.sock"))
    results: List[Tuple[str, bool, str]] = []
    try:
        target = server.start()
        print(f"grpcio {grpc.__version__} serving grpc.testing.TestService on {target}")
        with minigrpc.insecure_channel(target) as channel:
            empty = channel.unary_unary(
                "/grpc.testing.TestService/EmptyCall",
                request_serializer=empty_pb2.Empty.SerializeToString,
                response_deserializer=empty_pb2.Empty.FromString,
            )
            unary = channel.unary_unary(
                "/grpc.testing.TestService/UnaryCall",
                request_serializer=messages_pb2.SimpleRequest.SerializeToString,
                response_deserializer=messages_pb2.SimpleResponse.FromString,
            )

            def check(name: str, action: Callable[[], str]) -> None:
                try:
                    text = action()
                    results.append((name, True, text))
                except Exception as exc:  # the demo reports, it never shows a traceback
                    results.append((name, False, f"{type(exc).__name__}: {exc}"))

            def empty_unary() -> str:
                _, call = empty.with_call(empty_pb2.Empty(), timeout=5)
                return f"code={call.code().name}"

            def large_unary() -> str:
                request = messages_pb2.SimpleRequest(
                    response_size=314159, payload=messages_pb2.Payload(body=bytes(271828))
                )
                response = unary(request, timeout=5, compression=minigrpc.Compression.Gzip)
                assert len(response.payload.body) == 314159
                return "sent 271,828 bytes gzip-compressed, received 314,159 bytes"

            def error_status() -> str:
                request = messages_pb2.SimpleRequest(
                    response_status=messages_pb2.EchoStatus(code=5, message="no such thing ☺")
                )
                try:
                    unary(request, timeout=5)
                except minigrpc.RpcError as error:
                    assert error.code() is minigrpc.StatusCode.NOT_FOUND
                    return str(error)
                raise AssertionError("the call should have failed")

            def deadline() -> str:
                try:
                    empty(empty_pb2.Empty(), timeout=0.1, metadata=[("x-test-sleep-ms", "5000")])
                except minigrpc.RpcError as error:
                    assert error.code() is minigrpc.StatusCode.DEADLINE_EXCEEDED
                    return str(error)
                raise AssertionError("the call should have timed out")

            def metadata() -> str:
                _, call = empty.with_call(
                    empty_pb2.Empty(),
                    timeout=5,
                    metadata=[
                        ("x-grpc-test-echo-initial", "hello"),
                        ("x-grpc-test-echo-trailing-bin", b"\xab\xab\xab"),
                    ],
                )
                return f"initial={call.initial_metadata()} trailing={call.trailing_metadata()}"

            check("empty_unary", empty_unary)
            check("large_unary", large_unary)
            check("error status", error_status)
            check("deadline", deadline)
            check("custom metadata", metadata)
    except Exception as exc:
        results.append(("setup", False, f"{type(exc).__name__}: {exc}"))
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)

    for name, ok, text in results:
        print(f"  {'ok  ' if ok else 'FAIL'} {name:16} {text}")
    failed = [name for name, ok, _ in results if not ok]
    print("all calls behaved" if not failed else f"{len(failed)} failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
