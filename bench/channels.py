"""Long-lived channel features, measured: what they cost the calls that do not need them.

Two comparisons, each an A/B on minigrpc's client with only the feature changed:

- **A retry policy that never fires.**  A channel whose service config gives the echo method a
  ``retryPolicy`` (gRFC A6) keeps each request for replay and reads every attempt's trailers for
  pushback, even when the first attempt succeeds, as every call here does.  Its warm unary p50
  beside the same client's without a service config, on the same server: the target is at most
  5% more (:data:`RETRY_LIMIT`).
- **round_robin beside pick_first.**  :data:`SERVERS` grpcio echo servers on loopback TCP; the
  client's target is the ``ipv4:`` list of all three, with ``grpc.lb_policy_name`` set to
  ``round_robin`` (every call to the next ready connection) or ``pick_first`` (every call to
  the first address).  Calls/s of the throughput workload (8 threads, or 8 tasks for the
  asyncio clients, sharing the channel).  On a machine with fewer cores than the client and
  three servers could keep busy, round_robin's calls/s also pays for the servers: three servers
  each woken for a third of the calls spend more CPU per call, all told, than one that takes
  them all, and share the same cores with the client.  So grpcio's own client makes the same
  pair beside minigrpc's, on the same servers (:data:`BALANCING_REFERENCES`): its round_robin /
  pick_first ratio is what the servers and the machine take, and minigrpc's ratio must keep at
  least :data:`BALANCING_LIMIT` of it, so that a pick per call and three connections cost
  minigrpc's client little more than they cost grpcio's.  The servers' shares of their CPU time
  over the pair's run show that the calls really went to all three: with pick_first's half on
  the first server, about 67% / 17% / 17%.  The client's CPU per call (the CPU ratio) is what
  the pick itself costs.

Each pair runs in one child process, its two channels taking turns in blocks of calls
(``paired-latency`` and ``paired-throughput`` in :mod:`bench.workloads`), B's block first every
other round: separate processes seconds apart differ by more than 5% on a shared machine
whatever they run, blocks a fraction of a second apart see the same machine.  Ratios are of
medians over rounds, with the spread of the per-round ratios.

The section sits between :data:`DOC_BEGIN` and :data:`DOC_END` in docs/benchmarks.md, so that
``python -m bench --only channels`` replaces it alone.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from bench.stats import median, percentile, ratio

DOC_BEGIN = "<!-- channels: begin (python -m bench --only channels) -->"
DOC_END = "<!-- channels: end -->"

#: The echo servers every row calls (bench/peers.py, ``--tcp``), and how many.
SERVER_IMPL = "grpcio"
SERVERS = 3

#: The service config of the retry row: a retry policy on the echo method (gRFC A6's fields;
#: the echo never fails, so no attempt is ever retried).
RETRY_SERVICE_CONFIG = json.dumps({"methodConfig": [{
    "name": [{"service": "bench.Echo", "method": "Echo"}],
    "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
}]}, separators=(",", ":"))

#: p50 with the retry policy over p50 without, at most.
RETRY_LIMIT = 1.05
#: minigrpc's round_robin / pick_first calls/s over grpcio's, at least.
BALANCING_LIMIT = 0.9
#: Each minigrpc client of the balancing rows (blocking: threads; asyncio: tasks) with the
#: grpcio client whose pair is its reference.
BALANCING_REFERENCES = {"minigrpc": "grpcio", "minigrpc-aio": "grpcio-aio"}
BALANCING_CLIENTS = (*BALANCING_REFERENCES, *BALANCING_REFERENCES.values())
#: grpcio shares subchannels between the channels of a process unless told not to: each
#: channel of a grpcio pair keeps its own connections, as minigrpc's channels always do.
GRPCIO_OWN_CONNECTIONS = "grpc.use_local_subchannel_pool=1"

#: Blocks of calls each channel of a pair makes per round, the two channels taking turns.
BLOCKS = 10

#: (kind, A variant, B variant): B is the feature, A the same client without it.
PAIRS = (("retry", "no service config", "retryPolicy"),
         ("balancing", "pick_first", "round_robin"))


def new_rows() -> List[Dict[str, Any]]:
    """The section's rows, unmeasured: the retry pair, then a balancing pair per client."""
    rows = [{"kind": "retry", "variant": variant, "client": "minigrpc", "samples_us": [],
             "round_p50": [], "cpu_us_per_call": [], "rounds": [], "errors": []}
            for variant in PAIRS[0][1:]]
    rows += [{"kind": "balancing", "variant": variant, "client": client, "calls_per_s": [],
              "cpu_us_per_call": [], "server_cpu_split": [], "rounds": [], "errors": []}
             for client in BALANCING_CLIENTS for variant in PAIRS[1][1:]]
    return rows


#: One child run: (workload, client, arguments, the rows it measures, each with the key of
#: its part of the result).
Run = Tuple[str, str, List[str], List[Tuple[Dict[str, Any], str]]]


def runs(rows: Sequence[Dict[str, Any]], round_index: int, targets: Sequence[str],
         config: Dict[str, Any]) -> List[Run]:
    """The child runs of round ``round_index``, given the servers' ``targets``
    (``ipv4:127.0.0.1:PORT`` each): one per A/B pair, both of its channels in one process
    taking turns in blocks of calls (``paired-*`` in :mod:`bench.workloads`), B's block first
    every other round."""
    swapped = ["--b-first"] if round_index % 2 else []
    addresses = ",".join(target.split(":", 1)[1] for target in targets)
    found: List[Run] = []
    for index in range(0, len(rows), 2):
        before, after = rows[index], rows[index + 1]
        common = ["--size", str(config["size"]), "--blocks", str(config["blocks"]), *swapped]
        if before["kind"] == "retry":
            arguments = ["--target", targets[0], "--calls", str(config["latency_calls"]),
                         "--warmup", str(config["warmup"]),
                         "--b-option", f"grpc.service_config={RETRY_SERVICE_CONFIG}"]
            workload = "paired-latency"
        else:
            own = (["--option", GRPCIO_OWN_CONNECTIONS]
                   if before["client"].startswith("grpcio") else [])
            arguments = ["--target", f"ipv4:{addresses}", *own,
                         "--a-option", f"grpc.lb_policy_name={before['variant']}",
                         "--b-option", f"grpc.lb_policy_name={after['variant']}",
                         "--threads", str(config["threads"]), "--calls", str(config["calls"])]
            workload = "paired-throughput"
        found.append((workload, before["client"], [*arguments, *common],
                      [(before, "a"), (after, "b")]))
    return found


def record(row: Dict[str, Any], round_index: int, result: Dict[str, Any],
           cpu_split: Optional[List[float]]) -> None:
    """Add the ``result`` of round ``round_index`` to ``row``, and to round_robin's row the
    servers' shares of the CPU they spent during the pair's run."""
    row["rounds"].append(round_index)
    row["cpu_us_per_call"].append(result["cpu_us_per_call"])
    if row["kind"] == "retry":
        row["samples_us"].extend(result["samples_us"])
        row["round_p50"].append(median(result["samples_us"]))
    else:
        row["calls_per_s"].append(result["calls_per_s"])
        if cpu_split is not None and row["variant"] == PAIRS[1][2]:
            row["server_cpu_split"].append(cpu_split)


def _row(results: Dict[str, Any], kind: str, variant: str, client: str
         ) -> Optional[Dict[str, Any]]:
    for row in (results.get("channels") or {}).get("rows", []):
        if row["kind"] == kind and row["variant"] == variant and row["client"] == client:
            return row
    return None


def _per_round(row: Optional[Dict[str, Any]]) -> Dict[int, float]:
    """The row's figure of each round it succeeded in, by round."""
    if row is None:
        return {}
    return dict(zip(row["rounds"],
                    row["round_p50"] if row["kind"] == "retry" else row["calls_per_s"]))


def _cpu(row: Optional[Dict[str, Any]]) -> Optional[float]:
    """The row's client CPU per call, median over rounds."""
    return median(row["cpu_us_per_call"]) if row and row["cpu_us_per_call"] else None


def _figure(row: Optional[Dict[str, Any]]) -> Optional[float]:
    """The row's p50 over all samples (retry) or median calls/s over rounds (balancing)."""
    if row is None:
        return None
    values = row["samples_us"] if row["kind"] == "retry" else row["calls_per_s"]
    return median(values) if values else None


Comparison = Tuple[str, str, float, Optional[float], Optional[Tuple[float, float]],
                   Optional[float]]


def comparisons(results: Dict[str, Any]) -> List[Comparison]:
    """``(text, op, limit, ratio, per-round spread, client CPU ratio)`` of each pair."""
    found: List[Comparison] = []
    if not results.get("channels"):
        return found
    for kind, before, after in PAIRS:
        clients = ("minigrpc",) if kind == "retry" else tuple(BALANCING_REFERENCES)
        for client in clients:
            mine, reference = _row(results, kind, after, client), _row(results, kind, before,
                                                                        client)
            spread = _round_ratios(mine, reference)
            value = ratio(_figure(mine), _figure(reference))
            if kind == "retry":
                text, op, limit = (f"p50: {client} client with a retryPolicy that never fires "
                                   f"/ without ({SERVER_IMPL} server)", "<=", RETRY_LIMIT)
            else:
                peer = BALANCING_REFERENCES[client]
                theirs = _row(results, kind, after, peer)
                their_reference = _row(results, kind, before, peer)
                text, op, limit = (f"calls/s: round_robin over {SERVERS} {SERVER_IMPL} servers "
                                   f"/ pick_first, {client} client over {peer}'s", ">=",
                                   BALANCING_LIMIT)
                value = ratio(value, ratio(_figure(theirs), _figure(their_reference)))
                spread = [ours / peers for ours, peers in
                          zip(_round_ratios(mine, reference, theirs, their_reference),
                              _round_ratios(theirs, their_reference, mine, reference))
                          if peers]
            found.append((text, op, limit, value,
                          (min(spread), max(spread)) if spread else None,
                          ratio(_cpu(mine), _cpu(reference))))
    return found


def _round_ratios(after: Optional[Dict[str, Any]], before: Optional[Dict[str, Any]],
                  *others: Optional[Dict[str, Any]]) -> List[float]:
    """``after``'s figure over ``before``'s, round by round, in the rounds where both (and
    each of ``others``) have one."""
    after_rounds, before_rounds = _per_round(after), _per_round(before)
    rounds = set(after_rounds) & set(before_rounds)
    for other in others:
        rounds &= set(_per_round(other))
    found = [ratio(after_rounds[index], before_rounds[index]) for index in sorted(rounds)]
    return [value for value in found if value is not None]


def targets(results: Dict[str, Any]) -> List[Any]:
    """The targets table's ``channel`` rows (:class:`bench.report.Target`)."""
    from bench.report import Target  # the report imports this module

    found = []
    for text, op, limit, value, spread, cpu_ratio in comparisons(results):
        target = Target("channel", text, None, None, op, limit, cpu_ratio)
        target.ratio, target.spread = value, spread
        found.append(target)
    return found


def _split(row: Dict[str, Any]) -> str:
    """The servers' median shares of the server CPU, ``34% / 33% / 33%``."""
    splits = row.get("server_cpu_split") or []
    if not splits:
        return ""
    return " / ".join(f"{median([split[index] for split in splits]):.0%}"
                      for index in range(len(splits[0])))


def render_section(results: Dict[str, Any]) -> List[str]:
    """The docs/benchmarks.md section, markers included (nothing when it was not measured)."""
    from bench.report import _fmt, _fmt_ratio, _table  # the report's formatting (it imports us)

    section = results.get("channels")
    if not section:
        return []
    config = section.get("config", {})
    lines = [DOC_BEGIN, "## Long-lived channel features: what they cost", "",
             f"Measured {section.get('date', '?')}, load average {section.get('load', '?')} "
             f"(1, 5, 15 min) at the start and {section.get('load_end', '?')} at the end. "
             f"{SERVERS} {SERVER_IMPL} echo servers on loopback TCP. **Retry policy**: "
             f"{config.get('latency_calls', '?')} warm unary calls of "
             f"{config.get('size', '?')} bytes, one at a time, to the first server, on each of "
             "two channels of minigrpc's client in one process, in turns of "
             f"{config.get('blocks', '?')} blocks each: one without a service config, one whose "
             "service config gives the echo a `retryPolicy` (3 attempts on UNAVAILABLE), which "
             "never fires: the cost is keeping each request for replay and reading the "
             "trailers for pushback. **Balancing**: "
             f"{config.get('threads', '?')} threads (tasks for the asyncio clients) × "
             f"{config.get('calls', '?')} calls on each of two channels whose target lists "
             f"the {SERVERS} servers, one with `grpc.lb_policy_name` `pick_first` (every call "
             "to the first), one with `round_robin`, taking turns in one process as the retry "
             "pair does; the servers' shares of the CPU they spent during the pair's run show "
             "where the calls went (about 67% / 17% / 17% when round_robin spreads its half "
             f"evenly). {config.get('rounds', '?')} round(s), each pair once per round, B's "
             "block first every other round. Where the client and the three servers share "
             "fewer cores than they could keep busy, round_robin's calls/s also pays for the "
             "servers (three each woken for a third of the calls spend more CPU per call, all "
             "told, than one that takes them all), so grpcio's clients make the same pair on "
             "the same servers, each channel with its own connections "
             "(`grpc.use_local_subchannel_pool`), and minigrpc's ratio is judged against "
             "theirs; the client CPU ratio is what the pick itself costs.", ""]
    rows = []
    for row in section.get("rows", []):
        errors = "; ".join(row["errors"])[:200]
        what = f"{row['client']}, {row['variant']}"
        if row["kind"] == "retry":
            samples = row["samples_us"]
            if not samples:
                rows.append([what, "failed", "", "", "", errors])
                continue
            rows.append([what, f"p50 {_fmt(median(samples))} µs, p90 "
                         f"{_fmt(percentile(samples, 0.9))} µs",
                         " – ".join(_fmt(value) for value in (min(row["round_p50"]),
                                                             max(row["round_p50"]))),
                         _fmt(_cpu(row)), "", errors])
        else:
            rates = row["calls_per_s"]
            if not rates:
                rows.append([what, "failed", "", "", "", errors])
                continue
            rows.append([what, f"{_fmt(median(rates), 0)} calls/s",
                         f"{_fmt(min(rates), 0)} – {_fmt(max(rates), 0)}",
                         _fmt(_cpu(row)), _split(row), errors])
    lines += _table(("client, variant", "median", "min – max over rounds",
                     "client CPU µs/call", "servers' shares of their CPU (the pair's run)",
                     "errors"), rows)
    ratios = [[target.text, f"{target.op} {target.limit:g}×", _fmt_ratio(target.ratio),
               f"{target.spread[0]:.2f} – {target.spread[1]:.2f}" if target.spread else "",
               target.verdict,
               _fmt_ratio(target.cpu_ratio) if target.cpu_ratio is not None else ""]
              for target in targets(results)]
    if ratios:
        lines += ["", "Ratios of medians, with the feature over without (for balancing, "
                  "minigrpc's round_robin / pick_first over grpcio's); the per-round spread "
                  "is the lowest and highest ratio of one round's figures; the CPU ratio is "
                  "minigrpc's client CPU per call, with the feature over without (lower is "
                  "better):", "",
                  *_table(("measure", "target", "ratio", "per-round spread", "verdict",
                           "CPU ratio"), ratios)]
    return [*lines, "", DOC_END]
