"""``grpc.service_config``: the JSON a channel is configured with, validated as grpcio validates it.

gRPC's ``doc/service_config.md`` defines the format; gRFC A6 (client retries) its
``retryPolicy``, ``hedgingPolicy`` and ``retryThrottling``; gRFC A62 (pick_first) the
``pick_first`` config.  :func:`parse_service_config` reads the text once, when the channel is
made, and either returns a :class:`ServiceConfig` or raises one :class:`ServiceConfigError`
listing every problem, each with the field it is in (``methodConfig[0].retryPolicy.maxAttempts:
must be at least 2``), which the channel turns into a failure as grpcio does (its calls fail
INVALID_ARGUMENT, "errors validating service config").

What is accepted is what grpcio 1.85 (gRPC core) accepts, field for field
(tests/unit/test_service_config.py holds the two side by side):

* the text is strict JSON (no NaN, no duplicate keys) and an object; unknown fields are ignored
  and ``null`` counts as absent;
* a number may be written as a JSON number or as a string ("12", " 12", "+12"); an integer field
  takes no fraction or exponent (``3.0`` is refused); a duration is a string ``"1.5s"`` (at most
  nine decimals, 0 to 315576000000 seconds) and counts in whole milliseconds, as grpc core keeps
  it (``"0.0005s"`` is zero);
* ``methodConfig[].name[]``: ``{"service": s, "method": m}``; a name without ``service``, or with
  an empty one, is the default config (but ``method`` without ``service`` is an error); two
  configs for the same name are an error;
* ``retryPolicy``: ``maxAttempts`` at least 2 (more than 5 counts as 5), ``initialBackoff`` and
  ``maxBackoff`` above zero, ``backoffMultiplier`` above zero, ``retryableStatusCodes`` a
  non-empty list of status code names in capitals (grpc core takes no numbers here, though
  gRFC A6 allows them);
* ``retryThrottling``: ``maxTokens`` a positive integer (grpc core sets no upper bound; gRFC A6
  says at most 1000), ``tokenRatio`` above zero, three decimals kept (``0.0001`` is zero, an
  error);
* ``loadBalancingConfig``: a list of one-key objects; the first policy minigrpc implements
  (``pick_first``, ``round_robin``) wins; entries before it must be well formed; a list without
  one is an error.  ``loadBalancingPolicy`` (deprecated) names one policy, in any case.
  grpcio also knows policies minigrpc does not implement (``grpclb``, the xDS ones): a config
  that chooses only those is an error here;
* ``hedgingPolicy`` is read only when the channel sets ``grpc.experimental.enable_hedging``, the
  argument grpc core guards it with (grpc core parses no hedging at all, so by default it is
  ignored, as there); then it is validated as gRFC A6 says, and a method may have a retry policy
  or a hedging policy, not both (grpc-java's rule);
* ``healthCheckConfig.serviceName`` must be a string (client-side health checking itself is not
  implemented).

A service config from DNS TXT records: grpcio looks one up only when the channel sets
``grpc.service_config_disable_resolution`` to 0 *and* uses the c-ares or event-engine resolver;
its default (``value_or(true)`` in each of gRPC core's DNS resolvers) is not to, and its default
native resolver never does.  So a channel made with grpcio's defaults only ever uses the
``grpc.service_config`` argument, and minigrpc need not resolve TXT records to match it.
"""

import json
import re
from typing import Any, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

from ..protocol.codes import CODE_NAMES
from .channel_args import integer, option_value

__all__ = [
    "MAX_ATTEMPTS_LIMIT",
    "SUPPORTED_LB_POLICIES",
    "HedgingPolicy",
    "LoadBalancingConfig",
    "MethodConfig",
    "RetryPolicy",
    "RetryThrottling",
    "ServiceConfig",
    "ServiceConfigError",
    "parse_service_config",
    "service_config_option",
]

#: The most attempts a retry or hedging policy may make: a larger ``maxAttempts`` counts as this
#: (gRFC A6, "Limits on Retries and Hedges"; grpc core logs and clamps).
MAX_ATTEMPTS_LIMIT = 5
#: The load-balancing policies minigrpc implements (:mod:`minigrpc.driver.balancing`).
SUPPORTED_LB_POLICIES = ("pick_first", "round_robin")
#: The longest duration protobuf's Duration can hold, in seconds.
_MAX_DURATION_SECONDS = 315576000000
_INT32 = (-(2**31), 2**31 - 1)
_UINT32 = (0, 2**32 - 1)
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_UNSIGNED = re.compile(r"[+]?[0-9]+\Z")
#: What absl's number parsing skips around a number (grpc core reads numbers with it).
_SPACE = " \t\n\v\f\r"
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_STATUS_CODES = {name: number for number, name in enumerate(CODE_NAMES)}


class ServiceConfigError(ValueError):
    """A service config that does not validate; ``problems`` holds (field, what is wrong)
    pairs, every one found, in the order of the document."""

    def __init__(self, problems: List[Tuple[str, str]]) -> None:
        self.problems = problems
        listed = "; ".join(f"{field}: {why}" if field else why for field, why in problems)
        super().__init__(f"invalid service config: {listed}")


class RetryPolicy(NamedTuple):
    """A method's ``retryPolicy`` (gRFC A6, "Retry Policy Capabilities")."""

    max_attempts: int
    #: Seconds.
    initial_backoff: float
    #: Seconds.
    max_backoff: float
    backoff_multiplier: float
    #: Status code numbers.
    retryable_status_codes: FrozenSet[int]


class HedgingPolicy(NamedTuple):
    """A method's ``hedgingPolicy`` (gRFC A6, "Hedging Policy")."""

    max_attempts: int
    #: Seconds between attempts (0: all at once).
    hedging_delay: float
    #: Status code numbers after which the other attempts go on.
    non_fatal_status_codes: FrozenSet[int]


class MethodConfig(NamedTuple):
    """What the service config says about one method; None where it says nothing."""

    #: Seconds; the call's deadline is the sooner of this and its own.
    timeout: Optional[float] = None
    wait_for_ready: Optional[bool] = None
    max_request_message_bytes: Optional[int] = None
    max_response_message_bytes: Optional[int] = None
    retry_policy: Optional[RetryPolicy] = None
    hedging_policy: Optional[HedgingPolicy] = None


class RetryThrottling(NamedTuple):
    """``retryThrottling``, in thousandths of a token as grpc core counts them (gRFC A6,
    "Throttling Retry Attempts and Hedged RPCs")."""

    max_milli_tokens: int
    milli_token_ratio: int


class LoadBalancingConfig(NamedTuple):
    """The policy the service config chooses, with its settings."""

    #: One of :data:`SUPPORTED_LB_POLICIES`.
    policy: str
    #: ``pick_first``'s ``shuffleAddressList`` (gRFC A62).
    shuffle_address_list: bool = False


class ServiceConfig(NamedTuple):
    """A validated service config."""

    #: Method configs by path: ``/service/method``, ``/service/`` (the whole service) and ""
    #: (the default).
    methods: Dict[str, MethodConfig]
    retry_throttling: Optional[RetryThrottling] = None
    #: None: the config chooses no policy (the channel's ``grpc.lb_policy_name`` or pick_first).
    load_balancing: Optional[LoadBalancingConfig] = None
    health_check_service_name: Optional[str] = None

    def for_method(self, path: str) -> MethodConfig:
        """The config of ``/service/method``: the method's own, else its service's, else the
        default, else an empty one (``doc/service_config.md``; grpc core's order)."""
        methods = self.methods
        found = methods.get(path)
        if found is None:
            found = methods.get(path[: path.rfind("/") + 1])
        if found is None:
            found = methods.get("")
        return found if found is not None else _NO_CONFIG


_NO_CONFIG = MethodConfig()


class _Number(str):
    """A JSON number, kept as written: grpc core reads numbers from their text."""

    __slots__ = ()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _object_without_duplicates(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    result: Dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


class _Reader:
    """Reads one document, collecting every problem with the field it is in."""

    def __init__(self, enable_hedging: bool) -> None:
        self.problems: List[Tuple[str, str]] = []
        self.enable_hedging = enable_hedging

    def fail(self, field: str, why: str) -> None:
        self.problems.append((field, why))

    # -- values, each None when absent (null) or wrong (a problem is recorded) ----------------

    def _typed(self, value: Any, field: str, kind: type, what: str) -> Any:
        """``value`` if it is of ``kind`` (a JSON string is ``str`` itself: a number kept as
        written, :class:`_Number`, is not one)."""
        if value is None:
            return None
        if type(value) is not kind if kind is str else not isinstance(value, kind):
            self.fail(field, f"is not {what}")
            return None
        return value

    def object(self, value: Any, field: str) -> Optional[Dict[str, Any]]:
        found: Optional[Dict[str, Any]] = self._typed(value, field, dict, "an object")
        return found

    def array(self, value: Any, field: str) -> Optional[List[Any]]:
        found: Optional[List[Any]] = self._typed(value, field, list, "an array")
        return found

    def string(self, value: Any, field: str) -> Optional[str]:
        found: Optional[str] = self._typed(value, field, str, "a string")
        return found

    def boolean(self, value: Any, field: str) -> Optional[bool]:
        found: Optional[bool] = self._typed(value, field, bool, "a boolean")
        return found

    def _number_text(self, value: Any, field: str) -> Optional[str]:
        """A number's text, as written or in a string, without the spaces around it."""
        if value is None:
            return None
        if not isinstance(value, str):
            self.fail(field, "is not a number")
            return None
        return value.strip(_SPACE)

    def integer(self, value: Any, field: str, unsigned: bool = False) -> Optional[int]:
        """An integer field: a JSON number or a string of digits (absl's SimpleAtoi: surrounding
        whitespace and a sign are allowed), within 32 bits."""
        text = self._number_text(value, field)
        if text is None:
            return None
        low, high = _UINT32 if unsigned else _INT32
        if _INTEGER.match(text) and low <= int(text) <= high:
            return int(text)
        self.fail(field, "is not a non-negative integer" if unsigned else "is not an integer")
        return None

    def decimal(self, value: Any, field: str) -> Optional[float]:
        text = self._number_text(value, field)
        if text is None:
            return None
        if not _DECIMAL.match(text):
            self.fail(field, "is not a number")
            return None
        return float(text)

    def duration(self, value: Any, field: str) -> Optional[float]:
        """A protobuf Duration in JSON (``"1.5s"``), in seconds, whole milliseconds."""
        text = self.string(value, field)
        if text is None:
            return None
        if not text.endswith("s"):
            self.fail(field, "is not a duration: no 's' at its end")
            return None
        whole, dot, fraction = text[:-1].strip(_SPACE).partition(".")
        nanos = 0
        if dot:
            if not _INTEGER.match(fraction.strip(_SPACE)):
                self.fail(field, "is not a duration: no number of nanoseconds after the '.'")
                return None
            if len(fraction) > 9:
                self.fail(field, "is not a duration: more than nine digits after the '.'")
                return None
            nanos = int(fraction) * 10 ** (9 - len(fraction))
        if not _INTEGER.match(whole.strip(_SPACE)):
            self.fail(field, "is not a duration: no number of seconds")
            return None
        seconds = int(whole)
        if not 0 <= seconds <= _MAX_DURATION_SECONDS:
            self.fail(field, f"is not a duration: seconds must be 0 to {_MAX_DURATION_SECONDS}")
            return None
        # Whole milliseconds, truncated toward zero as grpc core's Duration is.
        millis = seconds * 1000 + int(nanos / 1_000_000)
        return millis / 1000.0

    def status_codes(self, value: Any, field: str) -> Optional[FrozenSet[int]]:
        items = self.array(value, field)
        if items is None:
            return None
        if not all(type(item) is str for item in items):
            for index, item in enumerate(items):
                self.string(item, f"{field}[{index}]")
            return frozenset()
        codes = set()
        for index, name in enumerate(items):
            if name in _STATUS_CODES:
                codes.add(_STATUS_CODES[name])
            else:
                self.fail(f"{field}[{index}]", f"{name!r} is not a status code name")
        return frozenset(codes)

    def required(self, document: Dict[str, Any], key: str, field: str) -> Any:
        value = document.get(key)
        if value is None:
            self.fail(f"{field}.{key}", "is required")
        return value

    # -- the document --------------------------------------------------------------------------

    def service_config(self, document: Any) -> Optional[ServiceConfig]:
        if not isinstance(document, dict):
            self.fail("", "the service config is not a JSON object")
            return None
        throttling = self.retry_throttling(document.get("retryThrottling"), "retryThrottling")
        balancing = self.load_balancing(document)
        health_check = self.object(document.get("healthCheckConfig"), "healthCheckConfig")
        service_name = None
        if health_check is not None:
            service_name = self.string(health_check.get("serviceName"),
                                       "healthCheckConfig.serviceName")
        methods: Dict[str, MethodConfig] = {}
        entries = self.array(document.get("methodConfig"), "methodConfig")
        if "methodConfig" in document and document["methodConfig"] is None:
            self.fail("methodConfig", "is not an array")  # grpc core reads it even when null
        for index, entry in enumerate(entries or ()):
            field = f"methodConfig[{index}]"
            method = self.object(entry, field)
            if method is not None:
                self.method_config(method, field, methods)
        return ServiceConfig(methods, throttling, balancing, service_name)

    def method_config(self, entry: Dict[str, Any], field: str,
                      methods: Dict[str, MethodConfig]) -> None:
        retry = self.retry_policy(self.object(entry.get("retryPolicy"), f"{field}.retryPolicy"),
                                  f"{field}.retryPolicy")
        hedging = None
        if self.enable_hedging:
            hedging = self.hedging_policy(
                self.object(entry.get("hedgingPolicy"), f"{field}.hedgingPolicy"),
                f"{field}.hedgingPolicy")
            if retry is not None and hedging is not None:
                self.fail(field, "has both a retryPolicy and a hedgingPolicy (one at most)")
        config = MethodConfig(
            timeout=self.duration(entry.get("timeout"), f"{field}.timeout") or None,
            wait_for_ready=self.boolean(entry.get("waitForReady"), f"{field}.waitForReady"),
            max_request_message_bytes=self.integer(
                entry.get("maxRequestMessageBytes"), f"{field}.maxRequestMessageBytes", True),
            max_response_message_bytes=self.integer(
                entry.get("maxResponseMessageBytes"), f"{field}.maxResponseMessageBytes", True),
            retry_policy=retry,
            hedging_policy=hedging,
        )
        for index, path in self.method_paths(entry.get("name"), f"{field}.name"):
            if path not in methods:
                methods[path] = config
            elif path:
                self.fail(f"{field}.name[{index}]", f"a second config for {path}")
            else:
                self.fail(f"{field}.name[{index}]", "a second default config")

    def method_paths(self, value: Any, field: str) -> Iterable[Tuple[int, str]]:
        """Each name's path: ``/service/method``, ``/service/``, or "" for the default."""
        for index, item in enumerate(self.array(value, field) or ()):
            name = self.object(item, f"{field}[{index}]")
            if name is None:
                continue
            service = self.string(name.get("service"), f"{field}[{index}].service")
            method = self.string(name.get("method"), f"{field}[{index}].method")
            if name.get("service") is None and name.get("method") is not None:
                self.fail(f"{field}[{index}]", "names a method without its service")
            elif not service:
                yield index, ""
            else:
                yield index, f"/{service}/{method or ''}"

    def max_attempts(self, policy: Dict[str, Any], field: str) -> Optional[int]:
        attempts = self.integer(self.required(policy, "maxAttempts", field),
                                f"{field}.maxAttempts")
        if attempts is not None and attempts < 2:
            self.fail(f"{field}.maxAttempts", "must be at least 2")
            return None
        return None if attempts is None else min(attempts, MAX_ATTEMPTS_LIMIT)

    def retry_policy(self, policy: Optional[Dict[str, Any]], field: str) -> Optional[RetryPolicy]:
        if policy is None:
            return None
        attempts = self.max_attempts(policy, field)
        backoffs = []
        for key in ("initialBackoff", "maxBackoff"):
            backoff = self.duration(self.required(policy, key, field), f"{field}.{key}")
            if backoff is not None and backoff <= 0:
                self.fail(f"{field}.{key}", "must be greater than 0")
                backoff = None
            backoffs.append(backoff)
        multiplier = self.decimal(self.required(policy, "backoffMultiplier", field),
                                  f"{field}.backoffMultiplier")
        if multiplier is not None and not 0 < multiplier < float("inf"):
            self.fail(f"{field}.backoffMultiplier", "must be greater than 0")
            multiplier = None
        codes = self.status_codes(policy.get("retryableStatusCodes"),
                                  f"{field}.retryableStatusCodes")
        if not codes:
            self.fail(f"{field}.retryableStatusCodes", "must name at least one status code")
        initial, maximum = backoffs
        if attempts is None or initial is None or maximum is None or multiplier is None:
            return None
        return RetryPolicy(attempts, initial, maximum, multiplier, codes or frozenset())

    def hedging_policy(self, policy: Optional[Dict[str, Any]],
                       field: str) -> Optional[HedgingPolicy]:
        if policy is None:
            return None
        attempts = self.max_attempts(policy, field)
        delay = self.duration(policy.get("hedgingDelay"), f"{field}.hedgingDelay")
        codes = self.status_codes(policy.get("nonFatalStatusCodes"),
                                  f"{field}.nonFatalStatusCodes")
        if attempts is None:
            return None
        return HedgingPolicy(attempts, delay or 0.0, codes or frozenset())

    def retry_throttling(self, value: Any, field: str) -> Optional[RetryThrottling]:
        throttling = self.object(value, field)
        if throttling is None:
            return None
        max_tokens = self.integer(self.required(throttling, "maxTokens", field),
                                  f"{field}.maxTokens", unsigned=True)
        if max_tokens == 0:
            self.fail(f"{field}.maxTokens", "must be greater than 0")
        ratio = self.milli_tokens(self.required(throttling, "tokenRatio", field),
                                  f"{field}.tokenRatio")
        if not max_tokens or ratio is None:
            return None
        return RetryThrottling(max_tokens * 1000, ratio)

    def milli_tokens(self, value: Any, field: str) -> Optional[int]:
        """``tokenRatio`` in thousandths: three decimals kept, the rest dropped (gRFC A6)."""
        if value is None:
            return None
        if not isinstance(value, str):
            self.fail(field, "is not a number")
            return None
        whole, dot, fraction = value.partition(".")
        fraction = fraction[:3]
        if not (_UNSIGNED.match(whole.strip(_SPACE)) and (not dot or _UNSIGNED.match(fraction))):
            self.fail(field, "is not a number with at most three decimals")
            return None
        milli = int(whole) * 1000 + (int(fraction) * 10 ** (3 - len(fraction)) if dot else 0)
        if milli <= 0:
            self.fail(field, "must be greater than 0 (three decimals are kept)")
            return None
        return milli

    def load_balancing(self, document: Dict[str, Any]) -> Optional[LoadBalancingConfig]:
        chosen = None
        if "loadBalancingConfig" in document:
            chosen = self.load_balancing_config(document["loadBalancingConfig"])
        name = self.string(document.get("loadBalancingPolicy"), "loadBalancingPolicy")
        if name:
            if name.lower() not in SUPPORTED_LB_POLICIES:
                self.fail("loadBalancingPolicy", f"{name!r} is not a policy minigrpc implements "
                          f"({', '.join(SUPPORTED_LB_POLICIES)})")
            elif chosen is None:
                chosen = LoadBalancingConfig(name.lower())
        return chosen

    def load_balancing_config(self, value: Any) -> Optional[LoadBalancingConfig]:
        """The first policy of the list that minigrpc implements (gRFC A24's rule, grpc core's
        checks on the entries up to it)."""
        field = "loadBalancingConfig"
        if not isinstance(value, list):
            self.fail(field, "is not an array")
            return None
        tried = []
        for index, entry in enumerate(value):
            if not isinstance(entry, dict) or len(entry) != 1:
                self.fail(f"{field}[{index}]", "must be an object with exactly one policy")
                return None
            (name, config), = entry.items()
            if not isinstance(config, dict):
                self.fail(f"{field}[{index}].{name}", "is not an object")
                return None
            if name == "pick_first":
                shuffle = self.boolean(config.get("shuffleAddressList"),
                                       f"{field}[{index}].pick_first.shuffleAddressList")
                return LoadBalancingConfig(name, bool(shuffle))
            if name == "round_robin":
                return LoadBalancingConfig(name)
            tried.append(name)
        self.fail(field, f"no policy minigrpc implements ({', '.join(SUPPORTED_LB_POLICIES)}) in "
                  f"the list: {', '.join(tried) or 'it is empty'}")
        return None


def parse_service_config(text: str, enable_hedging: bool = False) -> ServiceConfig:
    """Read ``grpc.service_config``; raise :class:`ServiceConfigError` naming every problem.

    ``enable_hedging`` is the channel's ``grpc.experimental.enable_hedging``: without it a
    ``hedgingPolicy`` is ignored, as in grpcio.
    """
    try:
        document = json.loads(
            text,
            parse_int=_Number,
            parse_float=_Number,
            parse_constant=_refuse_constant,
            object_pairs_hook=_object_without_duplicates,
        )
    except (TypeError, ValueError) as exc:
        raise ServiceConfigError([("", f"the service config is not JSON: {exc}")]) from None
    reader = _Reader(enable_hedging)
    config = reader.service_config(document)
    if reader.problems or config is None:
        raise ServiceConfigError(reader.problems)
    return config


def service_config_option(options: Optional[Iterable[Tuple[Any, Any]]]) -> Optional[ServiceConfig]:
    """The channel's ``grpc.service_config``, read with its ``grpc.experimental.enable_hedging``;
    None without one.  Raises :class:`ServiceConfigError` (a ValueError) for a bad config."""
    items = list(options or ())
    text = option_value(items, "grpc.service_config")
    if text is None:
        return None
    hedging = option_value(items, "grpc.experimental.enable_hedging")
    enable = hedging is not None and bool(integer(hedging, "grpc.experimental.enable_hedging"))
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return parse_service_config(str(text), enable_hedging=enable)
