"""The wire as the truth, and a minimal client as the capacity reference, for the client benches.

:class:`WireTap` is a passive packet sniffer on the loopback interface: an ``AF_PACKET`` socket (root only) in a
process of its own, reading every TCP segment to or from the server's port with the kernel's receive stamp
(``SO_TIMESTAMPNS``), independent of any client. Per request it knows when the ``POST`` left (the first segment of
the request), when the first event carrying data (``data: {``) and the ``[DONE]`` event reached the client's
socket. From those: TTFT and TPOT per request, and output tok/s over the window, as the wire saw them. The
sniffer costs CPU on the same box (a few µs per segment); it runs for every client of a comparison alike.

:class:`RawClient` is the least a streaming client can do: one kept-alive connection per request in flight
(``asyncio.Protocol``), the request written in one piece, the answer's bytes searched for the first ``data: {``
and for ``[DONE]`` (no HTTP parsing beyond that, no JSON). Its tok/s is the server's capacity as seen through a
client that costs almost nothing; its TTFT and e2e are read-time stamps.

Both die with the bench: the sniffer asks for ``SIGKILL`` when its parent dies (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import multiprocessing
import os
import re
import signal
import socket
import statistics
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

SO_TIMESTAMPNS = 35
_SO_RCVBUFFORCE = 33
_RID = re.compile(rb'"rid":\s*"([0-9A-Za-z_-]{1,64})"')
_ETH_P_ALL = 0x0003
_PACKET_OUTGOING = 4
_TIMESPEC = struct.Struct("@qq")


def available() -> str | None:
    """None when the sniffer can run here, else why not (it needs root and Linux's packet sockets)."""
    if not hasattr(socket, "AF_PACKET"):
        return "no AF_PACKET sockets on this OS"
    try:
        probe = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
    except PermissionError:
        return "the packet sniffer needs root (CAP_NET_RAW)"
    except OSError as exc:
        return f"no packet socket: {exc}"
    probe.close()
    return None


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _sniff(port: int, conn: multiprocessing.connection.Connection) -> None:
    """The sniffer process: (realtime stamp, client port, to the server?, flags) per segment with a payload;
    flags: 1 a request's first segment, 2 holds ``data: {``, 4 holds ``[DONE]``."""
    _die_with_parent()
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
    sock.bind(("lo", 0))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    try:  # past net.core.rmem_max (root): a burst of 256 answers must not overflow the socket and lose segments
        sock.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, 64 << 20)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    sock.settimeout(0.1)
    space = socket.CMSG_SPACE(_TIMESPEC.size)
    records: list[tuple[float, int, bool, int, str]] = []
    conn.send("ready")
    while not conn.poll():
        try:
            data, anc, _flags, addr = sock.recvmsg(1 << 17, space)
        except TimeoutError:
            continue
        if addr[2] == _PACKET_OUTGOING or len(data) < 54 or data[23] != 6:  # lo's copies; IPv4 TCP only
            continue
        ihl = (data[14] & 0x0F) * 4
        tcp = 14 + ihl
        sport, dport = struct.unpack_from("!HH", data, tcp)
        if port not in (sport, dport):
            continue
        payload = data[tcp + (data[tcp + 12] >> 4) * 4:]
        if not payload:
            continue
        stamp = next((_TIMESPEC.unpack_from(p)[0] + _TIMESPEC.unpack_from(p)[1] / 1e9 for level, kind, p in anc
                      if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS), time.time())
        to_server = dport == port
        rid = ""
        if to_server:
            flags = 1 if payload.startswith(b"POST ") else 0
            found = _RID.search(payload)  # SGLang's native body names the request (in a later segment when long)
            if found:
                flags, rid = flags | 8, found.group(1).decode()
        else:
            flags = (2 if b"data: {" in payload else 0) | (4 if b"[DONE]" in payload else 0)
        if flags:
            records.append((stamp, sport if to_server else dport, to_server, flags, rid))
    conn.recv()
    conn.send(records)


@dataclass(frozen=True)
class WireRequest:
    """One request as the wire saw it, on ``time.monotonic()``'s clock."""

    sent: float
    first: float | None
    done: float | None
    rid: str = ""
    """The request's id where its body names one (SGLang's ``rid``): pairs it with a client's own record."""


class WireTap:
    """``with WireTap(port) as tap: ...; tap.requests()`` (after the block)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._records: list[tuple[float, int, bool, int, str]] = []
        self._proc: multiprocessing.Process | None = None
        self._conn: multiprocessing.connection.Connection | None = None

    def __enter__(self) -> WireTap:
        ours, theirs = multiprocessing.get_context("fork").Pipe()
        self._proc = multiprocessing.get_context("fork").Process(target=_sniff, args=(self.port, theirs), daemon=True)
        self._proc.start()
        self._conn = ours
        if not ours.poll(10) or ours.recv() != "ready":
            raise RuntimeError("the packet sniffer did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None and self._conn is not None
        self._conn.send("stop")
        if self._conn.poll(30):
            self._records = self._conn.recv()
        self._proc.join(5)
        if self._proc.is_alive():
            self._proc.kill()

    def requests(self) -> list[WireRequest]:
        """Every request seen, in the order sent: the segments of each connection, in stamp order, split at each
        request's first segment."""
        offset = _monotonic_minus_realtime()
        by_port: dict[int, list[tuple[float, bool, int, str]]] = {}
        for stamp, port, to_server, flags, rid in sorted(self._records):
            by_port.setdefault(port, []).append((stamp + offset, to_server, flags, rid))
        out: list[WireRequest] = []
        for segments in by_port.values():
            current: dict[str, object] | None = None
            for at, to_server, flags, rid in segments:
                if to_server and flags & 1:
                    if current is not None:
                        out.append(WireRequest(**current))  # type: ignore[arg-type]
                    current = {"sent": at, "first": None, "done": None, "rid": ""}
                if current is None:
                    continue
                if to_server and flags & 8 and not current["rid"]:
                    current["rid"] = rid
                elif not to_server:
                    if flags & 2 and current["first"] is None:
                        current["first"] = at
                    if flags & 4 and current["done"] is None:
                        current["done"] = at
            if current is not None:
                out.append(WireRequest(**current))  # type: ignore[arg-type]
        return sorted(out, key=lambda r: r.sent)


def _monotonic_minus_realtime() -> float:
    best = (float("inf"), 0.0)
    for _ in range(5):
        before, real, after = time.monotonic(), time.time(), time.monotonic()
        best = min(best, (after - before, (before + after) / 2 - real))
    return best[1]


@dataclass(frozen=True)
class Figures:
    """One client's (or the wire's) figures over one window."""

    requests: int
    tok_s: float
    ttft_ms: float
    tpot_ms: float | None
    bursts: int
    """Requests whose whole answer arrived at one instant (TTFT = e2e): a client starved, or a server that held
    the stream."""
    cpu_ms_per_request: float | None = None
    events: int = 0


BURST_S = 0.001


def figures(times: Sequence[tuple[float, float, float]], tokens: int, cpu_s: float | None = None,
            events: int = 0) -> Figures:
    """From (sent, first token, done) per request, each answer ``tokens`` long."""
    if not times:
        return Figures(0, 0.0, 0.0, None, 0)
    window = max(t[2] for t in times) - min(t[0] for t in times)
    tpot = [(done - first) / (tokens - 1) * 1000 for _s, first, done in times if tokens > 1]
    return Figures(len(times), tokens * len(times) / window if window > 0 else 0.0,
                   statistics.median((first - sent) * 1000 for sent, first, _d in times),
                   statistics.median(tpot) if tpot else None,
                   sum(1 for _s, first, done in times if done - first < BURST_S),
                   cpu_s * 1000 / len(times) if cpu_s is not None else None, events)


def wire_figures(requests: Sequence[WireRequest], tokens: int, since: float) -> Figures:
    """The wire's figures for the requests sent after ``since`` (monotonic) that completed."""
    done = [(r.sent, r.first, r.done) for r in requests if r.sent >= since and r.first and r.done]
    return figures(done, tokens)  # type: ignore[arg-type]


class _RawProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[float, float]] | None = None
        self.first = 0.0
        self.tail = b""
        self.lost = False
        self.got = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        if b"HTTP/1." in data:  # an answer began (not the last one's late terminator)
            self.got = True
        seen = self.tail + data
        if not self.first and b"data: {" in seen:
            self.first = now
        if b"[DONE]" in seen and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result((self.first or now, now))
        self.tail = data[-16:]

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("the server closed the connection"))


class RawClient:
    """The minimal closed-loop client: ``await RawClient(port, path).run(bodies, concurrency)``."""

    def __init__(self, port: int, path: str) -> None:
        self.port = port
        self.path = path
        self._idle: list[_RawProtocol] = []

    async def _conn(self) -> _RawProtocol:
        while self._idle:
            proto = self._idle.pop()
            if not proto.lost:
                return proto
        _t, proto = await asyncio.get_running_loop().create_connection(_RawProtocol, "127.0.0.1", self.port)
        return proto

    async def one(self, body: dict[str, object]) -> tuple[float, float, float]:
        raw = json.dumps(body).encode()
        request = (f"POST {self.path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(raw)}\r\n\r\n").encode() + raw
        for attempt in range(2):
            proto = await self._conn()
            proto.first, proto.tail, proto.got = 0.0, b"", False
            proto.waiter = asyncio.get_running_loop().create_future()
            sent = time.monotonic()
            assert proto.transport is not None
            proto.transport.write(request)
            try:
                first, done = await proto.waiter
                break
            except ConnectionError:
                if attempt or proto.got:  # a kept connection the server closed as we sent: once more, new
                    raise
        # the chunked terminator follows [DONE]: let it in before the connection is reused
        await asyncio.sleep(0)
        self._idle.append(proto)
        return sent, first, done

    async def run(self, bodies: Sequence[dict[str, object]], concurrency: int) -> list[tuple[float, float, float]]:
        queue = iter(bodies)
        out: list[tuple[float, float, float]] = []

        async def worker() -> None:
            for body in queue:
                out.append(await self.one(body))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return out

    def close(self) -> None:
        for proto in self._idle:
            if proto.transport is not None:
                proto.transport.close()
        self._idle.clear()


TOK_S_BOUND = 0.005
TTFT_BOUND_MS = 0.5
TPOT_BOUND_MS = 0.05


class AgainstWire:
    """Ours against the wire at each concurrency (each printed as info) and the worst of them, the judged row:
    tok/s within :data:`TOK_S_BOUND`, TTFT p50 within :data:`TTFT_BOUND_MS`, TPOT p50 within :data:`TPOT_BOUND_MS`."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.levels: list[str] = []
        self.worst = [0.0, 0.0, 0.0]

    def add(self, name: str, level: str, ours: Figures, wire: Figures) -> bool:
        """Print one concurrency's three comparisons; whether all three hold."""
        tok = ours.tok_s / wire.tok_s - 1 if wire.tok_s else float("inf")
        ttft = ours.ttft_ms - wire.ttft_ms
        tpot = (ours.tpot_ms or 0.0) - (wire.tpot_ms or 0.0)
        print(f"FIGURE|{name}: tok/s ours / wire ({ours.tok_s:.1f} / {wire.tok_s:.1f})|{1 + tok:.4f}|"
              f"1 ± {TOK_S_BOUND}|info")
        print(f"FIGURE|{name}: TTFT p50 ours − wire ({ours.ttft_ms:.3f} − {wire.ttft_ms:.3f} ms)|{ttft:+.3f} ms|"
              f"± {TTFT_BOUND_MS} ms|info")
        print(f"FIGURE|{name}: TPOT p50 ours − wire ({ours.tpot_ms or 0:.4f} − {wire.tpot_ms or 0:.4f} ms)|"
              f"{tpot:+.4f} ms|± {TPOT_BOUND_MS} ms|info")
        self.levels.append(level)
        self.worst = [max(self.worst[0], abs(tok)), max(self.worst[1], abs(ttft)), max(self.worst[2], abs(tpot))]
        return abs(tok) <= TOK_S_BOUND and abs(ttft) <= TTFT_BOUND_MS and abs(tpot) <= TPOT_BOUND_MS

    def summary(self) -> bool | None:
        """Print the judged row (None: nothing was compared)."""
        if not self.levels:
            return None
        tok, ttft, tpot = self.worst
        ok = tok <= TOK_S_BOUND and ttft <= TTFT_BOUND_MS and tpot <= TPOT_BOUND_MS
        print(f"FIGURE|{self.server}: ours against the wire, worst over c = {', '.join(self.levels)} (tok/s, TTFT "
              f"p50, TPOT p50; {load()})|{tok * 100:.2f} %, {ttft:.2f} ms, {tpot:.3f} ms|"
              f"<= {TOK_S_BOUND * 100:.1f} %, {TTFT_BOUND_MS} ms, {TPOT_BOUND_MS} ms|{'pass' if ok else 'FAIL'}")
        return ok


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"

