"""Kernel receive stamps (engine.rxclock): a token's time is when it reached the socket, not when we read it."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpcore
import pytest

from specbench_tui.engine import rxclock
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


class LateBodyEnd:
    """An OpenAI-format streaming server (vLLM's wire) that, like vLLM, SGLang and llama.cpp, writes the chunked
    body's last chunk in a write of its own ``end_after_s`` after ``[DONE]`` (None: never, the body stays open);
    counts the connections it accepted."""

    def __init__(self, end_after_s: float | None) -> None:
        self.end_after_s = end_after_s
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    @staticmethod
    def _chunk(payload: object) -> bytes:
        data = f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n".encode()
        return f"{len(data):x}\r\n".encode() + data + b"\r\n"

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
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                for n in (1, 2, 3):
                    usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}
                    conn.sendall(self._chunk({"choices": [{"text": "x", "finish_reason": "length" if n == 3 else None}],
                                              "usage": usage}))
                conn.sendall(self._chunk({"choices": [], "usage": usage}) + self._chunk("[DONE]"))
                if self.end_after_s is None:
                    time.sleep(30)  # the body never ends (the client gives up on it)
                    return
                time.sleep(self.end_after_s)
                conn.sendall(b"0\r\n\r\n")

    def close(self) -> None:
        self.sock.close()


def _three_answers(port: int) -> list[tuple[GenerateResult, float]]:
    """Three requests one after the other on one client: each result and how long its ``generate`` took."""
    from specbench_tui.core.engines.vllm import VLLM

    async def run() -> list[tuple[GenerateResult, float]]:
        client = ServerClient(f"http://127.0.0.1:{port}", VLLM)
        try:
            out = []
            for _ in range(3):
                began = time.monotonic()
                result = await client.generate("hi", {"max_new_tokens": 3})
                out.append((result, time.monotonic() - began))
            return out
        finally:
            await client.aclose()

    return asyncio.run(run())


def test_a_body_that_ends_after_done_keeps_its_connection_for_the_next_request() -> None:
    """The body's end comes after ``[DONE]`` (a write of its own, as real servers send it): the client reads to it,
    so the next request goes out on the same connection instead of a new one (before, every request of a load
    point paid a connection: 48 ms p50, up to 0.95 s, at concurrency 8 on a busy vLLM). The answer's end is still
    ``[DONE]``'s arrival, not the body's end."""
    srv = LateBodyEnd(end_after_s=0.2)
    try:
        answers = _three_answers(srv.port)
    finally:
        srv.close()
    assert all(result.ok and result.done and result.completion_tokens == 3 for result, _ in answers), answers
    assert srv.connections == 1
    for result, took in answers:
        assert took >= 0.2  # generate waited for the body's end...
        assert result.end - result.start < 0.15  # ...which is not in the answer's time


def test_a_body_that_never_ends_after_done_is_cut_and_the_answer_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that keeps the body open after ``[DONE]`` is waited for only ``BODY_END_WAIT_S``: the answer is
    complete and ok, and the next request opens a new connection."""
    from specbench_tui.engine import client as client_module

    monkeypatch.setattr(client_module, "BODY_END_WAIT_S", 0.2)
    srv = LateBodyEnd(end_after_s=None)
    try:
        answers = _three_answers(srv.port)
    finally:
        srv.close()
    assert all(result.ok and result.done and result.completion_tokens == 3 for result, _ in answers), answers
    assert all(0.2 <= took < 5.0 for _, took in answers), answers
    assert srv.connections == 3


def test_a_wave_of_requests_over_idle_connections_takes_one_each_without_retries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight requests at once over eight idle kept-alive connections: each is sent on a connection of its own at
    the first try. httpcore's own pool gives the whole wave the first idle connection, and all but one retry a
    pass later, again and again (28 retries here; at concurrency 64 on a busy vLLM, 1.2 s p50 before a request
    left)."""
    from specbench_tui.core.engines.vllm import VLLM

    retries = 0
    handle = httpcore._async.http11.AsyncHTTP11Connection.handle_async_request

    async def counting(self: httpcore._async.http11.AsyncHTTP11Connection,
                       request: httpcore.Request) -> httpcore.Response:
        nonlocal retries
        try:
            return await handle(self, request)
        except httpcore.ConnectionNotAvailable:
            retries += 1
            raise

    monkeypatch.setattr(httpcore._async.http11.AsyncHTTP11Connection, "handle_async_request", counting)
    srv = LateBodyEnd(end_after_s=0.02)

    async def run() -> list[GenerateResult]:
        client = ServerClient(f"http://127.0.0.1:{srv.port}", VLLM)
        try:
            await asyncio.gather(*(client.generate("hi", {"max_new_tokens": 3}) for _ in range(8)))
            return await asyncio.gather(*(client.generate("hi", {"max_new_tokens": 3}) for _ in range(8)))
        finally:
            await client.aclose()

    try:
        results = asyncio.run(run())
    finally:
        srv.close()
    assert all(r.ok for r in results), results
    assert srv.connections == 8  # the second wave reused the first wave's connections
    assert retries == 0
