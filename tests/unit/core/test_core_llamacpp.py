"""The llama.cpp profile's pure parts, on the fixtures captured from the real server (tests/data/llamacpp/)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from repo_paths import REPO
from specbench_tui.core.engines.llamacpp import (
    LLAMACPP,
    LLAMACPP_SIGNATURES,
    LLAMACPP_SPEC_COUNTERS,
    llamacpp_final_meta,
    parse_draft_acceptance_line,
    parse_llamacpp_stats_line,
)
from specbench_tui.core.engines.registry import engine_flags, engine_names, get_profile
from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.core.errors import SweepError
from specbench_tui.core.launch import server_argv
from specbench_tui.core.logparse import parse_prometheus, spec_counter_figures
from specbench_tui.core.plan import build_plan
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.core.sweep.env import expand_env_refs
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.engine.client import ERROR_CONNECTION, ServerClient

DATA = REPO / "tests" / "data" / "llamacpp"
SCENARIOS = ("baseline", "draft-n4", "draft-n16", "ngram")
# The regex docs/real-engines.md gives for the line (the real server's format).
DOC_REGEX = re.compile(r"slot print_timing: id +(\d+) \| task (\d+) \| draft acceptance = (\d+\.\d{5}) \( *(\d+) "
                       r"accepted / *(\d+) generated\), mean len = +(\d+\.\d{2})$")


def _sse(name: str, scenario: str) -> list[str]:
    text = (DATA / scenario / name).read_text()
    return [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]


# ------------------------------------------------------------------------------------------------ log lines


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_draft_acceptance_lines_of_the_real_log(scenario):
    lines = (DATA / scenario / "stderr.log").read_text().splitlines()
    expected = [DOC_REGEX.search(line) for line in lines]
    parsed = [parse_draft_acceptance_line(line) for line in lines]
    assert [p is not None for p in parsed] == [m is not None for m in expected]
    for match, line in zip(expected, parsed):
        if match is None:
            continue
        assert (line.slot, line.task, line.accepted, line.generated) == tuple(int(match.group(i)) for i in (1, 2, 4, 5))
        assert line.rate == float(match.group(3)) and line.mean_len == float(match.group(6))
        assert abs(line.rate - line.accepted / line.generated) < 1e-4
        assert re.fullmatch(r"\d+\.\d{2}\.\d{3}\.\d{3}", line.time)
    if scenario == "baseline":
        assert not any(parsed)  # logged only for requests that drafted something
    if scenario.startswith("draft"):
        assert any(parsed)


def test_stats_line_feeds_the_log_panel_figures():
    line = ("0.00.135.825 I slot print_timing: id  1 | task 1 | draft acceptance = 0.48780 (   40 accepted /    82 "
            "generated), mean len =  2.82")
    stats = parse_llamacpp_stats_line(line)
    assert stats is not None and stats.kind == "decode"
    assert stats.accept_length == 2.82 and stats.accept_rate == 0.4878
    assert parse_llamacpp_stats_line("0.00.776.110 I slot print_timing: id  1 | task 1 |        eval time = 1 ms") is None
    assert LLAMACPP.parse_stats_line(line) == stats


# ------------------------------------------------------------------------------------------------ /metrics


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_metrics_diff_gives_acceptance(scenario):
    before = parse_prometheus((DATA / scenario / "metrics_before.txt").read_text())
    after = parse_prometheus((DATA / scenario / "metrics_after.txt").read_text())
    figures = spec_counter_figures(before, after, LLAMACPP_SPEC_COUNTERS)
    assert figures is not None and figures["source"] == "metrics"
    drafts = after["llamacpp:spec_decode_num_drafts_total"] - before["llamacpp:spec_decode_num_drafts_total"]
    accepted = (after["llamacpp:spec_decode_num_accepted_tokens_total"]
                - before["llamacpp:spec_decode_num_accepted_tokens_total"])
    assert figures["drafts"] == drafts and figures["accepted_tokens"] == accepted
    if drafts:
        assert figures["accept_length"] == pytest.approx(1 + accepted / drafts)
        assert 0 < figures["accept_rate"] <= 1
    else:
        assert figures["accept_length"] == 1.0 and figures["accept_rate"] is None
    if scenario == "baseline":
        assert figures["drafts"] == 0 and figures["predicted_tokens"] > 0
    if scenario.startswith("draft"):
        assert figures["accept_length"] > 1.5


def test_metrics_without_counters_or_after_a_restart_give_nothing():
    assert spec_counter_figures({}, {}, LLAMACPP_SPEC_COUNTERS) is None
    names = LLAMACPP_SPEC_COUNTERS
    before = {names.draft_tokens: 10.0, names.accepted_tokens: 5.0, names.drafts: 4.0}
    assert spec_counter_figures(before, {k: 0.0 for k in before}, names) is None
    text = '# HELP x\nllamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 3\nbad line\n'
    assert parse_prometheus(text) == {'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"}': 3.0}


# --------------------------------------------------------------------------------------------- responses


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_final_chunk_maps_to_meta_info(scenario):
    final = json.loads(_sse("completion_stream.sse", scenario)[-2])
    meta = llamacpp_final_meta(final)
    timings = final["timings"]
    assert meta["completion_tokens"] == final["usage"]["completion_tokens"] == timings["predicted_n"]
    assert meta["prompt_tokens"] == final["usage"]["prompt_tokens"]
    assert meta["finish_reason"] == "length"
    accepted = timings.get("draft_n_accepted", 0)  # absent (not 0) when nothing was drafted
    assert meta["spec_verify_ct"] == meta["completion_tokens"] - accepted
    assert meta["spec_accept_length"] == pytest.approx(meta["completion_tokens"] / meta["spec_verify_ct"])
    if "draft_n" in timings:
        assert meta["spec_accept_rate"] == pytest.approx(accepted / timings["draft_n"])
    else:
        assert meta["spec_accept_length"] == 1.0 and "spec_accept_rate" not in meta
    if scenario == "draft-n4":
        assert (meta["draft_tokens"], meta["accepted_tokens"], meta["spec_verify_ct"]) == (10, 8, 4)
        assert meta["spec_accept_length"] == 3.0


def _client(body: bytes, status: int = 200) -> ServerClient:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(status, content=body, headers={"content-type": "text/event-stream"})

    client = ServerClient("http://llama.test", LLAMACPP, transport=httpx.MockTransport(handler))
    client.seen = seen  # type: ignore[attr-defined]
    return client


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_stream_of_the_real_server_through_the_client(scenario):
    raw = (DATA / scenario / "completion_stream.sse").read_bytes()
    client = _client(raw)
    result = await client.generate("def f():", {"max_new_tokens": 12, "temperature": 0.0, "ignore_eos": True})
    await client.aclose()
    body = client.seen[0]
    assert body["max_tokens"] == 12 and body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "max_new_tokens" not in body and body["ignore_eos"] is True
    assert result.ok and result.done, result.error
    payloads = [json.loads(d) for d in _sse("completion_stream.sse", scenario) if d != "[DONE]"]
    assert result.text == "".join(p["choices"][0]["text"] for p in payloads)
    assert result.completion_tokens == 12 and result.chunks[-1].completion_tokens == 12
    assert result.meta_info["spec_verify_ct"] <= 12


async def test_stream_cut_by_a_killed_server_is_an_error():
    raw = (DATA / "draft-n4" / "completion_stream.sse").read_text()
    cut = raw[: raw.index('"finish_reason":"length"')].rsplit("data:", 1)[0]
    client = _client(cut.encode())
    result = await client.generate("x", {"max_new_tokens": 12})
    await client.aclose()
    assert not result.ok and result.error_kind == ERROR_CONNECTION
    assert "without [DONE]" in (result.error or "") and result.chunks


async def test_context_overflow_is_a_http_error_not_a_crash():
    error = (b'{"error":{"code":400,"message":"request (7801 tokens) exceeds the available context size (1024 tokens), '
             b'try increasing it","type":"exceed_context_size_error","n_prompt_tokens":7801,"n_ctx":1024}}')
    client = _client(error, status=400)
    result = await client.generate("x" * 100, {"max_new_tokens": 12})
    await client.aclose()
    assert result.error_kind == "http" and result.http_status == 400 and "exceeds the available context" in result.error
    line = ("0.01.2 E srv    send_error: task id = 7, error: request (7801 tokens) exceeds the available context size "
            "(1024 tokens), try increasing it")
    assert SignatureSet((), LLAMACPP_SIGNATURES).match(line) is None


def test_profile_facts():
    assert get_profile("llamacpp") is LLAMACPP and get_profile("sglang") is SGLANG
    assert LLAMACPP.ready_line is None and LLAMACPP.health_path == "/health" and LLAMACPP.abort_path is None
    assert LLAMACPP.context_length({"default_generation_settings": {"n_ctx": 1024}, "total_slots": 2}) == 1024
    assert LLAMACPP.context_length({}) is None
    assert LLAMACPP.exit_signatures[-11] == "segfault" and not SGLANG.exit_signatures
    assert engine_names()[:3] == ("sglang", "llamacpp", "vllm")


# ----------------------------------------------------------------------------------------------- signatures


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_no_signature_fires_on_a_healthy_real_log(scenario):
    signatures = SignatureSet((), LLAMACPP_SIGNATURES)
    lines = (DATA / scenario / "stderr.log").read_text().splitlines()
    assert [line for line in lines if signatures.match(line)] == []


@pytest.mark.parametrize(("line", "name"), [
    ("error: invalid argument: --bogus", "llamacpp_fatal_error"),
    ("/src/ggml/src/ggml-cpu/ops.cpp:412: GGML_ASSERT(ne0 == ne1) failed", "llamacpp_ggml_assert"),
    ("terminate called after throwing an instance of 'std::runtime_error'", "llamacpp_cpp_exception"),
    ("0.00.020.196 E gguf_init_from_file: failed to open GGUF file '/x.gguf' (No such file or directory)",
     "llamacpp_gguf_open_failed"),
    ("0.00.020.704 E srv  llama_server: exiting due to model loading error", "llamacpp_model_load_failed"),
    ("CUDA error: out of memory", "cuda_error"),
])
def test_llamacpp_crash_lines(line, name):
    match = SignatureSet((), LLAMACPP_SIGNATURES).match(line)
    assert match is not None and match.name == name


# ---------------------------------------------------------------------------------------- flags and sweeps


def test_flags_of_the_real_binary():
    flags = engine_flags("llamacpp")
    for name in ("model", "model-draft", "spec-draft-model", "spec-type", "spec-draft-n-max", "ctx-size",
                 "parallel", "threads", "metrics", "alias", "spec-ngram-simple-size-n"):
        assert name in flags.known_flags, name
    assert "help" not in flags.known_flags and "draft-max" not in flags.known_flags
    assert flags.short_aliases["md"] == "spec-draft-model" and flags.short_aliases["c"] == "ctx-size"
    assert flags.short_aliases["np"] == "parallel" and flags.short_aliases["m"] == "model"
    assert flags.shapes["metrics"].arity == "0" and flags.shapes["flash-attn"].arity == "?"
    assert flags.shapes["spec-type"].problem("spec-type", "draft-simple,ngram-simple") is None
    assert flags.shapes["spec-type"].problem("spec-type", "eagle") is not None
    assert flags.gpus_needed({}) == 1 and flags.gpus_needed({"device": "none"}) == 0
    assert flags.gpus_needed({"device": "CUDA0,CUDA1"}) == 2 and flags.runs_on_cpu
    assert engine_flags("sglang").gpus_needed({"tp-size": 4}) == 4 and not engine_flags("sglang").runs_on_cpu


def test_checked_in_flags_equal_the_dump_of_the_real_binary():
    done = subprocess.run(["bash", str(REPO / "tools/setup_llama_server.sh"), "--print-paths"], capture_output=True,
                          text=True, check=False)
    binary = next((line.split("=", 1)[1] for line in done.stdout.splitlines() if line.startswith("LLAMA_SERVER=")), "")
    if done.returncode != 0 or not binary or not Path(binary).exists():
        pytest.skip("llama-server is not built: run tools/setup_llama_server.sh")
    dumped = subprocess.run([sys.executable, str(REPO / "tools/dump_llamacpp_flags.py"), binary],
                            capture_output=True, text=True, check=True).stdout
    assert dumped == (REPO / "specbench_tui/core/engines/llamacpp_flags.tsv").read_text()


SWEEP = """
[sweep]
name = "t"
[engine]
profile = "llamacpp"
launcher = "command"
command = ["${{SB_TEST_SERVER}}"]
[server.args]
model = "${{SB_TEST_MODEL:-~/models/t.gguf}}"
{extra}
[[configs]]
name = "base"
[[workloads]]
kind = "code"
"""


def _load(tmp_path, extra: str = "", **env: str):
    path = tmp_path / "s.toml"
    path.write_text(SWEEP.format(extra=extra))
    old = {k: os.environ.get(k) for k in ("SB_TEST_SERVER", "SB_TEST_MODEL")}
    os.environ.update({"SB_TEST_SERVER": "/opt/llama/llama-server", **env})
    try:
        return build_plan(load_sweep(path))
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_sweep_with_environment_references(tmp_path):
    plan = _load(tmp_path)
    assert plan.sweep.engine.command == ("/opt/llama/llama-server",)
    assert plan.configs[0].argv == ("--model", os.path.expanduser("~/models/t.gguf"))
    plan = _load(tmp_path, SB_TEST_MODEL="/m/x.gguf")
    assert plan.configs[0].argv == ("--model", "/m/x.gguf")
    argv = server_argv(plan.sweep.engine, plan.configs[0], sys.executable, 8080)
    assert argv == ["/opt/llama/llama-server", "--model", "/m/x.gguf", "--metrics", "--host", "127.0.0.1",
                    "--port", "8080"]
    assert expand_env_refs("${NOPE_X}/a", {}) == ("${NOPE_X}/a", ["NOPE_X"])
    assert expand_env_refs("$HOME ${A}", {"A": "1"}) == ("$HOME 1", [])


def test_unset_environment_reference_is_a_located_error(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(SWEEP.format(extra="").replace("SB_TEST_SERVER", "LLAMA_SERVER_SURELY_UNSET"))
    with pytest.raises(SweepError) as info:
        load_sweep(path)
    text = str(info.value)
    assert "${LLAMA_SERVER_SURELY_UNSET} is not set" in text and ":7" in text or "line 7" in text


@pytest.mark.parametrize(("extra", "expected"), [
    ('md = "/d.gguf"', "short form -md of --spec-draft-model"),
    ("c = 2048", "short form -c of --ctx-size"),
    ("np = 2", "short form -np of --parallel"),
    ("draft-max = 4", "use --spec-draft-n-max"),
    ("port = 9000", "set by specbench"),
    ('spec-type = "eagle"', "--spec-type does not accept 'eagle'"),
    ("spec-draft-n-max = 0", "positive integer"),
    ("metrics = 3", "switch"),
])
def test_sweep_flag_mistakes(tmp_path, extra, expected):
    with pytest.raises(SweepError) as info:
        _load(tmp_path, extra)
    assert expected in str(info.value), str(info.value)


def test_shipped_sweep_validates(tmp_path):
    env = {"LLAMA_SERVER": "/x/llama-server", "TINY_TARGET_GGUF": "/x/t.gguf", "TINY_DRAFT_GGUF": "/x/d.gguf"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        plan = build_plan(load_sweep(REPO / "sweeps" / "llamacpp-tiny.toml"))
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert [c.name for c in plan.configs] == ["baseline", "draft-n2", "draft-n4", "draft-n8", "draft-n16", "ngram"]
    assert all(c.gpus_needed == 1 and c.argv[:2] == ("--model", "/x/t.gguf") for c in plan.configs)
    assert dict(zip(plan.by_name("draft-n8").argv[::2], plan.by_name("draft-n8").argv[1::2]))[
        "--spec-draft-n-max"] == "8"
    assert all(c.baseline == "baseline" for c in plan.configs[1:])
