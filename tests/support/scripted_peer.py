"""The one scripted HTTP/2 peer of the test suite: a server and a client that play scripts.

Every test that needs an HTTP/2 peer a gRPC library cannot be made to be uses this module.  It
has one listener and one way to dial, and two engines to speak with:

* the rule-free engine, :class:`RawConn`: raw sockets, ``hyperframe`` and ``hpack`` directly,
  never minigrpc or h2's state machine, so that a script can break every rule of RFC 9113 and
  gRPC's PROTOCOL-HTTP2.md on purpose: half frames, garbage, header blocks of any size, DATA past
  the window, frames on streams that do not exist.  A reader thread parses every inbound frame
  (it never enforces anything, it only records), decodes header blocks, keeps the peer's
  flow-control windows, and optionally ACKs SETTINGS/PINGs and returns DATA window, so a script
  that is busy writing never deadlocks against a peer that is busy writing too;
* the validating engine, h2's ``H2Connection``: it answers the other side as a correct HTTP/2
  peer does and fails on what RFC 9113 forbids, so tests also prove that what minigrpc sends
  is valid HTTP/2 (:class:`ServerGrpcConnection`, :class:`RawH2Client`, :class:`MemoryServer`).

The pieces:

* :class:`ScriptedServer` listens on a unix socket in a private temporary directory (or at a
  given path, or on TCP) and plays, per accepted connection, either ``script(conn)`` on a
  :class:`RawConn`, or (:meth:`ScriptedServer.h2`) ``on_request(request)`` per request on h2.
  ``misbehaving`` starts True; a test calls :meth:`ScriptedServer.behave` to turn the same
  address into a well-behaved gRPC server and prove that the client recovers (the channel must
  work again for the next call).  :func:`fault_server` plays the fixed faults the CNI tests
  name (``close-mid-response``, ``http-503``...), which ``python -m tests.support.fault_agent``
  serves as a process.
* :class:`HostileClient` is the same :class:`RawConn` dialled out, for the server-side
  scenarios (preface games, floods, rapid reset, slowloris); :class:`RawH2Client` dials out
  with h2, for requests gRPC libraries never send (GET, text/plain, bad flags) whose every
  answering frame a test looks at.
* :class:`MemoryServer`: a server-side ``H2Connection`` wired to a sans-IO
  :class:`~minigrpc.protocol.client_protocol.ClientGrpcConnection` by plain byte hand-overs, for
  unit tests of the client without sockets, threads or timing.
* :class:`ResourceSnapshot` proves that a scenario leaked no thread and no file descriptor.

Nothing here sleeps to synchronise: waits are on conditions, events and socket reads, and every
wait has a timeout so that a bug fails a test instead of hanging it.
"""

from __future__ import annotations

import functools
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

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
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

from minigrpc.http2 import frames as http2
from minigrpc.http2.frames import FRAME_HEADER_LENGTH, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE
from minigrpc.protocol import targets, wire
from minigrpc.protocol.client_protocol import ClientCall, ClientGrpcConnection
from minigrpc.protocol.headers import request_headers
from tests.support.h2_peer import GoawaySplitter, reopen_after_goaway

Header = Tuple[bytes, bytes]
HeaderLike = Tuple[Union[str, bytes], Union[str, bytes]]

#: What a request path defaults to: the interop TestService's EmptyCall.
EMPTY_PATH = "/grpc.testing.TestService/EmptyCall"

#: RFC 9113 §3.4.
CLIENT_PREFACE = http2.CLIENT_PREFACE
DEFAULT_WINDOW = 65_535
DEFAULT_MAX_FRAME = 16_384

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
        owner: Optional[ScriptedServer] = None,
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
            target=self._read_loop, name=f"scripted-peer-reader-{role}-{index}", daemon=True
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

    def read_for(self, seconds: float) -> None:
        """For a connection made with ``read=False``: read and record what arrives for
        ``seconds`` (the other side's SETTINGS and window updates), then never again: a peer
        that learns the windows it may fill, and then leaves everything sent to it unread."""
        deadline = threading.Event()
        timer = threading.Timer(seconds, deadline.set)
        timer.start()
        try:
            while not deadline.is_set():
                self.sock.settimeout(0.05)
                try:
                    header = self.sock.recv(FRAME_HEADER_LENGTH, socket.MSG_PEEK)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if len(header) < FRAME_HEADER_LENGTH:
                    if not header:
                        return
                    continue
                frame, length = Frame.parse_frame_header(memoryview(header))
                self.sock.settimeout(None)  # the frame is arriving: read all of it
                data = self._recv_exactly(FRAME_HEADER_LENGTH + length)
                if data is None:
                    return
                frame.parse_body(memoryview(data[FRAME_HEADER_LENGTH:]))
                self._on_frame(frame, length)
        finally:
            timer.cancel()
            self.sock.settimeout(None)

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
        """Automatic ACKs/WINDOW_UPDATEs, held until the script has written its first bytes
        (normally its preface: a client's, or a server's SETTINGS), so that they never precede it
        on the wire (RFC 9113 §3.4). A script that opens with garbage therefore has it read as
        the first frame, every run, not after an ACK that won a race with the script."""
        with self._write_lock:
            if not self._sent_anything:
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


class ScriptedServer:
    """A listening scripted peer: each accepted connection plays the script in its own thread.

    ``script(conn)`` gets a :class:`RawConn` (rule-free); a server made by :meth:`h2` instead
    answers every request with ``on_request(ServerRequest)`` on h2 (validating), after
    ``on_connect(ServerGrpcConnection)``, which may return False to close the connection before
    anything is sent (an "EOF before SETTINGS" peer).

    ``misbehaving`` starts True; scripts built by :func:`rpc_script` and
    :func:`connection_script` consult it so that :meth:`behave` turns the same address into a
    well-behaved gRPC server. ``errors`` collects exceptions raised by scripts (a test asserts
    it is empty: a script's AssertionError is how a peer reports a client breaking a rule).
    ``connections`` and ``requests`` hold what the engine made of them: :class:`RawConn` and
    :class:`StreamRecord`, or :class:`ServerGrpcConnection` and :class:`ServerRequest`.
    """

    def __init__(
        self,
        script: Optional[Script] = None,
        *,
        tcp: bool = False,
        path: Optional[str] = None,
        on_request: Optional[Callable[[ServerRequest], None]] = None,
        on_connect: Optional[Callable[[ServerGrpcConnection], Any]] = None,
        settings: Optional[Dict[int, int]] = None,
        **conn_options: Any,
    ) -> None:
        if (script is None) == (on_request is None):
            raise ValueError("give a script (raw engine) or on_request (h2 engine)")
        self.script = script
        self.on_request = on_request
        self.on_connect = on_connect
        self.settings = settings
        self.conn_options = conn_options
        self.misbehaving = True
        #: What a well-behaved answer carries; None echoes the request message.
        self.reply_payload: Optional[bytes] = None
        self.connections: List[Any] = []
        self.requests: List[Any] = []
        #: (connection index, stream id, error code) of every RST_STREAM the h2 engine got.
        self.resets: List[Tuple[int, int, int]] = []
        self.request_received = threading.Event()
        #: Set as soon as any request HEADERS arrive (the body may never come).
        self.headers_received = threading.Event()
        self.errors: List[BaseException] = []
        self.stop_event = threading.Event()
        #: Set by :meth:`behave`: scripts parked in :meth:`hang` say GOAWAY and close.
        self.behaving = threading.Event()
        self._lock = threading.Lock()
        self._request_seen = threading.Condition(self._lock)
        self._threads: List[threading.Thread] = []
        self._directory: Optional[str] = None
        if tcp:
            self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind(("127.0.0.1", 0))
            self.path = ""
            self.target = f"127.0.0.1:{self._listener.getsockname()[1]}"
        else:
            if path is None:
                self._directory = short_temp_dir()
                path = os.path.join(self._directory, "peer.sock")
            self.path = path
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(self.path)
            self.target = "unix:" + self.path
        self._listener.listen(128)
        self._wake_r, self._wake_w = socket.socketpair()
        self._acceptor = threading.Thread(target=self._accept_loop, name="scripted-peer-accept")
        self._acceptor.daemon = True
        self._acceptor.start()

    @classmethod
    def h2(
        cls,
        on_request: Callable[[ServerRequest], None],
        *,
        settings: Optional[Dict[int, int]] = None,
        on_connect: Optional[Callable[[ServerGrpcConnection], Any]] = None,
        tcp: bool = False,
        path: Optional[str] = None,
    ) -> ScriptedServer:
        """A server on the h2 engine: ``on_request`` answers each complete request."""
        return cls(on_request=on_request, settings=settings, on_connect=on_connect, tcp=tcp,
                   path=path)

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
                index = len(self.connections)
                conn: Any
                if self.on_request is not None:
                    conn = ServerGrpcConnection(self, sock, index)
                    run: Callable[[], None] = conn.serve
                else:
                    conn = RawConn(sock, "server", index=index, owner=self, **self.conn_options)
                    run = functools.partial(self._run_script, conn)
                self.connections.append(conn)
                worker = threading.Thread(target=run, name=f"scripted-peer-conn-{index}")
                worker.daemon = True
                self._threads.append(worker)
            worker.start()

    def _run_script(self, conn: RawConn) -> None:
        assert self.script is not None
        try:
            self.script(conn)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            if not conn.eof:
                # Give the other side our last bytes before closing (FIN, not RST).
                conn.shutdown()
            conn.close()

    def _on_request(self, record: Any) -> None:
        with self._lock:
            self.requests.append(record)
            self._request_seen.notify_all()
        self.request_received.set()

    def wait_for_requests(self, count: int = 1, timeout: float = WAIT) -> bool:
        """Wait until ``count`` requests have arrived in all; False on timeout."""
        with self._lock:
            return self._request_seen.wait_for(lambda: len(self.requests) >= count, timeout)

    def behave(self) -> None:
        """From now on, serve well-formed gRPC on the same address.

        Connections parked in :meth:`hang` end with GOAWAY(NO_ERROR, last = the highest stream
        seen), so a correct client knows that a call it races onto them was never processed and
        may be retried (PROTOCOL-HTTP2.md, "GOAWAY Frame"): the recovery check is deterministic.
        """
        self.misbehaving = False
        self.behaving.set()
        self._wake_connections()

    def _wake_connections(self) -> None:
        with self._lock:
            connections = [c for c in self.connections if isinstance(c, RawConn)]
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
            raise AssertionError(f"scripted peer threads did not stop: {alive}")

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def connection_count(self) -> int:
        with self._lock:
            return len(self.connections)

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
            if not conn._sent_anything:
                # A peer that stayed silent (silent_peer) owes its preface first: a GOAWAY as
                # the first frame would be a protocol error (RFC 9113 §3.4), not a way out.
                conn.send_settings()
            conn.send_goaway(last)
            # Keep reading until the client closes, as a real server drains after GOAWAY: closing
            # now, with the recovery call's frames still arriving, would answer them with a TCP
            # RST, and the client's kernel discards the unread GOAWAY when the RST lands.
            conn.wait_eof()


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
        sock = connect(target, timeout=None)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
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


# ==================================================================== h2 engine
# The same server and client, validating: h2's state machine speaks for the peer.

GRPC_RESPONSE_HEADERS: List[Header] = [(b":status", b"200"), (b"content-type", b"application/grpc")]


def server_connection(settings: Optional[Dict[int, int]] = None) -> h2.connection.H2Connection:
    """A server-side h2 connection with its SETTINGS queued (and changed, if asked)."""
    conn = h2.connection.H2Connection(
        config=h2.config.H2Configuration(client_side=False, header_encoding=None)
    )
    conn.initiate_connection()
    if settings:
        conn.update_settings(settings)
    return conn


def make_call(
    request: bytes = b"",
    *,
    path: str = "/test.Service/Method",
    metadata: Sequence[Header] = (),
    timeout: Optional[float] = None,
    deadline: Optional[float] = None,
    compressed: bool = False,
    encoding: Optional[str] = None,
) -> ClientCall:
    """A ClientCall for ``request`` (framed as one Length-Prefixed-Message)."""
    headers = request_headers(
        path=path,
        authority="localhost",
        user_agent="grpc-python-minigrpc/test",
        timeout=timeout,
        encoding=encoding,
        metadata=metadata,
    )
    return ClientCall(
        request=wire.encode_message(request, compressed), headers=headers, deadline=deadline
    )


class MemoryServer:
    """A real server-side ``H2Connection`` exchanging bytes with a client protocol in memory."""

    def __init__(
        self,
        client: Optional[ClientGrpcConnection] = None,
        settings: Optional[Dict[int, int]] = None,
        handshake: bool = True,
    ) -> None:
        self.client = client or ClientGrpcConnection()
        self.client.initiate()
        self.conn = server_connection(settings)
        self.requests: Dict[int, List[Header]] = {}
        self.bodies: Dict[int, bytes] = {}
        self.ended: List[int] = []
        self.resets: Dict[int, int] = {}
        self.server_events: List[Any] = []
        if handshake:
            self.pump()

    def to_server(self) -> List[Any]:
        """Deliver the client's queued bytes to the server; return h2's server events."""
        data = self.client.data_to_send()
        if not data:
            return []
        events = self.conn.receive_data(data)
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.requests[event.stream_id] = list(event.headers)
                self.bodies[event.stream_id] = b""
            elif isinstance(event, h2.events.DataReceived):
                self.bodies[event.stream_id] = self.bodies.get(event.stream_id, b"") + event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.ended.append(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                self.resets[event.stream_id] = int(event.error_code)
        self.server_events.extend(events)
        return events

    def to_client(self, data: Optional[bytes] = None) -> List[Any]:
        """Deliver the server's queued bytes (or ``data``) to the client; return its events."""
        if data is None:
            data = self.conn.data_to_send()
        if not data:
            return []
        return self.client.receive_data(data)

    def pump(self) -> List[Any]:
        """Exchange bytes both ways until neither side has anything to say."""
        client_events: List[Any] = []
        for _ in range(100):
            moved = bool(self.to_server())
            more = self.to_client()
            client_events.extend(more)
            if not moved and not more and not self.conn.data_to_send():
                break
        return client_events

    def start(self, call: ClientCall) -> int:
        """Start ``call`` on the client and deliver its frames; return its stream id."""
        self.client.start_call(call)
        self.to_server()
        return call.stream_id

    # -- server answers -----------------------------------------------------------------

    def headers(self, stream_id: int, extra: Sequence[Header] = (), end: bool = False) -> None:
        self.conn.send_headers(stream_id, GRPC_RESPONSE_HEADERS + list(extra), end_stream=end)

    def message(self, stream_id: int, payload: bytes, compressed: bool = False) -> None:
        self.conn.send_data(stream_id, wire.encode_message(payload, compressed))

    def trailers(
        self,
        stream_id: int,
        code: int = 0,
        message: Optional[str] = None,
        extra: Sequence[Header] = (),
    ) -> None:
        block: List[Header] = [(b"grpc-status", str(code).encode())]
        if message is not None:
            block.append((b"grpc-message", wire.percent_encode(message).encode()))
        self.conn.send_headers(stream_id, block + list(extra), end_stream=True)

    def respond(
        self, stream_id: int, payload: bytes = b"", code: int = 0, message: Optional[str] = None
    ) -> List[Any]:
        """A complete normal response (headers, one message, trailers), delivered."""
        self.headers(stream_id)
        self.message(stream_id, payload)
        self.trailers(stream_id, code, message)
        return self.to_client()

    def trailers_only(
        self, stream_id: int, code: int, message: Optional[str] = None, extra: Sequence[Header] = ()
    ) -> List[Any]:
        block = [*GRPC_RESPONSE_HEADERS, (b"grpc-status", str(code).encode())]
        if message is not None:
            block.append((b"grpc-message", wire.percent_encode(message).encode()))
        self.conn.send_headers(stream_id, block + list(extra), end_stream=True)
        return self.to_client()


# -- a scripted server on a real socket -------------------------------------------------------


class ServerRequest:
    """One request as a :class:`ScriptedServer` handler sees it, with ways to answer it."""

    def __init__(
        self, server_conn: ServerGrpcConnection, stream_id: int, headers: List[Header], body: bytes
    ) -> None:
        self.connection = server_conn
        self.stream_id = stream_id
        self.headers = headers
        self.body = body

    @property
    def path(self) -> str:
        return dict(self.headers)[b":path"].decode()

    def header(self, name: str) -> Optional[str]:
        for key, value in self.headers:
            if key == name.encode():
                return value.decode("utf-8", "replace")
        return None

    @property
    def message(self) -> bytes:
        """The request payload (the body without its 5-byte prefix)."""
        return self.body[5:]

    def respond(self, payload: bytes = b"", code: int = 0, message: str = "") -> None:
        conn = self.connection.conn
        conn.send_headers(self.stream_id, GRPC_RESPONSE_HEADERS)
        conn.send_data(self.stream_id, wire.encode_message(payload))
        conn.send_headers(
            self.stream_id,
            [(b"grpc-status", str(code).encode()), (b"grpc-message", message.encode())],
            end_stream=True,
        )
        self.connection.flush()

    def respond_raw(
        self,
        data: bytes,
        extra_headers: Sequence[Header] = (),
        trailers: Sequence[Header] = ((b"grpc-status", b"0"),),
    ) -> None:
        """Response headers (plus ``extra_headers``), ``data`` as one DATA frame, ``trailers``."""
        with self.connection.lock:
            conn = self.connection.conn
            conn.send_headers(self.stream_id, GRPC_RESPONSE_HEADERS + list(extra_headers))
            conn.send_data(self.stream_id, data)
            conn.send_headers(self.stream_id, list(trailers), end_stream=True)
        self.connection.flush()

    def reset(self, error_code: int) -> None:
        self.connection.conn.reset_stream(self.stream_id, error_code)
        self.connection.flush()

    def send_raw_headers(self, headers: List[Header], end_stream: bool = True) -> None:
        self.connection.conn.send_headers(self.stream_id, headers, end_stream=end_stream)
        self.connection.flush()


class ServerGrpcConnection:
    """The server end of one accepted connection (one thread)."""

    def __init__(self, server: ScriptedServer, sock: socket.socket, index: int) -> None:
        self.server = server
        self.sock = sock
        self.index = index
        self.conn = server_connection(server.settings)
        self.lock = threading.RLock()
        self._bodies: Dict[int, bytes] = {}
        self._headers: Dict[int, List[Header]] = {}
        self.closed = False

    def flush(self) -> None:
        with self.lock:
            data = self.conn.data_to_send()
            if data and not self.closed:
                try:
                    self.sock.sendall(data)
                except OSError:
                    self.closed = True

    def goaway(self, last_stream_id: int, error_code: int = 0, then_ping: bool = False) -> None:
        """Send GOAWAY (optionally followed at once by a PING, as grpc-go's graceful stop does).

        h2 refuses to send anything after its own GOAWAY, hence the reopen for the PING.
        """
        with self.lock:
            self.conn.close_connection(error_code=error_code, last_stream_id=last_stream_id)
            reopen_after_goaway(self.conn)
            if then_ping:
                self.conn.ping(b"\x01\x06\x01\x08\x00\x03\x03\x09")
            self.flush()

    def shutdown(self) -> None:
        """Half-close both directions: the serving thread sees EOF, so does the other side."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        self.closed = True
        self.shutdown()
        self.sock.close()

    def serve(self) -> None:
        try:
            if self.server.on_connect is not None and self.server.on_connect(self) is False:
                return
            self.flush()
            while not self.closed:
                try:
                    data = self.sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                with self.lock:
                    try:
                        events = self.conn.receive_data(data)
                    except h2.exceptions.ProtocolError:
                        self.flush()
                        return
                    ready: List[ServerRequest] = []
                    for event in events:
                        if isinstance(event, h2.events.RequestReceived):
                            self._headers[event.stream_id] = list(event.headers)
                            self._bodies[event.stream_id] = b""
                        elif isinstance(event, h2.events.DataReceived):
                            self._bodies[event.stream_id] += event.data
                            self.conn.acknowledge_received_data(
                                event.flow_controlled_length, event.stream_id
                            )
                        elif isinstance(event, h2.events.StreamEnded):
                            ready.append(
                                ServerRequest(
                                    self,
                                    event.stream_id,
                                    self._headers.pop(event.stream_id),
                                    self._bodies.pop(event.stream_id),
                                )
                            )
                        elif isinstance(event, h2.events.StreamReset):
                            self.server.resets.append(
                                (self.index, event.stream_id, int(event.error_code))
                            )
                        elif isinstance(event, h2.events.ConnectionTerminated):
                            self.flush()
                            return
                    self.flush()
                for request in ready:
                    self.server._on_request(request)
                    self.server.on_request(request)
        finally:
            self.close()


ErrorCodes = h2.errors.ErrorCodes


def connect(target: str, timeout: Optional[float] = WAIT) -> socket.socket:
    """A connected socket to a target string (unix, abstract or TCP), the one way this module
    dials; reads on it fail after ``timeout`` (None: they block, for a reader thread)."""
    parsed = targets.parse_target(target)
    if parsed.family == socket.AF_UNIX:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # A blocking connect waits for room in a full backlog; with a timeout Linux says EAGAIN.
        sock.connect(parsed.address)
        sock.settimeout(timeout)
        return sock
    assert isinstance(parsed.address, tuple)
    sock = socket.create_connection(parsed.address, timeout=timeout)
    return sock


def grpc_request_headers(
    path: str = EMPTY_PATH,
    *,
    method: bytes = b"POST",
    content_type: Optional[bytes] = b"application/grpc",
    te: bool = True,
    extra: Sequence[Tuple[bytes, bytes]] = (),
) -> List[Tuple[bytes, bytes]]:
    """Request headers as a gRPC client sends them (PROTOCOL-HTTP2.md, "Requests"), with knobs to
    break them."""
    headers = [
        (b":method", method),
        (b":scheme", b"http"),
        (b":path", path.encode("ascii")),
        (b":authority", b"localhost"),
    ]
    if content_type is not None:
        headers.append((b"content-type", content_type))
    if te:
        headers.append((b"te", b"trailers"))
    headers.extend(extra)
    return headers


class RawResponse:
    """Everything one stream received: headers, body, trailers, and any reset."""

    def __init__(self) -> None:
        self.headers: List[Tuple[bytes, bytes]] = []
        self.trailers: List[Tuple[bytes, bytes]] = []
        self.body = bytearray()
        self.reset_code: Optional[int] = None
        self.ended = False

    def header(self, name: bytes) -> Optional[bytes]:
        for key, value in self.headers + self.trailers:
            if key == name:
                return value
        return None

    @property
    def http_status(self) -> Optional[int]:
        value = self.header(b":status")
        return int(value) if value is not None else None

    @property
    def grpc_status(self) -> Optional[int]:
        value = self.header(b"grpc-status")
        return int(value) if value is not None else None

    @property
    def grpc_message(self) -> str:
        return wire.percent_decode(self.header(b"grpc-message") or b"")

    @property
    def trailers_only(self) -> bool:
        return not self.trailers and self.header(b"grpc-status") is not None

    def messages(self) -> List[Tuple[bool, bytes]]:
        return wire.MessageDecoder(None).feed(bytes(self.body))


class RawH2Client:
    """A minimal HTTP/2 client on h2 and a real socket, for requests gRPC libraries won't send."""

    def __init__(self, target: str, window: int = 4 * 1024 * 1024) -> None:
        self.sock = connect(target)
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.conn.initiate_connection()
        self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        if window > 65535:
            self.conn.increment_flow_control_window(window - 65535)
        self.responses: Dict[int, RawResponse] = {}
        self.remote_settings: Dict[int, int] = {}
        self.goaways: List[h2.events.ConnectionTerminated] = []
        self.ping_acks: List[bytes] = []
        self.events: List[Any] = []
        self.closed = False
        self._splitter = GoawaySplitter()
        self.flush()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def send_request(
        self,
        headers: List[Tuple[bytes, bytes]],
        body: Optional[bytes] = None,
        end_stream: bool = True,
    ) -> int:
        stream_id = self.conn.get_next_available_stream_id()
        self.responses[stream_id] = RawResponse()
        self.conn.send_headers(stream_id, headers, end_stream=body is None and end_stream)
        if body is not None:
            self.send_body(stream_id, body, end_stream)
        self.flush()
        return stream_id

    def send_body(self, stream_id: int, body: bytes, end_stream: bool = True) -> None:
        """Send ``body``, waiting for window as needed (keeps reading while it waits: RFC 9113
        §6.9)."""
        view = memoryview(body)
        while view:
            window = self.conn.local_flow_control_window(stream_id)
            size = min(window, self.conn.max_outbound_frame_size, len(view))
            if size <= 0:
                self.flush()
                self.read_once()
                continue
            self.conn.send_data(stream_id, bytes(view[:size]))
            view = view[size:]
        if end_stream:
            self.conn.end_stream(stream_id)
        self.flush()

    def read_once(self) -> None:
        """Read one chunk (blocking, with the socket timeout) and process its events."""
        data = self.sock.recv(1 << 20)
        if not data:
            self.closed = True
            raise ConnectionError("the server closed the connection")
        # One chunk per GOAWAY, and h2 reopened after each, so that a graceful shutdown can be
        # watched to its end like a real client does (h2 stops after a GOAWAY:
        # tests.support.h2_peer.reopen_after_goaway).
        for chunk in self._splitter.feed(data):
            for event in self.conn.receive_data(chunk):
                self.events.append(event)
                self._on_event(event)
                if isinstance(event, h2.events.ConnectionTerminated):
                    reopen_after_goaway(self.conn)
        self.flush()

    def _on_event(self, event: Any) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            self.responses[event.stream_id].headers.extend(event.headers)
        elif isinstance(event, h2.events.TrailersReceived):
            self.responses[event.stream_id].trailers.extend(event.headers)
        elif isinstance(event, h2.events.DataReceived):
            self.responses[event.stream_id].body += event.data
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            self.responses[event.stream_id].ended = True
        elif isinstance(event, h2.events.StreamReset):
            response = self.responses.get(event.stream_id)
            if response is not None:
                response.reset_code = event.error_code
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            for code, change in event.changed_settings.items():
                self.remote_settings[int(code)] = change.new_value
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaways.append(event)
        elif isinstance(event, h2.events.PingAckReceived):
            self.ping_acks.append(event.ping_data)

    def read_until(self, predicate: Callable[[], bool]) -> None:
        """Read until ``predicate()`` holds; the socket timeout fails the test on a hang."""
        while not predicate():
            self.read_once()

    def wait_response(self, stream_id: int, until_reset: bool = False) -> RawResponse:
        response = self.responses[stream_id]
        if until_reset:
            self.read_until(lambda: response.reset_code is not None)
        else:
            self.read_until(lambda: response.ended or response.reset_code is not None)
        return response

    def call(self, headers: List[Tuple[bytes, bytes]], body: Optional[bytes] = None) -> RawResponse:
        return self.wait_response(self.send_request(headers, body))

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> RawH2Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ==================================================================== fixed faults, by name
# Answers a correct gRPC server never gives, for the CNI plugin tests (the plugin must map each
# to the CNI error antrea's Go plugin prints) and for ``python -m tests.support.fault_agent``.

FAULTS = ("close-mid-response", "http-503", "html", "no-grpc-status", "grpc-status", "garbage",
          "silent", "goaway")


def fault_server(path: str, fault: str, raw_status: str = "13",
                 raw_message: str = "") -> ScriptedServer:
    """A server at unix ``path`` whose every call gets the same broken answer.

    ``close-mid-response``: headers and half a message, then the connection drops.
    ``http-503``: ``:status 503`` without ``grpc-status``.  ``html``: 200 with ``text/html``.
    ``no-grpc-status``: a full gRPC response whose trailers lack ``grpc-status``.
    ``grpc-status``: Trailers-Only with ``raw_status``/``raw_message`` (any text).
    ``garbage``: bytes that are not HTTP/2.  ``silent``: accepts and never answers.
    ``goaway``: GOAWAY(last_stream_id=0) right after the request arrives.
    """
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}")
    server: Optional[ScriptedServer] = None

    def on_connect(conn: ServerGrpcConnection) -> bool:
        if fault == "garbage":
            conn.sock.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
            return False
        if fault == "silent":
            assert server is not None
            server.stop_event.wait()
            return False
        return True

    def on_request(request: ServerRequest) -> None:
        connection = request.connection
        sid = request.stream_id
        if fault == "close-mid-response":
            with connection.lock:
                connection.conn.send_headers(sid, GRPC_RESPONSE_HEADERS)
                connection.conn.send_data(sid, b"\x00\x00\x00\x00\x40" + b"\x0a" * 10)
            connection.flush()
            connection.close()
        elif fault == "goaway":
            with connection.lock:
                connection.conn.close_connection(last_stream_id=0)
            connection.flush()
            connection.close()
        elif fault == "http-503":
            request.send_raw_headers([(b":status", b"503"), (b"content-type", b"text/plain")])
        elif fault == "html":
            with connection.lock:
                connection.conn.send_headers(
                    sid, [(b":status", b"200"), (b"content-type", b"text/html; charset=utf-8")])
                connection.conn.send_data(sid, b"<html><body>not gRPC</body></html>",
                                          end_stream=True)
            connection.flush()
        elif fault == "no-grpc-status":
            request.respond_raw(b"\x00\x00\x00\x00\x00", trailers=[(b"x-trailer", b"1")])
        else:  # grpc-status: any text, as a broken or future agent might send
            message = wire.percent_encode(raw_message)
            request.send_raw_headers([*GRPC_RESPONSE_HEADERS,
                                      (b"grpc-status", raw_status.encode()),
                                      (b"grpc-message", message.encode())])

    server = ScriptedServer.h2(on_request, on_connect=on_connect, path=path)
    return server
