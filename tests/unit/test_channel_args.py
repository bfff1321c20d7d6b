"""The argument table (minigrpc.driver.channel_args): true to grpcio, true to minigrpc's code, and
the warnings it gives."""

import glob
import os
import re
from typing import List

import pytest

from minigrpc.driver import channel_args
from minigrpc.driver.channel_args import (
    ARGUMENTS,
    CLIENT,
    DECIDED,
    FEATURES,
    IMPLEMENTED,
    INERT,
    SERVER,
    UNSUPPORTED,
    Feature,
    arguments_to_warn_about,
    duration,
    find,
    integer,
    option_value,
    warn_once,
)
from tests.peers import reference_grpcio_unavailable
from tools import architecture

PACKAGE = os.path.dirname(os.path.abspath(channel_args.__file__ + "/.."))


def test_each_name_has_one_entry_per_side() -> None:
    seen = set()
    for argument in ARGUMENTS:
        sides = (CLIENT, SERVER) if argument.side == "both" else (argument.side,)
        for side in sides:
            assert (argument.name, side) not in seen, argument
            seen.add((argument.name, side))
        assert argument.status in (IMPLEMENTED, DECIDED, UNSUPPORTED, INERT), argument
        assert argument.note, argument


def test_every_module_named_exists() -> None:
    for argument in ARGUMENTS:
        for module in filter(None, argument.module.split(", ")):
            assert module in architecture.MODULES, (argument.name, module)
        assert bool(argument.module) == (argument.status in (IMPLEMENTED, DECIDED)), argument


def test_every_option_minigrpc_reads_is_implemented_in_the_table() -> None:
    """The names the channels and the server compare option keys with."""
    read = set()
    for path in glob.glob(os.path.join(PACKAGE, "**", "*.py"), recursive=True):
        with open(path, encoding="utf-8") as source:
            read.update(re.findall(r'(?:name|key) == "((?:grpc|minigrpc)\.[\w.]+)"',
                                   source.read()))
    assert "grpc.max_receive_message_length" in read and "minigrpc.unix_socket_mode" in read
    for name in read:
        entries = [find(name, CLIENT), find(name, SERVER)]
        assert any(entry is not None and entry.status == IMPLEMENTED for entry in entries), name


def test_every_decided_argument_is_read_by_its_module() -> None:
    for argument in ARGUMENTS:
        if argument.status == DECIDED:
            path = architecture.module_path(argument.module)
            assert f'"{argument.name}"' in path.read_text(encoding="utf-8"), argument


@pytest.mark.skipif(reference_grpcio_unavailable() is not None,
                    reason=str(reference_grpcio_unavailable()))
def test_every_grpc_name_is_one_grpcio_knows() -> None:
    """Each ``grpc.*`` name is in grpcio's own library (no typo, nothing invented), but for the
    ones the table says grpcio ignores."""
    from grpc._cython import cygrpc

    # The extension module itself (beside it, some releases ship a cygrpc.pyi).
    with open(cygrpc.__file__, "rb") as handle:
        text = handle.read()
    missing = [argument.name for argument in ARGUMENTS
               if argument.name.startswith("grpc.") and argument.name.encode() not in text
               and argument.status != INERT]
    assert not missing, missing


def names(warnings: List[tuple]) -> List[str]:
    return [name for name, _ in warnings]


def test_implemented_and_inert_arguments_bring_no_warning() -> None:
    options = [("grpc.max_receive_message_length", 10), ("grpc.optimization_target", "latency"),
               ("minigrpc.initial_window_size", 65535)]
    assert arguments_to_warn_about(options, CLIENT) == []


def test_unknown_and_unsupported_arguments_are_named_with_why() -> None:
    warnings = dict(arguments_to_warn_about([
        ("grpc.experimental.enable_hedging", 1),  # carried out: no warning
        ("grpc.http_proxy", "http://proxy"),
        ("grpc.no_such_thing", 1),
        ("x-custom", 1),
    ], CLIENT))
    assert warnings == {
        "grpc.http_proxy": "not supported: HTTP CONNECT proxies are not implemented",
        "grpc.no_such_thing": "not an argument minigrpc knows; ignored",
        "x-custom": "not an argument minigrpc knows; ignored",
    }


KEEPALIVE_OPTIONS = [
    ("grpc.keepalive_time_ms", 1000),
    ("grpc.keepalive_timeout_ms", 1000),
    ("grpc.http2.ping_timeout_ms", 1000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]


def test_client_keepalive_options_are_carried_out_by_the_client_keepalive() -> None:
    """Both client transports carry them out (driver.client_keepalive), so a channel draws no
    warning for them; the module named reads each of them through driver.keepalive."""
    assert arguments_to_warn_about(KEEPALIVE_OPTIONS, CLIENT) == []
    reader = architecture.module_path("driver.keepalive").read_text(encoding="utf-8")
    for name, _ in KEEPALIVE_OPTIONS:
        entry = find(name, CLIENT)
        assert entry is not None and entry.status == IMPLEMENTED, name
        assert "driver.client_keepalive" in entry.module.split(", "), entry
        assert f'"{name}"' in reader, name


def test_a_value_that_asks_for_what_minigrpc_does_anyway_is_fine() -> None:
    assert arguments_to_warn_about([("grpc.enable_http_proxy", 0)], CLIENT) == []
    assert names(arguments_to_warn_about([("grpc.enable_http_proxy", 1)], CLIENT)) == [
        "grpc.enable_http_proxy"]
    assert arguments_to_warn_about([("grpc.enable_channelz", False)], SERVER) == []


def test_an_argument_of_the_other_side_is_named_as_such() -> None:
    assert arguments_to_warn_about([("minigrpc.unix_socket_mode", 0o600)], CLIENT) == [
        ("minigrpc.unix_socket_mode", "a server argument, ignored by a client")]
    assert dict(arguments_to_warn_about([("grpc.max_concurrent_streams", 5)], CLIENT))[
        "grpc.max_concurrent_streams"].startswith("not supported")


def test_each_name_is_warned_about_once_and_malformed_pairs_are_left_alone() -> None:
    options = [("grpc.census", 1), ("grpc.census", 1), ("grpc.census",), 5]
    assert names(arguments_to_warn_about(options, SERVER)) == ["grpc.census"]


def test_warn_once_logs_each_name_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel_args, "_WARNED", set())
    logged: List[str] = []
    warn_once([("grpc.census", 1), ("grpc.dscp", 8)], SERVER, logged.append)
    warn_once([("grpc.census", 1)], SERVER, logged.append)
    warn_once([("grpc.dscp", 8)], CLIENT, logged.append)
    assert logged == [
        "server option 'grpc.census': not supported: OpenCensus is not implemented",
        "server option 'grpc.dscp': not supported: packets are not marked",
        "client option 'grpc.dscp': not supported: packets are not marked",
    ]


def test_values_are_read_as_grpc_core_reads_them() -> None:
    assert duration(1500, "x") == 1.5
    assert duration("250", "x") == 0.25
    for never in (0, -1, 2**31 - 1, 2**40):
        assert duration(never, "x") is None
    assert integer(b"12", "x") == 12
    assert integer(True, "x") == 1  # grpcio passes a bool on as the integer it is
    for bad in ("soon", 1.5, None):
        with pytest.raises(ValueError, match=r"'grpc\.x' must be an integer"):
            integer(bad, "grpc.x")
    assert option_value([("a", 1), ("b", 2), ("a", 3)], "a") == 3
    assert option_value(None, "a") is None


def test_a_features_verdict_follows_its_arguments_statuses() -> None:
    """The README's verdicts are computed, never typed: every argument of FEATURES is in the
    table, and one argument not carried out turns "yes" into "partly" or "not yet"."""
    for feature in FEATURES:
        assert len(feature.statuses()) == len(feature.arguments), feature.name
    done = ("grpc.max_connection_idle_ms", SERVER)
    not_done = ("grpc.http2.settings_timeout", CLIENT)
    assert find(*done).status == IMPLEMENTED and find(*not_done).status == UNSUPPORTED
    assert Feature("f", "", "s").verdict() == "yes"
    assert Feature("f", "", "s", (done,)).verdict() == "yes"
    assert Feature("f", "", "s", (done, not_done)).verdict() == "partly"
    assert Feature("f", "", "s", (not_done,)).verdict() == "not yet"
    with pytest.raises(LookupError, match=r"no client argument 'grpc\.no_such_thing'"):
        Feature("f", "", "s", (("grpc.no_such_thing", CLIENT),)).statuses()
