"""The stream states of RFC 9113 §5.1 as :data:`minigrpc.http2.streams.TRANSITIONS` says them,
cell by cell, against a real connection.

Each test brings a stream of an :class:`~minigrpc.http2.connection.HTTP2Connection` (the end on
which the state comes naturally) into one state, sends or receives one frame, and checks that
what the connection does is what the table's cell says: the next state, the frame ignored, a
stream error STREAM_CLOSED (RST_STREAM, the connection goes on), a connection error (GOAWAY with
PROTOCOL_ERROR or STREAM_CLOSED), or a send that is refused.  So every cell, the error cells
included, is held by the code that consults it; the cells themselves are checked against the
RFC's text in :func:`test_the_table_says_what_rfc_9113_says`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import pytest

from minigrpc.http2 import frames, hpack_codec, streams
from minigrpc.http2.client import ClientHTTP2Connection
from minigrpc.http2.connection import HTTP2Connection
from minigrpc.http2.events import PeerConnectionError
from minigrpc.http2.server import ServerHTTP2Connection
from minigrpc.http2.streams import (
    CLOSED,
    CLOSED_BY_PEER,
    CLOSED_BY_US,
    CLOSED_UNOPENED,
    CONNECTION_PROTOCOL_ERROR,
    CONNECTION_STREAM_CLOSED,
    HALF_CLOSED_LOCAL,
    HALF_CLOSED_REMOTE,
    IDLE,
    IGNORE,
    NOT_ALLOWED,
    OPEN,
    RECV_DATA,
    RECV_END_STREAM,
    RECV_HEADERS,
    RECV_PRIORITY,
    RECV_RST_STREAM,
    RECV_WINDOW_UPDATE,
    SEND_DATA,
    SEND_END_STREAM,
    SEND_HEADERS,
    SEND_RST_STREAM,
    STATE_NAMES,
    STREAM_CLOSED_ERROR,
    TRANSITIONS,
)
from tests.unit.test_client_http2 import REQUEST, RESPONSE, TRAILERS
from tests.unit.test_status_and_http2 import read_frames

ACTIVE = (OPEN, HALF_CLOSED_LOCAL, HALF_CLOSED_REMOTE)


def block(fields: List[Tuple[bytes, bytes]]) -> bytes:
    return hpack_codec.Encoder().encode(hpack_codec.outbound_fields(fields))


def headers(stream_id: int, fields: List[Tuple[bytes, bytes]], end_stream: bool = False) -> bytes:
    flags = frames.END_HEADERS | (frames.END_STREAM if end_stream else 0)
    return frames.frame_bytes(frames.HEADERS, flags, stream_id, block(fields))


def server() -> ServerHTTP2Connection:
    conn = ServerHTTP2Connection()
    conn.initiate()
    assert not isinstance(
        conn.receive_data(frames.CLIENT_PREFACE + frames.settings_frame(()))[-1],
        PeerConnectionError,
    )
    conn.data_to_send()
    return conn


def client() -> ClientHTTP2Connection:
    conn = ClientHTTP2Connection()
    conn.initiate()
    conn.receive_data(frames.settings_frame(()))
    conn.data_to_send()
    return conn


def receive(conn: HTTP2Connection, data: bytes) -> List[Any]:
    events = conn.receive_data(data)
    assert not any(isinstance(event, PeerConnectionError) for event in events), events
    return events


# Each state, on the end where it comes naturally: (connection, stream id).


def _idle() -> Tuple[HTTP2Connection, int]:
    return server(), 3


def _open() -> Tuple[HTTP2Connection, int]:
    conn = client()
    conn.send_headers(1, REQUEST)
    return conn, 1


def _half_closed_local() -> Tuple[HTTP2Connection, int]:
    conn = client()
    conn.send_headers(1, REQUEST, end_stream=True)
    return conn, 1


def _half_closed_remote() -> Tuple[HTTP2Connection, int]:
    conn = server()
    receive(conn, headers(1, REQUEST, end_stream=True))
    return conn, 1


def _closed() -> Tuple[HTTP2Connection, int]:
    conn, stream_id = _half_closed_local()
    receive(conn, headers(stream_id, RESPONSE + TRAILERS, end_stream=True))
    return conn, stream_id


def _closed_by_us() -> Tuple[HTTP2Connection, int]:
    conn, stream_id = _open()
    conn.reset_stream(stream_id, frames.CANCEL)
    return conn, stream_id


def _closed_by_peer() -> Tuple[HTTP2Connection, int]:
    conn, stream_id = _open()
    receive(conn, frames.rst_stream_frame(stream_id, frames.CANCEL))
    return conn, stream_id


def _closed_unopened() -> Tuple[HTTP2Connection, int]:
    conn = server()
    receive(conn, headers(5, REQUEST, end_stream=True))
    return conn, 3


SETUPS: Dict[int, Callable[[], Tuple[HTTP2Connection, int]]] = {
    IDLE: _idle,
    OPEN: _open,
    HALF_CLOSED_LOCAL: _half_closed_local,
    HALF_CLOSED_REMOTE: _half_closed_remote,
    CLOSED: _closed,
    CLOSED_BY_US: _closed_by_us,
    CLOSED_BY_PEER: _closed_by_peer,
    CLOSED_UNOPENED: _closed_unopened,
}


def frame_for(event: int, conn: HTTP2Connection, stream_id: int) -> bytes:
    """The frame that is ``event`` on ``stream_id``: a request block to a server, a response
    block to a client; PRIORITY that makes the stream depend on itself, the one PRIORITY a
    stream notices (RFC 9113 §5.3.1)."""
    if event == RECV_HEADERS:
        return headers(stream_id, RESPONSE if conn.client else REQUEST)
    if event == RECV_DATA:
        return frames.data_frame(stream_id, b"x", False)
    if event == RECV_END_STREAM:
        return frames.data_frame(stream_id, b"", True)
    if event == RECV_RST_STREAM:
        return frames.rst_stream_frame(stream_id, frames.CANCEL)
    if event == RECV_WINDOW_UPDATE:
        return frames.window_update_frame(stream_id, 1)
    assert event == RECV_PRIORITY
    return frames.frame_bytes(frames.PRIORITY, 0, stream_id, stream_id.to_bytes(4, "big") + b"\x10")


RECEIVED = (RECV_HEADERS, RECV_DATA, RECV_END_STREAM, RECV_RST_STREAM, RECV_WINDOW_UPDATE,
            RECV_PRIORITY)
CELLS = [(state, event) for state in SETUPS for event in RECEIVED]


@pytest.mark.parametrize(
    ("state", "event"), CELLS,
    ids=[f"{STATE_NAMES[s]}-{streams.EVENT_NAMES[e]}" for s, e in CELLS],
)
def test_each_received_frame_does_what_its_cell_says(state: int, event: int) -> None:
    conn, stream_id = SETUPS[state]()
    assert conn.stream_state(stream_id) == state
    conn.data_to_send()
    cell = TRANSITIONS[state][event]
    events = conn.receive_data(frame_for(event, conn, stream_id))
    sent = frames_of(conn.data_to_send())
    goaways = [frame.error_code for frame in sent if frame.type == frames.GOAWAY]
    resets = [(frame.stream_id, frame.error_code) for frame in sent
              if frame.type == frames.RST_STREAM]
    if cell in (CONNECTION_PROTOCOL_ERROR, CONNECTION_STREAM_CLOSED):
        code = frames.PROTOCOL_ERROR if cell == CONNECTION_PROTOCOL_ERROR else frames.STREAM_CLOSED
        assert goaways == [code] and isinstance(events[-1], PeerConnectionError), (sent, events)
        return
    assert not goaways, events
    if cell == IGNORE:
        assert (events, resets, conn.stream_state(stream_id)) == ([], [], state)
    elif cell == STREAM_CLOSED_ERROR:
        assert resets == [(stream_id, frames.STREAM_CLOSED)]
        assert conn.stream_state(stream_id) == (CLOSED_BY_US if state in ACTIVE else state)
    elif event == RECV_PRIORITY:  # a stream that is not closed depends on itself: reset
        assert resets == [(stream_id, frames.PROTOCOL_ERROR)]
        assert conn.stream_state(stream_id) == (CLOSED_BY_US if state in ACTIVE else cell)
    else:
        assert resets == [] and events, events
        assert conn.stream_state(stream_id) == cell


def frames_of(data: bytes) -> List[frames.Frame]:
    return [frames.read_frame(*frame) for frame in read_frames(frames.FrameReader(), data)]


# -- what we send --------------------------------------------------------------------------------


def _server_open() -> Tuple[HTTP2Connection, int]:
    conn = server()
    receive(conn, headers(1, REQUEST))
    return conn, 1


def _server_half_closed_local() -> Tuple[HTTP2Connection, int]:
    conn, stream_id = _server_open()
    conn.send_headers(stream_id, RESPONSE)
    conn.send_headers(stream_id, TRAILERS, end_stream=True)
    return conn, stream_id


#: The ends that send in each state: a server answers on the streams a client opens.
SENDERS: Dict[int, Callable[[], Tuple[HTTP2Connection, int]]] = {
    **SETUPS,
    IDLE: lambda: (client(), 1),
    OPEN: _server_open,
    HALF_CLOSED_LOCAL: _server_half_closed_local,
}


@pytest.mark.parametrize("state", list(SENDERS), ids=[STATE_NAMES[s] for s in SENDERS])
def test_what_we_may_send_in_each_state(state: int) -> None:
    """SEND_HEADERS, SEND_DATA (what :meth:`local_flow_control_window` allows), SEND_END_STREAM
    and SEND_RST_STREAM, each from a fresh stream in ``state``; one that is not allowed
    raises, or for RST_STREAM sends nothing."""
    fields = REQUEST if state == IDLE else RESPONSE
    for event, send in (
        (SEND_HEADERS, lambda conn, sid: conn.send_headers(sid, fields)),
        (SEND_END_STREAM, lambda conn, sid: conn.end_stream(sid)),
        (SEND_RST_STREAM, lambda conn, sid: conn.reset_stream(sid, frames.CANCEL)),
    ):
        if state == IDLE and event == SEND_RST_STREAM:
            continue  # only ever the answer to a PRIORITY that depends on itself (above)
        conn, stream_id = SENDERS[state]()
        assert conn.stream_state(stream_id) == state
        conn.data_to_send()
        cell = TRANSITIONS[state][event]
        if cell == NOT_ALLOWED and event != SEND_RST_STREAM:
            with pytest.raises(ValueError):
                send(conn, stream_id)
            continue
        send(conn, stream_id)
        sent = frames_of(conn.data_to_send())
        if cell == NOT_ALLOWED:
            assert sent == []
            continue
        assert sent and conn.stream_state(stream_id) == cell, (STATE_NAMES[state], event)
    conn, stream_id = SENDERS[state]()
    may_send = conn.local_flow_control_window(stream_id) > 0
    assert may_send == (TRANSITIONS[state][SEND_DATA] >= 0)


# -- the table against the RFC's text -------------------------------------------------------------


def test_every_state_has_a_cell_for_every_event() -> None:
    assert sorted(TRANSITIONS) == list(range(len(STATE_NAMES)))
    for state, cells in TRANSITIONS.items():
        assert sorted(cells) == list(range(len(streams.EVENT_NAMES))), STATE_NAMES[state]
        for event, cell in cells.items():
            assert streams.outcome(state, event) == cell
            assert cell in streams.OUTCOME_NAMES or 0 <= cell < len(STATE_NAMES)


def test_the_table_says_what_rfc_9113_says() -> None:
    """RFC 9113 §5.1, sentence by sentence."""
    table = TRANSITIONS
    # "idle": sending or receiving HEADERS opens it; receiving any frame other than HEADERS or
    # PRIORITY is a connection error PROTOCOL_ERROR.
    assert table[IDLE][SEND_HEADERS] == table[IDLE][RECV_HEADERS] == OPEN
    assert table[IDLE][RECV_PRIORITY] == IDLE
    for event in (RECV_DATA, RECV_RST_STREAM, RECV_WINDOW_UPDATE):
        assert table[IDLE][event] == CONNECTION_PROTOCOL_ERROR
    # "open": END_STREAM moves it to half-closed, RST_STREAM either way to closed.
    assert table[OPEN][SEND_END_STREAM] == HALF_CLOSED_LOCAL
    assert table[OPEN][RECV_END_STREAM] == HALF_CLOSED_REMOTE
    assert (table[OPEN][SEND_RST_STREAM], table[OPEN][RECV_RST_STREAM]) == (
        CLOSED_BY_US, CLOSED_BY_PEER
    )
    # "half-closed (local)": nothing more is sent but RST_STREAM; frames of any type are
    # received; the peer's END_STREAM closes it.
    for event in (SEND_HEADERS, SEND_DATA, SEND_END_STREAM):
        assert table[HALF_CLOSED_LOCAL][event] == NOT_ALLOWED
    assert table[HALF_CLOSED_LOCAL][RECV_END_STREAM] == CLOSED
    # "half-closed (remote)": a frame other than WINDOW_UPDATE, PRIORITY or RST_STREAM is a
    # stream error STREAM_CLOSED; our END_STREAM closes it.
    for event in (RECV_HEADERS, RECV_DATA):
        assert table[HALF_CLOSED_REMOTE][event] == STREAM_CLOSED_ERROR
    assert table[HALF_CLOSED_REMOTE][RECV_WINDOW_UPDATE] == HALF_CLOSED_REMOTE
    assert table[HALF_CLOSED_REMOTE][SEND_END_STREAM] == CLOSED
    # "closed": nothing is sent; WINDOW_UPDATE, RST_STREAM and PRIORITY are ignored; after our
    # RST_STREAM everything is ignored; after the peer's, frames are a stream error
    # STREAM_CLOSED; after END_STREAM both ways, DATA and HEADERS a connection error.
    for state in (CLOSED, CLOSED_BY_US, CLOSED_BY_PEER, CLOSED_UNOPENED):
        for event in (SEND_HEADERS, SEND_DATA, SEND_END_STREAM, SEND_RST_STREAM):
            assert table[state][event] == NOT_ALLOWED
        for event in (RECV_WINDOW_UPDATE, RECV_RST_STREAM, RECV_PRIORITY):
            assert table[state][event] == IGNORE
    assert all(table[CLOSED_BY_US][event] == IGNORE for event in RECEIVED)
    assert table[CLOSED_BY_PEER][RECV_DATA] == table[CLOSED_BY_PEER][RECV_HEADERS] == (
        STREAM_CLOSED_ERROR
    )
    assert table[CLOSED][RECV_DATA] == table[CLOSED][RECV_HEADERS] == CONNECTION_STREAM_CLOSED
    # RFC 9113 §5.1.1: a stream below one the peer opened cannot be opened any more.
    assert table[CLOSED_UNOPENED][RECV_HEADERS] == CONNECTION_PROTOCOL_ERROR


@pytest.mark.parametrize(
    ("state", "code"),
    [(IDLE, frames.PROTOCOL_ERROR), (CLOSED, frames.STREAM_CLOSED),
     (CLOSED_UNOPENED, frames.PROTOCOL_ERROR)],
)
def test_received_raises_the_connection_errors_of_the_table(state: int, code: int) -> None:
    with pytest.raises(frames.FrameError) as raised:
        streams.received(state, RECV_HEADERS if state == CLOSED_UNOPENED else RECV_DATA, 7, "X")
    assert raised.value.error_code == code and "stream 7" in str(raised.value)
    assert streams.received(CLOSED_BY_US, RECV_DATA, 7, "DATA") == IGNORE


def test_identifiers_say_which_streams_are_idle_and_how_forgotten_ones_closed() -> None:
    """RFC 9113 §5.1.1: each end's streams in increasing order; what is not remembered of a
    closed stream follows from whose it was."""
    ours = streams.Streams(client=True)
    for stream_id in (1, 3):
        ours.send_headers(stream_id, 0, 0)
    assert [ours.state(n) for n in (1, 3, 5, 2)] == [OPEN, OPEN, IDLE, IDLE]
    with pytest.raises(ValueError):
        ours.send_headers(7, 0, 0)
    with pytest.raises(frames.FrameError):  # a client's peer opens nothing (push is refused)
        ours.receive_headers(2, 0, 0)
    theirs = streams.Streams(client=False)
    theirs.receive_headers(5, 0, 0)
    assert [theirs.state(n) for n in (3, 5, 7, 2)] == [CLOSED_UNOPENED, OPEN, IDLE, IDLE]
    old = streams.Streams(client=True)
    old.next_stream_id = 2 * streams.CLOSED_STREAMS_KEPT + 5
    for stream_id in range(1, 2 * streams.CLOSED_STREAMS_KEPT + 4, 2):
        old.remember(stream_id, CLOSED)
    assert old.state(1) == CLOSED_BY_US  # forgotten: read as reset by us, its frames ignored
    assert old.state(2 * streams.CLOSED_STREAMS_KEPT + 1) == CLOSED
