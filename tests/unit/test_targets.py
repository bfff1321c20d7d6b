"""Targets with several addresses (minigrpc.protocol.targets): ``ipv4:``/``ipv6:`` lists, DNS
names left for a resolver, and the single-address view the transports dial today.

The one-address forms (``unix:``, ``host:port``, ``dns:///``) keep their tests in
tests/unit/test_status_and_http2.py; the last test here holds the address lists against grpcio's
own parser, entry for entry.
"""

import socket
from typing import List, Optional, Tuple

import pytest

from minigrpc.protocol.targets import (
    DEFAULT_PORT,
    Target,
    parse_target,
    parse_target_addresses,
)
from tests.peers import reference_grpcio_unavailable


def addresses(target: str) -> List[Tuple[int, object]]:
    return [(t.family, t.address) for t in parse_target_addresses(target).addresses]


def test_an_ipv4_list_gives_every_address_in_order() -> None:
    parsed = parse_target_addresses("ipv4:127.0.0.1:5001,10.0.0.2:5002")
    assert parsed.scheme == "ipv4"
    assert addresses("ipv4:127.0.0.1:5001,10.0.0.2:5002") == [
        (socket.AF_INET, ("127.0.0.1", 5001)),
        (socket.AF_INET, ("10.0.0.2", 5002)),
    ]
    assert [t.display for t in parsed.addresses] == ["127.0.0.1:5001", "10.0.0.2:5002"]
    assert not parsed.needs_resolution


def test_the_authority_of_a_list_is_the_list_as_written_as_grpcio_sends_it() -> None:
    parsed = parse_target_addresses("ipv4:127.0.0.1:5001,10.0.0.2:5002")
    assert parsed.authority == "127.0.0.1:5001,10.0.0.2:5002"
    assert {t.authority for t in parsed.addresses} == {"127.0.0.1:5001,10.0.0.2:5002"}
    assert parse_target_addresses("ipv6:[::1]:7").authority == "[::1]:7"
    assert parse_target_addresses("ipv4:///127.0.0.1:7").authority == "127.0.0.1:7"


def test_an_ipv6_list_takes_brackets_before_a_port() -> None:
    assert addresses("ipv6:[::1]:5001,[2001:db8::2]:5002") == [
        (socket.AF_INET6, ("::1", 5001)),
        (socket.AF_INET6, ("2001:db8::2", 5002)),
    ]
    assert parse_target_addresses("ipv6:[::1]:5001").addresses[0].display == "[::1]:5001"


def test_an_entry_without_a_port_gets_443_as_the_naming_doc_says() -> None:
    assert addresses("ipv4:127.0.0.1") == [(socket.AF_INET, ("127.0.0.1", DEFAULT_PORT))]
    assert addresses("ipv6:::1") == [(socket.AF_INET6, ("::1", 443))]
    assert addresses("ipv6:[::1]") == [(socket.AF_INET6, ("::1", 443))]
    # Without brackets an IPv6 entry has no port: the whole text is the address.
    assert addresses("ipv6:::1:5") == [(socket.AF_INET6, ("::1:5", 443))]


def test_a_zone_written_the_uri_way_reaches_the_socket_module_its_way() -> None:
    assert addresses("ipv6:[fe80::1%25eth0]:7") == [(socket.AF_INET6, ("fe80::1%eth0", 7))]


def test_empty_entries_are_skipped_but_a_list_must_name_an_address() -> None:
    assert addresses("ipv4:127.0.0.1:1,,127.0.0.1:2,") == [
        (socket.AF_INET, ("127.0.0.1", 1)),
        (socket.AF_INET, ("127.0.0.1", 2)),
    ]
    for target in ("ipv4:", "ipv6:", "ipv4:,", "ipv4:///"):
        with pytest.raises(ValueError, match="no address"):
            parse_target_addresses(target)


@pytest.mark.parametrize(
    "target",
    [
        "ipv4:bad:1",
        "ipv4:localhost:1",
        "ipv4:01.2.3.4:1",
        "ipv4:1.2.3:1",
        "ipv4:256.1.1.1:1",
        "ipv4:[127.0.0.1]:1",
        "ipv4:127.0.0.1:99999",
        "ipv4:127.0.0.1:",
        "ipv4:127.0.0.1:x",
        "ipv4:127.0.0.1:1, 127.0.0.1:2",
        "ipv4:127.0.0.1:1,bad",
        "ipv4://auth/127.0.0.1:1",
        "ipv4:[::1]:1",
        "ipv6:127.0.0.1:1",
        "ipv6:[::1]:1,127.0.0.1:2",
        "ipv6:[::1",
        "ipv6:[::1]x",
        "ipv6:[::1]:",
    ],
)
def test_a_list_that_does_not_parse_is_a_value_error_naming_the_target(target: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_target_addresses(target)
    assert repr(target) in str(raised.value)


@pytest.mark.parametrize("target", ["dns:///a.example:1,b.example:2", "127.0.0.1:1,127.0.0.1:2"])
def test_a_comma_in_a_host_name_is_refused_never_resolved(target: str) -> None:
    """grpcio looks the whole string up in DNS and fails UNAVAILABLE ("Misformatted");
    here it never reaches a resolver."""
    with pytest.raises(ValueError, match="ipv4: or ipv6:") as raised:
        parse_target_addresses(target)
    assert repr(target) in str(raised.value)


def test_schemes_are_case_insensitive() -> None:
    assert addresses("IPV4:127.0.0.1:1") == [(socket.AF_INET, ("127.0.0.1", 1))]
    assert parse_target("UNIX:/x.sock").address == "/x.sock"
    assert parse_target("DNS:///h:1").address == ("h", 1)


def test_a_dns_name_waits_for_a_resolver_with_its_port_and_authority() -> None:
    parsed = parse_target_addresses("dns:///service.example:8443")
    assert parsed.needs_resolution and parsed.addresses == ()
    assert (parsed.scheme, parsed.host, parsed.port) == ("dns", "service.example", 8443)
    filled = parsed.resolved([(socket.AF_INET, "10.0.0.1"), (socket.AF_INET6, "fd00::1")])
    assert not filled.needs_resolution
    assert [(t.family, t.address, t.authority, t.display) for t in filled.addresses] == [
        (socket.AF_INET, ("10.0.0.1", 8443), "service.example:8443", "10.0.0.1:8443"),
        (socket.AF_INET6, ("fd00::1", 8443), "service.example:8443", "[fd00::1]:8443"),
    ]
    assert filled.authority == parsed.authority == "service.example:8443"


def test_a_bare_name_resolves_on_443_with_the_host_alone_as_authority() -> None:
    parsed = parse_target_addresses("service.example")
    assert (parsed.host, parsed.port, parsed.authority) == ("service.example", 443,
                                                             "service.example")
    assert parsed.resolved([(socket.AF_INET, "10.0.0.1")]).addresses[0].address == (
        "10.0.0.1", 443)


def test_a_dns_target_that_is_an_address_needs_no_resolver() -> None:
    parsed = parse_target_addresses("dns:///127.0.0.1:5")
    assert not parsed.needs_resolution
    assert parsed.addresses == (Target(socket.AF_INET, ("127.0.0.1", 5), "127.0.0.1:5",
                                       "127.0.0.1:5"),)
    assert addresses("[::1]:5") == [(socket.AF_INET6, ("::1", 5))]


def test_unix_targets_are_one_address() -> None:
    parsed = parse_target_addresses("unix:///run/x.sock")
    assert parsed.scheme == "unix"
    assert parsed.addresses == (parse_target("unix:///run/x.sock"),)
    assert parse_target_addresses("unix-abstract:n").addresses[0].address == b"\0n"


def test_parse_target_still_dials_one_address() -> None:
    """What the transports call today: one address, or the name to resolve when dialling."""
    assert parse_target("ipv4:127.0.0.1:5") == Target(socket.AF_INET, ("127.0.0.1", 5),
                                                      "127.0.0.1:5", "127.0.0.1:5")
    assert parse_target("ipv6:[::1]:5").address == ("::1", 5)
    assert parse_target("localhost:5") == Target(socket.AF_UNSPEC, ("localhost", 5),
                                                 "localhost:5", "localhost:5")
    with pytest.raises(ValueError, match="lists 2 addresses"):
        parse_target("ipv4:127.0.0.1:5,127.0.0.1:6")


#: Address lists and what grpcio 1.85 makes of them: None where it refuses the target ("the
#: target uri is not valid"), else the addresses it dials.  An entry without a port is left
#: out: grpcio refuses it, minigrpc gives it 443 as gRPC's doc/naming.md says.
GRPCIO_VERDICTS: List[Tuple[str, Optional[List[Tuple[str, int]]]]] = [
    ("ipv4:127.0.0.1:1", [("127.0.0.1", 1)]),
    ("ipv4:127.0.0.1:1,127.0.0.2:2", [("127.0.0.1", 1), ("127.0.0.2", 2)]),
    ("ipv4:127.0.0.1:1,,127.0.0.2:2,", [("127.0.0.1", 1), ("127.0.0.2", 2)]),
    ("ipv4:///127.0.0.1:1", [("127.0.0.1", 1)]),
    ("IPV4:127.0.0.1:1", [("127.0.0.1", 1)]),
    ("ipv4:127.0.0.1:01", [("127.0.0.1", 1)]),
    ("ipv6:[::1]:1,[::2]:2", [("::1", 1), ("::2", 2)]),
    ("ipv6:[fe80::1%25lo]:1", [("fe80::1%lo", 1)]),
    ("ipv4:bad:1", None),
    ("ipv4:01.2.3.4:1", None),
    ("ipv4:256.1.1.1:1", None),
    ("ipv4:[127.0.0.1]:1", None),
    ("ipv4:127.0.0.1:99999", None),
    ("ipv4:127.0.0.1:", None),
    ("ipv4:127.0.0.1:1, 127.0.0.2:2", None),
    ("ipv4:127.0.0.1:1,bad", None),
    ("ipv4://auth/127.0.0.1:1", None),
    ("ipv6:127.0.0.1:1", None),
    ("ipv6:[::1]:1,127.0.0.1:2", None),
]


def test_the_verdicts_table_is_minigrpcs() -> None:
    for target, expected in GRPCIO_VERDICTS:
        if expected is None:
            with pytest.raises(ValueError):
                parse_target_addresses(target)
        else:
            assert [t.address for t in parse_target_addresses(target).addresses] == expected


@pytest.mark.grpcio_peer
@pytest.mark.skipif(reference_grpcio_unavailable() is not None,
                    reason=str(reference_grpcio_unavailable()))
def test_the_verdicts_table_is_grpcios() -> None:
    """grpcio refuses the same lists: a call on such a channel fails at once, naming the target
    as not valid; on an accepted one it fails to connect (nothing listens on those ports)."""
    import grpc

    for target, expected in GRPCIO_VERDICTS:
        with grpc.insecure_channel(target) as channel, pytest.raises(grpc.RpcError) as raised:
            channel.unary_unary("/pkg.Service/Method")(b"", timeout=5)
        details = raised.value.details() or ""
        assert ("target uri is not valid" in details) == (expected is None), (target, details)
