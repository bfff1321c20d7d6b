"""The shared sans-IO parts of minigrpc.protocol.grpc_connection, against a real h2 peer."""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import h2.settings
import pytest

from minigrpc.protocol import wire
from minigrpc.protocol.grpc_connection import Outbound


@pytest.mark.parametrize("size", [0, 100, 64 * 1024 - 1, 64 * 1024, 300_000])
@pytest.mark.parametrize("compressed", [False, True])
def test_outbound_message_goes_out_exactly_framed(size: int, compressed: bool) -> None:
    """A large payload is framed without a copy (wire.frame_message); what reaches
    the wire is the same Length-Prefixed-Message, cut to the peer's frame size."""
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    client.initiate_connection()
    server.initiate_connection()
    server.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
    server.increment_flow_control_window(2**31 - 1 - 65535)
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send())
    client.send_headers(1, [(":method", "POST"), (":scheme", "http"), (":path", "/s/m"),
                            (":authority", "x")])
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    outbound = Outbound()
    outbound.add(wire.frame_message(payload, compressed), last=True)
    assert outbound.queued_bytes == size + wire.PREFIX_LENGTH
    outbound.write(client, 1, end_stream_on_last=True)
    assert outbound.empty
    received = b"".join(event.data for event in server.receive_data(client.data_to_send())
                        if isinstance(event, h2.events.DataReceived))
    assert received == wire.encode_message(payload, compressed)
