"""What h2 alone costs per unary call: the floor under every minigrpc call.

minigrpc does its HTTP/2 through h2, hpack and hyperframe, so no minigrpc call can cost less
than the work those libraries do for it. This measures that work with nothing else around it:
one h2 client connection and one h2 server connection, configured exactly as minigrpc configures
them (:func:`minigrpc.http2.client_config`, :func:`minigrpc.http2.start_connection`), pass the
bytes of the benchmark's echo call to each other in memory, in one thread, with no socket, no
lock and no gRPC layer. Per call, the client sends minigrpc's request headers
(:func:`minigrpc.headers.request_headers`) and the length-prefixed message, and takes in
the response; the server takes in the request and sends response headers, the message and the
trailers; each side acknowledges the DATA it received, as minigrpc does.

The result is the time of each side's h2 work per call, in microseconds (median of rounds).
Compare it with a client's or a server's whole CPU per call in the latency and throughput
sections: when h2's share alone exceeds what the reference library needs for the entire call,
no change inside minigrpc can meet that target.

Run as ``python -m bench.h2floor [--calls N] [--rounds R]``; it prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Dict, List, Optional, Sequence

import h2.connection
import h2.events

from bench.peers import ECHO_PATH
from bench.workloads import make_payload
from minigrpc import http2, wire
from minigrpc.headers import request_headers

_RESPONSE_HEADERS = [
    (b":status", b"200"),
    (b"content-type", b"application/grpc"),
    (b"grpc-accept-encoding", wire.ACCEPT_ENCODING.encode("ascii")),
]
_TRAILERS = [(b"grpc-status", b"0"), (b"grpc-message", b"")]


def _acknowledge(conn: h2.connection.H2Connection, events: List[Any]) -> None:
    for event in events:
        if isinstance(event, h2.events.DataReceived):
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)


def measure(calls: int, size: int) -> Dict[str, float]:
    """``calls`` echo calls on a fresh connection pair; µs of client and server h2 work each."""
    client = h2.connection.H2Connection(http2.client_config())
    server = h2.connection.H2Connection(http2.server_config())
    http2.start_connection(client)
    http2.start_connection(server)
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    headers = request_headers(path=ECHO_PATH, authority="localhost",
                              user_agent="grpc-python-minigrpc/bench")
    message = wire.encode_message(make_payload(size))
    client_s = server_s = 0.0
    for _ in range(calls):
        started = time.perf_counter()
        stream_id = client.get_next_available_stream_id()
        client.send_headers(stream_id, headers)
        client.send_data(stream_id, message, end_stream=True)
        request = client.data_to_send()
        sent = time.perf_counter()
        _acknowledge(server, server.receive_data(request))
        server.send_headers(stream_id, _RESPONSE_HEADERS)
        server.send_data(stream_id, message)
        server.send_headers(stream_id, _TRAILERS, end_stream=True)
        response = server.data_to_send()
        answered = time.perf_counter()
        _acknowledge(client, client.receive_data(response))
        acks = client.data_to_send()
        received = time.perf_counter()
        server.receive_data(acks)
        done = time.perf_counter()
        client_s += (sent - started) + (received - answered)
        server_s += (answered - sent) + (done - received)
    return {"client_us": client_s / calls * 1e6, "server_us": server_s / calls * 1e6}


def run(calls: int, rounds: int, size: int) -> Dict[str, Any]:
    samples = [measure(calls, size) for _ in range(rounds)]
    return {
        "calls": calls,
        "rounds": rounds,
        "client_us": statistics.median(sample["client_us"] for sample in samples),
        "server_us": statistics.median(sample["server_us"] for sample in samples),
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.h2floor")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=200)
    options = parser.parse_args(argv)
    try:
        result = run(options.calls, options.rounds, options.size)
    except Exception as exc:  # one line for the report, never a traceback
        result = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
