"""A Python gRPC server for the command line's tests, in a process of its own.

``python -m tests.cli.serve --impl IMPL --listen ADDRESS [--listen ...]`` serves the interop
``grpc.testing.TestService``, ``grpc.health.v1.Health`` and server reflection on each address
(``unix:PATH``, ``unix-abstract:NAME``, ``HOST:PORT``), prints one ``READY <target>`` line per
address once it listens (a TCP port 0 replaced by the kernel's choice), and stops when its stdin
closes.  Three implementations, the peers the tool is tested against besides grpc-go:

* ``minigrpc``: ``minigrpc.server()``, minigrpc's health servicer and reflection (v1 and v1alpha);
* ``minigrpc-aio``: ``minigrpc.aio.server()`` with the asyncio health and reflection servicers;
* ``grpcio``: ``grpc.server()`` with grpcio-health-checking and grpcio-reflection (v1alpha only,
  and NOT_FOUND for a method symbol): run it with a CPython that has grpcio.

The health statuses are grpc-go's interop server's (tests/go/interop_server ``-addons``):
``grpc.testing.TestService`` SERVING, ``grpc.testing.NotServing`` NOT_SERVING, and the server as
a whole (``""``) SERVING.  ``--no-reflection`` leaves reflection out, ``--no-health`` health.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from concurrent import futures
from typing import List, Sequence

SERVING_SERVICE = "grpc.testing.TestService"
NOT_SERVING_SERVICE = "grpc.testing.NotServing"


def _announce(targets: List[str]) -> None:
    for target in targets:
        sys.stdout.write(f"READY {target}\n")
    sys.stdout.flush()


def _target(address: str, port: int) -> str:
    if address.startswith("unix"):
        return address
    return f"{address.rpartition(':')[0]}:{port}"


def _names(options: argparse.Namespace, reflection_name: str) -> List[str]:
    names = ["grpc.testing.TestService"]
    if not options.no_health:
        names.append("grpc.health.v1.Health")
    return [*names, reflection_name]


def serve_blocking(options: argparse.Namespace) -> None:
    from tests.interop import test_pb2
    from tests.interop.servicer import TestServiceServicer

    if options.impl == "grpcio":
        import grpc
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc
        from grpc_reflection.v1alpha import reflection

        from minigrpc.descriptors import add_servicer

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        servicer = TestServiceServicer(grpc_module=grpc)
    else:
        import minigrpc
        from minigrpc.descriptors import add_servicer
        from minigrpc.health.v1 import health, health_pb2, health_pb2_grpc
        from minigrpc.reflection.v1alpha import reflection

        server = minigrpc.server(futures.ThreadPoolExecutor(max_workers=8))
        servicer = TestServiceServicer()
    add_servicer(server, test_pb2.DESCRIPTOR.services_by_name["TestService"], servicer)
    if not options.no_health:
        health_servicer = health.HealthServicer()
        health_servicer.set(SERVING_SERVICE, health_pb2.HealthCheckResponse.SERVING)
        health_servicer.set(NOT_SERVING_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if not options.no_reflection:
        reflection.enable_server_reflection(_names(options, reflection.SERVICE_NAME), server)
    ports = [server.add_insecure_port(address) for address in options.listen]
    server.start()
    _announce([_target(address, port) for address, port in zip(options.listen, ports)])
    sys.stdin.read()
    server.stop(None)


async def serve_asyncio(options: argparse.Namespace) -> None:
    from minigrpc import aio
    from minigrpc.descriptors import add_servicer
    from minigrpc.health.v1 import health, health_pb2, health_pb2_grpc
    from minigrpc.reflection.v1alpha import reflection
    from tests.interop import test_pb2
    from tests.interop.servicer import TestServiceServicer

    server = aio.server()
    add_servicer(server, test_pb2.DESCRIPTOR.services_by_name["TestService"],
                 TestServiceServicer())
    if not options.no_health:
        health_servicer = health.aio.HealthServicer()
        await health_servicer.set(SERVING_SERVICE, health_pb2.HealthCheckResponse.SERVING)
        await health_servicer.set(NOT_SERVING_SERVICE,
                                  health_pb2.HealthCheckResponse.NOT_SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if not options.no_reflection:
        reflection.enable_server_reflection(_names(options, reflection.SERVICE_NAME), server)
    ports = [server.add_insecure_port(address) for address in options.listen]
    await server.start()
    _announce([_target(address, port) for address, port in zip(options.listen, ports)])
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await server.stop(None)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cli.serve")
    parser.add_argument("--impl", choices=("minigrpc", "minigrpc-aio", "grpcio"), required=True)
    parser.add_argument("--listen", action="append", required=True)
    parser.add_argument("--no-reflection", action="store_true")
    parser.add_argument("--no-health", action="store_true")
    options = parser.parse_args(argv)
    if options.impl == "minigrpc-aio":
        asyncio.run(serve_asyncio(options))
    else:
        serve_blocking(options)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
