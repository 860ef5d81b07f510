"""The simulator's server-wide state over the wire, as SGLang 0.5.23 keeps it (issue 26): NGRAM's corpus and the
radix cache that repeats hit and ``/flush_cache`` clears, the running-request cap and its queue, the adaptive
step tiers, KV-pool retraction, and decode lines from every DP rank. Each test launches the simulator as a
subprocess and talks HTTP to it; the texts it expects are SGLang's (``tests/real_servers/test_sim_realserver.py`` holds them
against the installed source)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from specbench_tui.sim import args as sim_args
from specbench_tui.sim import kvpool
from specbench_tui.sim.profile import load_profile
from specbench_tui.sim.speed import SpeedModel
from specbench_tui.sim.testing import SimProcess

pytestmark = pytest.mark.e2e

FLUSH_OK = ("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n")
RESET_48 = ("Max running requests is reset to 48 for speculative decoding. "
            "You can override this by explicitly setting --max-running-requests.")
RETRACT_RE = re.compile(r"KV cache pool is full\. Retract requests\. #retracted_reqs: (\d+), #new_tokens_gained: "
                        r"(\d+), #new_token_ratio: (\d\.\d{4}) -> (\d\.\d{4})$")
NGRAM = ["--speculative-algorithm", "NGRAM"]
EAGLE3 = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"]
FAST = """
[deterministic]
enabled = true
tok_s = 400.0
accept_length = 2.0
ttft_ms = 5.0
[output]
eos = false
[shutdown]
poll_s = 0.2
"""
PROMPT = "Write a Python function that merges two sorted lists."


def generate(client: httpx.Client, text: str, max_new: int, **params: Any) -> dict[str, Any]:
    body = {"text": text, "sampling_params": {"max_new_tokens": max_new, "temperature": 0, **params}}
    resp = client.post("/generate", json=body)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def truth(argv: list[str], profile_toml: str) -> SpeedModel:
    """The simulator's own speed model for a command line and profile: the truths tests hold numbers to."""
    profile = load_profile({"SPECBENCH_SIM_PROFILE_TOML": profile_toml})
    return SpeedModel(profile, sim_args.resolve(sim_args.parse_args(["--model-path", "m", *argv])))


@pytest.fixture(scope="module")
def ngram() -> Iterator[SimProcess]:
    with SimProcess([*NGRAM, "--decode-log-interval", "1"], profile_toml=FAST) as sim:
        sim.wait_ready()
        yield sim


def test_ngram_repeat_is_drafted_from_the_corpus_until_flush_cache(ngram: SimProcess) -> None:
    model = truth(NGRAM, FAST)
    cold, warm = model.expected_accept_length("code"), model.expected_accept_length("code", warm=True)
    assert (cold, warm) == (2.0, 12.0)  # 12 = SGLang's default NGRAM draft tokens, every draft accepted
    with httpx.Client(base_url=ngram.url, timeout=30) as client:
        assert client.post("/flush_cache").status_code == 200  # the warm-up's output is not this prompt's
        first = generate(client, PROMPT, 61, ignore_eos=True)["meta_info"]
        again = generate(client, PROMPT, 61, ignore_eos=True)["meta_info"]
        other = generate(client, PROMPT + " Use recursion.", 61, ignore_eos=True)["meta_info"]
        resp = client.post("/flush_cache")
        assert (resp.status_code, resp.text) == (200, FLUSH_OK)
        flushed = generate(client, PROMPT, 61, ignore_eos=True)["meta_info"]
        story = "Write a short story about a lighthouse."
        sampled = [generate(client, story, 61, ignore_eos=True, temperature=0.8)["meta_info"] for _ in range(2)]
        seeded = [generate(client, story, 61, ignore_eos=True, temperature=0.8, sampling_seed=5)["meta_info"]
                  for _ in range(2)]
    # 60 tokens after the first: 30 verify steps cold; warm, 12 a step (5 steps), the last one short.
    assert first["spec_accept_length"] == pytest.approx(cold, abs=0.05)
    assert again["spec_accept_length"] == pytest.approx(61 / 5, abs=0.05) and again["spec_accept_length"] > 4 * cold
    assert other["spec_accept_length"] == pytest.approx(cold, abs=0.05)  # another prompt: another output
    assert flushed["spec_accept_length"] == pytest.approx(cold, abs=0.05)
    # Sampling without a seed decodes other tokens each time (nothing to draft from); with one, the same tokens.
    assert [m["spec_accept_length"] for m in sampled] == pytest.approx([cold, cold], abs=0.05)
    assert seeded[1]["spec_accept_length"] > 4 * cold
    # The radix cache: the repeat's prompt was cached (all but the one token SGLang always computes).
    assert first["cached_tokens"] == 0 and again["cached_tokens"] == again["prompt_tokens"] - 1
    assert flushed["cached_tokens"] == 0
    ngram.wait_for_line("Cache flushed successfully!")


def test_flush_cache_is_refused_while_a_request_runs_and_deferred_with_a_timeout(ngram: SimProcess) -> None:
    with httpx.Client(base_url=ngram.url, timeout=60) as client:
        started = threading.Event()
        done: list[dict[str, Any]] = []

        def long_stream() -> None:
            body = {"text": "A long story.", "stream": True,
                    "sampling_params": {"max_new_tokens": 1200, "temperature": 0, "ignore_eos": True}}
            with client.stream("POST", "/generate", json=body) as resp:
                for line in resp.iter_lines():
                    started.set()
                    if line.startswith("data: {"):
                        done[:] = [json.loads(line[6:])]

        worker = threading.Thread(target=long_stream)
        worker.start()
        assert started.wait(30)
        refused = client.post("/flush_cache")
        assert (refused.status_code, refused.text) == (400, "Flush cache failed.\n")
        line = ngram.wait_for_line("Cache not flushed because there are pending requests.")
        assert line.endswith("Cache not flushed because there are pending requests. #queue-req: 0, #running-req: 1")
        timed_out = client.post("/flush_cache", params={"timeout": 0.2})
        assert (timed_out.status_code, timed_out.text) == (400, "Timed out waiting for idle state.")
        ngram.wait_for_line("Deferred flush_cache timed out while waiting for idle state.")
        deferred = client.post("/flush_cache", params={"timeout": 60})  # waits until the stream finished
        assert (deferred.status_code, deferred.text) == (200, FLUSH_OK)
        worker.join(60)
        assert done and done[-1]["meta_info"]["completion_tokens"] == 1200


def test_a_cached_prefix_prefills_faster() -> None:
    profile = "[speed]\nprefill_tok_s = 4000.0\njitter = 0.0\n[output]\neos = false\n"
    prompt = " ".join(f"word{i % 97}" for i in range(1200))
    with SimProcess(profile_toml=profile) as sim:
        sim.wait_ready()
        with httpx.Client(base_url=sim.url, timeout=60) as client:
            client.post("/flush_cache")
            cold = generate(client, prompt, 2, ignore_eos=True)["meta_info"]
            warm = generate(client, prompt + " And one more line.", 2, ignore_eos=True)["meta_info"]
        lines = [line for line in sim.lines if "Prefill batch" in line]
    assert cold["cached_tokens"] == 0 and warm["cached_tokens"] == cold["prompt_tokens"]
    assert f"#cached-token: {warm['cached_tokens']}," in lines[-1]
    # TTFT: the cold prompt prefills ~0.6 s of tokens, the warm one only its new tail (e2e of 2 tokens).
    assert warm["e2e_latency"] < cold["e2e_latency"] / 2


def test_the_running_cap_is_48_for_speculation_and_the_schedulers_own_for_the_baseline() -> None:
    with SimProcess([*EAGLE3, "--decode-log-interval", "1"], profile_toml=FAST) as spec, \
            SimProcess(["--max-total-tokens", "3000"], profile_toml=FAST) as base:
        spec.wait_ready()
        base.wait_ready()
        info = httpx.get(f"{spec.url}/server_info", timeout=10).json()
        base_info = httpx.get(f"{base.url}/server_info", timeout=10).json()
    assert RESET_48 in spec.stderr and "reset to 48" not in base.stderr
    assert info["max_running_requests"] == 48
    assert [s["effective_max_running_requests_per_dp"] for s in info["internal_states"]] == [48]
    pool, ctx = base_info["max_total_num_tokens"], 262144
    expected = kvpool.max_running_requests(None, pool, ctx)
    assert base_info["max_running_requests"] is None
    assert [s["effective_max_running_requests_per_dp"] for s in base_info["internal_states"]] == [expected]
    assert pool == 3000 and expected == 1500  # min(max(min(int(pool / ctx * 512), 4096), 2048), pool // 2)
    assert f"max_running_requests={expected}," in base.stderr


def test_admission_beyond_the_cap_queues() -> None:
    with SimProcess(["--max-running-requests", "2", "--decode-log-interval", "1"], profile_toml=FAST) as sim:
        sim.wait_ready()
        with httpx.Client(base_url=sim.url, timeout=60) as client:
            threads = [threading.Thread(target=generate, args=(client, f"{PROMPT} {i}", 200),
                                        kwargs={"ignore_eos": True}) for i in range(5)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        decode = [line for line in sim.lines if "Decode batch" in line]
    running = [int(re.search(r"#running-req: (\d+)", line).group(1)) for line in decode]  # type: ignore[union-attr]
    queued = [int(re.search(r"#queue-req: (\d+)", line).group(1)) for line in decode]  # type: ignore[union-attr]
    assert max(running) == 2 and max(queued) >= 2


ADAPTIVE = """
[deterministic]
enabled = true
tok_s = 400.0
accept_length = 8.0
ttft_ms = 5.0
[output]
eos = false
"""


def test_adaptive_switches_steps_by_batch_size_and_reserves_eight_tokens() -> None:
    argv = [*EAGLE3, "--speculative-adaptive", "--max-running-requests", "64", "--context-length", "512"]
    with SimProcess(argv, profile_toml=ADAPTIVE) as sim:
        sim.wait_ready()
        with httpx.Client(base_url=sim.url, timeout=60) as client:
            alone = generate(client, PROMPT, 81, ignore_eos=True)["meta_info"]
            threads = [threading.Thread(target=generate, args=(client, f"{PROMPT} {i}", 300),
                                        kwargs={"ignore_eos": True}) for i in range(64)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            too_long = client.post("/generate", json={"input_ids": list(range(1, 501)),
                                                      "sampling_params": {"max_new_tokens": 5}})
        info = httpx.get(f"{sim.url}/server_info", timeout=10).json()
    assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (3, 4)
    assert "AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 5, 7]" in sim.stderr
    # Alone (slot 1: {1,3,5,7}) every draft is accepted, so the EMA climbs past 3 - 0.5 and then 5 - 0.5.
    assert "Adaptive spec params updated: steps 3 -> 5" in sim.stderr
    assert "Switch adaptive runtime state: steps 3 -> 5, draft_tokens 4 -> 6" in sim.stderr
    assert alone["spec_accept_length"] > 4.0
    # 64 at once: slot 64 has steps {0}, so speculation stops (one token a step).
    assert re.search(r"Switch adaptive runtime state: steps \d -> 0, draft_tokens \d -> 1", sim.stderr)
    # The reserved context is max(topk * steps, largest candidate + 1) = 8, not the configured 4.
    assert too_long.status_code == 400 and "508 tokens from the input messages" in too_long.text


def test_kv_pool_full_retracts_requests_and_counts_their_retractions() -> None:
    profile = FAST.replace("tok_s = 400.0", "tok_s = 800.0")
    with SimProcess(["--max-total-tokens", "3000", "--decode-log-interval", "10"], profile_toml=profile) as sim:
        sim.wait_ready()
        with httpx.Client(base_url=sim.url, timeout=120) as client:
            results: list[dict[str, Any]] = []
            threads = [threading.Thread(target=lambda i=i: results.append(
                generate(client, " ".join(["tok"] * 99) + f" {i}", 600))) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
    retracts = [RETRACT_RE.search(line) for line in sim.lines if "Retract requests" in line]
    assert retracts and all(retracts), [line for line in sim.lines if "Retract" in line]
    counted = sum(int(m.group(1)) for m in retracts if m)
    metas = [r["meta_info"] for r in results]
    assert len(metas) == 8 and all(m["completion_tokens"] == 600 for m in metas)  # nothing lost, nothing cut
    assert sum(m["num_retractions"] for m in metas) == counted and counted >= 1
    for m in retracts:  # the ratio had decayed from SGLANG_INIT_NEW_TOKEN_RATIO (0.7); re-estimated upwards
        assert m and float(m.group(3)) <= 0.7 and float(m.group(4)) > float(m.group(3))


def test_every_dp_rank_logs_its_own_decode_lines() -> None:
    with SimProcess(["--dp-size", "2", "--tp-size", "2", "--decode-log-interval", "1"], profile_toml=FAST) as sim:
        sim.wait_ready()
        with httpx.Client(base_url=sim.url, timeout=60) as client:
            threads = [threading.Thread(target=generate, args=(client, f"{PROMPT} {i}", 200),
                                        kwargs={"ignore_eos": True}) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            both = list(sim.lines)
            generate(client, PROMPT, 60, ignore_eos=True)  # one request: one rank busy, the other idle
            alone = sim.lines[len(both):]

    def ranks(lines: list[str]) -> set[str]:
        return {m.group(1) for line in lines if (m := re.match(r"^\[[^\]]* (DP\d TP\d)\] Decode batch", line))}

    assert ranks(both) == {"DP0 TP0", "DP1 TP0"}
    assert len(ranks(alone)) == 1  # an idle rank runs no decode batch and logs none


def test_sglang_simulate_acc_len_forces_the_acceptance() -> None:
    """``SGLANG_SIMULATE_ACC_LEN`` (SGLang's benchmark knob, ``spec_utils.sample_simulated_acc_len``) fakes the
    acceptance whatever the drafts: a measurement under it says nothing about the draft model."""
    with SimProcess(EAGLE3, env={"SGLANG_SIMULATE_ACC_LEN": "4"}) as forced, SimProcess(EAGLE3) as natural:
        forced.wait_ready()
        natural.wait_ready()
        chat = "Tell me about your weekend."
        got = generate(httpx.Client(base_url=forced.url, timeout=60), chat, 81, ignore_eos=True)["meta_info"]
        real = generate(httpx.Client(base_url=natural.url, timeout=60), chat, 81, ignore_eos=True)["meta_info"]
    assert got["spec_accept_length"] == pytest.approx(81 / 20) and got["spec_num_correct_drafts"] == 3 * 20
    assert real["spec_accept_length"] < 3.5
