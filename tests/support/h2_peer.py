"""h2 set up as a peer for tests and benchmarks: configuration, the initial SETTINGS, GOAWAY.

minigrpc runs on its own HTTP/2 connection; h2 is what tests talk to it with (a client for the
server, a server for the client) and what bench/h2floor.py measures as a reference. h2 needs
some care as a peer, and the helpers for it live here:

* :func:`client_config` / :func:`server_config`: headers are bytes, and h2 validates and
  normalises nothing, so that a test sends exactly the block it built (a test that wants h2's
  checks switches them back on).
* :func:`start_connection`: the preface, one SETTINGS frame with the given values and a large
  connection window (RFC 9113 §3.4, §6.5, §6.9.2), which h2's ``initiate_connection()`` alone
  cannot do.
* :class:`GoawaySplitter` and :func:`reopen_after_goaway`: h2 moves its connection to CLOSED on
  any GOAWAY and then refuses every frame but another GOAWAY, although RFC 9113 §6.8 lets the
  streams at or below the GOAWAY's last-stream-id finish; and a GOAWAY and the frames after it
  in one ``receive_data()`` call make h2 raise and lose the ``ConnectionTerminated`` event.
  A peer that must watch a graceful shutdown to its end feeds each GOAWAY to h2 on its own and
  reopens h2 after it.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import h2.config
import h2.connection
import h2.settings

from minigrpc.http2 import frames
from minigrpc.http2 import streams as http2


def client_config() -> h2.config.H2Configuration:
    """h2 settings for a client peer: bytes headers, no header validation or normalisation."""
    return _config(client_side=True)


def server_config() -> h2.config.H2Configuration:
    """h2 settings for a server peer: bytes headers, no header validation or normalisation."""
    return _config(client_side=False)


def _config(client_side: bool) -> h2.config.H2Configuration:
    return h2.config.H2Configuration(
        client_side=client_side,
        header_encoding=None,
        validate_outbound_headers=False,
        validate_inbound_headers=False,
        normalize_inbound_headers=False,
        normalize_outbound_headers=False,
    )


def start_connection(
    conn: h2.connection.H2Connection,
    *,
    stream_window: int = http2.DEFAULT_STREAM_WINDOW,
    connection_window: int = http2.DEFAULT_CONNECTION_WINDOW,
    max_frame_size: int = http2.DEFAULT_MAX_FRAME_SIZE,
    max_concurrent_streams: Optional[int] = None,
    max_header_list_size: int = http2.CONNECTION_MAX_HEADER_LIST_SIZE,
) -> None:
    """Queue the preface, one SETTINGS frame with these values and the connection WINDOW_UPDATE.

    The defaults are what minigrpc advertises. h2's ``initiate_connection()`` advertises its own
    defaults, and ``update_settings()`` would need a second SETTINGS frame that takes effect only
    on the peer's ACK; so the values become h2's initial local settings, and the two limits h2
    copied at construction (its inbound frame size and its HPACK decoder's header-list size) are
    set to match. SETTINGS cannot change the connection window, hence the WINDOW_UPDATE on
    stream 0 (RFC 9113 §6.9.2).
    """
    values: Dict[h2.settings.SettingCodes, int] = {
        h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: stream_window,
        h2.settings.SettingCodes.MAX_FRAME_SIZE: max_frame_size,
        h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: max_header_list_size,
    }
    client_side = bool(conn.config.client_side)
    if client_side:
        values[h2.settings.SettingCodes.ENABLE_PUSH] = 0
    if max_concurrent_streams is not None:
        values[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = max_concurrent_streams
    conn.local_settings = h2.settings.Settings(client=client_side, initial_values=values)
    conn.max_inbound_frame_size = max_frame_size
    conn.decoder.max_header_list_size = max_header_list_size
    conn.initiate_connection()
    increment = connection_window - conn.inbound_flow_control_window
    if increment > 0:
        conn.increment_flow_control_window(increment)


def reopen_after_goaway(conn: h2.connection.H2Connection) -> None:
    """Let h2 go on processing frames for the streams a GOAWAY allows to finish (RFC 9113 §6.8).

    h2 moves its state machine to CLOSED on any GOAWAY, sent or received; this puts it back to
    OPEN (an h2 internal, ``state_machine.state``). The caller must not open a new stream on the
    connection afterwards.
    """
    state_machine = conn.state_machine
    open_state = (
        h2.connection.ConnectionState.CLIENT_OPEN
        if conn.config.client_side
        else h2.connection.ConnectionState.SERVER_OPEN
    )
    if state_machine.state == h2.connection.ConnectionState.CLOSED:
        state_machine.state = open_state


class GoawaySplitter:
    """Cut an inbound byte stream into chunks so that each GOAWAY frame is one of its own.

    Fed to h2 chunk by chunk, with :func:`reopen_after_goaway` after a ``ConnectionTerminated``,
    a GOAWAY and the frames after it (grpc-go's graceful stop sends GOAWAY and PING together,
    PROTOCOL-HTTP2.md, "GOAWAY Frame") reach h2 as they would through separate reads. Only the
    9-byte frame headers are read (RFC 9113 §4.1); a partial frame goes on as it is, for h2 to
    buffer.
    """

    def __init__(self) -> None:
        self._header = b""
        self._remaining = 0
        self._goaway = False

    def feed(self, data: bytes) -> List[bytes]:
        """``data`` as a list of chunks, each GOAWAY frame (or what of it is in ``data``) alone."""
        cuts: List[int] = []
        pos = 0
        while pos < len(data):
            if self._remaining:
                take = min(self._remaining, len(data) - pos)
                pos += take
                self._remaining -= take
            else:
                take = min(frames.FRAME_HEADER_LENGTH - len(self._header), len(data) - pos)
                self._header += data[pos : pos + take]
                pos += take
                if len(self._header) < frames.FRAME_HEADER_LENGTH:
                    break
                self._remaining = int.from_bytes(self._header[:3], "big")
                self._goaway = self._header[3] == frames.GOAWAY
                self._header = b""
                if self._goaway:
                    cuts.append(pos - take)  # the frames before it, for h2 to answer first
            if self._goaway and not self._remaining:
                cuts.append(pos)
                self._goaway = False
        bounds = [0, *(cut for cut in cuts if 0 < cut < len(data)), len(data)]
        return [data[start:end] for start, end in zip(bounds, bounds[1:]) if end > start]
