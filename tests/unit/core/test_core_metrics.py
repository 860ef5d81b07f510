"""Per-request math: multi-token chunks are spread, never counted as one token."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specbench_tui.core.metrics import Chunk, acceptance_length, combine_turns, percentile, request_timing, spread


def test_multi_token_chunks_spread_itl_and_count_every_token():
    # start 0, first token at 0.1, then chunks of 3, 4 and 2 tokens every 30 ms
    chunks = [Chunk(0.1, 1), Chunk(0.13, 4), Chunk(0.16, 8), Chunk(0.19, 10)]
    timing = request_timing(0.0, 0.2, chunks)
    assert timing.ttft_s == pytest.approx(0.1)
    assert timing.completion_tokens == 10 and timing.chunks == 4
    assert len(timing.itls_s) == 9  # one per token after the first, not one per chunk
    assert timing.itls_s[:3] == pytest.approx([0.01] * 3)
    assert timing.itls_s[-2:] == pytest.approx([0.015] * 2)
    assert timing.decode_tps == pytest.approx(9 / 0.09)
    assert timing.e2e_s == pytest.approx(0.2)


def test_chunks_without_new_tokens_are_ignored():
    chunks = [Chunk(0.05, 0), Chunk(0.1, 1), Chunk(0.12, 1), Chunk(0.2, 3)]
    timing = request_timing(0.0, 0.25, chunks)
    assert timing.ttft_s == pytest.approx(0.1)
    assert timing.itls_s == pytest.approx((0.05, 0.05))
    assert timing.decode_tps == pytest.approx(2 / 0.1)


def test_zero_and_single_token_requests():
    empty = request_timing(0.0, 0.5, [])
    assert empty.ttft_s is None and empty.decode_tps is None and empty.completion_tokens == 0
    single = request_timing(0.0, 0.5, [Chunk(0.2, 1)])
    assert single.ttft_s == pytest.approx(0.2) and single.decode_tps is None


def test_first_chunk_tokens_are_not_decode_tokens():
    timing = request_timing(0.0, 1.0, [Chunk(0.1, 3), Chunk(0.2, 6)])
    assert timing.first_chunk_tokens == 3
    assert timing.decode_tps == pytest.approx(3 / 0.1)


@given(st.lists(st.tuples(st.floats(0.001, 0.1), st.integers(1, 16)), min_size=2, max_size=40))
def test_decode_rate_is_exact_for_constant_step_streams(steps):
    at, total, chunks = 0.05, 0, []
    for gap, tokens in steps:
        at += gap
        total += tokens
        chunks.append(Chunk(at, total))
    timing = request_timing(0.0, at, chunks)
    after = total - chunks[0].completion_tokens
    window = chunks[-1].at - chunks[0].at
    assert timing.decode_tps == pytest.approx(after / window)
    assert sum(timing.itls_s) == pytest.approx(window)
    assert len(timing.itls_s) == after


def test_acceptance_length():
    assert acceptance_length(3.25, 130, 40) == 3.25
    assert acceptance_length(None, 130, 40) == pytest.approx(3.25)
    assert acceptance_length(None, 130, None) is None
    assert acceptance_length(None, 0, 0) is None


def test_percentile_and_spread():
    assert percentile([], 50) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile([1, 2, 3, 4, 5], 95) == pytest.approx(4.8)
    s = spread([10.0, 12.0, None, 11.0, 30.0])
    assert s.n == 4 and s.median == pytest.approx(11.5) and s.maximum == 30.0
    assert s.mad == pytest.approx(1.0)
    assert spread([None]) is None


def test_combined_turns_weight_by_tokens():
    a = request_timing(0.0, 1.0, [Chunk(0.1, 1), Chunk(1.0, 91)])  # 90 tok in 0.9 s = 100 tok/s
    b = request_timing(0.0, 1.0, [Chunk(0.3, 1), Chunk(0.4, 11)])  # 10 tok in 0.1 s = 100 tok/s
    c = combine_turns([a, b])
    assert c.decode_tps == pytest.approx(100.0)
    assert c.ttft_s == pytest.approx(0.2)
    assert c.completion_tokens == 102 and c.e2e_s == pytest.approx(2.0)
