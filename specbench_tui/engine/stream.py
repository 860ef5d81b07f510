"""The measured stream: HTTP/1.1 over plain sockets, one kept-alive connection per request in flight.

The streamed requests that produce the product's figures (time to first token, per-token gaps, tok/s) do not go
through httpx: measured against the wire (a packet sniffer on the loopback interface), httpx's path cost
92-280 µs of CPU per server-sent event (an ``asyncio.wait_for`` timer and a reader added and removed on every
socket read, a pool scan per request, sniffio's failing import retried per lock) and closed every connection at
``[DONE]``, one before its chunked terminator, so each request paid a new connection. At concurrency 64 that made
the client, not the server, the bottleneck (0.54x a minimal client's capacity). This module is the measuring
path only; httpx keeps the small calls, TLS and proxies (:mod:`specbench_tui.engine.client` chooses).

What it does, and why each part:

- **A connection per request in flight, kept alive.** :class:`StreamPool` hands each request an idle connection
  or opens one; a response is read to the end of its body (the chunked terminator, or its ``Content-Length``), and
  only then does its connection go back to the pool. Name resolution happens once per pool and the connection is
  made *before* the request's clock starts: a load point's first wave does not time 64 connects.
- **One reader per connection, one wake-up for many.** A socket is registered once, when it connects, with the
  pool's own ``epoll`` set (which is itself one reader of the event loop), and stays until it closes. A wake-up
  reads every connection that has bytes: one ``recvmsg`` each (more only when a read filled the buffer), the
  kernel's receive stamp of the read (``SO_TIMESTAMPNS``, :mod:`specbench_tui.engine.rxclock`), the HTTP framing
  parsed and each complete SSE line handed straight to the request's :class:`Consumer`, all in that callback: no
  task switch, future or timer per event. The stamp is mapped onto ``time.monotonic()`` with one offset read per
  request.
- **Reads gathered while busy** (interrupt moderation, as a network card does it). The kernel stamps every
  segment as it arrives, so reading it a fraction of a millisecond later changes no figure; what a read costs is
  mostly the wake-up around it (measured on this project's 2-core box: 30 µs of CPU per event with a wake-up per
  event, whatever ran inside it). So once wake-ups come faster than one a pause (:data:`PACE_BUSY`) with answers to several requests
  streaming, the pool stops
  listening for :func:`StreamPool.pace_s` (at most :data:`PACE_MAX_S`) and then reads everything that arrived
  meanwhile in one pass, and again while anything did. One request alone is never paused. The pause is bounded by :data:`PACE_SHARE` of the mean gap between two reads of one answer,
  so two events of one answer almost never share a read (a read carries its last segment's stamp): at one request
  in flight, or before :data:`PACE_LEARN` gaps have been seen, nothing is paused. An idle connection that turns readable was closed by
  the server (or sent junk) and closes itself, so the pool never hands out a dead one knowingly; a reused
  connection that the server closed in the same instant (no byte of an answer yet) is retried once on a new one.
- **Bounded.** A response head over :data:`MAX_HEAD` bytes, a malformed chunk size, or an SSE line over the
  consumer's limit is a :class:`StreamProtocolError`; an error answer's body is read up to the consumer's limit and
  the connection is then closed, so a hostile 2 GB body is never read.
- **Every failure is an exception of this module** (:class:`StreamConnectError`, :class:`StreamReset`,
  :class:`StreamProtocolError`), which the client turns into a recorded error. Cancellation closes the connection,
  which is how the server learns to abort the request.

Linux only (``recvmsg`` with ``SO_TIMESTAMPNS``); :func:`supported` says so, and the client falls back to httpx
elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import select
from collections.abc import Callable, Mapping
from typing import Protocol

from specbench_tui.engine import rxclock

READ_SIZE = 256 << 10
"""Bytes asked of one ``recvmsg``: a 128K-token prompt's answer streams small events, but a server that batches
(or a reader that lagged) may have hundreds of KB waiting; a small buffer would mean a read per packet."""
MAX_HEAD = 64 << 10
"""The longest response head (status line and headers) accepted."""
PACE_MAX_S = 0.001
"""The longest pause between two gathered reads of a busy pool (see the module docstring)."""
PACE_SHARE = 0.125
"""The pause as a share of the mean gap between two reads of one answer: at an eighth, two events of one answer
share a read only when their gap is under an eighth of the mean."""
PACE_LEARN = 32
"""Gaps seen before any pause: a pool paces only once it knows how fast its answers stream."""
PACE_BUSY = 1.0
"""A pool is busy (and pauses) when a wake-up comes within this many pauses of the last pass, with two or more
requests in flight: bytes arrive faster than one read a pause, so a pause gathers reads that would each have cost a
wake-up; slower, or for one answer alone, a pause would gather little and add a wake-up of its own."""
_GAP_WEIGHT = 0.01
"""The weight of the newest gap in the running mean (about the last hundred reads)."""
RETIRE_AFTER_S = 2.0
"""How long a connection whose answer is complete (``[DONE]`` read) may take to deliver the rest of its body
before it is closed instead of kept."""


class StreamError(Exception):
    """A streamed request failed below HTTP: the connection could not be made, was cut, or spoke no HTTP/SSE."""


class StreamConnectError(StreamError):
    """No connection could be made (refused, unreachable, no address)."""


class StreamConnectTimeout(StreamError):
    """The connection was not made within the connect timeout."""


class StreamReset(StreamError):
    """The connection was closed or reset before the answer's body ended."""


class StreamProtocolError(StreamError):
    """The server's bytes are not an HTTP/1.1 answer (or not an SSE stream)."""


class Consumer(Protocol):
    """What a request's bytes are handed to, from the connection's reader callback."""

    max_line: int
    """The longest SSE line accepted, in bytes."""
    max_error_body: int
    """Bytes of a non-200 body to keep (the rest is never read)."""

    def started(self, at: float) -> None:
        """The request is about to leave (monotonic ``at``): the measurement's clock starts."""

    def status(self, code: int) -> None:
        """The answer's status line arrived."""

    def line(self, line: bytes, at: float) -> bool:
        """One non-empty SSE line of a 200 answer (its bytes, undecoded: a JSON parser takes them as they are),
        its arrival at ``at`` (monotonic); True once the answer is complete for the measurement (``[DONE]`` or an
        error payload): later lines are not handed over."""

    def error_body(self, head: bytes) -> None:
        """A non-200 answer's body, at most ``max_error_body`` bytes of it."""

    def progress(self) -> None:
        """Bytes of the answer arrived (the stall watchdog's signal)."""


def supported() -> bool:
    """Whether this platform gives us kernel receive stamps on TCP (Linux)."""
    return rxclock.supported()


# Parser states of one answer.
_HEAD, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _LENGTH, _UNTIL_CLOSE, _FINISHED = range(8)


def _chunk_size(line: bytes) -> int:
    """A chunk's size line (hexadecimal, maybe with ``;extensions``)."""
    try:
        return int(line, 16)
    except ValueError:
        pass
    text = line.split(b";", 1)[0].strip()
    try:
        return int(text, 16)
    except ValueError:
        raise StreamProtocolError(f"not a chunk size: {text[:40]!r}") from None


class _Connection:
    """One TCP connection: its reader stays registered from connect to close, and it carries one request at a
    time (HTTP/1.1 without pipelining)."""

    def __init__(self, sock: socket.socket, pool: StreamPool, loop: asyncio.AbstractEventLoop) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.pool = pool
        self.loop = loop
        self.closed = False
        self._consumer: Consumer | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._retire: asyncio.TimerHandle | None = None
        self._buf = bytearray()
        self._state = _FINISHED
        self._remaining = 0
        self._status = 0
        self._keep_alive = True
        self._answered = False
        """The consumer has what it measures (``[DONE]``, an error payload, or an error body): lines are dropped."""
        self.any_bytes = False
        """Some byte of the current answer arrived."""
        self._line = bytearray()
        self._after_cr = False
        self._error_head = bytearray()
        self._offset = 0.0
        self._last_at = 0.0
        """When the last read of the current answer arrived (0: none yet): the pool's gap between reads."""
        pool.attach(self)

    # -- a request ---------------------------------------------------------------------------------------

    async def exchange(self, request: bytes, consumer: Consumer) -> None:
        """Send ``request`` and feed its answer to ``consumer``; returns once the consumer has its answer (or the
        body ended). Raises a :class:`StreamError`; on any exception, cancellation included, the connection is
        closed, unless its answer had ended and the next request holds it already."""
        self._consumer = consumer
        waiter = self._waiter = self.loop.create_future()
        self._buf.clear()
        self._line.clear()
        self._error_head.clear()
        self._state, self._status, self._keep_alive = _HEAD, 0, True
        self._answered = self.any_bytes = self._after_cr = False
        self._offset = rxclock.monotonic_minus_realtime()  # one offset per request maps every stamp of its answer
        self._last_at = 0.0
        self.pool.in_flight += 1
        try:
            consumer.started(time.monotonic())
            await self.loop.sock_sendall(self.sock, request)
            await waiter
        except BaseException:
            if self._waiter is waiter:  # still ours: not handed to the next request since
                self.close()
            raise
        finally:
            self.pool.in_flight -= 1
            # The answer's end may have put this connection back in the pool (in the reader callback) and the next
            # request may have taken it before this coroutine resumed: its waiter is not ours to clear.
            if self._waiter is waiter:
                self._waiter = None

    # -- the reader callback ---------------------------------------------------------------------------

    def _readable(self) -> None:
        while self._read_once() and not self.closed:
            pass  # a read that filled the buffer: more may be waiting, read it now rather than after a loop turn

    def _read_once(self) -> bool:
        """One ``recvmsg`` and what it brought handed on; whether it filled the buffer."""
        try:
            data, ancdata, _flags, _addr = self.sock.recvmsg(READ_SIZE, rxclock.ANCILLARY_SPACE)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            self._lost(StreamReset(f"connection reset: {exc}"))
            return False
        if not data:
            self._eof()
            return False
        if self._state == _FINISHED:  # bytes on a connection with no request: the server closed it or sent junk
            self.close()
            return False
        stamp = rxclock.stamp_realtime(ancdata)
        now = time.monotonic()
        at = min(now, stamp + self._offset) if stamp is not None else now
        if self._last_at:
            self.pool.gap_seen(at - self._last_at)
        self._last_at = at
        self.any_bytes = True
        try:
            self._feed(data, at)
        except Exception as exc:  # noqa: BLE001 (a protocol error, or a consumer's bug: it reaches its request)
            self._lost(exc)
            return False
        return len(data) == READ_SIZE

    def _eof(self) -> None:
        if self._state == _UNTIL_CLOSE:  # a body delimited by the connection's end: this is its end
            self._state = _FINISHED
            self._keep_alive = False
            self._body_ended()
            return
        if self._state == _FINISHED or self._waiter is None:
            self.close()
            return
        where = "before any answer" if not self.any_bytes else "before the answer's body ended"
        self._lost(StreamReset(f"connection reset: the server closed the connection {where}"))

    def _lost(self, exc: BaseException) -> None:
        waiter = self._waiter
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    # -- HTTP framing ----------------------------------------------------------------------------------

    def _feed(self, data: bytes, at: float) -> None:
        assert self._consumer is not None
        self._consumer.progress()
        if self._buf:  # bytes of a head or a chunk that the last read cut
            self._buf += data
            data = bytes(self._buf)
            self._buf.clear()
        pos, end = 0, len(data)
        while True:
            state = self._state
            if state == _FINISHED:
                if pos < end:  # bytes after the answer's end: not a connection to keep
                    self._keep_alive = False
                self._body_ended()
                return
            if pos >= end:
                break
            if state == _CHUNK_SIZE:  # the hot path, inline: one whole chunk (an event) per step
                eol = data.find(b"\r\n", pos)
                if eol >= 0:
                    size = _chunk_size(data[pos:eol])
                    stop = eol + 2 + size
                    if size and stop + 2 <= end and data.startswith(b"\r\n", stop):
                        self._body(data[eol + 2:stop], at)
                        if self.closed:
                            return
                        pos = stop + 2
                        continue
            moved = self._STEPS[state](self, data, pos, at)
            if moved is None:
                break
            if self.closed:
                return
            pos = moved
        if len(data) - pos > MAX_HEAD:
            raise StreamProtocolError(f"{len(data) - pos} bytes of a response head or chunk size without its end")
        self._buf += data[pos:]
        if self._answered and self._retire is None and not self.closed:
            # The measurement is complete and the body's end did not come with it (it normally does, in the same
            # read): it has this long to come before the connection is closed instead of kept.
            self._retire = self.loop.call_later(RETIRE_AFTER_S, self.close)

    def _step_chunk_size(self, data: bytes, pos: int, at: float) -> int | None:
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            return None
        size = _chunk_size(data[pos:eol])
        if size == 0:
            self._state = _TRAILER
        else:
            self._remaining, self._state = size, _CHUNK_DATA
        return eol + 2

    def _step_data(self, data: bytes, pos: int, at: float) -> int | None:
        state = self._state
        take = len(data) - pos if state == _UNTIL_CLOSE else min(self._remaining, len(data) - pos)
        self._body(data[pos:pos + take], at)
        if state != _UNTIL_CLOSE:
            self._remaining -= take
            if self._remaining == 0:
                self._state = _FINISHED if state == _LENGTH else _CHUNK_END
        return pos + take

    def _step_chunk_end(self, data: bytes, pos: int, at: float) -> int | None:
        if len(data) - pos < 2:
            return None
        if data[pos:pos + 2] != b"\r\n":
            raise StreamProtocolError("a chunk without its closing line end")
        self._state = _CHUNK_SIZE
        return pos + 2

    def _step_trailer(self, data: bytes, pos: int, at: float) -> int | None:
        """Trailer fields, then the empty line that ends the chunked body."""
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            return None
        if eol == pos:
            self._state = _FINISHED
        return eol + 2

    def _step_head(self, data: bytes, pos: int, at: float) -> int | None:
        head_end = data.find(b"\r\n\r\n", pos)
        if head_end < 0:
            return None
        self._head(data[pos:head_end])
        return head_end + 4

    _STEPS: dict[int, Callable[[_Connection, bytes, int, float], int | None]] = {
        _HEAD: _step_head, _CHUNK_SIZE: _step_chunk_size, _CHUNK_DATA: _step_data, _CHUNK_END: _step_chunk_end,
        _TRAILER: _step_trailer, _LENGTH: _step_data, _UNTIL_CLOSE: _step_data,
    }

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise StreamProtocolError(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
        status = int(parts[1])
        if 100 <= status < 200:  # an interim answer (100 Continue): the real head follows
            return
        chunked, length = False, None
        self._keep_alive = parts[0] == b"HTTP/1.1"
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise StreamProtocolError(f"not a Content-Length: {value.strip()[:40]!r}") from None
            elif name == b"connection":
                token = value.strip().lower()
                if token == b"close":
                    self._keep_alive = False
                elif token == b"keep-alive":
                    self._keep_alive = True
        self._status = status
        assert self._consumer is not None
        self._consumer.status(status)
        if chunked:
            self._state = _CHUNK_SIZE
        elif length is not None:
            self._remaining, self._state = length, (_LENGTH if length > 0 else _FINISHED)
        else:
            self._state, self._keep_alive = _UNTIL_CLOSE, False

    def _body(self, data: bytes, at: float) -> None:
        if self._answered:
            return
        consumer = self._consumer
        assert consumer is not None
        if self._status != 200:
            self._error_head += data
            if len(self._error_head) >= consumer.max_error_body:
                self._answer_error_body()
                self.close()  # the rest of a (possibly huge) error body is never read
            return
        # SSE lines end at \r\n, \r or \n only (JSON leaves U+2028, U+2029 and U+0085 raw inside the text).
        if self._after_cr and data[:1] == b"\n":
            data = data[1:]
        self._after_cr = data[-1:] == b"\r"
        pending = self._line
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        pieces = data.split(b"\n")
        last = pieces.pop()
        for piece in pieces:
            if pending:
                pending += piece
                piece = bytes(pending)
                pending.clear()
            if piece and consumer.line(piece, at):  # empty: an event's end
                self._answered = True
                self._wake()
                return
        pending += last
        if len(pending) > consumer.max_line:
            raise StreamLineTooLong(len(pending))

    def _answer_error_body(self) -> None:
        assert self._consumer is not None
        if not self._answered:
            self._answered = True
            self._consumer.error_body(bytes(self._error_head[:self._consumer.max_error_body]))
            self._wake()

    def _body_ended(self) -> None:
        """The answer's body is complete: the connection is free again (or closed when it cannot be kept)."""
        consumer = self._consumer
        if self._status != 200:
            self._answer_error_body()
        elif not self._answered and self._line and consumer is not None:
            line, self._line = bytes(self._line), bytearray()
            consumer.line(line, time.monotonic())
        self._answered = True
        self._wake()
        if self._retire is not None:
            self._retire.cancel()
            self._retire = None
        self._consumer = None
        if self._keep_alive and not self.closed:
            self.pool.release(self)
        else:
            self.close()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._retire is not None:
            self._retire.cancel()
            self._retire = None
        self.pool.detach(self)
        self.sock.close()
        self.pool.forget(self)


class StreamLineTooLong(StreamProtocolError):
    """An SSE line grew past the consumer's limit without a line end."""


class StreamPool:
    """Kept-alive HTTP/1.1 connections to one ``host:port`` for streamed ``POST`` requests."""

    def __init__(self, host: str, port: int, *, headers: Mapping[str, str] | None = None,
                 connect_timeout_s: float = 10.0) -> None:
        self.host = host
        self.port = port
        self.connect_timeout_s = connect_timeout_s
        host_header = f"[{host}]" if ":" in host else host
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self._head_prefix = (f"Host: {host_header}:{port}\r\nAccept: text/event-stream\r\n"
                             f"Content-Type: application/json\r\nUser-Agent: specbench\r\n{extra}")
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._epoll: select.epoll | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._by_fd: dict[int, _Connection] = {}
        self._listening = False
        self._resume_timer: asyncio.TimerHandle | None = None
        self._last_pass = float("-inf")
        self._gap = 0.0
        self._gaps = 0
        self.wakeups = 0
        """Passes over the ready connections so far (each a wake-up of the event loop)."""
        self.reads = 0
        """Connections read in those passes."""
        self.in_flight = 0
        """Requests between their send and their answer's end (or failure)."""
        self.pauses = 0
        """Times the pool stopped listening to gather reads (it was busy)."""
        self._addresses: list[tuple[int, int, int, tuple[object, ...]]] | None = None
        self.opened = 0
        """Connections made so far (kept alive: about the peak concurrency, not the number of requests)."""

    def request_bytes(self, path: str, body: bytes) -> bytes:
        return (f"POST {path} HTTP/1.1\r\n{self._head_prefix}Content-Length: {len(body)}\r\n\r\n").encode() + body

    async def post(self, path: str, body: bytes, consumer: Consumer) -> None:
        """``POST body`` to ``path`` on a connection of the pool and feed the answer to ``consumer``."""
        request = self.request_bytes(path, body)
        conn, reused = await self._acquire()
        try:
            await conn.exchange(request, consumer)
        except StreamReset:
            if not reused or conn.any_bytes:
                raise
            # The server closed this kept-alive connection as we sent (its idle timeout): nothing was answered on
            # it, so the request never started there; once more on a new connection.
            await (await self._connect()).exchange(request, consumer)

    async def reserve(self, count: int) -> None:
        """Have at least ``count`` connections open (a load point's width), made before any clock starts."""
        missing = count - len(self._idle)
        if missing > 0:
            made = await asyncio.gather(*(self._connect() for _ in range(missing)), return_exceptions=True)
            for conn in made:
                if isinstance(conn, _Connection):
                    self.release(conn)
            errors = [e for e in made if isinstance(e, BaseException)]
            if errors and len(errors) == len(made):
                raise errors[0]

    async def _acquire(self) -> tuple[_Connection, bool]:
        """An idle connection (the most recently used: its peer is the likeliest alive) or a new one; and whether
        it was kept from an earlier request."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn, True
        return await self._connect(), False

    async def _resolve(self) -> list[tuple[int, int, int, tuple[object, ...]]]:
        if self._addresses is None:
            loop = asyncio.get_running_loop()
            try:
                infos = await asyncio.wait_for(
                    loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM), self.connect_timeout_s)
            except asyncio.TimeoutError:
                raise StreamConnectTimeout(f"cannot resolve {self.host} within {self.connect_timeout_s:g} s") from None
            except OSError as exc:
                raise StreamConnectError(f"cannot resolve {self.host}: {exc}") from exc
            self._addresses = [(f, k, p, a) for f, k, p, _n, a in infos]
        return self._addresses

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        last: OSError | None = None
        for family, kind, proto, address in await self._resolve():
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, rxclock.SO_TIMESTAMPNS or 0, 1)
                await asyncio.wait_for(loop.sock_connect(sock, address), self.connect_timeout_s)
            except asyncio.TimeoutError:
                sock.close()
                raise StreamConnectTimeout(
                    f"no connection to {self.host}:{self.port} within {self.connect_timeout_s:g} s") from None
            except OSError as exc:
                sock.close()
                last = exc
                continue
            except BaseException:
                sock.close()
                raise
            conn = _Connection(sock, self, loop)
            self._all.add(conn)
            self.opened += 1
            return conn
        raise StreamConnectError(f"connection refused: {last}" if last else f"no address for {self.host}")

    # -- one epoll set for the pool's connections: what the loop wakes on, and the pauses while busy ----------------

    @property
    def pace_s(self) -> float:
        """The pause after a pass that found two or more connections with bytes (0: none yet)."""
        if self._gaps < PACE_LEARN:
            return 0.0
        return min(PACE_MAX_S, PACE_SHARE * self._gap)

    def gap_seen(self, gap: float) -> None:
        """The gap between two reads of one answer: the running mean that bounds the pause."""
        self._gaps += 1
        weight = max(_GAP_WEIGHT, 1.0 / self._gaps)
        self._gap += (gap - self._gap) * weight

    def attach(self, conn: _Connection) -> None:
        if self._epoll is None:
            self._epoll = select.epoll()
        if self._loop is not conn.loop:  # the first connection, or a pool used again under another event loop
            self._unlisten()
            self._loop = conn.loop
            self._listen()
        self._by_fd[conn.fd] = conn
        self._epoll.register(conn.fd, select.EPOLLIN)

    def detach(self, conn: _Connection) -> None:
        if self._by_fd.get(conn.fd) is conn:
            del self._by_fd[conn.fd]
            if self._epoll is not None:
                with contextlib.suppress(OSError, ValueError):
                    self._epoll.unregister(conn.fd)

    def _unlisten(self) -> None:
        """Stop waking on the pool's connections (and drop a pending pause's end)."""
        if self._resume_timer is not None:
            self._resume_timer.cancel()
            self._resume_timer = None
        if self._listening and self._epoll is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._epoll.fileno())
        self._listening = False

    def _listen(self) -> None:
        assert self._epoll is not None and self._loop is not None
        if not self._listening:
            self._loop.add_reader(self._epoll.fileno(), self._on_ready)
            self._listening = True

    def _on_ready(self) -> None:
        """Bytes arrived while listening: read them, and pause when this pass came soon after the last one."""
        now = time.monotonic()
        pace = self.pace_s
        busy = self.in_flight > 1 and now - self._last_pass < PACE_BUSY * pace
        self._last_pass = now
        self._read_ready()
        if busy:
            self.pauses += 1
            assert self._epoll is not None and self._loop is not None
            self._loop.remove_reader(self._epoll.fileno())
            self._listening = False
            self._resume_timer = self._loop.call_later(pace, self._resume)

    def _resume(self) -> None:
        """The pause is over: read what gathered; pause again while anything did, else listen."""
        assert self._loop is not None
        self._resume_timer = None
        self._last_pass = time.monotonic()
        pace = self.pace_s
        if self._read_ready() and pace > 0.0:
            self._resume_timer = self._loop.call_later(pace, self._resume)
        else:
            self._listen()

    def _read_ready(self) -> int:
        """Read every connection with bytes waiting; how many there were."""
        if self._epoll is None:
            return 0
        ready = self._epoll.poll(0)
        self.wakeups += 1
        self.reads += len(ready)
        by_fd = self._by_fd
        for fd, _mask in ready:
            conn = by_fd.get(fd)
            if conn is not None:
                conn._readable()
        return len(ready)

    def release(self, conn: _Connection) -> None:
        if not conn.closed:
            self._idle.append(conn)

    def forget(self, conn: _Connection) -> None:
        self._all.discard(conn)
        with contextlib.suppress(ValueError):
            self._idle.remove(conn)

    def close(self) -> None:
        for conn in list(self._all):
            conn.close()
        self._idle.clear()
        self._unlisten()
        if self._epoll is not None:
            self._epoll.close()
            self._epoll = None
        self._loop = None
