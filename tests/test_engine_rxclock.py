"""Kernel receive stamps (engine.rxclock): a token's time is when it reached the socket, not when we read it."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator

import httpcore
import pytest

from specbench_tui.engine import rxclock
from specbench_tui.engine.client import ERROR_CONNECTION, ServerClient
from specbench_tui.core.engines.sglang import SGLANG

pytestmark = pytest.mark.skipif(not rxclock.supported(), reason="kernel receive stamps are Linux-only")

FIRST_TOKEN_AFTER_S = 0.05


def _event(tokens: int, finished: bool = False) -> bytes:
    payload = {"text": "x" * tokens, "meta_info": {"completion_tokens": tokens, "prompt_tokens": 3,
                                                    "finish_reason": {"type": "length"} if finished else None}}
    data = f"data: {json.dumps(payload)}\n\n".encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class SlowFirstToken:
    """A streaming server on its own thread: the first token FIRST_TOKEN_AFTER_S after the request, then 3 more
    ``gap_s`` apart; ``close_after_each`` closes every connection after its answer without saying so (a stale
    keep-alive)."""

    def __init__(self, close_after_each: bool = False, gap_s: float = 0.01) -> None:
        self.gap_s = gap_s
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.close_after_each = close_after_each
        self.sent_first: list[float] = []
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), 0)
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                self.requests += 1
                if head.startswith(b"GET"):
                    body = b'{"ok": true}'
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                                 % (len(body), body))
                else:
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                 b"transfer-encoding: chunked\r\n\r\n")
                    time.sleep(FIRST_TOKEN_AFTER_S)
                    self.sent_first.append(time.monotonic())
                    conn.sendall(_event(1))
                    for n in (2, 3):
                        time.sleep(self.gap_s)
                        conn.sendall(_event(n))
                    conn.sendall(_event(4, finished=True))
                    done = b"data: [DONE]\n\n"
                    conn.sendall(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
                if self.close_after_each:
                    return

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server() -> Iterator[SlowFirstToken]:
    srv = SlowFirstToken(gap_s=0.4)  # the next token comes after the hog below is over
    yield srv
    srv.close()


def test_plain_http_clients_read_through_the_stamping_transport() -> None:
    # Guards the one place rxclock reaches into httpx: the transport's ``_pool`` is what it sends through.
    async def check() -> None:
        client = ServerClient("http://127.0.0.1:9", SGLANG)
        try:
            transport = client._http._transport
            assert isinstance(transport, rxclock.RxClockTransport)
            assert isinstance(transport._pool, httpcore.AsyncConnectionPool)
            assert isinstance(transport._pool._network_backend, rxclock.RxBackend)
        finally:
            await client.aclose()
        tls = ServerClient("https://127.0.0.1:9", SGLANG)
        try:
            assert not isinstance(tls._http._transport, rxclock.RxClockTransport)
        finally:
            await tls.aclose()

    asyncio.run(check())


def test_ttft_is_when_the_token_arrived_even_if_the_loop_was_busy(server: SlowFirstToken) -> None:
    """The event loop is blocked from 20 ms to 320 ms; the first token arrives at 50 ms. Read-time stamps would
    say TTFT >= 320 ms; kernel stamps say 50 ms."""

    async def run() -> tuple[float | None, float]:
        client = ServerClient(f"http://127.0.0.1:{server.port}", SGLANG)
        try:
            async def hog() -> None:
                await asyncio.sleep(0.02)
                time.sleep(0.3)  # noqa: ASYNC251 -- the loop (the GIL, a CPU) is taken when the token comes in

            task = asyncio.create_task(hog())
            result = await client.generate("hi", {"max_new_tokens": 4})
            await task
            assert result.ok, result.error
            first = next(c.at for c in result.chunks if c.completion_tokens > 0)
            return first - result.start, result.start
        finally:
            await client.aclose()

    ttft, start = asyncio.run(run())
    served = server.sent_first[0] - start
    assert abs(ttft - served) < 0.01, (ttft, served)
    assert ttft < 0.15


def test_tokens_read_together_carry_the_last_ones_arrival() -> None:
    """A read that returns several packets carries the stamp of the last: tokens that waited in the socket
    while the loop was busy are stamped late by at most the gap to the last one, never early, and far less
    than by the read time."""
    srv = SlowFirstToken(gap_s=0.02)  # tokens at 50, 70, 90 ms; the loop is blocked until 320 ms

    async def run() -> list[float]:
        client = ServerClient(f"http://127.0.0.1:{srv.port}", SGLANG)
        try:
            async def hog() -> None:
                await asyncio.sleep(0.02)
                time.sleep(0.3)  # noqa: ASYNC251 -- on purpose: the loop is busy

            task = asyncio.create_task(hog())
            result = await client.generate("hi", {"max_new_tokens": 4})
            await task
            return [c.at - result.start for c in result.chunks]
        finally:
            await client.aclose()

    try:
        stamps = asyncio.run(run())
    finally:
        srv.close()
    assert len(stamps) >= 3
    assert FIRST_TOKEN_AFTER_S - 0.005 <= stamps[0] <= FIRST_TOKEN_AFTER_S + 0.06, stamps
    assert max(stamps) < 0.2, stamps  # read at >= 320 ms


def test_refused_connection_is_a_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connect is refused

        async def run():
            client = ServerClient(f"http://127.0.0.1:{port}", SGLANG, connect_timeout_s=2)
            try:
                return await client.generate("hi", {"max_new_tokens": 4}), await client.healthy(1.0)
            finally:
                await client.aclose()

        result, healthy = asyncio.run(run())
    assert result.error_kind == ERROR_CONNECTION and "refused" in result.error
    assert healthy is False


def test_a_connection_the_server_closed_is_not_reused() -> None:
    srv = SlowFirstToken(close_after_each=True)

    async def run() -> list[bool]:
        client = ServerClient(f"http://127.0.0.1:{srv.port}", SGLANG)
        try:
            out = []
            for _ in range(3):
                out.append(await client.get_json("/server_info") == {"ok": True})
                await asyncio.sleep(0.05)  # the server has closed by now; the pool must notice
                out.append((await client.generate("hi", {"max_new_tokens": 4})).ok)
            return out
        finally:
            await client.aclose()

    try:
        assert asyncio.run(run()) == [True] * 6
        assert srv.requests == 6
    finally:
        srv.close()


class _PreemptedClocks:
    """Clocks whose first monotonic-realtime-monotonic sandwich is cut by a 5 ms preemption, then read back to
    back: the realtime clock is 1,000 s ahead of the monotonic one."""

    def __init__(self) -> None:
        self.mono = iter([10.0, 10.005, 10.006, 10.006001])
        self.real = iter([1010.0002, 1010.0060005])

    def monotonic(self) -> float:
        return next(self.mono)

    def time(self) -> float:
        return next(self.real)


def test_a_preempted_clock_read_does_not_shift_the_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offset that maps kernel stamps onto the monotonic clock comes from the narrowest of its reads: one
    preempted between its two clocks (the first here, 5 ms wide) would put every stamp of that read late."""
    monkeypatch.setattr(rxclock, "time", _PreemptedClocks())
    assert rxclock.monotonic_minus_realtime() == pytest.approx(-1000.0, abs=1e-6)
