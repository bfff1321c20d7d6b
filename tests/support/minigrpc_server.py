"""A running minigrpc server for the tests, and the interop calls they make to it.

* :class:`MinigrpcServer` runs ``minigrpc.server()`` with the interop ``TestService`` (and any
  extra generic handlers) on each address kind a client dials (``unix``, ``unix-abstract``,
  ``tcp``: gRPC's doc/naming.md), so every test can run over all three.
* :func:`interop_callables` builds grpcio multi-callables for the interop methods.

The raw HTTP/2 client that sends what gRPC libraries never would is the scripted peer's
(:class:`tests.support.scripted_peer.RawH2Client`).  Nothing here sleeps to synchronise.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import minigrpc
from minigrpc.descriptors import add_servicer
from tests.interop import empty_pb2, messages_pb2, test_pb2
from tests.interop.servicer import TestServiceServicer
from tests.peers import ADDRESS_KINDS, listen_address, short_temp_dir
from tests.support.scripted_peer import EMPTY_PATH

__all__ = [
    "ADDRESS_KINDS",
    "EMPTY_PATH",
    "IO_THREAD_OPTION",
    "MinigrpcServer",
    "interop_callables",
]

UNARY_PATH = "/grpc.testing.TestService/UnaryCall"
#: The server option that runs unary-unary handlers on the I/O thread
#: (minigrpc/driver/server_options.py).
IO_THREAD_OPTION = ("minigrpc.unary_handlers_on_io_thread", 1)


class MinigrpcServer:
    """A started minigrpc server with the interop servicer; stop it with :meth:`stop`.

    ``kind`` is an address kind; ``target`` is what a client dials.  ``handlers`` are extra
    generic handlers; ``server_kwargs`` go to ``minigrpc.server()``.
    """

    def __init__(
        self,
        kind: str,
        handlers: Sequence[Any] = (),
        with_interop: bool = True,
        **server_kwargs: Any,
    ) -> None:
        self.kind = kind
        self.directory = short_temp_dir() if kind == "unix" else None
        self.servicer = TestServiceServicer()
        self.server = minigrpc.server(**server_kwargs)
        if with_interop:
            add_servicer(
                self.server, test_pb2.DESCRIPTOR.services_by_name["TestService"], self.servicer
            )
        if handlers:
            self.server.add_generic_rpc_handlers(handlers)
        address = listen_address(kind, self.directory)
        port = self.server.add_insecure_port(address)
        self.target = f"127.0.0.1:{port}" if kind == "tcp" else address
        self.server.start()

    @property
    def socket_path(self) -> Optional[str]:
        return self.target[len("unix:") :] if self.kind == "unix" else None

    def stop(self, grace: Optional[float] = None) -> None:
        self.servicer.release_sleepers()
        assert self.server.stop(grace).wait(30), "the minigrpc server did not stop"

    def __enter__(self) -> MinigrpcServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        if self.directory:
            import shutil

            shutil.rmtree(self.directory, ignore_errors=True)


def interop_callables(channel: Any) -> Tuple[Any, Any]:
    """``(EmptyCall, UnaryCall)`` multi-callables on a grpcio or minigrpc channel."""
    empty = channel.unary_unary(
        EMPTY_PATH,
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=empty_pb2.Empty.FromString,
    )
    unary = channel.unary_unary(
        UNARY_PATH,
        request_serializer=messages_pb2.SimpleRequest.SerializeToString,
        response_deserializer=messages_pb2.SimpleResponse.FromString,
    )
    return empty, unary


def large_unary_request(**fields: Any) -> Any:
    """large_unary of gRPC's doc/interop-test-descriptions.md: 271,828 request bytes, 314,159
    response bytes."""
    return messages_pb2.SimpleRequest(
        response_size=314159, payload=messages_pb2.Payload(body=bytes(271828)), **fields
    )


def run_in_threads(count: int, function: Callable[[int], None]) -> List[BaseException]:
    """Run ``function(i)`` on ``count`` threads; return the exceptions they raised."""
    errors: List[BaseException] = []
    lock = threading.Lock()

    def runner(index: int) -> None:
        try:
            function(index)
        except BaseException as exc:  # collected and asserted on by the caller
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return errors


def echo_from_threads(
    insecure_channel: Callable[[str], Any],
    target: str,
    path: str,
    channels: int,
    threads: int,
    calls: int = 100,
    timeout: float = 10.0,
) -> List[BaseException]:
    """``threads`` threads, spread over ``channels`` channels to ``target``, each making ``calls``
    echo calls of ``path`` with payloads unique to the thread and call; return what they raised.

    ``insecure_channel`` is grpcio's or minigrpc's; the channels are closed afterwards.
    """
    opened = [insecure_channel(target) for _ in range(channels)]
    try:

        def work(index: int) -> None:
            echo = opened[index % channels].unary_unary(path)
            for call_number in range(calls):
                payload = f"{index}-{call_number}".encode()
                assert echo(payload, timeout=timeout) == payload

        return run_in_threads(threads, work)
    finally:
        for channel in opened:
            channel.close()


def iterate_kinds() -> Iterator[str]:
    yield from ADDRESS_KINDS
