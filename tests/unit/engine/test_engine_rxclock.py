"""Kernel receive stamps (engine.rxclock): a token's time is when it reached the socket, not when we read it."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from specbench_tui.engine import rxclock, stream
from specbench_tui.engine.client import ERROR_CONNECTION, GenerateResult, ServerClient
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
        self.sent: list[tuple[int, float, float]] = []
        """Each event of the last answer: its completion tokens (0 for the closing ``[DONE]``), the clock just before
        and just after it was handed to the kernel (on loopback the kernel stamps it in between)."""
        self.requests = 0
        self.got_request = threading.Event()
        self.answered = threading.Event()
        """Set once an answer was sent in full."""
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
                self.got_request.set()
                if head.startswith(b"GET"):
                    body = b'{"ok": true}'
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                                 % (len(body), body))
                else:
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                 b"transfer-encoding: chunked\r\n\r\n")
                    self.sent = []
                    time.sleep(FIRST_TOKEN_AFTER_S)
                    self.sent_first.append(time.monotonic())
                    self._send(conn, 1, _event(1))
                    for n in (2, 3):
                        time.sleep(self.gap_s)
                        self._send(conn, n, _event(n))
                    self._send(conn, 4, _event(4, finished=True))
                    done = b"data: [DONE]\n\n"
                    self._send(conn, 0, f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")  # 0: the end
                    self.answered.set()
                if self.close_after_each:
                    return

    def _send(self, conn: socket.socket, tokens: int, data: bytes) -> None:
        before = time.monotonic()
        conn.sendall(data)
        self.sent.append((tokens, before, time.monotonic()))

    def close(self) -> None:
        self.sock.close()


HOG_AFTER_ANSWER_S = 0.25
"""How long the loop stays busy after the server sent what the test waits for: the tokens wait in the socket."""


async def hog_the_loop(server: SlowFirstToken, sent: Callable[[], bool]) -> float:
    """Once the request reached ``server``, keep the event loop (and a CPU) busy until ``sent()`` holds and
    :data:`HOG_AFTER_ANSWER_S` longer; returns when the loop was let go. Waiting for the server's side instead of
    a fixed time keeps the loop busy when the tokens come in, however late a loaded machine sends them."""
    assert await asyncio.to_thread(server.got_request.wait, 30), "the request never reached the server"
    deadline = time.monotonic() + 30
    while not sent() and time.monotonic() < deadline:
        time.sleep(0.001)  # noqa: ASYNC251 -- on purpose: the loop is busy
    time.sleep(HOG_AFTER_ANSWER_S)  # noqa: ASYNC251 -- on purpose: the loop is busy
    return time.monotonic()


@pytest.fixture
def server() -> Iterator[SlowFirstToken]:
    srv = SlowFirstToken(gap_s=1.0)  # the next token comes well after the hog below is over (0.25 s after the first)
    yield srv
    srv.close()


def test_plain_http_streams_through_our_stamping_connections_and_tls_through_httpx() -> None:
    async def check() -> None:
        client = ServerClient("http://127.0.0.1:9", SGLANG)
        try:
            assert isinstance(client.stream_pool, stream.StreamPool)
        finally:
            await client.aclose()
        tls = ServerClient("https://127.0.0.1:9", SGLANG)
        try:
            assert tls.stream_pool is None
        finally:
            await tls.aclose()

    asyncio.run(check())


def test_a_proxy_in_the_environment_takes_the_stream_through_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    # Where the environment names a proxy for plain HTTP, httpx (which honours it) carries the stream, as it
    # carries the small calls; a host in no_proxy is reached directly, through our stamping connections.
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.delenv("NO_PROXY", raising=False)

    async def check() -> tuple[bool, bool]:
        far, near = ServerClient("http://10.1.2.3:30000", SGLANG), ServerClient("http://127.0.0.1:30000", SGLANG)
        try:
            return far.stream_pool is None, near.stream_pool is not None
        finally:
            await far.aclose()
            await near.aclose()

    assert asyncio.run(check()) == (True, True)


def test_ttft_is_when_the_token_arrived_even_if_the_loop_was_busy(server: SlowFirstToken) -> None:
    """The event loop is blocked from when the request reaches the server until 250 ms after the first token
    was sent (at 50 ms, later on a loaded machine). Read-time stamps would say TTFT >= the end of that; kernel
    stamps say when the token was sent."""

    async def run() -> tuple[float, float, float]:
        client = ServerClient(f"http://127.0.0.1:{server.port}", SGLANG)
        try:
            task = asyncio.create_task(hog_the_loop(server, lambda: bool(server.sent)))
            result = await client.generate("hi", {"max_new_tokens": 4})
            let_go = await task
            assert result.ok, result.error
            first = next(c.at for c in result.chunks if c.completion_tokens > 0)
            return first, result.start, let_go
        finally:
            await client.aclose()

    first, start, let_go = asyncio.run(run())
    tokens, before, after = server.sent[0]
    assert tokens == 1
    # Stamped when the kernel took the token in (between the server's two clocks around its send), not when read.
    assert before - 0.01 < first < after + 0.01, (first - start, before - start, after - start)
    assert first < let_go - HOG_AFTER_ANSWER_S + 0.01, (first - start, let_go - start)
    assert server.sent_first[0] - start >= FIRST_TOKEN_AFTER_S - 0.005


def test_tokens_read_together_carry_the_last_ones_arrival() -> None:
    """A read that returns several packets carries the stamp of the last: tokens that waited in the socket
    while the loop was busy are stamped late by at most the gap to the last one, never early, and far less
    than by the read time."""
    srv = SlowFirstToken(gap_s=0.02)  # tokens at 50, 70, 90 ms; the loop is busy until 250 ms after the last

    async def run() -> tuple[GenerateResult, float]:
        client = ServerClient(f"http://127.0.0.1:{srv.port}", SGLANG)
        try:
            task = asyncio.create_task(hog_the_loop(srv, srv.answered.is_set))
            result = await client.generate("hi", {"max_new_tokens": 4})
            return result, await task
        finally:
            await client.aclose()

    try:
        result, let_go = asyncio.run(run())
    finally:
        srv.close()
    chunks = [c for c in result.chunks if c.completion_tokens > 0]
    assert len(chunks) >= 3
    sent = {tokens: (before, after) for tokens, before, after in srv.sent}
    last_sent = max(after for _, after in sent.values())  # the closing [DONE] may come in the same read
    start = result.start
    seen = ([(c.completion_tokens, round((c.at - start) * 1000, 1)) for c in chunks],
            {k: (round((b - start) * 1000, 1), round((a - start) * 1000, 1)) for k, (b, a) in sent.items()},
            round((let_go - start) * 1000, 1))  # milliseconds from the request's start, for a failure's message
    for chunk in chunks:
        before, _ = sent[chunk.completion_tokens]
        # never early (a stamp of an earlier packet would be a 20 ms gap early), late by the gap to the last at most;
        # 10 ms for the stamps' conversion to the monotonic clock
        assert before - 0.01 <= chunk.at <= last_sent + 0.01, seen
        assert chunk.at < let_go - HOG_AFTER_ANSWER_S + 0.01, seen  # far from the read time


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
