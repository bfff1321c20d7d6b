"""Regenerate the frame listings in docs/protocol.md from live calls, so the page
cannot drift from what the code sends.

Each scenario runs in this process: the reference agent's ``Cni`` servicer served by
``minigrpc.server`` on a temporary unix socket, and a client call made the way the antrea-cni
plugin makes it (``cni_client.client``, or a minigrpc channel with its messages where the plugin
offers no knob, e.g. a deadline).  The ``minigrpc.protocol.wire`` frame trace
(``minigrpc.net.trace``) is captured with a logging handler, normalised, and written between
markers in the doc::

    <!-- trace:add -->
    ...replaced by this script...
    <!-- /trace:add -->

(``tools/render_docs.py`` owns the ``generated:`` regions; this script never touches them.)

Usage::

    python tools/protocol_walkthrough.py            # rewrite docs/protocol.md
    python tools/protocol_walkthrough.py --check    # exit 1 with a diff when the doc is stale
    python tools/protocol_walkthrough.py --print    # show every region on stdout

What is normalised, so that two runs render the same text (see ``normalise_entries``):

* the socket path in the client's listings (``unix:<socket>``), a fresh temporary directory
  per run (the server's listing shows its peer as logged: an unnamed unix socket, ``unix:``);
* the ``user-agent`` version and the ``grpc-timeout`` value (the time left when the headers
  were built), and the ``len=`` of any HEADERS frame carrying them (``len=<n>``: HPACK's
  Huffman code makes the length depend on the exact digits);
* MAC addresses in the agent's result JSON (``<mac>``);
* the *interleaving* of the two directions: the HTTP/2 connection answers SETTINGS and PING
  frames by itself, and its ACK leaves with the next write, whose timing depends on how the
  kernel split the reads. The listing puts every ACK this side sends right after the frame it
  answers.  The order of
  frames within one direction is never changed.

Everything else, frame lengths, flags, window increments, header values and the first bytes of
every message, is shown exactly as it went over the socket.

Synchronisation uses readiness signals only (an Event set by the servicer, or a wait on the
captured trace lines), never sleeps.  The deadline scenario goes through :class:`HoldingRelay`,
which keeps the server's own deadline answer from racing the client's RST_STREAM.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import logging
import os
import re
import shutil
import socket
import struct
import sys
import tempfile
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "protocol.md"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Our markers; deliberately distinct from render_docs' ``<!-- generated:NAME -->``.
REGION = re.compile(
    r"(?P<open><!-- trace:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /trace:(?P=name) -->)",
    re.S,
)

#: How long any single wait in a scenario may take before the walkthrough gives up.
STEP_TIMEOUT = 10.0
#: The deadline of scenario (c).  Short, so the check stays fast; long enough that the agent's
#: SETTINGS exchange is over well before it expires.
DEADLINE_SECONDS = 0.5

PEER_PLACEHOLDER = "unix:<socket>"
_PEER_WIDTH = 15  # minigrpc.net.trace pads the peer column to at least this many characters

# The invocation every scenario sends: what containerd passes for a Pod "web-0"
# (docs/cni-plugin-behaviour.md, "Deployment"), with Antrea's network configuration.  Fixed values,
# so the bytes are the same every run.
CONTAINER_ID = "a3f9c2e17b04"
NETNS = "/var/run/netns/cni-7b04"
IFNAME = "eth0"
CNI_ARGS = (
    "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;"
    f"K8S_POD_INFRA_CONTAINER_ID={CONTAINER_ID}"
)
CNI_PATH = "/opt/cni/bin"
NETWORK_CONFIG = (
    b'{"cniVersion":"0.3.0","name":"antrea","type":"antrea","ipam":{"type":"host-local"}}'
)
POOL = "10.10.1.0/24"
#: A method the agent does not serve (scenario b): what a plugin newer than its agent would ask.
UNKNOWN_ACTION = "CmdStatus"


class WalkthroughError(RuntimeError):
    """A scenario did not go the way the doc describes it."""


# --------------------------------------------------------------------------------------------
# Capturing and parsing the trace


class TraceCapture(logging.Handler):
    """Collects every ``minigrpc.protocol.wire`` record and lets a scenario wait for a given
    line."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: List[str] = []
        self._changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    def count(self, start: str, *words: str, without: str = "") -> int:
        """How many records begin with ``start``, contain every one of ``words`` and (when
        given) do not contain ``without``."""
        with self._changed:
            return sum(
                m.startswith(start)
                and all(w in m for w in words)
                and not (without and without in m)
                for m in self.messages
            )

    def wait_until(self, ready: Callable[[], bool], what: str) -> None:
        """Block until ``ready()`` holds for the records so far: a readiness signal, no sleep."""
        with self._changed:
            if not self._changed.wait_for(ready, STEP_TIMEOUT):
                raise WalkthroughError(f"timed out waiting for {what}")

    def wait_for(self, start: str, *words: str, what: str) -> None:
        """Block until one record matches (see :meth:`count`)."""
        self.wait_until(lambda: self.count(start, *words) >= 1, what)

    def settings_settled(self) -> bool:
        """Both sides have seen every SETTINGS frame acknowledged (RFC 9113 §6.5.3)."""
        server_sent = self.count("server --> ", " SETTINGS ", without=" ACK ")
        client_got = self.count("client <-- ", " SETTINGS ", without=" ACK ")
        return (
            server_sent > 0
            and client_got >= server_sent
            and self.count("client --> ", " SETTINGS ", " ACK ") >= client_got
            and self.count("server <-- ", " SETTINGS ", " ACK ") >= server_sent
        )


@contextlib.contextmanager
def captured_trace() -> Iterator[TraceCapture]:
    """Turn the ``minigrpc.protocol.wire`` logger on for the block, into a :class:`TraceCapture`
    only."""
    logger = logging.getLogger("minigrpc.protocol.wire")
    capture = TraceCapture()
    saved = (logger.level, logger.propagate)
    logger.addHandler(capture)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield capture
    finally:
        logger.removeHandler(capture)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


_LINE = re.compile(
    r"^(?P<role>client|server) (?P<arrow>-->|<--) (?P<peer>.*?) {2,}"
    r"(?P<rest>(?:PREFACE|[A-Z_]{3,}|0x[0-9a-f]{2}|<|!!).*)$"
)


@dataclass
class Entry:
    """One frame of the trace: who logged it, which way it went, its line and header lines."""

    role: str
    arrow: str
    rest: str
    extra: List[str] = field(default_factory=list)
    peer: str = ""

    @property
    def sent(self) -> bool:
        return self.arrow == "-->"

    @property
    def frame_type(self) -> str:
        return self.rest.split(" ", 1)[0]

    @property
    def flags(self) -> str:
        parts = self.rest.split()
        return parts[3] if len(parts) > 3 and parts[1].startswith("stream=") else ""

    @property
    def is_ack(self) -> bool:
        return self.flags == "ACK"


def parse_records(messages: Sequence[str], role: str) -> List[Entry]:
    """The records of one side (``client`` or ``server``), split into line and header lines."""
    entries: List[Entry] = []
    for message in messages:
        first, *extra = message.split("\n")
        match = _LINE.match(first)
        if match is None:
            raise WalkthroughError(f"unexpected trace line: {first!r}")
        if match.group("role") != role:
            continue
        indent = match.start("rest") + 2
        lines = [line[indent:] for line in extra]
        entries.append(
            Entry(
                role, match.group("arrow"), match.group("rest"), lines, match.group("peer").rstrip()
            )
        )
    return entries


# --------------------------------------------------------------------------------------------
# Normalising


_MAC = re.compile(r"\b[0-9a-f]{2}(?::[0-9a-f]{2}){5}\b")
_USER_AGENT = re.compile(r"^(user-agent: .*?grpc-python-minigrpc/)\S+")
_TIMEOUT = re.compile(r"^grpc-timeout: \d+(?P<unit>[HMSmun])\b.*$")
_LEN = re.compile(r"\blen=\d+(\s*)")


def normalise_entries(entries: List[Entry], timeout: Optional[float] = None) -> List[Entry]:
    """Replace what varies per run by placeholders (see the module docstring)."""
    result: List[Entry] = []
    for entry in entries:
        extra: List[str] = []
        varying = False
        for line in entry.extra:
            new = _USER_AGENT.sub(r"\1<version>", line)
            match = _TIMEOUT.match(new)
            if match is not None:
                shown = f"{timeout:g} s" if timeout is not None else "the"
                unit = match.group("unit")
                new = f"grpc-timeout: <n>{unit}  (what is left of the {shown} timeout)"
            varying = varying or new != line
            extra.append(new)
        rest = entry.rest
        if varying:
            rest = _LEN.sub(lambda m: "len=<n>".ljust(len(m.group(0))), rest, count=1)
        result.append(Entry(entry.role, entry.arrow, rest, extra, entry.peer))
    return result


def canonical_order(entries: List[Entry]) -> List[Entry]:
    """Put every SETTINGS/PING ACK this side sent right after the frame it answers.

    The k-th SETTINGS ACK sent answers the k-th SETTINGS received (RFC 9113 §6.5.3), and the
    k-th PING ACK sent the k-th PING received (RFC 9113 §6.7).  Which write carries an ACK depends
    on how the kernel cut the reads, so without this the listing would differ from run to run.
    """
    pending: Dict[str, List[Entry]] = {"SETTINGS": [], "PING": []}
    others: List[Entry] = []
    for entry in entries:
        if entry.sent and entry.is_ack and entry.frame_type in pending:
            pending[entry.frame_type].append(entry)
        else:
            others.append(entry)
    ordered: List[Entry] = []
    for entry in others:
        ordered.append(entry)
        queue = pending.get(entry.frame_type)
        if queue and not entry.sent and not entry.is_ack:
            ordered.append(queue.pop(0))
    for queue in pending.values():
        ordered.extend(queue)  # an ACK for a frame not in the listing: keep it, at the end
    return ordered


def render_entries(entries: List[Entry], peer: Optional[str] = PEER_PLACEHOLDER) -> str:
    """The listing as the trace prints it, with the peer column replaced by ``peer``.

    ``peer=None`` keeps the peer as logged: the server's view of a unix-socket client is the
    unnamed address ``unix:``, the same every run.
    """
    lines: List[str] = []
    for entry in entries:
        shown = (entry.peer if peer is None else peer).ljust(_PEER_WIDTH)
        prefix = f"{entry.role} {entry.arrow} {shown}  "
        lines.append((prefix + entry.rest).rstrip())
        indent = " " * (len(prefix) + 2)
        lines.extend((indent + line).rstrip() for line in entry.extra)
    return "\n".join(lines)


def client_listing(capture: TraceCapture, timeout: Optional[float] = None) -> str:
    entries = parse_records(capture.messages, "client")
    return render_entries(canonical_order(normalise_entries(entries, timeout)))


def server_listing(capture: TraceCapture) -> str:
    entries = parse_records(capture.messages, "server")
    return render_entries(canonical_order(normalise_entries(entries)), peer=None)


def fenced(text: str, lang: str = "text") -> str:
    return f"```{lang}\n{text.rstrip()}\n```\n"


# --------------------------------------------------------------------------------------------
# Annotated hex dumps of a Length-Prefixed-Message (PROTOCOL-HTTP2.md, Requests) and its protobuf


_WIRE_TYPES = {0: "varint", 1: "64-bit", 2: "length-delimited", 5: "32-bit"}
_HEX_COLUMN = 32


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _hex(data: bytes) -> str:
    return " ".join(format(byte, "02x") for byte in data)  # bytes.hex(" ") is 3.8+


def _dump_line(indent: int, raw: bytes, note: str) -> str:
    shown = _hex(raw) if len(raw) <= 8 else _hex(raw[:8]) + " .."
    return ("  " * indent + shown).ljust(_HEX_COLUMN) + note


def _quote_text(value: bytes, limit: int = 110) -> str:
    text = value.decode("utf-8", "backslashreplace")
    if len(text) > limit:
        text = text[:limit] + "..."
    return '"' + text.replace('"', '\\"') + '"'


def annotate_protobuf(
    data: bytes, descriptor: Any, summaries: Optional[Dict[str, str]] = None, indent: int = 0
) -> List[str]:
    """One line per protobuf field: tag bytes, then the value, named from the descriptor.

    ``summaries`` replaces the quoted value of the named fields by a note (a long JSON
    document reads better as a document than as an escaped string).
    """
    summaries = summaries or {}
    lines: List[str] = []
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        fd = descriptor.fields_by_number.get(number) if descriptor is not None else None
        name = fd.name if fd is not None else "unknown"
        kind = _WIRE_TYPES.get(wire_type, f"wire type {wire_type}")
        if wire_type == 2:
            length, body_start = _varint(data, pos)
            body = data[body_start : body_start + length]
            head = data[start:body_start]
            if fd is not None and fd.message_type is not None:
                note = f"field {number} {name} ({fd.message_type.name}), {kind}, {length} bytes:"
                lines.append(_dump_line(indent, head, note))
                lines.extend(annotate_protobuf(body, fd.message_type, summaries, indent + 1))
            else:
                note = f"field {number} {name}, {kind}, {length} bytes"
                lines.append(_dump_line(indent, head, note))
                lines.append(_dump_line(indent + 1, body, summaries.get(name, _quote_text(body))))
            pos = body_start + length
        elif wire_type == 0:
            value, pos = _varint(data, pos)
            lines.append(_dump_line(indent, data[start:pos], f"field {number} {name} = {value}"))
        else:
            size = 8 if wire_type == 1 else 4
            pos += size
            lines.append(_dump_line(indent, data[start:pos], f"field {number} {name}, {kind}"))
    return lines


def annotate_message(
    message: bytes, descriptor: Any, summaries: Optional[Dict[str, str]] = None
) -> str:
    """The 5-byte gRPC prefix, then the protobuf fields of the payload."""
    flag, length = struct.unpack(">BI", message[:5])
    lines = [
        _dump_line(
            0,
            message[:1],
            f"compressed flag = {flag} (the message is not compressed)"
            if flag == 0
            else f"compressed flag = {flag} (compressed with grpc-encoding)",
        ),
        _dump_line(0, message[1:5], f"message length = {length} (4 bytes, big-endian)"),
    ]
    lines.extend(annotate_protobuf(message[5:], descriptor, summaries))
    return "\n".join(lines)


def _message_line(listing: str, direction: str, stream: int = 1) -> str:
    """The trace line of the first DATA frame going ``direction`` on ``stream``."""
    for line in listing.splitlines():
        if f" {direction} " in line and " DATA " in line and f"stream={stream} " in line:
            return line
    raise WalkthroughError(f"no DATA frame {direction} on stream {stream} in the trace")


def _check_message_matches(listing: str, direction: str, message: bytes) -> None:
    """The bytes we annotate must be the bytes the trace saw go over the socket."""
    line = _message_line(listing, direction)
    flag, length = struct.unpack(">BI", message[:5])
    expected = f"grpc-message flag={flag} length={length} [{_hex(message[5:21])}"
    if expected not in line:
        raise WalkthroughError(
            f"the annotated message does not match the trace:\n  {expected}\n  {line}"
        )


# --------------------------------------------------------------------------------------------
# The live parts: an agent, the plugin's call, and a relay for the deadline scenario


def _cmd_args() -> Any:
    from cni_client.skel import CmdArgs

    return CmdArgs(
        container_id=CONTAINER_ID,
        netns=NETNS,
        ifname=IFNAME,
        args=CNI_ARGS,
        path=CNI_PATH,
        stdin_data=NETWORK_CONFIG,
    )


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


class Agent:
    """The reference agent's servicer on minigrpc, as ``python -m cni_client.agent`` serves it.

    ``started`` is set when a call reaches the servicer; with ``hold=True`` the call then waits
    for ``release`` (the agent's own ``--hang`` behaviour, but one we can end).
    """

    def __init__(self, directory: str, hold: bool = False) -> None:
        import minigrpc
        from cni_client import agent, cni_pb2

        self.path = os.path.join(directory, "cni.sock")
        self.started = threading.Event()
        self.release = threading.Event()
        outer = self

        class Servicer(agent.CniServicer):
            def CmdAdd(self, request: Any, context: Any) -> Any:
                outer.started.set()
                return super().CmdAdd(request, context)

        self.servicer = Servicer([POOL], cni_pb2, hang=self.release if hold else None)
        self.executor = futures.ThreadPoolExecutor(max_workers=4)
        self.server = minigrpc.server(self.executor)
        self.server.add_generic_rpc_handlers(
            (agent.generic_handler(minigrpc, self.servicer, cni_pb2),)
        )
        self.server.add_insecure_port("unix:" + self.path)

    def __enter__(self) -> Agent:
        self.server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release.set()
        self.server.stop(None).wait(STEP_TIMEOUT)
        self.executor.shutdown(wait=True)


@contextlib.contextmanager
def plugin_and_agent(directory: str, hold: bool = False) -> Iterator[Tuple[Agent, TraceCapture]]:
    """An agent, the trace captured, and ``ANTREA_CNI_SOCKET`` pointing the plugin at it."""
    from cni_client import client

    with Agent(directory, hold) as agent, captured_trace() as capture:
        with _environment(client.SOCKET_PATH_ENV, agent.path):
            yield agent, capture


class HoldingRelay:
    """A byte relay between the client and the agent that holds back the call's response.

    Used for the deadline (scenario c) only.  minigrpc's server enforces the same deadline
    (it got it in ``grpc-timeout``) and answers DEADLINE_EXCEEDED trailers when it passes; the
    client's RST_STREAM(CANCEL) and those trailers race.  The relay forwards connection frames
    (stream 0) at once and drops the frames of the call, so the listing always shows the
    client's side of the deadline.  Nothing is rewritten: what does pass, passes byte for byte.
    """

    def __init__(self, directory: str, upstream: str) -> None:
        self.path = os.path.join(directory, "relay.sock")
        self.upstream = upstream
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(1)
        self._threads: List[threading.Thread] = []
        self._sockets: List[socket.socket] = [self._listener]

    def __enter__(self) -> HoldingRelay:
        thread = threading.Thread(target=self._accept, name="walkthrough-relay", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(STEP_TIMEOUT)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.connect(self.upstream)
        self._sockets += [client, server]
        for source, sink, keep in ((client, server, None), (server, client, _stream_zero)):
            thread = threading.Thread(target=self._pump, args=(source, sink, keep), daemon=True)
            thread.start()
            self._threads.append(thread)

    @staticmethod
    def _pump(
        source: socket.socket, sink: socket.socket, keep: Optional[Callable[[bytes], bool]]
    ) -> None:
        buffer = b""
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)
                return
            if keep is None:
                out = data
            else:
                buffer += data
                out = b""
                while len(buffer) >= 9:
                    end = 9 + int.from_bytes(buffer[:3], "big")
                    if len(buffer) < end:
                        break
                    frame, buffer = buffer[:end], buffer[end:]
                    if keep(frame):
                        out += frame
            try:
                if out:
                    sink.sendall(out)
            except OSError:
                return


def _stream_zero(frame: bytes) -> bool:
    return int.from_bytes(frame[5:9], "big") & 0x7FFFFFFF == 0


# --------------------------------------------------------------------------------------------
# Scenarios.  Each returns {region name: rendered text}.


def scenario_add(directory: str) -> Dict[str, str]:
    """(a) One CNI ADD exactly as the plugin makes it: ``cni_client.client.request``."""
    from cni_client import client, cni_pb2
    from minigrpc.protocol import wire

    args = _cmd_args()
    with plugin_and_agent(directory) as (_, capture):
        result = client.request(client.ACTION_ADD, args)
    listing = client_listing(capture)
    request = wire.encode_message(client.build_request(args))
    response = wire.encode_message(cni_pb2.CniCmdResponse(cni_result=result).SerializeToString())
    _check_message_matches(listing, "-->", request)
    _check_message_matches(listing, "<--", response)
    return {
        "add": fenced(listing),
        "add-settings": settings_table(capture),
        "add-request-message": fenced(annotate_message(request, cni_pb2.CniCmdRequest.DESCRIPTOR)),
        "add-network-config": fenced(NETWORK_CONFIG.decode(), "json"),
        "add-response-message": fenced(
            annotate_message(
                response,
                cni_pb2.CniCmdResponse.DESCRIPTOR,
                {"cni_result": "the CNI result (JSON), shown below"},
            )
        ),
        "add-result": fenced(_MAC.sub("<mac>", result.decode()), "json"),
    }


def scenario_unimplemented(directory: str) -> Dict[str, str]:
    """(b) A method the agent does not serve: Trailers-Only UNIMPLEMENTED, CNI error 202."""
    from cni_client import client
    from cni_client.skel import CniError

    with plugin_and_agent(directory) as (_, capture):
        try:
            client.request(UNKNOWN_ACTION, _cmd_args())
        except CniError as exc:
            error = exc
        else:
            raise WalkthroughError(f"{UNKNOWN_ACTION} unexpectedly succeeded")
    return {
        "unimplemented": fenced(client_listing(capture)),
        "unimplemented-cni-error": fenced(error.to_json().decode(), "json"),
    }


def _call_with_deadline(target_path: str) -> Any:
    """CmdAdd as the plugin builds it, but with a deadline; returns the RpcError it ends with."""
    import minigrpc
    from cni_client import client, messages

    channel = minigrpc.insecure_channel("unix:" + target_path)
    try:
        add = channel.unary_unary(
            f"/{client.CNI_SERVICE}/{client.ACTION_ADD}",
            response_deserializer=messages.decode_response,
        )
        add(client.build_request(_cmd_args()), timeout=DEADLINE_SECONDS)
    except minigrpc.RpcError as exc:
        return exc
    finally:
        channel.close()
    raise WalkthroughError("the call with a deadline unexpectedly succeeded")


def scenario_deadline(directory: str) -> Dict[str, str]:
    """(c) A call with a deadline to an agent that does not answer: RST_STREAM(CANCEL)."""
    import minigrpc
    from cni_client import client

    with Agent(directory, hold=True) as agent:
        with HoldingRelay(directory, agent.path) as relay, captured_trace() as capture:
            error = _call_with_deadline(relay.path)
    if error.code() is not minigrpc.StatusCode.DEADLINE_EXCEEDED:
        raise WalkthroughError(f"expected DEADLINE_EXCEEDED, got {error}")
    cni_error = client.rpc_failure_to_cni(error.code().name, str(error))
    outcome = (
        f"RpcError: {error}\ncode: {error.code()}\nas a CNI error: {cni_error.to_json().decode()}"
    )
    return {
        "deadline": fenced(client_listing(capture, DEADLINE_SECONDS)),
        "deadline-outcome": fenced(outcome),
    }


def scenario_goaway(directory: str) -> Dict[str, str]:
    """(d) The agent stops gracefully while an ADD is in flight: two GOAWAYs, the call ends OK."""
    from cni_client import client

    outcome: List[Any] = []

    def plugin_call() -> None:
        try:
            outcome.append(client.request(client.ACTION_ADD, _cmd_args()))
        except Exception as exc:
            outcome.append(exc)

    with plugin_and_agent(directory, hold=True) as (agent, capture):
        caller = threading.Thread(target=plugin_call, name="walkthrough-plugin")
        caller.start()
        try:
            if not agent.started.wait(STEP_TIMEOUT):
                raise WalkthroughError("the ADD never reached the agent")
            # Let the SETTINGS exchange finish first, so that the listing shows both ACKs
            # before the GOAWAY whatever reads the frames arrive in.
            capture.wait_until(capture.settings_settled, "the SETTINGS exchange")
            stopped = agent.server.stop(30)
            capture.wait_for(
                "client <-- ",
                " GOAWAY ",
                "last_stream_id=1 ",
                what="the second GOAWAY (last_stream_id=1) at the client",
            )
        finally:
            agent.release.set()
            caller.join(STEP_TIMEOUT)
        if not stopped.wait(STEP_TIMEOUT):
            raise WalkthroughError("the agent did not finish stopping")
    if not outcome or not isinstance(outcome[0], bytes):
        raise WalkthroughError(f"the ADD in flight did not succeed: {outcome!r}")
    return {
        "goaway": fenced(client_listing(capture)),
        "goaway-server": fenced(server_listing(capture)),
    }


def codec_examples(directory: str) -> Dict[str, str]:
    """Not a call: what minigrpc's codecs write for a few values (docs/wire-rules.md,
    "Timeouts" and "Responses and status")."""
    from minigrpc.protocol import wire

    timeouts = ["| timeout | `grpc-timeout` |", "|---|---|"]
    for seconds, label in (
        (0.0001, "100 µs"),
        (0.1, "100 ms"),
        (DEADLINE_SECONDS, "500 ms"),
        (1.5, "1.5 s"),
        (100.0, "100 s"),
        (36000.0, "10 h"),
        (34560000.0, "400 days"),
    ):
        timeouts.append(f"| {label} | `{wire.encode_timeout(seconds)}` |")
    messages = ["| status message | `grpc-message` on the wire |", "|---|---|"]
    for text in ("Method not found!", "pool 100% used", "\tbad ☺\r\n"):
        encoded = wire.percent_encode(text)
        if wire.percent_decode(encoded) != text:
            raise WalkthroughError(f"percent-encoding does not round-trip {text!r}")
        shown = repr(text)[1:-1].replace("|", "\\|")
        messages.append(f"| `{shown}` | `{encoded}` |")
    return {
        "grpc-timeout-examples": "\n".join(timeouts) + "\n",
        "percent-encoding-examples": "\n".join(messages) + "\n",
    }


SCENARIOS: Tuple[Callable[[str], Dict[str, str]], ...] = (
    scenario_add,
    scenario_unimplemented,
    scenario_deadline,
    scenario_goaway,
    codec_examples,
)

# What each SETTINGS parameter means (RFC 9113 §6.5.2), for the table of scenario (a).
_SETTING_MEANINGS = {
    "HEADER_TABLE_SIZE": "HPACK dynamic table the sender's decoder keeps (RFC 7541 §4.2)",
    "ENABLE_PUSH": "whether the peer may push (only servers push); gRPC never does",
    "MAX_CONCURRENT_STREAMS": "streams (calls) the sender lets its peer open at once",
    "INITIAL_WINDOW_SIZE": "bytes the peer may send on each stream before a WINDOW_UPDATE",
    "MAX_FRAME_SIZE": "largest frame payload the sender accepts",
    "MAX_HEADER_LIST_SIZE": "largest header list (name + value + 32 per field) it accepts",
    "ENABLE_CONNECT_PROTOCOL": "extended CONNECT (RFC 8441); unused by gRPC",
}


#: RFC 9113 §6.5.2: the value of each setting until a SETTINGS frame changes it.
_SETTING_DEFAULTS = {
    "HEADER_TABLE_SIZE": "4096",
    "ENABLE_PUSH": "1",
    "MAX_CONCURRENT_STREAMS": "unlimited",
    "INITIAL_WINDOW_SIZE": "65535",
    "MAX_FRAME_SIZE": "16384",
    "MAX_HEADER_LIST_SIZE": "unlimited",
    "ENABLE_CONNECT_PROTOCOL": "0",
}


def _announced(capture: TraceCapture, arrow: str) -> Dict[str, str]:
    """Every setting one side announced (as the client saw it), the last value winning."""
    values: Dict[str, str] = {}
    frames = 0
    for entry in parse_records(capture.messages, "client"):
        if entry.arrow == arrow and entry.frame_type == "SETTINGS" and not entry.is_ack:
            values.update(re.findall(r"\b([A-Z_]+)=(\d+)", entry.rest))
            frames += 1
    if not frames:
        raise WalkthroughError(f"no SETTINGS frame went {arrow} in the client's trace")
    return values


def settings_table(capture: TraceCapture) -> str:
    """The values each side announces, read from the live trace (RFC 9113 §6.5.2)."""
    client = _announced(capture, "-->")
    server = _announced(capture, "<--")
    rows = [
        "| setting | RFC 9113 default | minigrpc client | minigrpc server | meaning |",
        "|---|---|---|---|---|",
    ]
    for name, meaning in _SETTING_MEANINGS.items():
        default = _SETTING_DEFAULTS[name]
        rows.append(
            f"| {name} | {default} | {client.get(name, '(not sent)')} | "
            f"{server.get(name, '(not sent)')} | {meaning} |"
        )
    return "\n".join(rows) + "\n"


# --------------------------------------------------------------------------------------------
# Rendering the doc


def run_scenarios() -> Dict[str, str]:
    """Run every scenario live; return the text of every region."""
    regions: Dict[str, str] = {}
    directory = tempfile.mkdtemp(prefix="mg-walk-")
    try:
        for number, scenario in enumerate(SCENARIOS):
            sub = os.path.join(directory, str(number))
            os.mkdir(sub)
            regions.update(scenario(sub))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return regions


def render(text: str, regions: Dict[str, str]) -> str:
    """Replace the body of every ``trace:`` region whose name we produced."""

    def replace(match: re.Match) -> str:
        name = match.group("name")
        if name not in regions:
            return match.group(0)
        return match.group("open") + regions[name] + match.group("close")

    return REGION.sub(replace, text)


def region_names(text: str) -> List[str]:
    return [match.group("name") for match in REGION.finditer(text)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 with a diff when docs/protocol.md is stale"
    )
    parser.add_argument(
        "--print",
        action="store_true",
        dest="show",
        help="print every region instead of writing the doc",
    )
    parser.add_argument(
        "--doc",
        type=Path,
        default=DOC,
        help="the document to rewrite or check (default: docs/protocol.md)",
    )
    options = parser.parse_args(argv)
    doc: Path = options.doc.resolve()
    try:
        regions = run_scenarios()
    except WalkthroughError as exc:
        print(f"protocol walkthrough failed: {exc}", file=sys.stderr)
        return 2
    if options.show:
        for name, body in regions.items():
            print(f"<!-- trace:{name} -->\n{body}<!-- /trace:{name} -->\n")
        return 0
    old = doc.read_text(encoding="utf-8")
    new = render(old, regions)
    missing = sorted(set(regions) - set(region_names(old)))
    unknown = sorted(set(region_names(old)) - set(regions))
    problems = [f"region trace:{name} is missing from the doc" for name in missing]
    problems += [f"region trace:{name} is not produced by any scenario" for name in unknown]
    for problem in problems:
        print(problem, file=sys.stderr)
    shown = str(doc.relative_to(ROOT)) if ROOT in doc.parents else doc.name  # 3.9: is_relative_to
    if options.check:
        if new != old:
            diff = difflib.unified_diff(
                old.splitlines(), new.splitlines(), shown, "live run", lineterm=""
            )
            print("\n".join(diff))
            print(f"{shown} is stale: run `python tools/protocol_walkthrough.py`", file=sys.stderr)
            return 1
        return 1 if problems else 0
    if new != old:
        doc.write_text(new, encoding="utf-8")
        print(f"rewrote {shown}")
    else:
        print(f"{shown} is up to date")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
