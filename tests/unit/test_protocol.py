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


def test_packed_small_messages_go_out_in_order_whatever_the_cuts() -> None:
    """A server's small messages share byte arrays; written in cuts of a few bytes while more
    are added (the array being written is sealed, the next message starts another), what
    reaches the wire is every message, framed, in order, and the cost is all given back."""
    from minigrpc.protocol.memory_budget import MemoryBudget

    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    client.initiate_connection()
    server.initiate_connection()
    client.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
    client.increment_flow_control_window(2**31 - 1 - 65535)
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send())
    client.send_headers(1, [(":method", "POST"), (":scheme", "http"), (":path", "/s/m"),
                            (":authority", "x")])
    server.receive_data(client.data_to_send())
    server.send_headers(1, [(":status", "200")])
    account = MemoryBudget().open_connection()
    outbound = Outbound(account, pack_small=True)
    expected = b""
    received = b""
    for index in range(300):
        payload = bytes([index % 251]) * (index % 7) if index % 50 else b"L" * 5000
        outbound.add(wire.frame_message(payload))
        expected += wire.encode_message(payload)
        assert outbound.queued_cost == account.outbound
        outbound.write(server, 1, room=3 + index % 11)
        received += b"".join(e.data for e in client.receive_data(server.data_to_send())
                             if isinstance(e, h2.events.DataReceived))
    assert account.outbound > 4 * 5000  # most of the large ones still wait
    outbound.write(server, 1)
    received += b"".join(e.data for e in client.receive_data(server.data_to_send())
                         if isinstance(e, h2.events.DataReceived))
    assert received == expected
    assert outbound.empty and outbound.queued_bytes == 0 and outbound.queued_cost == 0
    assert account.outbound == 0
