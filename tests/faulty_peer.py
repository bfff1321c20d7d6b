"""A scriptable hostile HTTP/2 peer for the fault-injection suite (issue 5).

It is built on raw sockets, ``hyperframe`` and ``hpack`` directly, never on minigrpc or h2's
state machine, so that it can break every rule of RFC 9113 and PROTOCOL-HTTP2.md on purpose:
write half frames, garbage, header blocks of any size, DATA past the window, frames on streams
that do not exist.

* :class:`RawConn` wraps one socket. A reader thread parses every inbound frame (it never
  enforces anything, it only records), decodes header blocks, keeps the peer's flow-control
  windows, and optionally ACKs SETTINGS/PINGs and returns DATA window, so a script that is
  busy writing never deadlocks against a peer that is busy writing too. Scripts write with
  ``send_*`` helpers or raw bytes.
* :class:`FaultyServer` listens on a unix socket in a private temporary directory (or TCP) and
  runs ``script(conn)`` in a thread per accepted connection. ``misbehaving`` starts True; a test
  calls :meth:`FaultyServer.behave` to turn the same address into a well-behaved gRPC server
  and prove that the client recovers (issue 5: "the channel must work again for the next call").
* :class:`HostileClient` is the same :class:`RawConn` dialled out, for the server-side
  scenarios (preface games, floods, rapid reset, slowloris).
* :class:`ResourceSnapshot` proves that a scenario leaked no thread and no file descriptor.

Nothing here sleeps to synchronise: waits are on conditions, events and socket reads, and every
wait has a timeout so that a bug fails a test instead of hanging it.
"""

from __future__ import annotations

import gc
import os
import queue
import select
import shutil
import socket
import struct
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import hpack
from hyperframe.frame import (
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

Header = Tuple[bytes, bytes]
HeaderLike = Tuple[Union[str, bytes], Union[str, bytes]]

#: RFC 9113 §3.4.
CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_HEADER_LENGTH = 9
DEFAULT_WINDOW = 65_535
DEFAULT_MAX_FRAME = 16_384

# SETTINGS identifiers (RFC 9113 §6.5.2).
HEADER_TABLE_SIZE = 0x1
ENABLE_PUSH = 0x2
MAX_CONCURRENT_STREAMS = 0x3
INITIAL_WINDOW_SIZE = 0x4
MAX_FRAME_SIZE = 0x5
MAX_HEADER_LIST_SIZE = 0x6

# Frame types (RFC 9113 §6).
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE = range(9)
CONTINUATION = 0x9

#: How long any helper waits before declaring the other side stuck (a test failure, not a hang).
WAIT = 10.0

GRPC_OK_HEADERS: Sequence[Header] = ((b":status", b"200"), (b"content-type", b"application/grpc"))


def grpc_message(payload: bytes, flag: int = 0, length: Optional[int] = None) -> bytes:
    """A Length-Prefixed-Message (PROTOCOL-HTTP2.md), with a lying ``length`` when asked."""
    return struct.pack(">BI", flag, len(payload) if length is None else length) + payload


def split_messages(data: bytes) -> List[bytes]:
    """Payloads of the complete uncompressed Length-Prefixed-Messages in ``data``."""
    messages = []
    pos = 0
    while len(data) - pos >= 5:
        _, length = struct.unpack_from(">BI", data, pos)
        if len(data) - pos - 5 < length:
            break
        messages.append(bytes(data[pos + 5 : pos + 5 + length]))
        pos += 5 + length
    return messages


def _bytes(value: Union[str, bytes]) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def _normalise(headers: Iterable[HeaderLike]) -> List[Header]:
    return [(_bytes(name), _bytes(value)) for name, value in headers]


@dataclass
class StreamRecord:
    """Everything the other side sent on one stream: header blocks, DATA, END_STREAM, RST."""

    stream_id: int
    header_blocks: List[List[Header]] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray)
    data_frames: int = 0
    ended: bool = False
    reset_code: Optional[int] = None

    @property
    def headers(self) -> List[Header]:
        return self.header_blocks[0] if self.header_blocks else []

    @property
    def trailers(self) -> List[Header]:
        return self.header_blocks[-1] if len(self.header_blocks) > 1 else []

    def header(self, name: str, block: int = 0) -> Optional[bytes]:
        if len(self.header_blocks) <= block:
            return None
        wanted = name.encode("ascii")
        for key, value in self.header_blocks[block]:
            if key == wanted:
                return value
        return None

    @property
    def path(self) -> str:
        return (self.header(":path") or b"").decode("utf-8", "replace")

    @property
    def messages(self) -> List[bytes]:
        return split_messages(bytes(self.data))

    @property
    def done(self) -> bool:
        return self.ended or self.reset_code is not None


@dataclass
class GoAwayRecord:
    last_stream_id: int
    error_code: int
    additional_data: bytes


class RawConn:
    """One socket, a frame-recording reader thread and rule-free writers.

    ``role`` is ``"server"`` (the other side is a client: expect its preface) or ``"client"``.
    The reader thread is the only reader; scripts and tests observe what it recorded through
    :meth:`wait_for` and :meth:`next_request`. Writes from any thread are serialised by a lock.
    """

    def __init__(
        self,
        sock: socket.socket,
        role: str,
        *,
        index: int = 0,
        auto_ack_settings: bool = True,
        auto_ack_ping: bool = True,
        auto_window_update: bool = True,
        owner: Optional[FaultyServer] = None,
        read: bool = True,
        record_frames: bool = True,
    ) -> None:
        self.sock = sock
        self.role = role
        self.index = index
        self.owner = owner
        self.auto_ack_settings = auto_ack_settings
        self.auto_ack_ping = auto_ack_ping
        self.auto_window_update = auto_window_update
        #: Keep every frame object in :attr:`frames` (off for floods: it is the test's memory).
        self.record_frames = record_frames
        self.encoder = hpack.Encoder()
        self._decoder = hpack.Decoder(max_header_list_size=1 << 26)
        self._decoder.max_allowed_table_size = 1 << 16
        # Re-entrant so that a script can hold it across many writes (see :meth:`exclusive`).
        self._write_lock = threading.RLock()
        self.cond = threading.Condition()
        # Everything below is guarded by ``cond``.
        self.preface = b""
        self.preface_ok: Optional[bool] = None
        self.frames: List[Frame] = []
        self.frame_counts: Dict[int, int] = {}
        self.max_data_frame = 0
        self.streams: Dict[int, StreamRecord] = {}
        self.resets: List[Tuple[int, int]] = []
        self.goaways: List[GoAwayRecord] = []
        self.pings: List[bytes] = []
        self.ping_acks: List[bytes] = []
        self.settings_received: List[Dict[int, int]] = []
        self.settings_acks = 0
        self.peer_settings: Dict[int, int] = {}
        self.eof = False
        self.reader_error: Optional[BaseException] = None
        self.write_error: Optional[BaseException] = None
        self.bytes_received = 0
        # Flow control for what *we* send (the other side's receive windows).
        self.send_window = DEFAULT_WINDOW
        self.stream_send_windows: Dict[int, int] = {}
        self._requests: queue.Queue[Optional[StreamRecord]] = queue.Queue()
        self._closed = False
        self._sent_anything = False
        self._held_replies: List[bytes] = []
        self._header_stream: Optional[int] = None
        self._header_fragments: List[bytes] = []
        self._header_end_stream = False
        self._reader = threading.Thread(
            target=self._read_loop, name=f"faulty-peer-reader-{role}-{index}", daemon=True
        )
        if read:
            self._reader.start()
        else:
            # A peer that never reads: what the other side writes piles up in its buffers.
            self.eof = False

    # ---------------------------------------------------------------- reading (reader thread)

    def _recv_exactly(self, count: int) -> Optional[bytes]:
        chunks = []
        while count:
            try:
                chunk = self.sock.recv(min(count, 1 << 20))
            except OSError:
                return None
            if not chunk:
                return None
            self.bytes_received += len(chunk)
            chunks.append(chunk)
            count -= len(chunk)
        return b"".join(chunks)

    def _read_loop(self) -> None:
        try:
            if self.role == "server":
                preface = self._recv_exactly(len(CLIENT_PREFACE))
                with self.cond:
                    self.preface = preface or b""
                    self.preface_ok = preface == CLIENT_PREFACE
                    self.cond.notify_all()
                if preface != CLIENT_PREFACE:
                    return
            while True:
                header = self._recv_exactly(FRAME_HEADER_LENGTH)
                if header is None:
                    return
                frame, length = Frame.parse_frame_header(memoryview(header))
                body = self._recv_exactly(length) if length else b""
                if body is None:
                    return
                frame.parse_body(memoryview(body))
                self._on_frame(frame, length)
        except BaseException as exc:  # recorded for the test; the reader must never raise
            with self.cond:
                self.reader_error = exc
        finally:
            with self.cond:
                self.eof = True
                self.cond.notify_all()
            self._requests.put(None)

    def _stream(self, stream_id: int) -> StreamRecord:
        record = self.streams.get(stream_id)
        if record is None:
            record = self.streams[stream_id] = StreamRecord(stream_id)
            self.stream_send_windows.setdefault(
                stream_id, self.peer_settings.get(INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
            )
        return record

    def _on_frame(self, frame: Frame, length: int) -> None:
        replies: List[bytes] = []
        completed: Optional[StreamRecord] = None
        with self.cond:
            if self.record_frames:
                self.frames.append(frame)
            self.frame_counts[frame.type] = self.frame_counts.get(frame.type, 0) + 1
            flags = frame.flags
            if isinstance(frame, (HeadersFrame, ContinuationFrame)):
                if isinstance(frame, HeadersFrame):
                    self._header_stream = frame.stream_id
                    self._header_fragments = [frame.data]
                    self._header_end_stream = "END_STREAM" in flags
                else:
                    self._header_fragments.append(frame.data)
                if "END_HEADERS" in flags:
                    block = b"".join(self._header_fragments)
                    decoded = self._decoder.decode(block, raw=True)
                    headers = [(bytes(k), bytes(v)) for k, v in decoded]
                    record = self._stream(self._header_stream or frame.stream_id)
                    record.header_blocks.append(headers)
                    if self.owner is not None:
                        self.owner.headers_received.set()
                    if self._header_end_stream:
                        record.ended = True
                        completed = record
                    self._header_fragments = []
            elif isinstance(frame, DataFrame):
                record = self._stream(frame.stream_id)
                record.data += frame.data
                record.data_frames += 1
                self.max_data_frame = max(self.max_data_frame, length)
                if "END_STREAM" in flags:
                    record.ended = True
                    completed = record
                if self.auto_window_update and length:
                    replies.append(WindowUpdateFrame(0, window_increment=length).serialize())
                    if not record.ended:
                        replies.append(
                            WindowUpdateFrame(frame.stream_id, window_increment=length).serialize()
                        )
            elif isinstance(frame, RstStreamFrame):
                self._stream(frame.stream_id).reset_code = frame.error_code
                self.resets.append((frame.stream_id, frame.error_code))
                if self.role == "client":
                    completed = self.streams[frame.stream_id]
            elif isinstance(frame, SettingsFrame):
                if "ACK" in flags:
                    self.settings_acks += 1
                else:
                    self.settings_received.append(dict(frame.settings))
                    if INITIAL_WINDOW_SIZE in frame.settings:
                        new = frame.settings[INITIAL_WINDOW_SIZE]
                        old = self.peer_settings.get(INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
                        for sid in self.stream_send_windows:
                            self.stream_send_windows[sid] += new - old
                    self.peer_settings.update(frame.settings)
                    if self.auto_ack_settings:
                        replies.append(SettingsFrame(0, flags=["ACK"]).serialize())
            elif isinstance(frame, PingFrame):
                if "ACK" in flags:
                    self.ping_acks.append(bytes(frame.opaque_data))
                else:
                    self.pings.append(bytes(frame.opaque_data))
                    if self.auto_ack_ping:
                        replies.append(
                            PingFrame(0, opaque_data=frame.opaque_data, flags=["ACK"]).serialize()
                        )
            elif isinstance(frame, WindowUpdateFrame):
                if frame.stream_id == 0:
                    self.send_window += frame.window_increment
                else:
                    self.stream_send_windows[frame.stream_id] = (
                        self.stream_send_windows.get(
                            frame.stream_id,
                            self.peer_settings.get(INITIAL_WINDOW_SIZE, DEFAULT_WINDOW),
                        )
                        + frame.window_increment
                    )
            elif isinstance(frame, GoAwayFrame):
                self.goaways.append(
                    GoAwayRecord(
                        frame.last_stream_id, frame.error_code, bytes(frame.additional_data)
                    )
                )
            self.cond.notify_all()
        if replies:
            self._send_replies(b"".join(replies))
        if completed is not None and (self.role == "server" or completed.done):
            if self.role == "server" and self.owner is not None:
                self.owner._on_request(completed)
            self._requests.put(completed)

    # ---------------------------------------------------------------- observing

    def wait_for(self, predicate: Callable[[], bool], timeout: float = WAIT) -> bool:
        """Wait until ``predicate()`` (evaluated under the lock) holds; False on timeout."""
        with self.cond:
            return self.cond.wait_for(predicate, timeout)

    def next_request(self, timeout: Optional[float] = WAIT) -> Optional[StreamRecord]:
        """The next stream the other side finished (END_STREAM, or RST on the client role).

        None at EOF (or on timeout, which the caller treats like EOF).
        """
        try:
            return self._requests.get(timeout=timeout)
        except queue.Empty:
            return None

    def wait_stream_done(self, stream_id: int, timeout: float = WAIT) -> StreamRecord:
        """Client role: wait for the response on ``stream_id`` to end (END_STREAM, RST or EOF)."""
        self.wait_for(
            lambda: self.eof or (stream_id in self.streams and self.streams[stream_id].done),
            timeout,
        )
        with self.cond:
            return self.streams.get(stream_id) or StreamRecord(stream_id)

    def wait_eof(self, timeout: float = WAIT) -> bool:
        return self.wait_for(lambda: self.eof, timeout)

    def wait_settings(self, timeout: float = WAIT) -> bool:
        return self.wait_for(lambda: bool(self.settings_received) or self.eof, timeout)

    # ---------------------------------------------------------------- writing

    def send(self, data: bytes) -> bool:
        """Write raw bytes; False (recorded) when the other side is gone."""
        with self._write_lock:
            try:
                self.sock.sendall(data)
                self._sent_anything = True
                if self._held_replies:
                    held, self._held_replies = b"".join(self._held_replies), []
                    self.sock.sendall(held)
                return True
            except OSError as exc:
                self.write_error = exc
                return False

    def _send_replies(self, data: bytes) -> None:
        """Automatic ACKs/WINDOW_UPDATEs. A client's are held until it has written its first
        bytes (normally the preface), so that they never precede it on the wire."""
        with self._write_lock:
            if self.role == "client" and not self._sent_anything:
                self._held_replies.append(data)
                return
        self.send(data)

    def exclusive(self) -> Any:
        """Hold the write lock: nothing (not even an auto-ACK) lands inside a dribbled frame."""
        return self._write_lock

    def send_frame(self, *frames: Frame) -> bool:
        return self.send(b"".join(frame.serialize() for frame in frames))

    def send_preface(self, settings: Optional[Dict[int, int]] = None) -> bool:
        """Client role: the connection preface and our SETTINGS."""
        return self.send(CLIENT_PREFACE + SettingsFrame(0, settings=settings or {}).serialize())

    def send_settings(self, settings: Optional[Dict[int, int]] = None, ack: bool = False) -> bool:
        if ack:
            return self.send_frame(SettingsFrame(0, flags=["ACK"]))
        return self.send_frame(SettingsFrame(0, settings=settings or {}))

    def encode_headers(self, headers: Iterable[HeaderLike]) -> bytes:
        """hpack-encode with this connection's encoder (its dynamic table state is shared)."""
        with self._write_lock:
            return bytes(self.encoder.encode(_normalise(headers)))

    def header_frames(
        self,
        stream_id: int,
        headers: Iterable[HeaderLike],
        *,
        end_stream: bool = False,
        fragment: Optional[int] = None,
        end_headers: bool = True,
    ) -> bytes:
        """HEADERS (+ CONTINUATION every ``fragment`` bytes) for one header block, serialised."""
        block = self.encode_headers(headers)
        size = fragment or max(len(block), 1)
        pieces = [block[i : i + size] for i in range(0, len(block), size)] or [b""]
        out = []
        for number, piece in enumerate(pieces):
            last = number == len(pieces) - 1
            flags = ["END_HEADERS"] if last and end_headers else []
            if number == 0:
                if end_stream:
                    flags.append("END_STREAM")
                out.append(HeadersFrame(stream_id, piece, flags=flags).serialize())
            else:
                out.append(ContinuationFrame(stream_id, piece, flags=flags).serialize())
        return b"".join(out)

    def send_headers(
        self,
        stream_id: int,
        headers: Iterable[HeaderLike],
        *,
        end_stream: bool = False,
        fragment: Optional[int] = None,
    ) -> bool:
        return self.send(
            self.header_frames(stream_id, headers, end_stream=end_stream, fragment=fragment)
        )

    def send_data(
        self,
        stream_id: int,
        data: bytes,
        *,
        end_stream: bool = False,
        pad_length: Optional[int] = None,
        frame_size: Optional[int] = None,
        flow_control: bool = True,
        timeout: float = WAIT,
    ) -> bool:
        """DATA in frames of at most ``frame_size`` (default: the other side's MAX_FRAME_SIZE).

        With ``flow_control`` it waits for window like a well-behaved sender, counting padding
        (RFC 9113 §6.9.1); a receiver that leaks window then stalls it, and the test sees a
        deadline instead of a silent success. False when the window never opens or on EOF.
        """
        pad = 0 if pad_length is None else pad_length + 1
        with self.cond:
            limit = frame_size or self.peer_settings.get(MAX_FRAME_SIZE, DEFAULT_MAX_FRAME)
        chunk_room = max(1, limit - pad)
        pos = 0
        while True:
            piece_size = min(chunk_room, len(data) - pos)
            need = pad + min(piece_size, 1)
            if flow_control and need:
                if not self.wait_for(
                    lambda need=need: self.eof
                    or self._stream_reset(stream_id)
                    or min(self.send_window, self._stream_window(stream_id)) >= need,
                    timeout,
                ):
                    return False
                with self.cond:
                    record = self.streams.get(stream_id)
                    if self.eof or (record is not None and record.reset_code is not None):
                        return False
                    room = min(self.send_window, self._stream_window(stream_id))
                    piece_size = min(piece_size, room - pad)
                    cost = piece_size + pad
                    self.send_window -= cost
                    self.stream_send_windows[stream_id] = self._stream_window(stream_id) - cost
            piece = data[pos : pos + piece_size]
            pos += piece_size
            last = pos >= len(data)
            frame = DataFrame(stream_id, piece, flags=["END_STREAM"] if last and end_stream else [])
            if pad_length is not None:
                frame.flags.add("PADDED")
                frame.pad_length = pad_length
            if not self.send_frame(frame):
                return False
            if last:
                return True

    def _stream_reset(self, stream_id: int) -> bool:
        record = self.streams.get(stream_id)
        return record is not None and record.reset_code is not None

    def _stream_window(self, stream_id: int) -> int:
        return self.stream_send_windows.get(
            stream_id, self.peer_settings.get(INITIAL_WINDOW_SIZE, DEFAULT_WINDOW)
        )

    def send_rst(self, stream_id: int, error_code: int) -> bool:
        return self.send_frame(RstStreamFrame(stream_id, error_code=error_code))

    def send_goaway(self, last_stream_id: int, error_code: int = 0, data: bytes = b"") -> bool:
        return self.send_frame(
            GoAwayFrame(
                0, last_stream_id=last_stream_id, error_code=error_code, additional_data=data
            )
        )

    def send_ping(self, payload: bytes = b"\x00" * 8, ack: bool = False) -> bool:
        return self.send_frame(PingFrame(0, opaque_data=payload, flags=["ACK"] if ack else []))

    def send_window_update(self, stream_id: int, increment: int) -> bool:
        return self.send_frame(WindowUpdateFrame(stream_id, window_increment=increment))

    def respond(
        self,
        stream_id: int,
        payload: bytes = b"",
        *,
        status: int = 0,
        message: Optional[str] = None,
        headers: Sequence[HeaderLike] = GRPC_OK_HEADERS,
        trailers: Optional[Sequence[HeaderLike]] = None,
    ) -> bool:
        """A well-formed unary response (PROTOCOL-HTTP2.md, Responses)."""
        if trailers is None:
            trailers = [(b"grpc-status", str(status).encode())]
            if message is not None:
                trailers.append((b"grpc-message", message.encode()))
        return (
            self.send_headers(stream_id, headers)
            and self.send_data(stream_id, grpc_message(payload))
            and self.send_headers(stream_id, trailers, end_stream=True)
        )

    # ---------------------------------------------------------------- ending

    def shutdown(self) -> None:
        """Half-close both directions: the reader sees EOF, the other side sees EOF."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self, join: bool = True) -> None:
        """Shut down, let the reader finish, close the socket. Idempotent."""
        self.shutdown()
        if join and self._reader.is_alive() and threading.current_thread() is not self._reader:
            self._reader.join(WAIT)
        with self._write_lock:
            if not self._closed:
                self._closed = True
                self.sock.close()

    def abort(self) -> None:
        """Close with RST (SO_LINGER 0) on TCP; a plain close on unix sockets."""
        if self.sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        self.close()

    @property
    def reader_alive(self) -> bool:
        return self._reader.is_alive()


Script = Callable[[RawConn], None]
Fault = Callable[[RawConn, StreamRecord], Optional[str]]


def short_temp_dir() -> str:
    """A private directory with a short path: unix socket paths are limited to 107 bytes."""
    return tempfile.mkdtemp(prefix="mgf-")


class FaultyServer:
    """A listening hostile peer; ``script(conn)`` runs in its own thread per connection.

    ``misbehaving`` starts True; scripts built by :func:`rpc_script` and
    :func:`connection_script` consult it so that :meth:`behave` turns the same address into a
    well-behaved gRPC server. ``errors`` collects exceptions raised by scripts (a test asserts
    it is empty: a script's AssertionError is how a peer reports a client breaking a rule).
    """

    def __init__(self, script: Script, *, tcp: bool = False, **conn_options: Any) -> None:
        self.script = script
        self.conn_options = conn_options
        self.misbehaving = True
        #: What a well-behaved answer carries; None echoes the request message.
        self.reply_payload: Optional[bytes] = None
        self.connections: List[RawConn] = []
        self.requests: List[StreamRecord] = []
        self.request_received = threading.Event()
        #: Set as soon as any request HEADERS arrive (the body may never come).
        self.headers_received = threading.Event()
        self.errors: List[BaseException] = []
        self.stop_event = threading.Event()
        #: Set by :meth:`behave`: scripts parked in :meth:`hang` say GOAWAY and close.
        self.behaving = threading.Event()
        self._lock = threading.Lock()
        self._threads: List[threading.Thread] = []
        self._directory: Optional[str] = None
        if tcp:
            self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind(("127.0.0.1", 0))
            self.path = ""
            self.target = f"127.0.0.1:{self._listener.getsockname()[1]}"
        else:
            self._directory = short_temp_dir()
            self.path = os.path.join(self._directory, "peer.sock")
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(self.path)
            self.target = "unix:" + self.path
        self._listener.listen(128)
        self._wake_r, self._wake_w = socket.socketpair()
        self._acceptor = threading.Thread(target=self._accept_loop, name="faulty-peer-accept")
        self._acceptor.daemon = True
        self._acceptor.start()

    # ------------------------------------------------------------ lifecycle

    def _accept_loop(self) -> None:
        while True:
            readable, _, _ = select.select([self._listener, self._wake_r], [], [])
            if self._wake_r in readable:
                return
            try:
                sock, _ = self._listener.accept()
            except OSError:
                continue
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self.stop_event.is_set():
                    sock.close()
                    return
                conn = RawConn(
                    sock, "server", index=len(self.connections), owner=self, **self.conn_options
                )
                self.connections.append(conn)
                worker = threading.Thread(
                    target=self._run_script, args=(conn,), name=f"faulty-peer-script-{conn.index}"
                )
                worker.daemon = True
                self._threads.append(worker)
            worker.start()

    def _run_script(self, conn: RawConn) -> None:
        try:
            self.script(conn)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            if not conn.eof:
                # Give the other side our last bytes before closing (FIN, not RST).
                conn.shutdown()
            conn.close()

    def _on_request(self, record: StreamRecord) -> None:
        with self._lock:
            self.requests.append(record)
        self.request_received.set()

    def behave(self) -> None:
        """From now on, serve well-formed gRPC on the same address.

        Connections parked in :meth:`hang` end with GOAWAY(NO_ERROR, last = the highest stream
        seen), so a correct client knows that a call it races onto them was never processed and
        may be retried (grpc-wire.md §5): the recovery check is deterministic.
        """
        self.misbehaving = False
        self.behaving.set()
        self._wake_connections()

    def _wake_connections(self) -> None:
        with self._lock:
            connections = list(self.connections)
        for conn in connections:
            with conn.cond:
                conn.cond.notify_all()

    def close(self) -> None:
        """Stop accepting, end every connection and join every thread (a leak is an error)."""
        self.stop_event.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._acceptor.join(WAIT)
        self._wake_connections()
        with self._lock:
            connections = list(self.connections)
            threads = list(self._threads)
        for conn in connections:
            conn.shutdown()
        for thread in threads:
            thread.join(WAIT)
        for conn in connections:
            conn.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()
        if self._directory:
            shutil.rmtree(self._directory, ignore_errors=True)
        alive = [t.name for t in [*threads, self._acceptor] if t.is_alive()]
        if alive:
            raise AssertionError(f"faulty peer threads did not stop: {alive}")

    def __enter__(self) -> FaultyServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def connection_count(self) -> int:
        with self._lock:
            return len(self.connections)

    def wait_request(self, timeout: float = WAIT) -> bool:
        return self.request_received.wait(timeout)

    def hang(self, conn: RawConn) -> None:
        """Do nothing until the test ends, :meth:`behave` or the other side goes away.

        On :meth:`behave` the connection says GOAWAY naming the last stream it had when it began
        to hang: a call the client opened on it in the meantime (the test's recovery call) was
        never processed, so the client must retry it elsewhere rather than fail it.
        """
        with conn.cond:
            last = max(conn.streams, default=0)
        while not (self.stop_event.is_set() or self.behaving.is_set() or conn.eof):
            conn.wait_for(
                lambda: conn.eof or self.stop_event.is_set() or self.behaving.is_set(),
                timeout=0.5,
            )
        if self.behaving.is_set() and not conn.eof and not self.stop_event.is_set():
            conn.send_goaway(last)


def echo_response(conn: RawConn, request: StreamRecord) -> None:
    """A well-behaved unary response: the first request message echoed, OK."""
    conn.respond(request.stream_id, reply_payload(conn, request))


def reply_payload(conn: RawConn, request: StreamRecord) -> bytes:
    """The owner's configured reply, else the first request message echoed."""
    if conn.owner is not None and conn.owner.reply_payload is not None:
        return conn.owner.reply_payload
    messages = request.messages
    return messages[0] if messages else b""


def serve_well(conn: RawConn, settings: Optional[Dict[int, int]] = None) -> None:
    """A well-behaved gRPC server on ``conn``: SETTINGS, then echo every request."""
    conn.send_settings(settings or {})
    while True:
        request = conn.next_request(timeout=None)
        if request is None:
            return
        if request.reset_code is None:
            echo_response(conn, request)


def rpc_script(fault: Fault, settings: Optional[Dict[int, int]] = None) -> Script:
    """A script that answers each request with ``fault`` while the server misbehaves.

    ``fault(conn, request)`` may return ``"close"`` to end the connection right there, or
    ``"stop"`` to stop reading (the script then waits for the test's end).
    """

    def script(conn: RawConn) -> None:
        owner = conn.owner
        assert owner is not None
        conn.send_settings(settings or {})
        while True:
            request = conn.next_request(timeout=None)
            if request is None:
                return
            if request.reset_code is not None:
                continue
            if owner.misbehaving:
                outcome = fault(conn, request)
                if outcome == "close":
                    return
                if outcome == "stop":
                    owner.hang(conn)
                    return
            else:
                echo_response(conn, request)

    return script


def connection_script(fault: Script) -> Script:
    """A script running ``fault(conn)`` on connections accepted while misbehaving."""

    def script(conn: RawConn) -> None:
        owner = conn.owner
        assert owner is not None
        if owner.misbehaving:
            fault(conn)
        else:
            serve_well(conn)

    return script


class HostileClient(RawConn):
    """A raw client connection for the server-side scenarios (preface games, floods, resets)."""

    def __init__(self, target: str, **options: Any) -> None:
        if target.startswith("unix:"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(target[len("unix:") :])
        else:
            host, _, port = target.rpartition(":")
            sock = socket.create_connection((host, int(port)))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().__init__(sock, "client", **options)
        self._next_stream_id = 1

    def next_stream_id(self) -> int:
        stream_id = self._next_stream_id
        self._next_stream_id += 2
        return stream_id

    def request_headers(
        self,
        path: str,
        extra: Sequence[HeaderLike] = (),
        *,
        content_type: bytes = b"application/grpc",
    ) -> List[Header]:
        headers: List[Header] = [
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", path.encode()),
            (b":authority", b"localhost"),
            (b"content-type", content_type),
            (b"te", b"trailers"),
        ]
        return headers + _normalise(extra)

    def unary(self, path: str, payload: bytes, timeout: float = WAIT) -> StreamRecord:
        """A well-formed call; returns the recorded response stream."""
        stream_id = self.next_stream_id()
        self.send_headers(stream_id, self.request_headers(path))
        self.send_data(stream_id, grpc_message(payload), end_stream=True)
        return self.wait_stream_done(stream_id, timeout)

    def __enter__(self) -> HostileClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def grpc_status_of(record: StreamRecord) -> Optional[int]:
    """The ``grpc-status`` a response carried (Trailers-Only or trailers), or None."""
    for block in reversed(record.header_blocks):
        for key, value in block:
            if key == b"grpc-status":
                try:
                    return int(value)
                except ValueError:
                    return None
    return None


def http_status_of(record: StreamRecord) -> Optional[int]:
    value = record.header(":status")
    return int(value) if value is not None and value.isdigit() else None


# -------------------------------------------------------------------- leak checking


def open_fds() -> Optional[int]:
    """Number of open file descriptors of this process (Linux), or None elsewhere."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


class ResourceSnapshot:
    """Threads and file descriptors before a scenario, to prove afterwards that none leaked."""

    def __init__(self) -> None:
        gc.collect()
        self.threads = set(threading.enumerate())
        self.fds = open_fds()

    def leaks(self, timeout: float = WAIT) -> List[str]:
        """What is still open; threads started since the snapshot get ``timeout`` to finish."""
        problems = []
        for thread in threading.enumerate():
            if thread not in self.threads and thread is not threading.current_thread():
                thread.join(timeout)
                if thread.is_alive():
                    problems.append(f"thread {thread.name!r} still running")
        gc.collect()
        fds = open_fds()
        if self.fds is not None and fds is not None and fds > self.fds:
            problems.append(f"{fds - self.fds} file descriptor(s) leaked: {_fd_kinds()}")
        return problems

    def assert_no_leaks(self, timeout: float = WAIT) -> None:
        problems = self.leaks(timeout)
        assert not problems, "; ".join(problems)


def _fd_kinds() -> str:
    kinds = []
    try:
        for name in os.listdir("/proc/self/fd"):
            try:
                kinds.append(os.readlink(f"/proc/self/fd/{name}"))
            except OSError:
                continue
    except OSError:
        return "?"
    return ", ".join(sorted(kinds))


# ==================================================================== client-side scenarios
#
# The catalogue of issue 5, "Client side", shared by test_hostile_client.py (minigrpc's channel)
# and test_hostile_plugin.py (the CNI plugin as a subprocess). ``expected`` is a StatusCode
# name chosen from grpc-wire.md (section cited in ``reference``); "OK" means the call must
# succeed. ``deadline_only`` scenarios end only by the caller's deadline (the plugin has none,
# so there the runtime's SIGKILL is the only way out).

RST_CODES: Dict[int, str] = {
    0x0: "INTERNAL",
    0x1: "INTERNAL",
    0x2: "INTERNAL",
    0x3: "RESOURCE_EXHAUSTED",
    0x4: "INTERNAL",
    0x5: "INTERNAL",
    0x6: "INTERNAL",
    0x7: "UNAVAILABLE",
    0x8: "CANCELLED",
    0x9: "INTERNAL",
    0xA: "INTERNAL",
    0xB: "RESOURCE_EXHAUSTED",
    0xC: "PERMISSION_DENIED",
    0xD: "INTERNAL",
    0x2A: "INTERNAL",
}


@dataclass(frozen=True)
class ClientScenario:
    name: str
    group: str
    description: str
    script: Script
    expected: str
    reference: str
    deadline: float = 10.0
    deadline_only: bool = False
    request_size: int = 16
    #: Exact ``details()`` expected, when the scenario is about the message text.
    details: Optional[str] = None
    #: Most requests a retrying client may make before giving up (REFUSED_STREAM, GOAWAY).
    max_requests: Optional[int] = None
    #: A well-behaved reply after :meth:`FaultyServer.behave` needs a new connection.
    new_connection_after: bool = False


def _respond_raw(
    conn: RawConn,
    sid: int,
    headers: Sequence[HeaderLike],
    body: Optional[bytes],
    trailers: Optional[Sequence[HeaderLike]],
) -> None:
    """HEADERS, then DATA (if any), then trailers (if any); END_STREAM on the last of them."""
    conn.send_headers(sid, headers, end_stream=body is None and trailers is None)
    if body is not None:
        conn.send_data(sid, body, end_stream=trailers is None)
    if trailers is not None:
        conn.send_headers(sid, trailers, end_stream=True)


def _shaped(
    headers: Sequence[HeaderLike] = GRPC_OK_HEADERS,
    body: Optional[bytes] = b"\x00\x00\x00\x00\x02hi",
    trailers: Optional[Sequence[HeaderLike]] = ((b"grpc-status", b"0"),),
) -> Script:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        _respond_raw(conn, request.stream_id, headers, body, trailers)
        return None

    return rpc_script(fault)


def _close_before_preface(conn: RawConn) -> None:
    conn.close(join=False)


def _garbage_then(close: bool) -> Script:
    def fault(conn: RawConn) -> None:
        conn.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        if close:
            conn.shutdown()
        else:
            assert conn.owner is not None
            conn.owner.hang(conn)

    return connection_script(fault)


def _silent(conn: RawConn) -> None:
    """Accept, read, never write a byte (not even SETTINGS)."""
    assert conn.owner is not None
    conn.owner.hang(conn)


def _zero_window(opens: bool) -> Script:
    def script(conn: RawConn) -> None:
        owner = conn.owner
        assert owner is not None
        if not owner.misbehaving:
            serve_well(conn)
            return
        conn.send_settings({INITIAL_WINDOW_SIZE: 0})
        # The client may have sent up to 65,535 bytes before our SETTINGS arrived (RFC 9113
        # §6.9.2); the 100 kB request then stalls, its window negative, until we open it.
        conn.wait_for(lambda: any(r.headers for r in conn.streams.values()) or conn.eof)
        if not opens:
            owner.hang(conn)
            return
        conn.send_settings({INITIAL_WINDOW_SIZE: DEFAULT_WINDOW})
        while True:
            request = conn.next_request(timeout=None)
            if request is None:
                return
            if request.reset_code is None:
                echo_response(conn, request)

    return script


def _max_frame_script(conn: RawConn) -> None:
    def fault(c: RawConn, request: StreamRecord) -> Optional[str]:
        assert c.max_data_frame <= DEFAULT_MAX_FRAME, (
            f"client sent a {c.max_data_frame}-byte DATA frame; our MAX_FRAME_SIZE is 16384"
        )
        echo_response(c, request)
        return None

    rpc_script(fault, settings={MAX_FRAME_SIZE: DEFAULT_MAX_FRAME})(conn)


def _illegal_settings(settings: Dict[int, int]) -> Script:
    def fault(conn: RawConn) -> None:
        conn.send_settings(settings)
        assert conn.owner is not None
        conn.owner.hang(conn)

    return connection_script(fault)


def _reset_with(code: int, stage: str = "immediately") -> Script:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        sid = request.stream_id
        if stage in ("after_headers", "during_data", "after_data"):
            conn.send_headers(sid, GRPC_OK_HEADERS)
        if stage == "during_data":
            conn.send_data(sid, grpc_message(b"x" * 100)[:50])
        if stage == "after_data":
            conn.send_data(sid, grpc_message(b"x" * 100))
        conn.send_rst(sid, code)
        return None

    return rpc_script(fault)


def _rst_after_trailers(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.respond(request.stream_id, reply_payload(conn, request))
    conn.send_rst(request.stream_id, 0)
    return None


def _goaway_below(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.send_goaway(request.stream_id - 2 if request.stream_id > 2 else 0)
    return "stop"


def _goaway_above(graceful: bool) -> Fault:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        if graceful:
            conn.send_goaway(2**31 - 1)
            conn.send_ping(bytes([1, 6, 1, 8, 0, 3, 3, 9]))
        conn.send_goaway(request.stream_id)
        conn.respond(request.stream_id, reply_payload(conn, request))
        return "stop"

    return fault


def _goaway_then_close(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.send_goaway(request.stream_id)
    conn.send_headers(request.stream_id, GRPC_OK_HEADERS)
    conn.send_data(request.stream_id, grpc_message(b"y" * 1000)[:500])
    return "close"


def _ping_flood(conn: RawConn, request: StreamRecord) -> Optional[str]:
    burst = b"".join(
        PingFrame(0, opaque_data=i.to_bytes(8, "big")).serialize() for i in range(1000)
    )
    for _ in range(10):
        if not conn.send(burst):
            return "close"
    echo_response(conn, request)
    return None


def _never_answers(conn: RawConn, request: StreamRecord) -> Optional[str]:
    return None


def _byte_at_a_time(pace: Optional[float]) -> Fault:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        sid = request.stream_id
        response = (
            conn.header_frames(sid, GRPC_OK_HEADERS)
            + DataFrame(sid, grpc_message(reply_payload(conn, request))).serialize()
            + conn.header_frames(sid, [(b"grpc-status", b"0")], end_stream=True)
        )
        owner = conn.owner
        assert owner is not None
        with conn.exclusive():
            for i in range(len(response)):
                if not conn.send(response[i : i + 1]):
                    return "close"
                if pace is not None and owner.stop_event.wait(pace):
                    return "close"
        return None

    return fault


def _padded(conn: RawConn, request: StreamRecord) -> Optional[str]:
    sid = request.stream_id
    payload = reply_payload(conn, request)
    conn.send_headers(sid, GRPC_OK_HEADERS)
    # 5-byte frames + 255 bytes of padding: ~17,000 frames cost ~4.4 MB of window, more than
    # the client's 4 MiB stream window, so a client acking len(data) instead of
    # flow_controlled_length stalls (grpc-wire.md §6, data_frame_padding).
    body = grpc_message(payload)
    if not conn.send_data(sid, body, frame_size=256 + 5, pad_length=255, timeout=20):
        return "close"
    conn.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)
    return None


def _continuation(conn: RawConn, request: StreamRecord) -> Optional[str]:
    sid = request.stream_id
    big = b"v" * 6000
    conn.send_headers(sid, [*GRPC_OK_HEADERS, (b"x-big", big)], fragment=700)
    conn.send_data(sid, grpc_message(reply_payload(conn, request)))
    conn.send_headers(sid, [(b"grpc-status", b"0"), (b"x-big-trailer", big)], end_stream=True,
                      fragment=500)
    return None


def _oversized_headers(size: int) -> Fault:
    def fault(conn: RawConn, request: StreamRecord) -> Optional[str]:
        sid = request.stream_id
        headers = [*GRPC_OK_HEADERS]
        # Many distinct fields (incompressible values) so the decoded list really is ``size``.
        for i in range(size // 1000 + 1):
            headers.append((f"x-filler-{i}".encode(), os.urandom(480).hex().encode()))
        conn.send_headers(sid, headers, fragment=16_000)
        conn.send_data(sid, grpc_message(reply_payload(conn, request)))
        conn.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)
        return None

    return fault


def _oversized_message(conn: RawConn, request: StreamRecord) -> Optional[str]:
    sid = request.stream_id
    conn.send_headers(sid, GRPC_OK_HEADERS)
    size = 4 * 1024 * 1024 + 1
    conn.send_data(sid, grpc_message(b"\x00" * size), timeout=5)
    conn.send_headers(sid, [(b"grpc-status", b"0")], end_stream=True)
    return None


def _truncated_then_eof(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.send_headers(request.stream_id, GRPC_OK_HEADERS)
    conn.send_data(request.stream_id, grpc_message(b"z" * 10, length=100))
    return "close"


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data)


def _gzip_bomb() -> bytes:
    import zlib

    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(b"\x00" * (8 * 1024 * 1024)) + compressor.flush()


def _push_promise(conn: RawConn, request: StreamRecord) -> Optional[str]:
    """PUSH_PROMISE although the client said ENABLE_PUSH=0 (RFC 9113 §8.4: connection error)."""
    block = conn.encode_headers([(b":method", b"GET"), (b":scheme", b"http"),
                                 (b":path", b"/pushed"), (b":authority", b"localhost")])
    promised = struct.pack(">I", 2)
    body = promised + block
    header = struct.pack(">I", len(body))[1:] + bytes([PUSH_PROMISE, 0x4])
    conn.send(header + struct.pack(">I", request.stream_id) + body)
    return "stop"


def _headers_on_unopened_stream(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.send_headers(request.stream_id + 2, GRPC_OK_HEADERS)
    return "stop"


def _window_overflow(conn: RawConn, request: StreamRecord) -> Optional[str]:
    conn.send_window_update(0, 2**31 - 1)
    conn.send_window_update(0, 2**31 - 1)
    return "stop"


def _settings_flood(conn: RawConn, request: StreamRecord) -> Optional[str]:
    burst = SettingsFrame(0, settings={HEADER_TABLE_SIZE: 4096}).serialize() * 1000
    for _ in range(10):
        if not conn.send(burst):
            return "close"
    echo_response(conn, request)
    return None


def client_scenarios() -> List[ClientScenario]:
    """Every client-side scenario of issue 5 (a fresh list: scripts hold no state)."""
    ok_trailers = ((b"grpc-status", b"0"),)
    grpc_headers = GRPC_OK_HEADERS
    one = grpc_message(b"hi")
    scenarios = [
        ClientScenario(
            "close_before_preface", "connection", "the peer closes before its preface",
            connection_script(_close_before_preface), "UNAVAILABLE", "§5 Connection loss",
        ),
        ClientScenario(
            "garbage_preface_then_close", "connection",
            "an HTTP/1.1 answer instead of the preface, then close",
            _garbage_then(close=True), "UNAVAILABLE", "§5 Connection loss; RFC 9113 §3.4",
        ),
        ClientScenario(
            "garbage_preface_then_hang", "connection",
            "an HTTP/1.1 answer instead of the preface, connection kept open",
            _garbage_then(close=False), "UNAVAILABLE", "§5 Connection loss; RFC 9113 §3.4",
        ),
        ClientScenario(
            "silent_peer", "connection", "accepts, never sends SETTINGS",
            connection_script(_silent), "DEADLINE_EXCEEDED", "§4.3 DEADLINE_EXCEEDED",
            deadline=0.5, deadline_only=True,
        ),
        ClientScenario(
            "zero_window_opens_later", "settings",
            "SETTINGS INITIAL_WINDOW_SIZE=0, opened by a second SETTINGS after the HEADERS",
            _zero_window(opens=True), "OK", "§6 Sending", request_size=100_000,
        ),
        ClientScenario(
            "zero_window_never_opens", "settings", "SETTINGS INITIAL_WINDOW_SIZE=0 forever",
            _zero_window(opens=False), "DEADLINE_EXCEEDED", "§4.3 DEADLINE_EXCEEDED",
            deadline=0.5, deadline_only=True, request_size=100_000,
        ),
        ClientScenario(
            "min_max_frame_size", "settings",
            "MAX_FRAME_SIZE=16384 (the minimum); a 100 kB request must use frames <= 16384",
            _max_frame_script, "OK", "§6 Sending", request_size=100_000,
        ),
        ClientScenario(
            "illegal_max_frame_size", "settings",
            "MAX_FRAME_SIZE=1024 (below the RFC minimum): a connection error",
            _illegal_settings({MAX_FRAME_SIZE: 1024}), "UNAVAILABLE",
            "§5 Connection loss; RFC 9113 §6.5.2",
        ),
        ClientScenario(
            "http_200_no_content_type", "http-status", ":status 200 without content-type",
            _shaped(headers=[(b":status", b"200")]), "UNKNOWN", "§3 Broken peers, §4.1",
        ),
        ClientScenario(
            "http_200_text_html", "http-status", ":status 200, content-type text/html",
            _shaped(headers=[(b":status", b"200"), (b"content-type", b"text/html")],
                    body=b"<html>hello</html>", trailers=None),
            "UNKNOWN", "§3 Broken peers, §4.1",
        ),
    ]
    for status, code in (
        (400, "INTERNAL"), (401, "UNAUTHENTICATED"), (403, "PERMISSION_DENIED"),
        (404, "UNIMPLEMENTED"), (429, "UNAVAILABLE"), (502, "UNAVAILABLE"),
        (503, "UNAVAILABLE"), (504, "UNAVAILABLE"), (418, "UNKNOWN"),
    ):
        scenarios.append(ClientScenario(
            f"http_{status}_text_html", "http-status", f":status {status}, text/html body",
            _shaped(headers=[(b":status", str(status).encode()), (b"content-type", b"text/html")],
                    body=b"<html>nope</html>", trailers=None),
            code, "§4.1",
        ))
    scenarios.append(ClientScenario(
        "http_503_headers_only", "http-status", ":status 503 and END_STREAM, nothing else",
        _shaped(headers=[(b":status", b"503")], body=None, trailers=None),
        "UNAVAILABLE", "§4.1",
    ))
    scenarios += [
        ClientScenario(
            "no_grpc_status", "grpc-status", "trailers without grpc-status",
            _shaped(trailers=[(b"grpc-message", b"where is my status")]), "UNKNOWN", "§3",
        ),
        ClientScenario(
            "trailers_only_no_grpc_status", "grpc-status",
            "Trailers-Only (200, application/grpc, END_STREAM) without grpc-status",
            _shaped(body=None, trailers=None), "UNKNOWN", "§3",
        ),
        ClientScenario(
            "grpc_status_non_numeric", "grpc-status", "grpc-status: abc",
            _shaped(trailers=[(b"grpc-status", b"abc")]), "UNKNOWN", "§3",
        ),
        ClientScenario(
            "grpc_status_negative", "grpc-status", "grpc-status: -1",
            _shaped(trailers=[(b"grpc-status", b"-1")]), "UNKNOWN", "§3",
        ),
        ClientScenario(
            "grpc_status_out_of_range", "grpc-status", "grpc-status: 17",
            _shaped(trailers=[(b"grpc-status", b"17")]), "UNKNOWN", "§3",
        ),
        ClientScenario(
            "grpc_status_huge", "grpc-status", "grpc-status: 4294967296",
            _shaped(trailers=[(b"grpc-status", b"4294967296")]), "UNKNOWN", "§3",
        ),
        ClientScenario(
            "grpc_message_bad_percent", "grpc-message",
            "grpc-message with malformed %-escapes: kept as they are",
            _shaped(body=None, trailers=None, headers=[
                *grpc_headers, (b"grpc-status", b"9"), (b"grpc-message", b"%zz%4 100% %%"),
            ]),
            "FAILED_PRECONDITION", "§3 grpc-message", details="%zz%4 100% %%",
        ),
        ClientScenario(
            "grpc_message_bad_utf8", "grpc-message",
            "grpc-message that percent-decodes to invalid UTF-8: U+FFFD",
            _shaped(body=None, trailers=None, headers=[
                *grpc_headers, (b"grpc-status", b"9"), (b"grpc-message", b"%FF%FEok%C3"),
            ]),
            "FAILED_PRECONDITION", "§3 grpc-message", details="\ufffd\ufffdok\ufffd",
        ),
        ClientScenario(
            "grpc_message_raw_bytes", "grpc-message",
            "grpc-message with raw non-ASCII bytes (not percent-encoded)",
            _shaped(body=None, trailers=None, headers=[
                *grpc_headers, (b"grpc-status", b"9"), (b"grpc-message", b"caf\xc3\xa9 \xff"),
            ]),
            "FAILED_PRECONDITION", "§3 grpc-message", details="caf\u00e9 \ufffd",
        ),
        ClientScenario(
            "two_response_messages", "cardinality", "two messages for a unary call",
            _shaped(body=one + one, trailers=ok_trailers), "INTERNAL", "§2 Unary cardinality",
        ),
        ClientScenario(
            "zero_response_messages", "cardinality", "no message, then grpc-status 0",
            _shaped(body=None, trailers=ok_trailers), "INTERNAL", "§2 Unary cardinality",
        ),
        ClientScenario(
            "length_prefix_4gib", "length-prefix", "a length prefix claiming 4 GiB",
            _shaped(body=b"\x00\xff\xff\xff\xff" + b"a" * 100, trailers=ok_trailers),
            "RESOURCE_EXHAUSTED", "§6 Message size",
        ),
        ClientScenario(
            "message_over_limit", "length-prefix", "a real 4 MiB + 1 message",
            rpc_script(_oversized_message), "RESOURCE_EXHAUSTED", "§6 Message size",
        ),
        ClientScenario(
            "length_prefix_cut_then_trailers", "length-prefix",
            "prefix says 100 bytes, 10 arrive, then grpc-status 0",
            _shaped(body=grpc_message(b"z" * 10, length=100), trailers=ok_trailers),
            "INTERNAL", "§4.3 INTERNAL",
        ),
        ClientScenario(
            "length_prefix_cut_then_eof", "length-prefix",
            "prefix says 100 bytes, 10 arrive, then the connection closes",
            rpc_script(_truncated_then_eof), "UNAVAILABLE", "§5 Connection loss",
        ),
        ClientScenario(
            "length_prefix_cut_in_prefix", "length-prefix",
            "3 bytes of a prefix, then grpc-status 0",
            _shaped(body=b"\x00\x00\x00", trailers=ok_trailers), "INTERNAL", "§4.3 INTERNAL",
        ),
        ClientScenario(
            "flag_byte_2", "compression", "a message flag byte of 2",
            _shaped(body=grpc_message(b"hi", flag=2), trailers=ok_trailers), "INTERNAL",
            "§2 Compression",
        ),
        ClientScenario(
            "compressed_flag_without_encoding", "compression",
            "flag 1 and no grpc-encoding header",
            _shaped(body=grpc_message(_gzip(b"hi"), flag=1), trailers=ok_trailers), "INTERNAL",
            "§2 Compression",
        ),
        ClientScenario(
            "compressed_flag_identity", "compression", "flag 1 with grpc-encoding: identity",
            _shaped(headers=[*grpc_headers, (b"grpc-encoding", b"identity")],
                    body=grpc_message(b"hi", flag=1), trailers=ok_trailers), "INTERNAL",
            "§2 Compression",
        ),
        ClientScenario(
            "unknown_encoding", "compression", "flag 1 with grpc-encoding: snappy",
            _shaped(headers=[*grpc_headers, (b"grpc-encoding", b"snappy")],
                    body=grpc_message(b"\x02\x04hi", flag=1), trailers=ok_trailers), "INTERNAL",
            "§2 Compression",
        ),
        ClientScenario(
            "corrupt_gzip", "compression", "grpc-encoding gzip with a corrupt body",
            _shaped(headers=[*grpc_headers, (b"grpc-encoding", b"gzip")],
                    body=grpc_message(b"\x1f\x8b\x08\x00garbage-not-deflate", flag=1),
                    trailers=ok_trailers), "INTERNAL", "§2 Compression",
        ),
        ClientScenario(
            "truncated_gzip", "compression", "grpc-encoding gzip with a truncated body",
            _shaped(headers=[*grpc_headers, (b"grpc-encoding", b"gzip")],
                    body=grpc_message(_gzip(b"hello" * 100)[:-12], flag=1),
                    trailers=ok_trailers), "INTERNAL", "§2 Compression",
        ),
        ClientScenario(
            "gzip_bomb", "compression", "8 MiB of zeros gzipped into a few kB",
            _shaped(headers=[*grpc_headers, (b"grpc-encoding", b"gzip")],
                    body=grpc_message(_gzip_bomb(), flag=1), trailers=ok_trailers),
            "RESOURCE_EXHAUSTED", "§6 Message size",
        ),
    ]
    for code, expected in RST_CODES.items():
        scenarios.append(ClientScenario(
            f"rst_stream_{code:#04x}", "rst-stream",
            f"RST_STREAM({code:#x}) right after the request",
            _reset_with(code), expected, "§4.2",
            max_requests=5 if code == 0x7 else None,
        ))
    for stage in ("after_headers", "during_data", "after_data"):
        scenarios.append(ClientScenario(
            f"rst_no_error_{stage}", "rst-stream",
            f"RST_STREAM(NO_ERROR) {stage.replace('_', ' ')}",
            _reset_with(0, stage), "INTERNAL", "§4.2; §9 rst_after_header/during/after_data",
        ))
    scenarios += [
        ClientScenario(
            "rst_no_error_after_trailers", "rst-stream",
            "trailers (OK), then RST_STREAM(NO_ERROR): normal",
            rpc_script(_rst_after_trailers), "OK", "§3 Early Server Closure",
        ),
        ClientScenario(
            "goaway_below_stream", "goaway", "GOAWAY(last_stream_id below the call)",
            rpc_script(_goaway_below), "UNAVAILABLE", "§5 GOAWAY", max_requests=5,
            new_connection_after=True,
        ),
        ClientScenario(
            "goaway_above_stream", "goaway",
            "GOAWAY(last_stream_id = the call), then a full response",
            rpc_script(_goaway_above(graceful=False)), "OK", "§5 GOAWAY",
            new_connection_after=True,
        ),
        ClientScenario(
            "goaway_graceful", "goaway",
            "GOAWAY(2^31-1) + PING, GOAWAY(the call), then a full response",
            rpc_script(_goaway_above(graceful=True)), "OK", "§5 GOAWAY (graceful shutdown)",
            new_connection_after=True,
        ),
        ClientScenario(
            "goaway_then_close_mid_response", "goaway",
            "GOAWAY(the call), HEADERS, half a message, close",
            rpc_script(_goaway_then_close), "UNAVAILABLE", "§5 Connection loss",
        ),
        ClientScenario(
            "ping_flood", "ping", "10,000 PINGs before the response",
            rpc_script(_ping_flood), "OK", "§5 PING",
        ),
        ClientScenario(
            "settings_flood", "ping", "10,000 SETTINGS frames before the response",
            rpc_script(_settings_flood), "OK", "RFC 9113 §6.5",
        ),
        ClientScenario(
            "push_promise", "frames", "PUSH_PROMISE although ENABLE_PUSH=0",
            rpc_script(_push_promise), "UNAVAILABLE", "§5 Connection loss; RFC 9113 §8.4",
        ),
        ClientScenario(
            "headers_on_unopened_stream", "frames",
            "response HEADERS on a stream the client never opened",
            rpc_script(_headers_on_unopened_stream), "UNAVAILABLE",
            "§5 Connection loss; RFC 9113 §5.1",
        ),
        ClientScenario(
            "window_update_overflow", "frames",
            "WINDOW_UPDATEs pushing the connection window past 2^31-1",
            rpc_script(_window_overflow), "UNAVAILABLE", "§5 Connection loss; RFC 9113 §6.9.1",
        ),
        ClientScenario(
            "never_answers", "slow", "reads the request, never answers",
            rpc_script(_never_answers), "DEADLINE_EXCEEDED", "§4.3, §5 Cancellation",
            deadline=0.5, deadline_only=True,
        ),
        ClientScenario(
            "one_byte_at_a_time", "slow", "the whole response written one byte per send()",
            rpc_script(_byte_at_a_time(None)), "OK", "§2 (frame boundaries mean nothing)",
        ),
        ClientScenario(
            "one_byte_at_a_time_past_deadline", "slow",
            "one byte every 50 ms: the deadline still holds",
            rpc_script(_byte_at_a_time(0.05)), "DEADLINE_EXCEEDED", "§4.3, §5",
            deadline=1.0, deadline_only=True,
        ),
        ClientScenario(
            "padded_data", "frames",
            "5-byte DATA frames with 255 bytes of padding (~4.4 MB of window)",
            rpc_script(_padded), "OK", "§6 Receiving; §9 data_frame_padding",
            deadline=30.0, request_size=17_000 * 5,
        ),
        ClientScenario(
            "continuation_frames", "frames",
            "headers and trailers split over HEADERS + CONTINUATION frames",
            rpc_script(_continuation), "OK", "RFC 9113 §6.10",
        ),
        ClientScenario(
            "header_block_over_call_limit", "frames",
            "a 20 kB response header block (over the 16 KiB per-call limit)",
            rpc_script(_oversized_headers(20_000)), "INTERNAL", "§6 Header size",
        ),
        ClientScenario(
            "header_block_over_connection_limit", "frames",
            "a 100 kB response header block (over the advertised MAX_HEADER_LIST_SIZE)",
            rpc_script(_oversized_headers(100_000)), "UNAVAILABLE",
            "§6 Header size (h2 kills the connection), §5 Connection loss",
        ),
    ]
    return scenarios


# -------------------------------------------------------------------- observations for the report

#: Environment variable naming a JSON-lines file; tools/robustness_report.py sets it.
RECORD_ENV = "ROBUSTNESS_RECORD"


def record_observation(nodeid: str, **fields: Any) -> None:
    """Append one observation (scenario, expected, observed, ...) for docs/robustness.md.

    A no-op unless ``$ROBUSTNESS_RECORD`` is set, so ordinary test runs write nothing.
    """
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    import json

    line = json.dumps({"nodeid": nodeid, **fields}, sort_keys=True, default=str)
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(line + "\n")
