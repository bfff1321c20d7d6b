"""What h2 alone costs per unary call: the pure-Python HTTP/2 reference.

grpclib, and minigrpc until its own HTTP/2 connection replaced it, do their HTTP/2 through h2,
hpack and hyperframe, so no call on them can cost less than the work those libraries do for it.
This measures that work with nothing else around it: one h2 client connection and one h2 server
connection, configured as minigrpc's tests configure h2 as a peer
(:func:`tests.support.h2_peer.client_config`, :func:`tests.support.h2_peer.start_connection`:
minigrpc's SETTINGS values, no header validation or normalisation), pass the bytes of the
benchmark's echo call to each other in memory, in one thread, with no socket, no lock and no
gRPC layer. Per call, the client sends minigrpc's request headers
(:func:`minigrpc.protocol.headers.request_headers`) and the length-prefixed message, and takes in
the response; the server takes in the request and sends response headers, the message and the
trailers; each side acknowledges the DATA it received, as minigrpc does.

The server side answers the way one of the bench's real servers does, frame for frame, because
the client pays h2's price for every frame it receives (see a call in each with
``MINIGRPC_TRACE=1``):

``grpcio``
    response headers with ``grpc-accept-encoding``, the message, trailers, then a connection
    WINDOW_UPDATE for the request's bytes;
``grpc-go``
    first a connection WINDOW_UPDATE and a PING (grpc-go's bandwidth probe), then response
    headers, the message and trailers; the client answers the PING with a PING ACK.

The result is the time of each side's h2 work per call, in microseconds (median of rounds), for
each pattern.
Compare it with a client's or a server's whole CPU per call in the latency and throughput
sections: it is what an h2-based library spends on HTTP/2 alone, and the client CPU targets of
docs/benchmarks.md are divided by it.

Run as ``python -m bench.h2floor [--calls N] [--rounds R]``; it prints one JSON object. With
``--options`` it measures instead what each of h2's header options costs (:func:`compare_options`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import h2.config
import h2.connection
import h2.events

from bench.peers import ECHO_PATH
from bench.workloads import make_payload
from minigrpc.protocol import headers, wire
from minigrpc.protocol.headers import request_headers
from tests.support.h2_peer import client_config, server_config, start_connection

_TRAILERS = [(b"grpc-status", b"0"), (b"grpc-message", b"")]
_PING_PAYLOAD = b"\x02\x04\x10\x10\x09\x0e\x07\x07"


class ServerPattern:
    """The frames one real server sends for a unary call, around the response itself."""

    def __init__(self, name: str, response_headers: List[Tuple[bytes, bytes]],
                 update_window_first: bool, ping_first: bool) -> None:
        self.name = name
        self.response_headers = response_headers
        #: WINDOW_UPDATE for the request's bytes before the response (else after it).
        self.update_window_first = update_window_first
        #: A PING before the response, which the client must acknowledge.
        self.ping_first = ping_first


PATTERNS = {
    pattern.name: pattern
    for pattern in (
        ServerPattern("grpcio", [(b":status", b"200"), (b"content-type", b"application/grpc"),
                                 (b"grpc-accept-encoding", b"identity, deflate, gzip")],
                      update_window_first=False, ping_first=False),
        ServerPattern("grpc-go", [(b":status", b"200"), (b"content-type", b"application/grpc")],
                      update_window_first=True, ping_first=True),
    )
}


def _acknowledge(conn: h2.connection.H2Connection, events: List[Any]) -> int:
    """Acknowledge received DATA as minigrpc does; the flow-controlled bytes received."""
    received = 0
    for event in events:
        if isinstance(event, h2.events.DataReceived):
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            received += event.flow_controlled_length
    return received


def measure(calls: int, size: int, pattern: ServerPattern = PATTERNS["grpcio"],
            changes: Optional[Dict[str, bool]] = None) -> Dict[str, float]:
    """``calls`` echo calls on a fresh connection pair; µs of client and server h2 work each.

    ``changes`` overrides some of minigrpc's h2 options (:data:`H2_OPTIONS`) on both sides."""
    client = h2.connection.H2Connection(_configured(client_config(), changes))
    server = h2.connection.H2Connection(_configured(server_config(), changes))
    start_connection(client)
    start_connection(server)
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
        request_bytes = _acknowledge(server, server.receive_data(request))
        if pattern.update_window_first:
            server.increment_flow_control_window(request_bytes)
        if pattern.ping_first:
            server.ping(_PING_PAYLOAD)
        server.send_headers(stream_id, pattern.response_headers)
        server.send_data(stream_id, message)
        server.send_headers(stream_id, _TRAILERS, end_stream=True)
        if not pattern.update_window_first:
            server.increment_flow_control_window(request_bytes)
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


#: h2's header options (``H2Configuration``), each of which the peer configuration sets
#: (:func:`tests.support.h2_peer.client_config`).
H2_OPTIONS = ("validate_outbound_headers", "normalize_outbound_headers",
              "validate_inbound_headers", "normalize_inbound_headers")


def _configured(config: h2.config.H2Configuration, changes: Optional[Dict[str, bool]]
                ) -> h2.config.H2Configuration:
    for name, value in (changes or {}).items():
        setattr(config, name, value)
    return config


def compare_options(calls: int, rounds: int, size: int) -> Dict[str, Any]:
    """h2's work per call (grpc-go's pattern) with the peer configuration's options, then each
    one flipped, and what minigrpc's own checks of received blocks cost (the work h2's inbound
    validation would do)."""
    pattern = PATTERNS["grpc-go"]
    ours = client_config()
    variants: Dict[str, Optional[Dict[str, bool]]] = {"the peer's options": None}
    for name in H2_OPTIONS:
        flipped = not getattr(ours, name)
        variants[f"{name}={flipped}"] = {name: flipped}
    result: Dict[str, Any] = {"calls": calls, "rounds": rounds, "pattern": pattern.name,
                              "variants": {}}
    for label, changes in variants.items():
        samples = [measure(calls, size, pattern, changes) for _ in range(rounds)]
        result["variants"][label] = {
            side: statistics.median(sample[side] for sample in samples)
            for side in ("client_us", "server_us")}
    result["own_checks_us"] = _own_checks(calls, rounds, pattern)
    return result


def _own_checks(calls: int, rounds: int, pattern: ServerPattern) -> Dict[str, float]:
    """µs per call of minigrpc's checks of the blocks each side receives in ``pattern``."""
    request = request_headers(path=ECHO_PATH, authority="localhost",
                              user_agent="grpc-python-minigrpc/bench")
    response, trailers = pattern.response_headers, _TRAILERS
    client_times, server_times = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            headers.malformed_response(response)
            headers.malformed_trailers(trailers)
        middle = time.perf_counter()
        for _ in range(calls):
            headers.malformed_request(request)
        done = time.perf_counter()
        client_times.append((middle - started) / calls * 1e6)
        server_times.append((done - middle) / calls * 1e6)
    return {"client_us": statistics.median(client_times),
            "server_us": statistics.median(server_times)}


def run(calls: int, rounds: int, size: int) -> Dict[str, Any]:
    """Medians of ``rounds`` rounds per pattern: ``{pattern: {"client_us", "server_us"}}``."""
    result: Dict[str, Any] = {"calls": calls, "rounds": rounds, "patterns": {}}
    for name, pattern in PATTERNS.items():
        samples = [measure(calls, size, pattern) for _ in range(rounds)]
        result["patterns"][name] = {
            "client_us": statistics.median(sample["client_us"] for sample in samples),
            "server_us": statistics.median(sample["server_us"] for sample in samples),
        }
    return result


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.h2floor")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--options", action="store_true",
                        help="flip each of h2's header options in turn (compare_options)")
    options = parser.parse_args(argv)
    try:
        measure_all = compare_options if options.options else run
        result = measure_all(options.calls, options.rounds, options.size)
    except Exception as exc:  # one line for the report, never a traceback
        result = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
