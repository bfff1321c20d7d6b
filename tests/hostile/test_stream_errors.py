"""A stream's error is the stream's, whatever frames share the read that carries it.

The server's HTTP/2 connection (:mod:`minigrpc.http2.connection`) decodes a whole read before
the server sees its events, so when the request the server rejects (or fails) arrives in the
same read as frames that close its stream (RST_STREAM, a WINDOW_UPDATE overflowing the stream's
window past 2^31-1, DATA after END_STREAM), the stream is already closed in the connection by
the time the server answers it. The answer must then be dropped
quietly: RFC 9113 §5.4.2 makes each of these a stream error, and §5.1 says a closed stream gets
nothing more. The connection, and the live bidi call on its stream 1, must go on.

Every ordering of every non-empty subset of the closing frames follows each kind of request,
in one write (so in one read: the server reads up to 64 KiB at once), on one connection,
against the server in its own process (:class:`tests.hostile.test_hostile_server.ServerProcess`).
"""

from __future__ import annotations

import itertools
from typing import Callable, Dict, Iterator, List, Tuple

import pytest
from hyperframe.frame import DataFrame, RstStreamFrame, WindowUpdateFrame

from tests.hostile.test_hostile_server import (
    CHAT,
    ECHO,
    SERVER_KINDS,
    WAIT,
    ServerProcess,
    request_headers,
)
from tests.support.scripted_peer import (
    HostileClient,
    grpc_message,
    grpc_status_of,
)

Header = Tuple[bytes, bytes]

#: The requests whose answer races the closing frames.
REQUESTS: Dict[str, List[Header]] = {
    # Not gRPC at all: the server answers 405/415 with a Trailers-Only status.
    "non_grpc_get": [
        (b":method", b"GET"),
        (b":scheme", b"http"),
        (b":path", b"/"),
        (b":authority", b"localhost"),
    ],
    # doc/compression.md: UNIMPLEMENTED for an encoding the server does not support.
    "unknown_grpc_encoding": request_headers(ECHO, grpc_encoding=b"snappy"),
    # A valid unary call that the frames below make fail (partial message, no message).
    "unary_call": request_headers(ECHO),
}

CANCEL = 8

#: Frames that close (or end) the stream, by name.
CLOSERS: Dict[str, Callable[[int], bytes]] = {
    "rst_stream": lambda sid: RstStreamFrame(sid, error_code=CANCEL).serialize(),
    # 65,535 + 2 x 2^30 > 2^31-1: a stream error FLOW_CONTROL_ERROR (RFC 9113 §6.9.1).
    "window_overflow": lambda sid: WindowUpdateFrame(sid, window_increment=1 << 30).serialize()
    * 2,
    # Half a message: the call cannot complete.
    "data": lambda sid: DataFrame(sid, grpc_message(b"partial")[:4]).serialize(),
    "end_stream": lambda sid: DataFrame(sid, b"", flags=["END_STREAM"]).serialize(),
}


def orderings() -> Iterator[Tuple[str, ...]]:
    names = sorted(CLOSERS)
    for size in range(1, len(names) + 1):
        yield from itertools.permutations(names, size)


@pytest.fixture(params=SERVER_KINDS)
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """The blocking server and the asyncio one."""
    process = ServerProcess(kind=request.param)
    try:
        yield process
    finally:
        code, output = process.stop()
        assert "Traceback" not in output, output
        assert code == 0, output


class LiveChat:
    """The bidi call on stream 1: each :meth:`round_trip` must come back echoed."""

    def __init__(self, client: HostileClient) -> None:
        self.client = client
        self.sent: List[bytes] = []
        client.send_headers(1, request_headers(CHAT))

    def round_trip(self, label: str) -> bool:
        payload = f"{len(self.sent)}:{label}".encode()
        self.sent.append(payload)
        self.client.send_frame(DataFrame(1, grpc_message(payload)))
        wanted = len(self.sent)
        return self.client.wait_for(
            lambda: self.client.eof
            or (1 in self.client.streams and len(self.client.streams[1].messages) >= wanted),
            WAIT,
        ) and not self.client.eof

    def finish(self) -> Tuple[object, List[bytes]]:
        self.client.send_frame(DataFrame(1, b"", flags=["END_STREAM"]))
        record = self.client.wait_stream_done(1)
        return grpc_status_of(record), record.messages


def _expect_answer(kind: str, ordering: Tuple[str, ...]) -> bool:
    """Whether the server owes the stream an answer we can wait for (END_STREAM or RST)."""
    if "rst_stream" in ordering or "window_overflow" in ordering:
        return False  # the client closed it, or the connection reset it (FLOW_CONTROL_ERROR)
    # A valid call with half a message and no END_STREAM is still waiting for the rest, and a
    # request that is not gRPC is answered once complete (docs/wire-rules.md).
    return kind == "unknown_grpc_encoding" or "end_stream" in ordering


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", sorted(REQUESTS))
def test_stream_error_ends_only_its_stream(server: ServerProcess, kind: str) -> None:
    with HostileClient(server.target) as client:
        client.send_preface()
        chat = LiveChat(client)
        assert chat.round_trip("before"), "the bidi call did not answer"
        failures = []
        stream_id = 3
        for ordering in orderings():
            label = "+".join(ordering)
            frames = client.header_frames(stream_id, REQUESTS[kind])
            frames += b"".join(CLOSERS[name](stream_id) for name in ordering)
            client.send(frames)
            if not chat.round_trip(label):
                failures.append(f"{label}: the connection died")
                break
            record = client.streams.get(stream_id)
            if _expect_answer(kind, ordering) and (record is None or not record.done):
                failures.append(f"{label}: stream {stream_id} got no answer")
            stream_id += 2
        goaways = [(g.error_code, g.additional_data) for g in client.goaways]
        status, messages = chat.finish() if not client.eof else (None, [])
    assert not failures, failures
    assert not goaways, goaways
    assert (status, messages) == (0, chat.sent)
