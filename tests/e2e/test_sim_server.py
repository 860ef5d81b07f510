"""The simulator over the wire, as a subprocess: start-up, endpoints, fields, timing truth, logs, shutdown."""

from __future__ import annotations

import json
import re
import signal
import statistics
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from specbench_tui.sim import logs
from specbench_tui.sim.testing import SimProcess, group_left

pytestmark = pytest.mark.e2e

# A parser for SGLang's Decode batch lines, written from the reference (not from the simulator): both the
# 0.5.23 comma form (no trailing comma after #queue-req) and the older period form, optional ms and prefixes.
DECODE_RE = re.compile(
    r"^\[(?P<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?)(?:\s+DP(?P<dp>\d+))?(?:\s+TP(?P<tp>\d+))?\]\s+"
    r"Decode batch(?: \[\d+\])?[.,]\s+#running-req:\s*(?P<running>\d+),\s+#token:\s*(?P<tokens>\d+),\s+"
    r"token usage:\s*(?P<usage>[0-9.]+),\s+(?:accept len:\s*(?P<accept_len>[0-9.]+),\s+"
    r"accept rate:\s*(?P<accept_rate>[0-9.]+),\s+)?.*?gen throughput \(token/s\):\s*(?P<gen>[0-9.]+),\s+"
    r"#queue-req:\s*(?P<queue>\d+),?\s*$"
)
REFERENCE_LINES = [  # verbatim from the reference (sglang issue #11948, and the 0.5.23 format string)
    "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 186, token usage: 0.00, accept len: 1.95, "
    "accept rate: 0.49, cuda graph: True, gen throughput (token/s): 178.86, #queue-req: 0,",
    "[2026-10-01 12:00:00] Decode batch, #running-req: 8, #token: 4096, token usage: 0.02, accept len: 3.12, "
    "accept rate: 0.71, cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 0",
]

KEY = "sekrit"
DDTREE_B15 = ["--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "z-lab/Qwen3-27B-DFlash-b16",
              "--speculative-ddtree-budget", "15"]
DETERMINISTIC = """
[deterministic]
enabled = true
tok_s = 140.0
accept_length = 4.0
ttft_ms = 20.0
[output]
eos = false
[shutdown]
poll_s = 0.2
"""
CODE_PROMPT = "Write a Python function that merges two sorted lists."


def sse_events(resp: httpx.Response) -> Iterator[str]:
    for line in resp.iter_lines():
        if line.startswith("data: "):
            yield line[6:]


@pytest.fixture(scope="module")
def ddtree() -> Iterator[SimProcess]:
    """A deterministic DDTree b15 server with metrics, an API key, a short context and frequent decode logs."""
    sim = SimProcess([*DDTREE_B15, "--enable-metrics", "--api-key", KEY, "--context-length", "4096",
                      "--decode-log-interval", "5", "--tp-size", "2"], profile_toml=DETERMINISTIC)
    with sim:
        sim.wait_ready()
        yield sim


@pytest.fixture()
def client(ddtree: SimProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=ddtree.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=10) as c:
        yield c


def test_start_up_sequence_ready_within_seconds_and_health() -> None:
    with SimProcess() as sim:
        took = sim.wait_ready(timeout=60)
        # About 1 s quiet (docs/simulator.md), most of it Python starting four processes: a loaded 2-core box
        # takes a few times that. The bound still fails a start-up that sleeps its way to SGLang's minutes.
        assert took < 8.0, f"ready after {took:.2f} s"
        with httpx.Client(base_url=sim.url, timeout=5) as c:
            for path in ("/health", "/health_generate", "/ready"):
                r = c.get(path)
                assert (r.status_code, r.content) == (200, b"")
            assert c.get("/model_info").json()["model_path"] == "Qwen/Qwen3-27B"
            assert c.get("/metrics").status_code == 404  # no --enable-metrics
        sim.wait_for_line('"GET /metrics HTTP/1.1" 404 Not Found')  # the last line written so far
        text = sim.stderr
    order = ["server_args=ServerArgs(", "Init parallel begin.", "Init parallel ends. elapsed=", "Load weight begin. avail mem=",
             "Load weight end. elapsed=", "KV Cache is allocated. #tokens: ", "Memory pool end. avail mem=",
             "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1", "\rCapturing batches (bs=",
             "Capture target decode CUDA graph end. bs=[", "INFO:     Started server process [",
             f"INFO:     Uvicorn running on http://127.0.0.1:{sim.port} (Press CTRL+C to quit)",
             '"GET /model_info HTTP/1.1" 200 OK', "] Prefill batch, #new-seq: 1,", '"POST /generate HTTP/1.1" 200 OK',
             "] The server is fired up and ready to roll!", '"GET /health HTTP/1.1" 200 OK']
    positions = [text.find(marker) for marker in order]
    assert -1 not in positions, [m for m, p in zip(order, positions) if p < 0]
    assert positions == sorted(positions)
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] The server is fired up", text, re.M)


def test_streaming_generate_fields(client: httpx.Client) -> None:
    body = {"text": CODE_PROMPT, "sampling_params": {"max_new_tokens": 41, "temperature": 0}, "stream": True}
    with client.stream("POST", "/generate", json=body) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        events = list(sse_events(resp))
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    texts = [c["text"] for c in chunks]
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))  # cumulative text
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == [1 + 4 * i for i in range(len(counts))]  # one chunk per verify step of 4 tokens
    assert all(c["meta_info"]["finish_reason"] is None and "e2e_latency" not in c["meta_info"] for c in chunks[:-1])
    meta = chunks[-1]["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 41}
    assert meta["completion_tokens"] == 41 and meta["e2e_latency"] > 0
    assert meta["prompt_tokens"] == client.post("/v1/tokenize", json={"prompt": CODE_PROMPT}).json()["count"]
    assert {"id", "cached_tokens", "weight_version"} <= meta.keys()
    assert meta["spec_verify_ct"] == 10 and meta["spec_accept_length"] == pytest.approx(4.1)
    assert meta["spec_num_proposed_drafts"] == 10 * 15 and meta["spec_num_correct_drafts"] == 30
    assert meta["spec_accept_rate"] == pytest.approx(30 / 150)
    assert len(meta["spec_correct_drafts_histogram"]) == 16 and meta["spec_correct_drafts_histogram"][3] == 10
    plain = client.post("/generate", json={**body, "stream": False}).json()
    assert plain["text"] == chunks[-1]["text"] and len(plain["output_ids"]) == 41
    assert plain["meta_info"]["cached_tokens"] > 0  # the same prompt again hits the prefix cache


def test_deterministic_rate_measured_by_a_plain_streaming_client(client: httpx.Client) -> None:
    body = {"text": "Explain speculative decoding.", "stream": True,
            "sampling_params": {"max_new_tokens": 1 + 4 * 40, "temperature": 0, "ignore_eos": True}}
    stamps: list[tuple[float, int]] = []
    with client.stream("POST", "/generate", json=body) as resp:
        for event in sse_events(resp):
            if event != "[DONE]":
                stamps.append((time.perf_counter(), json.loads(event)["meta_info"]["completion_tokens"]))
    # The rate from step to step (the median of the seconds per token between two events): a late read of the
    # first or the last event (or one stalled step of the server) no longer moves it, as it moved the rate from
    # the first to the last event by a few percent on a loaded box.
    per_token = [(t1 - t0) / (n1 - n0) for (t0, n0), (t1, n1) in zip(stamps, stamps[1:]) if n1 > n0]
    assert len(per_token) >= 30
    assert 1 / statistics.median(per_token) == pytest.approx(140.0, rel=0.01)


def test_context_overflow_on_each_endpoint(client: httpx.Client) -> None:
    long_text = "word " * 5000
    n = client.post("/v1/tokenize", json={"prompt": long_text}).json()["count"]
    too_long = f"The input ({n} tokens) is longer than the model's context length (4096 tokens)."
    r = client.post("/generate", json={"text": long_text})
    assert (r.status_code, r.json()) == (400, {"error": {"message": too_long}})
    total = ("Requested token count exceeds the model's maximum context length of 4096 tokens. You requested a total "
             "of {t} tokens: {i} tokens from the input messages and 4090 tokens for the completion. Please reduce the "
             "number of tokens in the input messages or the completion to fit within the limit.")
    i = client.post("/v1/tokenize", json={"prompt": CODE_PROMPT}).json()["count"]
    r = client.post("/generate", json={"text": CODE_PROMPT, "sampling_params": {"max_new_tokens": 4090}})
    assert (r.status_code, r.json()["error"]["message"]) == (400, total.format(t=i + 4090, i=i))
    with client.stream("POST", "/generate", json={"text": long_text, "stream": True}) as resp:
        assert resp.status_code == 200
        events = list(sse_events(resp))
    assert events == [json.dumps({"error": {"message": too_long, "type": "invalid_request_error", "code": 400,
                                            "retryable": False}}, separators=(",", ":")), "[DONE]"]
    for path, payload in (("/v1/completions", {"prompt": long_text}),
                          ("/v1/chat/completions", {"messages": [{"role": "user", "content": long_text}]})):
        for stream in (False, True):
            r = client.post(path, json={"model": "m", **payload, "stream": stream})
            body = r.json()
            assert r.status_code == 400 and body["object"] == "error" and body["code"] == 400
            assert body["type"] == "BadRequestError" and body["param"] is None
            assert body["message"].startswith("The input (") and "context length (4096 tokens)" in body["message"]


def test_api_key_enforced_except_health_ready_metrics(ddtree: SimProcess) -> None:
    with httpx.Client(base_url=ddtree.url, timeout=10) as anon:
        r = anon.post("/generate", json={"text": "hi"})
        assert (r.status_code, r.json()) == (401, {"error": "Unauthorized"})
        assert anon.get("/server_info", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert anon.get("/health").status_code == 200
        assert anon.get("/ready").status_code == 200
        assert anon.get("/metrics").status_code == 200


def test_openai_endpoints_usage_and_spec_details(client: httpx.Client) -> None:
    msgs = [{"role": "user", "content": CODE_PROMPT}]
    r = client.post("/v1/chat/completions", json={"model": "m", "messages": msgs, "max_completion_tokens": 9,
                                                  "return_spec_tokens_details": True}).json()
    prompt_tokens = client.post("/v1/tokenize", json={"messages": msgs}).json()["count"]
    assert r["object"] == "chat.completion" and r["choices"][0]["finish_reason"] == "length"
    assert r["usage"]["prompt_tokens"] == prompt_tokens and r["usage"]["completion_tokens"] == 9
    assert r["sglext"]["spec_tokens_details"]["spec_verify_ct"] == 2
    for include in (False, True):
        body = {"model": "m", "messages": msgs, "max_completion_tokens": 9, "stream": True}
        if include:
            body["stream_options"] = {"include_usage": True}
        with client.stream("POST", "/v1/chat/completions", json=body) as resp:
            chunks = [json.loads(e) for e in sse_events(resp) if e != "[DONE]"]
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        assert content == r["choices"][0]["message"]["content"]
        assert any(c["choices"] and c["choices"][0]["finish_reason"] == "length" for c in chunks)
        usage_chunks = [c for c in chunks if c["choices"] == []]
        assert len(usage_chunks) == (1 if include else 0)
        if include:
            assert chunks[-1] is usage_chunks[0] and chunks[-1]["usage"]["completion_tokens"] == 9
    r = client.post("/v1/completions", json={"model": "m", "prompt": CODE_PROMPT}).json()
    assert r["object"] == "text_completion" and r["usage"]["completion_tokens"] == 16  # max_tokens default


def test_server_info_flush_cache_and_metrics(client: httpx.Client) -> None:
    client.post("/generate", json={"text": CODE_PROMPT, "sampling_params": {"max_new_tokens": 20}})
    info = client.get("/server_info").json()
    assert info["version"] == "0.5.23" and info["context_length"] == 4096 and info["tp_size"] == 2
    assert (info["speculative_algorithm"], info["speculative_num_draft_tokens"]) == ("DDTREE", 16)
    assert info["speculative_ddtree_budget"] == 15 and info["max_running_requests"] == 48
    state = info["internal_states"][0]
    assert state["avg_spec_accept_length"] > 3.0 and "last_gen_throughput" in state and info["startup_time"] > 0
    r = client.post("/flush_cache")
    assert r.status_code == 200 and r.text == (
        "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, "
        "the operation will not be performed.)\n")
    # reset_metrics zeroes the totals: _average_accept_length is None again, so the key is absent.
    assert "avg_spec_accept_length" not in client.get("/server_info").json()["internal_states"][0]
    metrics = client.get("/metrics").text
    for name in ("sglang:generation_tokens_total{", "sglang:prompt_tokens_total{", "sglang:num_requests_total{",
                 "sglang:spec_verify_calls_total{", "sglang:gen_throughput{", "sglang:spec_accept_length{",
                 "sglang:time_to_first_token_seconds_bucket{"):
        assert name in metrics
    assert client.get("/v1/models").json()["data"][0]["max_model_len"] == 4096


@pytest.mark.parametrize("line", REFERENCE_LINES)
def test_reference_parser_reads_real_sglang_lines(line: str) -> None:
    assert DECODE_RE.match(line)


def test_sim_decode_lines_parse_in_comma_form(ddtree: SimProcess, client: httpx.Client) -> None:
    client.post("/generate", json={"text": "Tell me a story.", "sampling_params": {"max_new_tokens": 120}})
    ddtree.wait_for_line("Decode batch")
    lines = [ln for ln in ddtree.stderr.splitlines() if "Decode batch" in ln]
    assert lines
    matches = [DECODE_RE.match(line) for line in lines]
    assert all(matches), lines
    assert all("Decode batch, " in line and not line.endswith(",") for line in lines)
    decoded = [m for m in matches if m is not None]
    assert all(m["tp"] == "0" and float(m["accept_len"]) <= 4.0 for m in decoded)
    # Deterministic: 4 tokens per verify step, except a request's last (capped) step.
    assert any(m["accept_len"] == "4.00" and m["accept_rate"] == "0.20" for m in decoded)


@pytest.mark.parametrize("style", ["comma", "period"])
def test_format_helpers_parse(style: str) -> None:
    spec = logs.format_decode(style, 3, 900, 0.01, 3.5, 0.61, True, 401.25, 2)
    prefix = logs.scheduler_prefix(None, 0, 1, style)
    m = DECODE_RE.match(f"[2026-11-29 10:00:00{prefix}] {spec}")
    assert m and (m["accept_len"], m["gen"], m["queue"]) == ("3.50", "401.25", "2")
    assert (m["tp"] == "0") == (style == "period")


def test_period_form_autoregressive_and_greedy_output_is_lossless(client: httpx.Client) -> None:
    env = {"SPECBENCH_SIM_LOG_STYLE": "period", "SGLANG_LOG_MS": "1"}
    with SimProcess(["--decode-log-interval", "3"], profile_toml=DETERMINISTIC, env=env) as sim:
        sim.wait_ready()
        body = {"text": CODE_PROMPT, "sampling_params": {"max_new_tokens": 30, "temperature": 0}}
        ar = httpx.post(f"{sim.url}/generate", json=body, timeout=10).json()
        sim.wait_for_line("Decode batch")
        lines = [ln for ln in sim.stderr.splitlines() if "Decode batch" in ln]
    spec = client.post("/generate", json=body).json()
    assert ar["text"] == spec["text"] and "spec_verify_ct" not in ar["meta_info"]
    assert lines
    for line in lines:
        m = DECODE_RE.match(line)
        assert m and "Decode batch. " in line and line.endswith(",") and m["tp"] == "0"
        assert m["accept_len"] is None and re.match(r"\[\S+ \d\d:\d\d:\d\d\.\d{3} TP0\]", line)


def test_sigterm_drains_in_flight_requests_then_kills_the_tree() -> None:
    with SimProcess(profile_toml=DETERMINISTIC) as sim:
        sim.wait_ready()
        result: dict[str, object] = {}
        streaming = threading.Event()

        def stream() -> None:
            body = {"text": "Count slowly.", "stream": True, "sampling_params": {"max_new_tokens": 120}}
            events = []
            with httpx.stream("POST", f"{sim.url}/generate", json=body, timeout=30) as resp:
                for event in sse_events(resp):
                    events.append(event)
                    streaming.set()
            result["events"] = events

        worker = threading.Thread(target=stream)
        worker.start()
        # In flight for sure (its first tokens are here, ~0.8 s of them to come), not after a fixed 0.3 s
        assert streaming.wait(30), "the request never started streaming"
        sim.signal(signal.SIGTERM)
        sim.wait_for_line("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        sim.wait_for_line("Gracefully exiting... Remaining number of requests 1. Remaining requests remaining_rids=['")
        assert httpx.get(f"{sim.url}/health", timeout=5).status_code == 503
        worker.join(30)
        code = sim.wait_exit(30)
        assert code == -signal.SIGKILL  # kill_process_tree SIGKILLs the server itself
        events = result["events"]
        assert isinstance(events, list) and events[-1] == "[DONE]"
        assert json.loads(events[-2])["meta_info"]["completion_tokens"] == 120
        assert "Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[]." in sim.stderr
        assert group_left(sim.pgid) == []


def test_force_shutdown_skips_the_drain() -> None:
    with SimProcess(profile_toml=DETERMINISTIC, env={"SGL_FORCE_SHUTDOWN": "1"}) as sim:
        sim.wait_ready()
        sim.signal(signal.SIGTERM)
        assert sim.wait_exit(15) == -signal.SIGKILL
        assert "Signal SIGTERM received while force shutdown flag set. Force exiting." in sim.stderr
