"""The server side of one HTTP/2 connection, sans IO: bytes in (`H2Server.feed`), events out,
and frames to write gathered in one buffer (`H2Server.data_to_send`), so all frames of one
read are handled in one pass and all their answers leave in one write.

What it does for the gRPC door (RFC 9113):

- the client preface, then our SETTINGS first: a large initial stream window and a connection
  WINDOW_UPDATE, so inbound data is never throttled, replenished as it arrives (a request is
  buffered until complete anyway; `GRPC_MESSAGE_MAX_BYTES` bounds it);
- the peer's SETTINGS acknowledged and honoured (INITIAL_WINDOW_SIZE adjusts the open
  streams' send windows, MAX_FRAME_SIZE splits our DATA; our answers never index into the
  peer's HPACK table, so its HEADER_TABLE_SIZE needs nothing); PING answered;
- HEADERS + CONTINUATION joined into one block and decoded (`hpack.Decoder`); DATA
  unpadded; PRIORITY and unknown frame types ignored;
- outbound flow control: DATA that does not fit the stream's or the connection's window
  waits in the stream's queue (with the trailers behind it) until WINDOW_UPDATE opens it;
- RST_STREAM and GOAWAY from the peer reported as events (the server cancels the calls);
- a connection error becomes GOAWAY with its code and an `ENDED` event; a stream error
  RST_STREAM and a `RESET` event for that stream. Nothing the peer sends raises.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from skiff.common.limits import (H2_HEADER_LIST_MAX_BYTES, H2_MAX_FRAME_BYTES, H2_RECEIVE_WINDOW_BYTES,
                                 H2_STREAMS_MAX)
from skiff.protocol.h2 import frames as f
from skiff.protocol.h2.hpack import Decoder

HEADERS_EVENT, DATA_EVENT, RESET, ENDED, GONE = range(5)
"""Event kinds: a request's header list; a stream's DATA; a stream reset (by the peer or
by a stream error of ours: its call is to be cancelled); the connection ended by our
GOAWAY for a protocol error (every call is to be cancelled and the transport closed after
the write); the peer's GOAWAY (it opens no more calls; those open may finish)."""

HEADER_TABLE_BYTES = 4096
"""Our SETTINGS_HEADER_TABLE_SIZE: HPACK's default, what gRPC clients expect."""
TABLE_SIZE_ZERO = b"\x20"
"""An HPACK dynamic table size update to 0 (RFC 7541 §6.3)."""


class Event(NamedTuple):
    kind: int
    stream_id: int
    headers: tuple[tuple[str, str], ...] | None = None
    data: bytes = b""
    end_stream: bool = False
    code: int = 0
    """RESET and ENDED: the error code."""


class _Stream:
    __slots__ = ("send_window", "pending", "received", "remote_closed", "local_closed")

    def __init__(self, send_window: int) -> None:
        self.send_window = send_window
        self.pending: deque[tuple[bytes, bool]] = deque()
        """What waits for window, in order: (DATA bytes, False), then maybe (trailers block, True)."""
        self.received = 0
        """DATA bytes received since this stream's window was last replenished."""
        self.remote_closed = False
        self.local_closed = False


class H2Server:
    def __init__(self) -> None:
        self._out: list[bytes] = []
        self._buffer = b""
        self._preface = False
        self._decoder = Decoder(HEADER_TABLE_BYTES, H2_HEADER_LIST_MAX_BYTES)
        self._streams: dict[int, _Stream] = {}
        self._last_stream = 0
        self._block: list[bytes] = []
        """A header block awaiting CONTINUATION frames."""
        self._block_stream = 0
        self._block_end_stream = False
        self._peer_window = f.DEFAULT_WINDOW
        """What the peer lets us send on each new stream (its INITIAL_WINDOW_SIZE)."""
        self._peer_max_frame = f.DEFAULT_MAX_FRAME
        self._send_window = f.DEFAULT_WINDOW
        self._received = 0
        """DATA bytes received since the connection window was last replenished."""
        self._waiting: dict[int, None] = {}
        """Streams with DATA waiting for window, in the order they started waiting."""
        self._table_update = b""
        """What our next header block starts with (a table size update), if anything."""
        self.ended = False
        """A connection error was answered: nothing more is read."""
        self.goaway_sent = False
        self.peer_gone = False
        """The peer's GOAWAY came: it opens no more streams."""

    # -- output ----------------------------------------------------------------------

    def start(self) -> None:
        """Our SETTINGS and the connection window's first opening: the first bytes we send."""
        self._out.append(f.settings({f.SETTINGS_HEADER_TABLE_SIZE: HEADER_TABLE_BYTES,
                                     f.SETTINGS_ENABLE_PUSH: 0,
                                     f.SETTINGS_MAX_CONCURRENT_STREAMS: H2_STREAMS_MAX,
                                     f.SETTINGS_INITIAL_WINDOW_SIZE: H2_RECEIVE_WINDOW_BYTES,
                                     f.SETTINGS_MAX_FRAME_SIZE: H2_MAX_FRAME_BYTES,
                                     f.SETTINGS_MAX_HEADER_LIST_SIZE: H2_HEADER_LIST_MAX_BYTES}))
        self._out.append(f.window_update(0, H2_RECEIVE_WINDOW_BYTES - f.DEFAULT_WINDOW))

    def data_to_send(self) -> bytes:
        out = self._out
        if not out:
            return b""
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        return data

    def send_headers(self, stream_id: int, block: bytes, end_stream: bool = False) -> None:
        """A HEADERS frame (one frame: our blocks are small constants); trailers (end_stream) wait
        behind DATA still queued for window."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.local_closed:
            return
        if end_stream and stream.pending:
            stream.pending.append((block, True))
            stream.local_closed = True
            return
        self._out.append(f.frame(f.HEADERS, f.END_HEADERS | (f.END_STREAM if end_stream else 0), stream_id,
                                 self._header_block(block)))
        if end_stream:
            stream.local_closed = True
            self._maybe_forget(stream_id, stream)

    def send_data(self, stream_id: int, data: bytes) -> None:
        """``data`` on the stream, as much as the windows allow now, the rest when they open."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.local_closed:
            return
        if stream.pending:
            stream.pending.append((data, False))
            return
        sent = self._send_now(stream_id, stream, data)
        if sent < len(data):
            stream.pending.append((data[sent:], False))
            self._waiting[stream_id] = None

    def send_answer(self, stream_id: int, headers: bytes, data: bytes, trailers: bytes) -> None:
        """A whole answer (headers, one DATA, trailers ending the stream): what a unary call
        sends, in one piece when the windows and the frame size take the DATA at once."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.local_closed:
            return
        size = len(data)
        if stream.pending or size > stream.send_window or size > self._send_window or size > self._peer_max_frame:
            self.send_headers(stream_id, headers)
            self.send_data(stream_id, data)
            self.send_headers(stream_id, trailers, end_stream=True)
            return
        pack, headers = f.HEADER.pack, self._header_block(headers)
        self._out.append(b"".join((pack(len(headers) >> 8, len(headers) & 0xFF, f.HEADERS, f.END_HEADERS, stream_id),
                                   headers, pack(size >> 8, size & 0xFF, f.DATA, 0, stream_id), data,
                                   pack(len(trailers) >> 8, len(trailers) & 0xFF, f.HEADERS,
                                        f.END_HEADERS | f.END_STREAM, stream_id), trailers)))
        stream.send_window -= size
        self._send_window -= size
        stream.local_closed = True
        self._maybe_forget(stream_id, stream)

    def _header_block(self, block: bytes) -> bytes:
        """``block``, after the table size update the peer's smaller SETTINGS_HEADER_TABLE_SIZE
        asks the next block to start with (RFC 7541 §4.2): size 0, since we index nothing."""
        if self._table_update:
            block, self._table_update = self._table_update + block, b""
        return block

    def reset(self, stream_id: int, code: int) -> None:
        """RST_STREAM: the call ends without trailers."""
        if self._streams.pop(stream_id, None) is not None:
            self._waiting.pop(stream_id, None)
            self._out.append(f.rst_stream(stream_id, code))

    def close(self, code: int = f.NO_ERROR, why: str = "") -> None:
        """GOAWAY: no new stream is taken; the open ones go on with NO_ERROR (a graceful stop),
        nothing more is read after an error (the transport closes once it is written)."""
        if not self.goaway_sent:
            self.goaway_sent = True
            self._out.append(f.goaway(self._last_stream, code, why.encode()[:256]))
        if code != f.NO_ERROR:
            self.ended = True

    def _send_now(self, stream_id: int, stream: _Stream, data: bytes) -> int:
        size = min(len(data), stream.send_window, self._send_window)
        if size <= 0:
            return 0
        step, out, pos = self._peer_max_frame, self._out, 0
        while pos < size:
            chunk = data[pos:pos + min(step, size - pos)]
            out.append(f.frame(f.DATA, 0, stream_id, chunk))
            pos += len(chunk)
        stream.send_window -= size
        self._send_window -= size
        return size

    def _flush_waiting(self) -> None:
        for stream_id in list(self._waiting):
            if self._send_window <= 0:
                return
            stream = self._streams.get(stream_id)
            if stream is None:
                self._waiting.pop(stream_id, None)
                continue
            pending = stream.pending
            while pending:
                data, is_trailers = pending[0]
                if is_trailers:
                    pending.popleft()
                    self._out.append(f.frame(f.HEADERS, f.END_HEADERS | f.END_STREAM, stream_id,
                                             self._header_block(data)))
                    continue
                sent = self._send_now(stream_id, stream, data)
                if sent < len(data):
                    pending[0] = (data[sent:], False)
                    break
                pending.popleft()
            if not pending:
                self._waiting.pop(stream_id, None)
                self._maybe_forget(stream_id, stream)

    def _maybe_forget(self, stream_id: int, stream: _Stream) -> None:
        """A stream both sides ended is dropped; one we ended while the client still sends is
        reset with NO_ERROR (RFC 9113 §8.1: the client stops sending and keeps our answer)."""
        if not stream.local_closed or stream.pending:
            return
        del self._streams[stream_id]
        if not stream.remote_closed:
            self._out.append(f.rst_stream(stream_id, f.NO_ERROR))

    # -- input -----------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Event]:
        """The events of ``data`` (with what an earlier read left unfinished)."""
        if self.ended:
            return []
        events: list[Event] = []
        try:
            self._feed(self._buffer + data if self._buffer else data, events)
        except f.H2Error as exc:
            self._buffer = b""
            self.close(exc.code, str(exc))
            events.append(Event(ENDED, 0, code=exc.code))
        return events

    def _feed(self, data: bytes, events: list[Event]) -> None:
        pos = 0
        if not self._preface:
            if len(data) < len(f.PREFACE):
                if not f.PREFACE.startswith(data):
                    raise f.H2Error(f.PROTOCOL_ERROR, "not an HTTP/2 client preface")
                self._buffer = data
                return
            if not data.startswith(f.PREFACE):
                raise f.H2Error(f.PROTOCOL_ERROR, "not an HTTP/2 client preface")
            self._preface = True
            pos = len(f.PREFACE)
        end, unpack = len(data), f.HEADER.unpack_from
        while end - pos >= f.HEADER_BYTES:
            high, low, kind, flags, stream_id = unpack(data, pos)
            size = (high << 8) | low
            if size > H2_MAX_FRAME_BYTES:
                raise f.H2Error(f.FRAME_SIZE_ERROR, f"a frame of {size} bytes (SETTINGS_MAX_FRAME_SIZE is "
                                                    f"{H2_MAX_FRAME_BYTES})")
            if end - pos - f.HEADER_BYTES < size:
                break
            start = pos + f.HEADER_BYTES
            pos = start + size
            self._frame(kind, flags, stream_id & 0x7FFFFFFF, data[start:pos], events)
            if self.ended:
                return
        self._buffer = data[pos:] if pos < end else b""

    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if self._block and kind != f.CONTINUATION:
            raise f.H2Error(f.PROTOCOL_ERROR, "a header block interrupted before END_HEADERS")
        if kind == f.DATA:
            self._data(flags, stream_id, payload, events)
        elif kind == f.HEADERS:
            self._headers(flags, stream_id, payload, events)
        elif kind == f.CONTINUATION:
            if not self._block or stream_id != self._block_stream:
                raise f.H2Error(f.PROTOCOL_ERROR, "CONTINUATION without a header block to continue")
            self._block.append(payload)
            if flags & f.END_HEADERS:
                self._headers_done(events)
        elif kind == f.SETTINGS:
            self._settings(flags, stream_id, payload)
        elif kind == f.WINDOW_UPDATE:
            self._window_update(stream_id, payload, events)
        elif kind == f.PING:
            if stream_id or len(payload) != f.PING_PAYLOAD_BYTES:
                raise f.H2Error(f.FRAME_SIZE_ERROR if stream_id == 0 else f.PROTOCOL_ERROR, "a malformed PING")
            if not flags & f.ACK:
                self._out.append(f.frame(f.PING, f.ACK, 0, payload))
        elif kind == f.RST_STREAM:
            if stream_id == 0 or len(payload) != 4:
                raise f.H2Error(f.PROTOCOL_ERROR if stream_id == 0 else f.FRAME_SIZE_ERROR, "a malformed RST_STREAM")
            if stream_id > self._last_stream:
                raise f.H2Error(f.PROTOCOL_ERROR, f"RST_STREAM on idle stream {stream_id}")
            if self._streams.pop(stream_id, None) is not None:
                self._waiting.pop(stream_id, None)
                events.append(Event(RESET, stream_id, code=f.U32.unpack(payload)[0]))
        elif kind == f.GOAWAY:
            if stream_id or len(payload) < 8:
                raise f.H2Error(f.PROTOCOL_ERROR, "a malformed GOAWAY")
            self.peer_gone = True
            events.append(Event(GONE, 0, code=f.U32X2.unpack_from(payload)[1]))
        elif kind == f.PRIORITY:
            if stream_id == 0:
                raise f.H2Error(f.PROTOCOL_ERROR, "PRIORITY on stream 0")
        elif kind == f.PUSH_PROMISE:
            raise f.H2Error(f.PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        # other types are ignored (RFC 9113 §4.1)

    def _unpad(self, flags: int, payload: bytes) -> bytes:
        if not flags & f.PADDED:
            return payload
        if not payload or payload[0] >= len(payload):
            raise f.H2Error(f.PROTOCOL_ERROR, "padding as long as the frame")
        return payload[1:len(payload) - payload[0]]

    def _data(self, flags: int, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if stream_id == 0:
            raise f.H2Error(f.PROTOCOL_ERROR, "DATA on stream 0")
        if stream_id > self._last_stream:
            raise f.H2Error(f.PROTOCOL_ERROR, f"DATA on idle stream {stream_id}")
        self._received += len(payload)  # padding counts against the windows too
        if self._received >= H2_RECEIVE_WINDOW_BYTES // 2:
            self._out.append(f.window_update(0, self._received))
            self._received = 0
        stream = self._streams.get(stream_id)
        if stream is None or stream.remote_closed:
            if stream is not None:
                self.reset(stream_id, f.STREAM_CLOSED)
                events.append(Event(RESET, stream_id, code=f.STREAM_CLOSED))
            return  # a stream we already ended or reset: its late DATA is dropped
        stream.received += len(payload)
        if stream.received > H2_RECEIVE_WINDOW_BYTES:
            self.reset(stream_id, f.FLOW_CONTROL_ERROR)
            events.append(Event(RESET, stream_id, code=f.FLOW_CONTROL_ERROR))
            return
        end_stream = bool(flags & f.END_STREAM)
        if end_stream:
            stream.remote_closed = True
        elif stream.received >= H2_RECEIVE_WINDOW_BYTES // 2:
            self._out.append(f.window_update(stream_id, stream.received))
            stream.received = 0
        events.append(Event(DATA_EVENT, stream_id, data=self._unpad(flags, payload), end_stream=end_stream))
        if end_stream:
            self._maybe_forget(stream_id, stream)

    def _headers(self, flags: int, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if stream_id == 0 or stream_id % 2 == 0:
            raise f.H2Error(f.PROTOCOL_ERROR, f"HEADERS on stream {stream_id} (a client's are odd)")
        payload = self._unpad(flags, payload)
        if flags & f.PRIORITY_FLAG:
            if len(payload) < 5:
                raise f.H2Error(f.FRAME_SIZE_ERROR, "HEADERS too short for its priority")
            payload = payload[5:]
        self._block = [payload]
        self._block_stream = stream_id
        self._block_end_stream = bool(flags & f.END_STREAM)
        if flags & f.END_HEADERS:
            self._headers_done(events)

    def _headers_done(self, events: list[Event]) -> None:
        block = b"".join(self._block)
        self._block = []
        stream_id, end_stream = self._block_stream, self._block_end_stream
        if len(block) > H2_HEADER_LIST_MAX_BYTES:
            raise f.H2Error(f.PROTOCOL_ERROR, f"a header block of {len(block)} bytes")
        headers = self._decoder.decode(block)  # decoded even when refused: the table must follow
        stream = self._streams.get(stream_id)
        if stream is not None:  # trailers of a request stream
            if not end_stream or stream.remote_closed:
                self.reset(stream_id, f.PROTOCOL_ERROR)
                events.append(Event(RESET, stream_id, code=f.PROTOCOL_ERROR))
                return
            stream.remote_closed = True
            events.append(Event(DATA_EVENT, stream_id, end_stream=True))
            self._maybe_forget(stream_id, stream)
            return
        if stream_id <= self._last_stream:
            raise f.H2Error(f.STREAM_CLOSED, f"HEADERS on closed stream {stream_id}")
        self._last_stream = stream_id
        if self.goaway_sent:
            return  # past our GOAWAY's last stream: ignored (RFC 9113 §6.8), the client retries elsewhere
        if len(self._streams) >= H2_STREAMS_MAX:
            self._out.append(f.rst_stream(stream_id, f.REFUSED_STREAM))
            return
        stream = self._streams[stream_id] = _Stream(self._peer_window)
        stream.remote_closed = end_stream
        events.append(Event(HEADERS_EVENT, stream_id, headers, end_stream=end_stream))

    def _settings(self, flags: int, stream_id: int, payload: bytes) -> None:
        if stream_id:
            raise f.H2Error(f.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & f.ACK:
            if payload:
                raise f.H2Error(f.FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload")
            return
        if len(payload) % f.SETTING.size:
            raise f.H2Error(f.FRAME_SIZE_ERROR, f"SETTINGS of {len(payload)} bytes")
        for key, value in f.SETTING.iter_unpack(payload):
            if key == f.SETTINGS_INITIAL_WINDOW_SIZE:
                if value > f.MAX_WINDOW:
                    raise f.H2Error(f.FLOW_CONTROL_ERROR, f"SETTINGS_INITIAL_WINDOW_SIZE {value}")
                delta = value - self._peer_window
                self._peer_window = value
                for stream in self._streams.values():
                    stream.send_window += delta
            elif key == f.SETTINGS_MAX_FRAME_SIZE:
                if not f.DEFAULT_MAX_FRAME <= value <= f.MAX_FRAME_LIMIT:
                    raise f.H2Error(f.PROTOCOL_ERROR, f"SETTINGS_MAX_FRAME_SIZE {value}")
                self._peer_max_frame = value
            elif key == f.SETTINGS_ENABLE_PUSH and value > 1:
                raise f.H2Error(f.PROTOCOL_ERROR, f"SETTINGS_ENABLE_PUSH {value}")
            elif key == f.SETTINGS_HEADER_TABLE_SIZE and value < HEADER_TABLE_BYTES:
                self._table_update = TABLE_SIZE_ZERO  # some decoders (nghttp2) insist on hearing it
        self._out.append(f.SETTINGS_ACK)
        self._flush_waiting()

    def _window_update(self, stream_id: int, payload: bytes, events: list[Event]) -> None:
        if len(payload) != 4:
            raise f.H2Error(f.FRAME_SIZE_ERROR, "a WINDOW_UPDATE not of 4 bytes")
        increment = f.U32.unpack(payload)[0] & 0x7FFFFFFF
        if stream_id == 0:
            if increment == 0:
                raise f.H2Error(f.PROTOCOL_ERROR, "a connection WINDOW_UPDATE of 0")
            self._send_window += increment
            if self._send_window > f.MAX_WINDOW:
                raise f.H2Error(f.FLOW_CONTROL_ERROR, "the connection window past 2^31-1")
        else:
            stream = self._streams.get(stream_id)
            if stream is None:
                if stream_id > self._last_stream:
                    raise f.H2Error(f.PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {stream_id}")
                return
            if increment == 0 or stream.send_window + increment > f.MAX_WINDOW:
                code = f.PROTOCOL_ERROR if increment == 0 else f.FLOW_CONTROL_ERROR
                self.reset(stream_id, code)
                events.append(Event(RESET, stream_id, code=code))
                return
            stream.send_window += increment
        if self._waiting:
            self._flush_waiting()
