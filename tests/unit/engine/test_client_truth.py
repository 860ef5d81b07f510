"""The measuring client's truth: never starved by the server it measures, never its bottleneck.

- A server runs in the measuring process's session (Linux schedules a session as one autogroup): in a session of
  its own, a server that keeps the cores busy starves the client, which then reads each answer in one piece
  (TTFT = e2e, TPOT 0). It keeps a process group of its own, for the group kill.
- The measured stream keeps one connection per request in flight alive across requests and reads each body to its
  end (httpx closed every connection at ``[DONE]``: a connect per request).
- Its HTTP framing holds however the bytes are cut into reads.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hostile_http import HostileServer

from repo_paths import REPO
from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.core.engines.vllm import VLLM
from specbench_tui.core.plan import build_plan
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.engine import stream
from specbench_tui.engine.client import GenerateResult, ServerClient
from specbench_tui.engine.local_executor import LocalExecutor
from specbench_tui.engine.server import ServerProcess

pytestmark = pytest.mark.skipif(not stream.supported(), reason="the measured stream is Linux-only")


async def test_a_server_shares_the_measuring_process_session_in_a_process_group_of_its_own(tmp_path: Path) -> None:
    # The server prints its session and group, then waits to be stopped.
    script = "import os, time; print(os.getsid(0), os.getpgrp(), flush=True); time.sleep(60)"
    log = tmp_path / "c.log"
    server = ServerProcess("c", [sys.executable, "-c", script], dict(os.environ), log, SGLANG,
                           SignatureSet(builtins=()), lambda event: None)
    pid = await server.start()
    try:
        lines: list[str] = []
        for _ in range(200):
            lines = log.read_text().splitlines() if log.exists() else []
            if lines:
                break
            await asyncio.sleep(0.05)
        assert lines, "the server printed nothing"
        sid, pgid = (int(x) for x in lines[0].split())
        keeper = server.keeper_pid
        assert keeper is not None
        assert sid == os.getsid(0), "the server is in a session (a scheduling group) of its own"
        assert os.getsid(keeper) == os.getsid(0)
        assert pgid == pid != os.getpgrp(), "the server's process group is its own (the group kill)"
        assert os.getpgid(keeper) == keeper != os.getpgrp(), "the keeper left the engine's group"
    finally:
        await server.stop(1.0)


async def test_kept_alive_connections_one_per_request_in_flight() -> None:
    async with HostileServer("ok") as server:
        client = ServerClient(server.url, SGLANG)
        try:
            for _ in range(10):  # one at a time: one connection for all
                result = await client.generate("hi", {"max_new_tokens": 4})
                assert result.ok and result.done, result.error
            assert client.stream_pool is not None and client.stream_pool.opened == 1
            for _ in range(3):  # waves of 8: eight connections, reused by every wave
                results = await asyncio.gather(*(client.generate("hi", {"max_new_tokens": 4}) for _ in range(8)))
                assert all(r.ok and r.completion_tokens == 4 for r in results), [r.error for r in results]
            assert client.stream_pool.opened <= 8 + 1, client.stream_pool.opened
        finally:
            await client.aclose()


async def test_reserve_opens_connections_before_any_clock_starts() -> None:
    async with HostileServer("ok") as server:
        client = ServerClient(server.url, SGLANG)
        try:
            await client.reserve(16)
            assert client.stream_pool is not None and client.stream_pool.opened == 16
            results = await asyncio.gather(*(client.generate("hi", {"max_new_tokens": 4}) for _ in range(16)))
            assert all(r.ok for r in results)
            assert client.stream_pool.opened == 16
        finally:
            await client.aclose()


class _Lines:
    """A consumer that keeps what it is handed."""

    max_line = 1 << 20
    max_error_body = 4096

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.code = 0
        self.body = b""

    def started(self, at: float) -> None:
        pass

    def status(self, code: int) -> None:
        self.code = code

    def line(self, line: bytes, at: float) -> bool:
        self.lines.append(line.decode())
        return line == b"data: [DONE]"

    def error_body(self, head: bytes) -> None:
        self.body = head

    def progress(self) -> None:
        pass


def _answer(events: list[str], chunked: bool = True) -> bytes:
    pieces = [f"data: {e}\r\n\n".encode() for e in events]  # one event per chunk; \r\n, \n both end a line
    if not chunked:
        body = b"".join(pieces)
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    chunks = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\nX-T: 1\r\n\r\n"
    return b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks


@pytest.mark.parametrize("chunked", [True, False])
def test_the_framing_holds_however_the_bytes_are_cut(chunked: bool) -> None:
    events = [json.dumps({"text": "a\u2028b" * i, "n": i}, ensure_ascii=False) for i in range(1, 30)] + ["[DONE]"]
    wire = _answer(events, chunked)
    rng = random.Random(7)
    for trial in range(200):
        cuts = sorted(rng.sample(range(1, len(wire)), rng.randint(1, 40))) if trial else list(range(1, len(wire)))
        released: list[object] = []
        pool = stream.StreamPool("127.0.0.1", 1)
        pool.release = released.append  # type: ignore[method-assign,assignment]
        conn = stream._Connection.__new__(stream._Connection)  # no socket, no loop: bytes in, calls out
        _bare(conn, pool)
        consumer = _Lines()
        conn._consumer = consumer
        conn._state = stream._HEAD
        for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True):
            conn._feed(wire[a:b], 0.0)
        data = [line for line in consumer.lines if line]
        assert data == [f"data: {e}" for e in events], trial
        assert consumer.code == 200 and released == [conn], "the connection was not kept after its body's end"


def _bare(conn: stream._Connection, pool: stream.StreamPool) -> None:
    """A connection's parser state without a socket (``_feed`` is pure bytes in, calls out)."""
    conn.pool, conn.closed, conn._retire, conn._waiter = pool, False, None, None
    conn.loop = _NoLoop()  # type: ignore[assignment]
    conn._buf, conn._line, conn._error_head = bytearray(), bytearray(), bytearray()
    conn._remaining, conn._status, conn._keep_alive = 0, 0, True
    conn._answered = conn.any_bytes = conn._after_cr = False


class _NoLoop:
    """Stands in for the event loop where the parser sets its retire timer (the answer complete before its body)."""

    def call_later(self, delay: float, callback: object) -> SimpleNamespace:
        return SimpleNamespace(cancel=lambda: None)


FAST_PROFILE = """
seed = 1
[deterministic]
enabled = true
tok_s = 400.0
accept_length = 1.0
ttft_ms = 2.0
"""


def test_a_connection_handed_on_before_its_last_request_resumed_keeps_the_next_request() -> None:
    """The answer's end puts its connection back in the pool from the reader callback; a worker that was ready
    first may send its request on it before the finished request's coroutine resumes. That coroutine must not
    clear the next request's state (it did: on the simulator, 2-5 of 64 answers at concurrency 8 were read to
    their end and never handed over, each a hang until the request timeout)."""
    from specbench_tui.sim.testing import SimProcess

    async def run(url: str) -> list[GenerateResult]:
        client = ServerClient(url, SGLANG, request_timeout_s=8.0)
        try:
            queue = iter(range(160))
            results: list[GenerateResult] = []

            async def worker() -> None:
                for n in queue:
                    results.append(await client.generate(f"request {n}", {"max_new_tokens": 32,
                                                                           "ignore_eos": True}))

            await asyncio.gather(*(worker() for _ in range(8)))
            return results
        finally:
            await client.aclose()

    with SimProcess(profile_toml=FAST_PROFILE) as sim:
        sim.wait_ready()
        results = asyncio.run(run(sim.url))
    assert [r.error for r in results if not r.ok] == []
    assert len(results) == 160 and all(r.completion_tokens == 32 for r in results)


def test_an_event_orjson_refuses_is_parsed_as_python_would_and_junk_is_a_protocol_error() -> None:
    from specbench_tui.engine.client import ERROR_PROTOCOL, _decode_payload

    def result() -> GenerateResult:
        return GenerateResult(rid="r", started_at=0.0, start=0.0)

    assert _decode_payload(b'{"text": "a\xe2\x80\xa8b", "n": 1}', result()) == {"text": "a\u2028b", "n": 1}
    assert _decode_payload(b'{"n": NaN, "big": 123456789012345678901234567890}', result()) is not None
    assert _decode_payload(b'{"text": "\xff\xfe"}', result()) == {"text": "\ufffd\ufffd"}  # as decoded with replace
    bad = result()
    assert _decode_payload(b'{"text": "Hel', bad) is None
    assert bad.error_kind == ERROR_PROTOCOL and "unreadable stream payload" in (bad.error or "")


def test_a_body_whose_end_lags_its_answer_is_retired_after_its_grace() -> None:
    """[DONE] read, the chunked terminator not: the connection waits RETIRE_AFTER_S for it, then is closed, not
    kept (a timer set only then: an answer and its terminator in one read set none)."""
    timers: list[float] = []

    class _Loop:
        def call_later(self, delay: float, callback: object) -> SimpleNamespace:
            timers.append(delay)
            return SimpleNamespace(cancel=lambda: None)

    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    done = b"data: [DONE]\n\n"
    for tail, expected in ((b"0\r\n\r\n", []), (b"", [stream.RETIRE_AFTER_S])):
        timers.clear()
        pool = stream.StreamPool("127.0.0.1", 1)
        pool.release = lambda conn: None  # type: ignore[method-assign]
        conn = stream._Connection.__new__(stream._Connection)
        _bare(conn, pool)
        conn.loop = _Loop()  # type: ignore[assignment]
        conn._consumer, conn._state = _Lines(), stream._HEAD
        conn._feed(head + b"%x\r\n%s\r\n" % (len(done), done) + tail, 0.0)
        assert timers == expected, tail


def _vllm_executor(path: Path) -> LocalExecutor:
    """The executor of a vLLM sweep (nothing opened: only what it chose at construction is read)."""
    plan = build_plan(load_sweep(path))
    return LocalExecutor(plan, None, None, lambda event: None, profile=VLLM,  # type: ignore[arg-type]
                         signatures=SignatureSet(builtins=()), port_base=38500)


def test_a_sweep_asks_a_running_token_count_only_when_a_configuration_streams_several_tokens_a_chunk(
        tmp_path: Path) -> None:
    """``continuous_usage_stats`` costs vLLM's API server a usage object per chunk (6-12 % of its tok/s at c = 64 on
    2 cores): the shipped n-gram sweep asks it of every row (baseline included, so the speedup compares like with
    like), the same sweep without its speculative rows asks what ``vllm bench serve`` asks."""
    shipped = REPO / "sweeps" / "vllm-tiny.toml"
    assert _vllm_executor(shipped).stream_options == {"include_usage": True, "continuous_usage_stats": True}
    text = shipped.read_text()
    start = text.index('[[configs]]\nname = "ngram-k{k}"')
    baseline_only = tmp_path / "vllm-baseline.toml"
    baseline_only.write_text(text[:start] + text[text.index("[[workloads]]"):])
    assert _vllm_executor(baseline_only).stream_options == {"include_usage": True}
