"""SGLang's Decode/Prefill batch lines in every form the reference lists."""

import time

import pytest

from specbench_tui.core.engines.sglang import line_timestamp, parse_batch_line
from specbench_tui.core.logparse import summarize_decode

NEW = ("[2026-10-01 12:00:00] Decode batch, #running-req: 8, #token: 4096, token usage: 0.02, accept len: 3.12, "
       "accept rate: 0.71, cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 0")
OLD = ("[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 186, token usage: 0.00, accept len: 1.95, "
       "accept rate: 0.49, cuda graph: True, gen throughput (token/s): 178.86, #queue-req: 0,")


def test_new_comma_form():
    line = parse_batch_line(NEW)
    assert line is not None and line.kind == "decode"
    assert (line.running_req, line.num_token, line.queue_req) == (8, 4096, 0)
    assert line.accept_length == pytest.approx(3.12) and line.accept_rate == pytest.approx(0.71)
    assert line.gen_throughput == pytest.approx(1234.56)
    assert line.tp_rank is None


def test_old_period_form_with_tp_prefix_and_trailing_comma():
    line = parse_batch_line(OLD)
    assert line is not None and line.tp_rank == 0
    assert line.accept_length == pytest.approx(1.95) and line.gen_throughput == pytest.approx(178.86)


@pytest.mark.parametrize("line", [
    "[2026-10-01 12:00:00.123] Decode batch, #running-req: 1, #token: 10, token usage: 0.00, cuda graph: True, "
    "gen throughput (token/s): 64.00, #queue-req: 0",
    "[2025-05-26 07:48:17 DP1 TP2] Decode batch [1234], #running-req: 1, #token: 10, token usage: 0.00, "
    "cuda graph: False, gen throughput (token/s): 64.00, #queue-req: 3,",
])
def test_optional_parts(line):
    parsed = parse_batch_line(line)
    assert parsed is not None and parsed.gen_throughput == pytest.approx(64.0)
    assert parsed.accept_length is None


def test_prefill_and_other_lines():
    prefill = parse_batch_line("[2025-05-26 07:48:17 DP1 TP2] Prefill batch. #new-seq: 2, #new-token: 1024, "
                               "#cached-token: 4, token usage: 0.91, #running-req: 51, #queue-req: 1")
    assert prefill is not None and prefill.kind == "prefill" and prefill.new_tokens == 1024
    assert (prefill.dp_rank, prefill.tp_rank) == (1, 2)
    assert parse_batch_line("The server is fired up and ready to roll!") is None
    assert parse_batch_line("[2026-10-01 12:00:00] INFO:     127.0.0.1 - \"POST /generate\" 200 OK") is None


def test_summary_counts_rank_zero_only():
    lines = [parse_batch_line(NEW), parse_batch_line(OLD),
             parse_batch_line(OLD.replace("TP0", "TP1").replace("1.95", "9.99"))]
    summary = summarize_decode(lines)
    assert summary.lines == 2
    assert summary.accept_length == pytest.approx((3.12 + 1.95) / 2)
    assert summary.gen_throughput_max == pytest.approx(1234.56)
    assert summarize_decode([]).accept_length is None


def test_line_timestamp_with_and_without_ms():
    whole = line_timestamp("[2026-10-01 12:00:00] x")
    assert whole == time.mktime(time.strptime("2026-10-01 12:00:00", "%Y-%m-%d %H:%M:%S"))
    assert line_timestamp("[2026-10-01 12:00:00.250 TP0] x") == pytest.approx(whole + 0.25)
    assert line_timestamp("no stamp") is None
