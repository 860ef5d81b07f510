"""The measured stream gathers its reads while busy (engine/stream.py, "Reads gathered while busy"): one wake-up of
the event loop reads every connection with bytes, and a busy pool pauses a fraction of its answers' gap between
passes. What must hold: the pause is learnt and bounded (never a pause before the pool knows its gap, never past a
share of it), a lone request is never paused, and on a busy pool the figures stay those of the kernel's stamps
(no two events of one answer read as one)."""

from __future__ import annotations

import asyncio

import pytest

from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.engine import stream
from specbench_tui.engine.client import GenerateResult, ServerClient
from specbench_tui.sim.testing import SimProcess

TOK_S = 200.0
PROFILE = f"""
seed = 1
[deterministic]
enabled = true
tok_s = {TOK_S}
accept_length = 1.0
ttft_ms = 2.0
"""


def test_a_pool_paces_only_once_it_knows_its_gap_and_never_past_a_share_of_it() -> None:
    pool = stream.StreamPool("127.0.0.1", 1)
    for _ in range(stream.PACE_LEARN - 1):
        pool.gap_seen(0.004)
    assert pool.pace_s == 0.0  # not learnt yet: no pause
    pool.gap_seen(0.004)
    assert pool.pace_s == pytest.approx(stream.PACE_SHARE * 0.004)
    for _ in range(2000):  # slow answers: the pause stops at its ceiling
        pool.gap_seen(0.5)
    assert pool.pace_s == stream.PACE_MAX_S
    for _ in range(2000):  # fast ones: a share of the gap, whatever it was before
        pool.gap_seen(0.0008)
    assert pool.pace_s == pytest.approx(stream.PACE_SHARE * 0.0008, rel=0.02)


async def _run(url: str, concurrency: int, requests: int) -> tuple[list[GenerateResult], stream.StreamPool]:
    client = ServerClient(url, SGLANG, request_timeout_s=30.0)
    try:
        queue = iter(range(requests))
        results: list[GenerateResult] = []

        async def worker() -> None:
            for n in queue:
                results.append(await client.generate(f"request {n}", {"max_new_tokens": 48, "ignore_eos": True}))

        await client.reserve(concurrency)
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        assert client.stream_pool is not None
        return results, client.stream_pool
    finally:
        await client.aclose()


@pytest.fixture(scope="module")
def sim_url() -> object:
    with SimProcess(["--max-running-requests", "64"], profile_toml=PROFILE) as sim:
        sim.wait_ready()
        yield sim.url


def test_a_busy_pool_gathers_its_reads_and_every_event_keeps_its_own_stamp(sim_url: str) -> None:
    results, pool = asyncio.run(_run(sim_url, 32, 128))
    assert [r.error for r in results if not r.ok] == []
    assert pool.pauses > 0 and pool.reads >= 3 * pool.wakeups, (pool.pauses, pool.reads, pool.wakeups)
    # The simulator streams each answer's tokens 1 / TOK_S apart (more on a loaded box). A pause longer than that
    # would put two events of one answer in one read, which carries one stamp (its last segment's): the first
    # event's time would be the second's: most events would share a read (86 % with a 20 ms pause). A simulator
    # that a loaded box held back sends some events back to back whatever the client does (0-4 % seen unpaced).
    gaps = [b.at - a.at for r in results for a, b in zip(r.chunks[1:-1], r.chunks[2:-1])]
    shared = sum(1 for g in gaps if g == 0.0)
    assert shared <= 0.15 * len(gaps), f"{shared} of {len(gaps)} events shared a read with the one before"


def test_one_request_at_a_time_is_never_paused(sim_url: str) -> None:
    results, pool = asyncio.run(_run(sim_url, 1, 4))
    assert [r.error for r in results if not r.ok] == []
    assert pool.pauses == 0 and pool.reads == pool.wakeups


def test_a_pool_used_again_under_another_event_loop_still_reads(sim_url: str) -> None:
    """A client kept across two ``asyncio.run`` calls: its pool's wake-ups must move to the running loop (they stayed
    on the closed one, and every answer hung until its timeout)."""
    client = ServerClient(sim_url, SGLANG, request_timeout_s=10.0)

    async def one() -> GenerateResult:
        return await client.generate("again", {"max_new_tokens": 8, "ignore_eos": True})

    try:
        assert asyncio.run(one()).ok
        pool = client.stream_pool
        assert pool is not None
        for conn in list(pool._idle):  # the first loop's connections die with it
            conn.close()
        second = asyncio.run(one())
        assert second.ok and second.completion_tokens == 8, second.error
    finally:
        asyncio.run(client.aclose())
