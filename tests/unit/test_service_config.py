"""``grpc.service_config`` (minigrpc.driver.service_config): what it means, and that it accepts
exactly the configs grpcio accepts.

:data:`CASES` is the contract: each config with the field minigrpc's error names, or None where
the config is valid.  One test holds minigrpc to it; another holds grpcio to it (a channel made
with a config grpcio refuses fails every call INVALID_ARGUMENT, "errors validating service
config" or "JSON parsing failed"), so the table cannot drift from the reference.
:data:`DIFFERENCES` are the configs where minigrpc knowingly refuses what grpcio takes.
"""

import json
from typing import Any, List, Optional, Tuple

import pytest

from minigrpc.driver.service_config import (
    HedgingPolicy,
    LoadBalancingConfig,
    MethodConfig,
    RetryPolicy,
    RetryThrottling,
    ServiceConfigError,
    parse_service_config,
    service_config_option,
)
from minigrpc.protocol.codes import Code
from tests.peers import reference_grpcio_unavailable

RETRY = {"maxAttempts": 3, "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2,
         "retryableStatusCodes": ["UNAVAILABLE"]}


def method(**fields: Any) -> str:
    return json.dumps({"methodConfig": [{"name": [{"service": "pkg.S"}], **fields}]})


def retry(**changes: Any) -> str:
    policy = {**RETRY, **changes}
    return method(retryPolicy={k: v for k, v in policy.items() if v is not None})


M0 = "methodConfig[0]"
R0 = M0 + ".retryPolicy"

#: (config, the field minigrpc's error names, or None for a valid config).
CASES: List[Tuple[str, Optional[str]]] = [
    ("{}", None),
    ('{"unknownField": 1}', None),
    ("not json", ""),
    ("[]", ""),
    ("null", ""),
    ('{"a": NaN}', ""),
    ('{"a": 1,}', ""),
    ('{"methodConfig": [], "methodConfig": []}', ""),
    # names
    ('{"methodConfig": [{}]}', None),
    ('{"methodConfig": [{"name": []}]}', None),
    ('{"methodConfig": {}}', "methodConfig"),
    ('{"methodConfig": null}', "methodConfig"),
    ('{"methodConfig": ["x"]}', M0),
    ('{"methodConfig": [{"name": {"service": "pkg.S"}}]}', M0 + ".name"),
    ('{"methodConfig": [{"name": ["pkg.S"]}]}', M0 + ".name[0]"),
    ('{"methodConfig": [{"name": [{"service": 5}]}]}', M0 + ".name[0].service"),
    ('{"methodConfig": [{"name": [{"service": "pkg.S", "method": 5}]}]}', M0 + ".name[0].method"),
    ('{"methodConfig": [{"name": [{"method": "M"}]}]}', M0 + ".name[0]"),
    ('{"methodConfig": [{"name": [{"service": null, "method": "M"}]}]}', M0 + ".name[0]"),
    ('{"methodConfig": [{"name": [{"service": "", "method": "M"}]}]}', None),
    ('{"methodConfig": [{"name": [{"service": "pkg.S"}]}, {"name": [{"service": "pkg.S"}]}]}',
     "methodConfig[1].name[0]"),
    ('{"methodConfig": [{"name": [{"service": "pkg.S", "method": ""}]}, '
     '{"name": [{"service": "pkg.S"}]}]}', "methodConfig[1].name[0]"),
    ('{"methodConfig": [{"name": [{}]}, {"name": [{"service": ""}]}]}', "methodConfig[1].name[0]"),
    ('{"methodConfig": [{"name": [{"service": "pkg.S", "method": "M"}, '
     '{"service": "pkg.S", "method": "M"}]}]}', M0 + ".name[1]"),
    (method(unknownField=1), None),
    # timeout, waitForReady, message sizes
    (method(timeout="1.5s"), None),
    (method(timeout="0.000001s"), None),
    (method(timeout="1.5"), M0 + ".timeout"),
    (method(timeout=1.5), M0 + ".timeout"),
    (method(timeout="-1s"), M0 + ".timeout"),
    (method(timeout="315576000001s"), M0 + ".timeout"),
    (method(timeout="1.0000000001s"), M0 + ".timeout"),
    (method(timeout="1e3s"), M0 + ".timeout"),
    (method(timeout=".5s"), M0 + ".timeout"),
    (method(timeout="1.s"), M0 + ".timeout"),
    (method(timeout="1s "), M0 + ".timeout"),
    (method(timeout="0.5S"), M0 + ".timeout"),
    (method(timeout="  1s"), None),
    (method(timeout="1 s"), None),
    (method(timeout="+1s"), None),
    (method(timeout="-0.5s"), None),
    (method(timeout=None), None),
    (method(waitForReady=True), None),
    (method(waitForReady="yes"), M0 + ".waitForReady"),
    (method(waitForReady=1), M0 + ".waitForReady"),
    (method(maxRequestMessageBytes=-1), M0 + ".maxRequestMessageBytes"),
    (method(maxRequestMessageBytes="12"), None),
    (method(maxResponseMessageBytes=4294967295), None),
    (method(maxResponseMessageBytes=4294967296), M0 + ".maxResponseMessageBytes"),
    (method(maxResponseMessageBytes=" 12"), None),
    (method(maxResponseMessageBytes="+12"), None),
    (method(maxResponseMessageBytes=1.5), M0 + ".maxResponseMessageBytes"),
    (method(maxResponseMessageBytes=True), M0 + ".maxResponseMessageBytes"),
    # retryPolicy
    (retry(), None),
    (retry(maxAttempts=9), None),
    (retry(maxAttempts="3", backoffMultiplier="2.5"), None),
    (retry(maxAttempts=1), R0 + ".maxAttempts"),
    (retry(maxAttempts=-3), R0 + ".maxAttempts"),
    (retry(maxAttempts=3.0), R0 + ".maxAttempts"),
    (retry(maxAttempts=3.5), R0 + ".maxAttempts"),
    (retry(maxAttempts=2147483648), R0 + ".maxAttempts"),
    (retry(maxAttempts=None), R0 + ".maxAttempts"),
    (retry(initialBackoff="0s"), R0 + ".initialBackoff"),
    (retry(initialBackoff="0.0009s"), R0 + ".initialBackoff"),
    (retry(initialBackoff="0.001s"), None),
    (retry(initialBackoff=None), R0 + ".initialBackoff"),
    (retry(maxBackoff="0s"), R0 + ".maxBackoff"),
    (retry(maxBackoff="0.5s"), None),
    (retry(backoffMultiplier=0), R0 + ".backoffMultiplier"),
    (retry(backoffMultiplier=-1), R0 + ".backoffMultiplier"),
    (retry(backoffMultiplier=1e-3), None),
    (retry(retryableStatusCodes=[]), R0 + ".retryableStatusCodes"),
    (retry(retryableStatusCodes=None), R0 + ".retryableStatusCodes"),
    (retry(retryableStatusCodes=["NOPE"]), R0 + ".retryableStatusCodes[0]"),
    (retry(retryableStatusCodes=["Unavailable"]), R0 + ".retryableStatusCodes[0]"),
    (retry(retryableStatusCodes=["UNAVAILABLE", "OK", "DEADLINE_EXCEEDED"]), None),
    (retry(retryableStatusCodes=[14]), R0 + ".retryableStatusCodes[0]"),
    (retry(retryableStatusCodes=["14"]), R0 + ".retryableStatusCodes[0]"),
    (method(retryPolicy=None), None),
    (method(retryPolicy="x"), R0),
    # hedgingPolicy: ignored unless grpc.experimental.enable_hedging, as in grpc core
    (method(hedgingPolicy={"maxAttempts": 3}), None),
    (method(hedgingPolicy={"maxAttempts": 1, "hedgingDelay": "x"}), None),
    (method(hedgingPolicy={"maxAttempts": 3}, retryPolicy=RETRY), None),
    # retryThrottling
    ('{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}}', None),
    ('{"retryThrottling": {"maxTokens": 2000, "tokenRatio": 0.1}}', None),
    ('{"retryThrottling": {"maxTokens": "10", "tokenRatio": "0.5"}}', None),
    ('{"retryThrottling": {"maxTokens": 10, "tokenRatio": 1.2345}}', None),
    ('{"retryThrottling": {"maxTokens": 10, "tokenRatio": 5}}', None),
    ('{"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}}', "retryThrottling.maxTokens"),
    ('{"retryThrottling": {"maxTokens": -1, "tokenRatio": 0.1}}', "retryThrottling.maxTokens"),
    ('{"retryThrottling": {"maxTokens": 10.5, "tokenRatio": 0.1}}', "retryThrottling.maxTokens"),
    ('{"retryThrottling": {"tokenRatio": 0.1}}', "retryThrottling.maxTokens"),
    ('{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0}}', "retryThrottling.tokenRatio"),
    ('{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.0001}}', "retryThrottling.tokenRatio"),
    ('{"retryThrottling": {"maxTokens": 10, "tokenRatio": -0.5}}', "retryThrottling.tokenRatio"),
    ('{"retryThrottling": {"maxTokens": 10, "tokenRatio": 1e-1}}', "retryThrottling.tokenRatio"),
    ('{"retryThrottling": {"maxTokens": 10, "tokenRatio": true}}', "retryThrottling.tokenRatio"),
    ('{"retryThrottling": {"maxTokens": 10}}', "retryThrottling.tokenRatio"),
    ('{"retryThrottling": "x"}', "retryThrottling"),
    ('{"retryThrottling": null}', None),
    # load balancing
    ('{"loadBalancingConfig": [{"round_robin": {}}]}', None),
    ('{"loadBalancingConfig": [{"round_robin": {"x": 1}}]}', None),
    ('{"loadBalancingConfig": [{"pick_first": {"shuffleAddressList": true}}]}', None),
    ('{"loadBalancingConfig": [{"pick_first": {"shuffleAddressList": "yes"}}]}',
     "loadBalancingConfig[0].pick_first.shuffleAddressList"),
    ('{"loadBalancingConfig": [{"nope": {}}, {"pick_first": {}}]}', None),
    ('{"loadBalancingConfig": [{"pick_first": {}}, {"nope": 1}]}', None),
    ('{"loadBalancingConfig": [{"nope": 1}, {"pick_first": {}}]}', "loadBalancingConfig[0].nope"),
    ('{"loadBalancingConfig": [{"nope": {}, "x": {}}, {"pick_first": {}}]}',
     "loadBalancingConfig[0]"),
    ('{"loadBalancingConfig": [{}, {"pick_first": {}}]}', "loadBalancingConfig[0]"),
    ('{"loadBalancingConfig": ["x", {"pick_first": {}}]}', "loadBalancingConfig[0]"),
    ('{"loadBalancingConfig": [{"nope": {}}]}', "loadBalancingConfig"),
    ('{"loadBalancingConfig": [{"ROUND_ROBIN": {}}]}', "loadBalancingConfig"),
    ('{"loadBalancingConfig": []}', "loadBalancingConfig"),
    ('{"loadBalancingConfig": {"round_robin": {}}}', "loadBalancingConfig"),
    ('{"loadBalancingConfig": null}', "loadBalancingConfig"),
    ('{"loadBalancingPolicy": "round_robin"}', None),
    ('{"loadBalancingPolicy": "ROUND_ROBIN"}', None),
    ('{"loadBalancingPolicy": ""}', None),
    ('{"loadBalancingPolicy": "nope"}', "loadBalancingPolicy"),
    ('{"loadBalancingPolicy": 5}', "loadBalancingPolicy"),
    ('{"loadBalancingPolicy": "pick_first", "loadBalancingConfig": [{"round_robin": {}}]}', None),
    ('{"healthCheckConfig": {"serviceName": "x"}}', None),
    ('{"healthCheckConfig": {"serviceName": 5}}', "healthCheckConfig.serviceName"),
    ('{"healthCheckConfig": "x"}', "healthCheckConfig"),
]

#: Configs grpcio accepts and minigrpc refuses, each with why: policies grpc core implements and
#: minigrpc does not (a config that picks only those cannot be carried out here).
DIFFERENCES: List[Tuple[str, str]] = [
    ('{"loadBalancingConfig": [{"grpclb": {}}]}', "grpclb is not implemented"),
    ('{"loadBalancingPolicy": "grpclb"}', "grpclb is not implemented"),
]


@pytest.mark.parametrize(("config", "field"), CASES)
def test_minigrpc_accepts_what_the_table_says(config: str, field: Optional[str]) -> None:
    if field is None:
        parse_service_config(config)
        return
    with pytest.raises(ServiceConfigError) as raised:
        parse_service_config(config)
    assert field in [name for name, _ in raised.value.problems], raised.value.problems
    assert str(raised.value).startswith("invalid service config: ")


@pytest.mark.parametrize(("config", "why"), DIFFERENCES)
def test_minigrpc_refuses_policies_it_does_not_implement(config: str, why: str) -> None:
    with pytest.raises(ServiceConfigError, match="minigrpc implements"):
        parse_service_config(config)


def grpcio_refuses(config: str) -> bool:
    """Whether grpcio refuses ``config``: its channel then fails every call INVALID_ARGUMENT at
    once.  Nothing listens on the target, so a call on a valid config fails UNAVAILABLE (or
    runs out its short deadline while a retry policy backs off)."""
    import grpc

    options = [("grpc.service_config", config), ("grpc.enable_retries", 1)]
    with grpc.insecure_channel("ipv4:127.0.0.1:1", options=options) as channel, \
            pytest.raises(grpc.RpcError) as raised:
        channel.unary_unary("/pkg.S/M")(b"", timeout=0.2)
    details = raised.value.details() or ""
    refused = raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused == ("service config" in details or "JSON parsing failed" in details), details
    return refused


@pytest.mark.grpcio_peer
@pytest.mark.skipif(reference_grpcio_unavailable() is not None,
                    reason=str(reference_grpcio_unavailable()))
def test_grpcio_accepts_what_the_table_says() -> None:
    wrong = [(config, field) for config, field in CASES
             if grpcio_refuses(config) != (field is not None)]
    assert not wrong, wrong
    assert not any(grpcio_refuses(config) for config, _ in DIFFERENCES)


def test_the_error_lists_every_problem_with_its_field() -> None:
    config = json.dumps({"methodConfig": [{"name": [{"service": "a"}], "timeout": 3,
                                           "retryPolicy": {**RETRY, "maxAttempts": 1}}],
                         "retryThrottling": {"maxTokens": 0, "tokenRatio": 1}})
    with pytest.raises(ServiceConfigError) as raised:
        parse_service_config(config)
    assert [field for field, _ in raised.value.problems] == [
        "retryThrottling.maxTokens", R0 + ".maxAttempts", M0 + ".timeout"]
    assert "methodConfig[0].retryPolicy.maxAttempts: must be at least 2" in str(raised.value)


def test_a_method_finds_its_own_config_then_its_services_then_the_default() -> None:
    config = parse_service_config(json.dumps({"methodConfig": [
        {"name": [{"service": "pkg.S", "method": "M"}], "timeout": "1s"},
        {"name": [{"service": "pkg.S"}], "timeout": "2s"},
        {"name": [{}], "timeout": "3s"},
    ]}))
    assert config.for_method("/pkg.S/M").timeout == 1.0
    assert config.for_method("/pkg.S/Other").timeout == 2.0
    assert config.for_method("/pkg.T/M").timeout == 3.0


def test_a_method_without_any_config_gets_an_empty_one() -> None:
    config = parse_service_config(method(timeout="1s"))
    assert config.for_method("/pkg.T/M") == MethodConfig()
    assert parse_service_config("{}").for_method("/pkg.S/M") == MethodConfig()


def test_an_empty_service_or_method_names_the_default_or_the_whole_service() -> None:
    config = parse_service_config(json.dumps({"methodConfig": [
        {"name": [{"service": "", "method": "M"}], "timeout": "3s"},
        {"name": [{"service": "pkg.S", "method": ""}], "timeout": "2s"},
    ]}))
    assert config.for_method("/pkg.S/Any").timeout == 2.0
    assert config.for_method("/other.S/M").timeout == 3.0


def test_method_settings_are_read_into_their_types() -> None:
    config = parse_service_config(method(timeout="1.5s", waitForReady=True,
                                         maxRequestMessageBytes="1024",
                                         maxResponseMessageBytes=2048))
    assert config.for_method("/pkg.S/M") == MethodConfig(
        timeout=1.5, wait_for_ready=True, max_request_message_bytes=1024,
        max_response_message_bytes=2048)


def test_durations_count_in_whole_milliseconds_and_zero_is_no_timeout() -> None:
    assert parse_service_config(method(timeout="0.0019s")).for_method("/pkg.S/M").timeout == 0.001
    assert parse_service_config(method(timeout="0.0005s")).for_method("/pkg.S/M").timeout is None
    assert parse_service_config(method(timeout="-0.5s")).for_method("/pkg.S/M").timeout == 0.5


def test_a_retry_policy_is_read_and_its_attempts_capped_at_five() -> None:
    config = parse_service_config(retry(maxAttempts=9, initialBackoff="0.1s", maxBackoff="2s",
                                        backoffMultiplier=1.5,
                                        retryableStatusCodes=["UNAVAILABLE", "ABORTED"]))
    assert config.for_method("/pkg.S/M").retry_policy == RetryPolicy(
        max_attempts=5, initial_backoff=0.1, max_backoff=2.0, backoff_multiplier=1.5,
        retryable_status_codes=frozenset({Code.UNAVAILABLE, Code.ABORTED}))


def test_retry_throttling_keeps_thousandths_of_tokens() -> None:
    def throttling(ratio: str) -> Optional[RetryThrottling]:
        text = '{"retryThrottling": {"maxTokens": 10, "tokenRatio": ' + ratio + "}}"
        return parse_service_config(text).retry_throttling

    assert throttling("0.1") == RetryThrottling(max_milli_tokens=10000, milli_token_ratio=100)
    assert throttling("1.2345") == RetryThrottling(10000, 1234)
    assert throttling('"0.5"') == RetryThrottling(10000, 500)
    assert throttling("5") == RetryThrottling(10000, 5000)


def test_the_first_implemented_policy_of_the_list_wins() -> None:
    def chosen(config: Any) -> Optional[LoadBalancingConfig]:
        return parse_service_config(json.dumps(config)).load_balancing

    assert chosen({"loadBalancingConfig": [{"grpclb": {}}, {"round_robin": {}},
                                           {"pick_first": {}}]}) == LoadBalancingConfig(
        "round_robin")
    assert chosen({"loadBalancingConfig": [{"pick_first": {"shuffleAddressList": True}}]}) == (
        LoadBalancingConfig("pick_first", shuffle_address_list=True))
    assert chosen({"loadBalancingPolicy": "ROUND_ROBIN"}) == LoadBalancingConfig("round_robin")
    assert chosen({"loadBalancingPolicy": "round_robin",
                   "loadBalancingConfig": [{"pick_first": {}}]}) == LoadBalancingConfig(
        "pick_first")
    assert chosen({}) is None


def test_a_hedging_policy_is_read_only_where_hedging_is_enabled() -> None:
    config = method(hedgingPolicy={"maxAttempts": 7, "hedgingDelay": "0.5s",
                                   "nonFatalStatusCodes": ["UNAVAILABLE", "INTERNAL"]})
    assert parse_service_config(config).for_method("/pkg.S/M").hedging_policy is None
    hedged = parse_service_config(config, enable_hedging=True).for_method("/pkg.S/M")
    assert hedged.hedging_policy == HedgingPolicy(
        max_attempts=5, hedging_delay=0.5,
        non_fatal_status_codes=frozenset({Code.UNAVAILABLE, Code.INTERNAL}))
    bare = parse_service_config(method(hedgingPolicy={"maxAttempts": 2}), enable_hedging=True)
    assert bare.for_method("/pkg.S/M").hedging_policy == HedgingPolicy(2, 0.0, frozenset())


@pytest.mark.parametrize(("policy", "field"), [
    ({"maxAttempts": 1}, R0.replace("retry", "hedging") + ".maxAttempts"),
    ({}, R0.replace("retry", "hedging") + ".maxAttempts"),
    ({"maxAttempts": 2, "hedgingDelay": "x"}, R0.replace("retry", "hedging") + ".hedgingDelay"),
    ({"maxAttempts": 2, "nonFatalStatusCodes": ["NOPE"]},
     R0.replace("retry", "hedging") + ".nonFatalStatusCodes[0]"),
])
def test_an_enabled_hedging_policy_is_validated(policy: Any, field: str) -> None:
    with pytest.raises(ServiceConfigError) as raised:
        parse_service_config(method(hedgingPolicy=policy), enable_hedging=True)
    assert [name for name, _ in raised.value.problems] == [field]


def test_a_method_has_a_retry_policy_or_a_hedging_policy_not_both() -> None:
    config = method(hedgingPolicy={"maxAttempts": 3}, retryPolicy=RETRY)
    with pytest.raises(ServiceConfigError, match="both a retryPolicy and a hedgingPolicy"):
        parse_service_config(config, enable_hedging=True)


def test_the_channel_options_give_the_config_and_the_hedging_switch() -> None:
    hedged = method(hedgingPolicy={"maxAttempts": 2})
    assert service_config_option(None) is None
    assert service_config_option([("grpc.service_config", hedged)]).for_method(
        "/pkg.S/M").hedging_policy is None
    config = service_config_option([("grpc.service_config", hedged.encode()),
                                    ("grpc.experimental.enable_hedging", 1)])
    assert config is not None
    assert config.for_method("/pkg.S/M").hedging_policy == HedgingPolicy(2, 0.0, frozenset())
    with pytest.raises(ServiceConfigError):
        service_config_option([("grpc.service_config", "{")])
