"""Kernel receive timestamps for the streams we measure: when a token's bytes reached our socket, not when our
thread got round to reading them.

A measured time-to-first-token is ``t(first token's bytes read) - t(request sent)``. The read side is where
a benchmark client lies: between the packet's arrival and the moment the measuring code calls the clock, the
engine thread may wait for the GIL (the TUI renders in the same process), for a CPU (other processes on a
2-core box), or for its event loop to finish other callbacks. Linux stamps every received packet in the
kernel when ``SO_TIMESTAMPNS`` is set, and hands the stamp of the last packet of each read to ``recvmsg`` as
ancillary data (TCP included; ``ioctl(SIOCGSTAMPNS)`` does not work on TCP sockets). The stamp is taken at
arrival, so none of those waits reach the figure. One limit: a read that returns several packets carries the
last one's stamp, so when the reader lagged by more than the gap between two tokens, the earlier tokens of that
read are stamped late by up to that gap (never early; read-time stamps would be late by the whole lag).

:class:`RxClockTransport` is an ``httpx`` transport whose connections are plain non-blocking sockets read
with ``recvmsg`` on the running asyncio loop; ``rx_monotonic(response)`` gives the arrival time of the bytes
last read for that response, on the ``time.monotonic()`` clock the rest of the engine uses. It is used for
plain-HTTP servers on Linux; for TLS, a proxy or another OS the client keeps httpx's own transport and its
timestamps fall back to ``time.monotonic()`` at read time (``rx_monotonic`` returns None).
"""

from __future__ import annotations

import asyncio
import errno
import math
import socket
import ssl
import struct
import sys
import time
import typing
from collections.abc import Iterable

import httpcore
import httpx

SO_TIMESTAMPNS: int | None = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
"""``SO_TIMESTAMPNS`` (35 on Linux); the ancillary message type ``SCM_TIMESTAMPNS`` has the same value."""
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0


def monotonic_minus_realtime(tries: int = 3) -> float:
    """``time.monotonic() - time.time()`` at one instant: what maps a kernel (realtime) stamp onto the monotonic
    clock. The realtime clock is read between two monotonic reads and the middle taken; a thread preempted inside
    that sandwich (a busy box) would shift the stamp by the whole preemption, so a wide sandwich is read again
    and the narrowest of ``tries`` kept (two reads back to back, as before, put one stamp 0.35 ms late under
    load: an answer whose end came before its first token)."""
    best_gap, best = math.inf, 0.0
    for _ in range(tries):
        before = time.monotonic()
        real = time.time()
        after = time.monotonic()
        if after - before < best_gap:
            best_gap, best = after - before, (before + after) / 2 - real
        if best_gap < 20e-6:
            break
    return best


def supported() -> bool:
    """Whether this platform stamps received TCP packets for us (Linux)."""
    return sys.platform.startswith("linux") and SO_TIMESTAMPNS is not None and _ANCILLARY > 0


class RxStream(httpcore.AsyncNetworkStream):
    """One TCP connection read with ``recvmsg``, remembering the kernel's stamp of the last packet read."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.last_rx_realtime: float | None = None
        """CLOCK_REALTIME seconds at which the last packet of the latest read arrived (None before any)."""
        self.last_rx_monotonic: float | None = None
        """The same instant on ``time.monotonic()``'s clock."""

    async def _wait(self, add: str, remove: str, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        fd = self._sock.fileno()
        waiter = loop.create_future()

        def ready() -> None:
            if not waiter.done():
                waiter.set_result(None)

        getattr(loop, add)(fd, ready)
        try:
            await asyncio.wait_for(waiter, timeout)
        finally:
            getattr(loop, remove)(fd)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        while True:
            try:
                data, ancdata, _flags, _addr = self._sock.recvmsg(max_bytes, _ANCILLARY)
            except (BlockingIOError, InterruptedError):
                try:
                    await self._wait("add_reader", "remove_reader", timeout)
                except asyncio.TimeoutError as exc:
                    raise httpcore.ReadTimeout(f"no data within {timeout} s") from exc
                continue
            except OSError as exc:
                raise httpcore.ReadError(str(exc)) from exc
            if data:
                self._stamp(ancdata)
            return data

    def _stamp(self, ancdata: list[tuple[int, int, bytes]]) -> None:
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
                seconds, nanos = _TIMESPEC.unpack_from(payload)
                rx = seconds + nanos / 1e9
                self.last_rx_realtime = rx
                self.last_rx_monotonic = min(time.monotonic(), rx + monotonic_minus_realtime())
                return

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        view = memoryview(buffer)
        while view:
            try:
                sent = self._sock.send(view)
            except (BlockingIOError, InterruptedError):
                try:
                    await self._wait("add_writer", "remove_writer", timeout)
                except asyncio.TimeoutError as exc:
                    raise httpcore.WriteTimeout(f"could not send within {timeout} s") from exc
                continue
            except OSError as exc:
                raise httpcore.WriteError(str(exc)) from exc
            view = view[sent:]

    async def aclose(self) -> None:
        self._sock.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("RxStream carries plain HTTP only; TLS servers use httpx's own transport")

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "socket":
            return self._sock
        if info == "is_readable":
            # A kept-alive connection that turned readable has been closed by the server (or sent junk).
            try:
                self._sock.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                pass
            return True
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "client_addr":
            return self._sock.getsockname()
        return None


class RxBackend(httpcore.AsyncNetworkBackend):
    """Opens :class:`RxStream` connections on the running asyncio loop."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[typing.Any] | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        last: Exception | None = None
        for family, kind, proto, _name, address in infos:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if SO_TIMESTAMPNS is not None:  # always so where this backend is used (supported())
                    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                for option in socket_options or ():
                    sock.setsockopt(*option)
                if local_address:
                    sock.bind((local_address, 0))
                await asyncio.wait_for(loop.sock_connect(sock, address), timeout)
                return RxStream(sock)
            except asyncio.TimeoutError as exc:
                sock.close()
                raise httpcore.ConnectTimeout(f"no connection to {host}:{port} within {timeout} s") from exc
            except OSError as exc:
                sock.close()
                last = exc
        message = f"[Errno {getattr(last, 'errno', errno.ECONNREFUSED)}] {last}" if last else "no address"
        raise httpcore.ConnectError(message)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[typing.Any] | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("RxBackend connects over TCP only")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class RxClockTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (request and response mapping, error mapping, pooling) over :class:`RxBackend`."""

    def __init__(self, *, limits: httpx.Limits) -> None:
        super().__init__(verify=False, limits=limits)
        # httpx builds its pool in __init__ without a way to name the network backend; the pool is rebuilt with
        # the same settings and ours (tests/test_engine_rxclock.py fails if httpx stops using ``_pool``).
        self._pool = httpcore.AsyncConnectionPool(
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=RxBackend(),
        )


def rx_monotonic(response: httpx.Response) -> float | None:
    """When the bytes last read for ``response`` arrived, on ``time.monotonic()``'s clock (None: unknown)."""
    stream = response.extensions.get("network_stream")
    stream = getattr(stream, "_stream", stream)  # an upgrade wrapper keeps the real stream in ``_stream``
    return stream.last_rx_monotonic if isinstance(stream, RxStream) else None
